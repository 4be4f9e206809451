"""drainer/lifecycle/closed.py: an AWS Health scheduled change that is over releases
the node its drain left cordoned, only where the instance runs, EC2 has nothing else
scheduled for it, and the node's record is of that drain. The release itself, through
the real handler on both backends, is in tests/e2e/test_ec2_events.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from awssim import ec2_events as health
from awssim.instances import schedule_events
from awssim.world import create_node_group
from drainer import aws
from drainer.k8s.cordon import PROGRESS_ANNOTATION
from drainer.k8s.kube import Kube
from drainer.lifecycle import closed
from drainer.lifecycle.events import parse_event
from drainer.lifecycle.events_ec2 import ChangeClosed
from drainer.lifecycle.job import Tools
from drainer.lifecycle.settings import Settings

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's
CLUSTER = "prod"


@pytest.fixture
def clients(moto_aws: None) -> aws.AwsClients:
    return aws.make_clients(boto3.Session(region_name=REGION))


def _no_kube(*args: Any) -> Kube:
    raise AssertionError("the node was looked at: it should have been left before")


def _instance(clients: aws.AwsClients) -> str:
    group = create_node_group(
        clients.ec2, clients.autoscaling, asg_name="eks-workers", size=1, cluster_name=CLUSTER
    )
    return group.instance_ids[0]


def _closing(instance_id: str) -> ChangeClosed:
    raw = health.scheduled_change(ACCOUNT, REGION, [instance_id], starts_in=-3600)
    raw["detail"]["statusCode"] = "closed"
    parsed = parse_event(json.loads(json.dumps(raw)))
    assert isinstance(parsed, ChangeClosed), parsed
    return parsed


def _tools(clients: aws.AwsClients, **settings: Any) -> Tools:
    return Tools(Settings(cluster_name=CLUSTER, **settings), clients, _no_kube)


def test_closed__ec2_has_another_event_scheduled__node_left_cordoned_for_it(
    clients: aws.AwsClients,
) -> None:
    """A node drained ahead of a second change (a stop next week) stays cordoned when
    the first closes: released, its pods came back and went down with the second."""
    instance = _instance(clients)
    schedule_events(
        ACCOUNT,
        REGION,
        instance,
        [
            {"Code": "system-reboot", "Description": "[Completed] reboot done"},
            {"Code": "instance-stop", "Description": "[Canceled] not needed"},
            {
                "Code": "instance-retirement",
                "Description": "The instance is running on degraded hardware",
                "NotBefore": datetime(2026, 12, 3, 9, 0, tzinfo=UTC),
            },
        ],
    )

    result = closed.handle(_closing(instance), _tools(clients), None)

    assert result["released"] == []
    assert result["kept"][instance] == (
        f"EC2 still has instance-retirement from 2026-12-03T09:00:00Z scheduled for "
        f"instance {instance}: its node stays cordoned for it"
    )


def test_closed__instance_not_running__nothing_to_release(clients: aws.AwsClients) -> None:
    instance = _instance(clients)
    clients.ec2.stop_instances(InstanceIds=[instance])

    result = closed.handle(_closing(instance), _tools(clients), None)

    assert result["kept"] == {instance: f"instance {instance} is stopped: nothing to release"}


def test_closed__scheduled_change_drain_off__nothing_asked_of_aws_or_the_cluster() -> None:
    from test_ec2_events import NO_AWS

    tools = Tools(Settings(scheduled_change_drain=False), NO_AWS, _no_kube)

    result = closed.handle(_closing("i-0a1b2c3d4e5f60718"), tools, None)

    assert result == {
        "result": "closed",
        "reason": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED: closed, the change is over",
        "settled": [],
        "released": [],
        "kept": {},
    }


def _node(record: dict[str, Any] | None) -> dict[str, Any]:
    annotations = {PROGRESS_ANNOTATION: json.dumps(record)} if record is not None else {}
    return {"metadata": {"name": "n1", "annotations": annotations}, "spec": {}}


CLOSED_AT = 1_800_000_000.0


@pytest.mark.parametrize(
    ("record", "why"),
    [
        (None, "no eks-node-drainer record"),
        ({"phase": "drained", "trigger": "terminate-hook", "added": ["cordon"]}, "terminate-hook"),
        ({"phase": "drained", "added": ["cordon"]}, "the command line or an earlier version"),
        ({"phase": "draining", "trigger": "scheduled-change", "since": 1}, "is being drained"),
        (
            {"phase": "drained", "trigger": "scheduled-change", "at": CLOSED_AT + 5},
            "ended after the change closed",
        ),
        ({"phase": "drained", "trigger": "scheduled-change", "at": CLOSED_AT - 5}, ""),
        ({"phase": "timed_out", "trigger": "scheduled-change", "at": CLOSED_AT - 5}, ""),
    ],
    ids=["none", "terminate-hook", "no-trigger", "draining", "after", "drained", "timed-out"],
)
def test_closed__only_the_record_of_an_ended_scheduled_change_drain_is_released(
    record: dict[str, Any] | None, why: str
) -> None:
    event = _closing("i-0a1b2c3d4e5f60718").first
    event = type(event)(**{**event.__dict__, "event_time": "2027-01-15T08:00:00Z"})
    assert event.issued_at == CLOSED_AT

    said = closed._not_its_drain(_node(record), event)

    assert (why in said) if why else said == ""
