"""make deploy prints the self-check's plan part (drainer/plan/groups.py) as warnings:
a line per group the function drains, each blocker under it with its fix; a group
not planned, or the plan not made, is a warning saying why. Never a failure: the
check passed, and a blocker holds a drain, not the deploy."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from tools import deploy

MESSAGE = (
    "can drain in cluster prod: every permission granted; a dry-run cordon of node n1 was accepted"
)
BLOCKED = (
    "plan of group workers-a: 2 node(s), 1 blocker(s), deadlocked on n1: default/solo-1: "
    "PodDisruptionBudget default/solo allows 0 disruptions with all 1 of its pods healthy: "
    "nothing the drain does can raise it (deadlock); fix: scale the workload to 2 replicas"
)
BLOCKER = {
    "pod": "default/solo-1",
    "reason": "PodDisruptionBudget default/solo allows 0 disruptions with all 1 of its pods "
    "healthy: nothing the drain does can raise it (deadlock)",
    "budget": "default/solo",
    "fix": "scale the workload to 2 replicas",
}
PLAN: dict[str, Any] = {
    "groups": [
        {
            "group": "workers-a",
            "nodes": [
                {"node": "n1", "blockers": [BLOCKER], "deadlocked": True},
                {"node": "n2", "blockers": [], "deadlocked": False},
            ],
            "deadlocked": True,
            "instances_without_node": [],
            "not_planned": "",
            "summary": BLOCKED,
        },
        {
            "group": "workers-b",
            "nodes": [{"node": "n3", "blockers": [], "deadlocked": False}],
            "deadlocked": False,
            "instances_without_node": [],
            "not_planned": "",
            "summary": "plan of group workers-b: 1 node(s), nothing blocks their drains",
        },
    ],
    "not_planned": "",
    "notes": [],
}


@pytest.fixture
def lambda_client(fake_aws_env: None) -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("lambda", region_name="us-east-1")
    with Stubber(client) as stubber:
        yield client, stubber


def _answers(stubber: Stubber, answer: dict[str, Any]) -> None:
    body = json.dumps(answer).encode()
    stubber.add_response(
        "invoke",
        {"StatusCode": 200, "Payload": StreamingBody(io.BytesIO(body), len(body))},
    )


def _check(client: Any) -> list[str]:
    said: list[str] = []
    deploy.wait_for_self_check(
        client,
        "drainer",
        {"ClusterName": "prod"},
        deploy.Options(),
        say=said.append,
        outputs={},
        sleep=lambda seconds: None,
    )
    return said


def test_self_check_with_blockers__each_printed_as_a_warning_with_its_fix(
    lambda_client: tuple[Any, Stubber],
) -> None:
    client, stubber = lambda_client
    message = "\n".join([MESSAGE, BLOCKED, PLAN["groups"][1]["summary"]])
    _answers(stubber, {"result": "check_passed", "missing": [], "message": message, "plan": PLAN})

    said = _check(client)

    assert said == [
        f"self-check passed: {MESSAGE}",
        f"warning: {BLOCKED}",
        f"  default/solo-1 on n1: {BLOCKER['reason']}",
        "    fix: scale the workload to 2 replicas",
        "plan of group workers-b: 1 node(s), nothing blocks their drains",
    ]


def test_self_check_not_planned__a_warning_saying_how_to_enable_it(
    lambda_client: tuple[Any, Stubber],
) -> None:
    client, stubber = lambda_client
    why = (
        "not planned: this function may not get persistentvolumes, a read only the plan "
        "makes; to see the plan's blockers here: kubectl apply -f k8s-rbac/plan/"
    )
    plan = {"groups": [], "not_planned": why, "notes": []}
    answer = {"result": "check_passed", "missing": [], "message": f"{MESSAGE}\nplan: {why}"}
    _answers(stubber, {**answer, "plan": plan})

    said = _check(client)

    assert said == [f"self-check passed: {MESSAGE}", f"warning: plan: {why}"]
