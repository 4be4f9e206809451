"""The self-check asks for exactly what k8s-rbac/ grants, and its event parses; its
plan part (the plan's blockers for the groups the function drains: warnings, never a
failed check) on moto's group and kubesim, as the function's own identity."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
import yaml

from drainer import aws
from drainer.cli import arguments
from drainer.cli.plan import options_from
from drainer.k8s import selfcheck
from drainer.lifecycle import checks
from drainer.lifecycle.clients import eks_kube
from drainer.lifecycle.events import SelfCheckEvent, parse_event
from drainer.lifecycle.events_fields import Skip
from drainer.lifecycle.job import Tools
from drainer.lifecycle.settings import Settings
from drainer.plan.function_drain import plan_flags
from drainer.plan.groups import PLAN_SECONDS, forecast_groups
from kubesim import KubeSim
from testbed import World
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import RBAC_DIR, place_on, rbac_manifests, wait_until
from tools.preflight import grants


def test_needed_plus_force_plus_events__exactly_what_k8s_rbac_grants() -> None:
    (role,) = [d for d in rbac_manifests() if d["kind"] == "ClusterRole"]
    assert {*selfcheck.NEEDED, selfcheck.FORCE, *selfcheck.EVENTS, selfcheck.DAEMONSETS} == grants(
        role["rules"]
    )


def test_result__events_not_allowed__passes_saying_drains_record_no_events() -> None:
    check = selfcheck.SelfCheck(
        "prod",
        cordon="a dry-run cordon of node n1 was accepted",
        no_events=["create events.k8s.io/events"],
    )

    assert check.passed
    assert check.message() == (
        "can drain in cluster prod: may drain; a dry-run cordon of node n1 was accepted; "
        "not allowed to create events.k8s.io/events: drains record no Kubernetes Events "
        "(kubectl apply -f k8s-rbac/)"
    )


@pytest.mark.parametrize(
    ("event", "parsed"),
    [
        ({"self_check": {}}, SelfCheckEvent("")),
        ({"self_check": {"cluster_name": "prod"}}, SelfCheckEvent("prod")),
    ],
)
def test_self_check_event__parsed(event: dict[str, object], parsed: SelfCheckEvent) -> None:
    assert parse_event(event) == parsed


@pytest.mark.parametrize("event", [{"self_check": "yes"}, {"self_check": {"cluster_name": 3}}])
def test_malformed_self_check__skipped_with_reason(event: dict[str, object]) -> None:
    skipped = parse_event(event)
    assert isinstance(skipped, Skip)
    assert "malformed self-check" in skipped.reason


def test_result__failed_check_names_what_is_missing_and_the_fix() -> None:
    result = selfcheck.SelfCheck("prod", missing=["create pods/eviction"]).result()
    assert result["result"] == "check_failed"
    assert result["message"] == (
        "cannot drain in cluster prod: not allowed to create pods/eviction. "
        "Apply the RBAC: kubectl apply -f k8s-rbac/"
    )


# -- the plan's blockers for the groups the function drains (drainer/plan/groups.py) ----


def _plan_rbac() -> list[dict[str, Any]]:
    return [
        document
        for path in sorted((RBAC_DIR / "plan").glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
        if document
    ]


def test_forecast_reads__exactly_what_k8s_rbac_plan_grants() -> None:
    (role,) = [d for d in _plan_rbac() if d["kind"] == "ClusterRole"]
    assert set(selfcheck.FORECAST_READS) == grants(role["rules"])


@pytest.fixture
def world(moto_aws: None) -> Iterator[World]:
    """Two nodes, the instances of moto's group eks-workers; the drainer's identity
    (an EKS token for moto's credentials) in k8s-rbac/'s group, on kubesim."""
    with KubeSim(speed=20, cluster_name="demo") as running:
        yield World(Cluster.of_kubesim(running), size=2)


def _check(
    world: World, clock: Callable[[], float] = time.monotonic, **settings: Any
) -> dict[str, Any]:
    session = boto3.Session(region_name=world.region)
    chosen = Settings(
        **{"cluster_name": "demo", "allowed_asgs": frozenset({"eks-workers"}), **settings}
    )
    tools = Tools(chosen, aws.make_clients(session), eks_kube(session, world.region), clock=clock)
    return checks.handle(SelfCheckEvent(""), tools, forecast=forecast_groups)


def _solo(world: World) -> str:
    """A single replica under minAvailable 1 on the first node: a deadlocked budget."""
    node = world.nodes[world.instance_ids[0]]
    place_on(
        world, node, [w.deployment("solo", 1), w.budget("solo", {"app": "solo"}, min_available=1)]
    )
    wait_until(
        lambda: (
            (world.cluster.get("PodDisruptionBudget", "solo", "default").get("status") or {}).get(
                "currentHealthy"
            )
            == 1
        ),
        10,
    )
    return node


def test_plan_part__deadlocked_budget__blocker_with_fix__check_still_passes(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.cluster.apply(_plan_rbac())
    node = _solo(world)

    with caplog.at_level(logging.INFO, logger="drainer.lifecycle.checks"):
        answer = _check(world)

    assert answer["result"] == "check_passed"
    [group] = answer["plan"]["groups"]
    assert (group["group"], group["deadlocked"], group["instances_without_node"]) == (
        "eks-workers", True, [],
    )  # fmt: skip
    held = {n["node"]: n for n in group["nodes"]}
    assert set(held) == set(world.nodes.values())
    [blocker] = held[node]["blockers"]
    assert (blocker["budget"], held[node]["deadlocked"]) == ("default/solo", True)
    assert blocker["pod"].startswith("default/solo-")
    assert "scale the workload to 2 replicas" in blocker["fix"]
    [other] = [n for name, n in held.items() if name != node]
    assert (other["blockers"], other["deadlocked"]) == ([], False)
    # One line per group, in the message and as a WARNING in the log.
    line = str(answer["message"]).splitlines()[1]
    assert line.startswith("plan of group eks-workers: 2 node(s), 1 blocker(s), deadlocked on ")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [f"self-check: {line}"]


def test_plan_part__nothing_blocks__said_per_group_at_info(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.cluster.apply(_plan_rbac())

    with caplog.at_level(logging.INFO, logger="drainer.lifecycle.checks"):
        answer = _check(world)

    assert answer["result"] == "check_passed"
    assert answer["plan"]["groups"][0]["deadlocked"] is False
    assert str(answer["message"]).splitlines()[1] == (
        "plan of group eks-workers: 2 node(s), nothing blocks their drains"
    )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_plan_part__without_k8s_rbac_plan__not_planned_saying_how__check_passes(
    world: World,
) -> None:
    _solo(world)

    answer = _check(world)

    assert answer["result"] == "check_passed"
    assert answer["plan"] == {
        "groups": [],
        "not_planned": "not planned: this function may not get persistentvolumes, a read only "
        "the plan makes; to see the plan's blockers here: kubectl apply -f k8s-rbac/plan/",
        "notes": [],
    }


def test_plan_part__ec2_denied_for_the_group__that_group_not_planned__check_passes(
    world: World,
) -> None:
    world.cluster.apply(_plan_rbac())
    world.aws.fail_action("ec2", "DescribeInstances", "AccessDenied")

    answer = _check(world)

    assert answer["result"] == "check_passed"
    [group] = answer["plan"]["groups"]
    assert group["nodes"] == []
    assert group["not_planned"].startswith("not planned: ")
    assert "ec2:DescribeInstances" in group["not_planned"]


class _Clock:
    """Reads these times in turn, then the last one for ever."""

    def __init__(self, *times: float) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0) if len(self.times) > 1 else self.times[0]


def test_plan_part__past_its_time__group_left_not_planned_with_the_command(
    world: World,
) -> None:
    world.cluster.apply(_plan_rbac())

    answer = _check(world, clock=_Clock(0.0, PLAN_SECONDS + 1))

    [group] = answer["plan"]["groups"]
    assert (group["nodes"], group["not_planned"]) == (
        [],
        "not planned: past the self-check's 60 s for its plan; plan it with "
        "eks-node-drainer plan --asg eks-workers",
    )


def test_plan_part__time_out_after_the_first_node__the_rest_said_not_planned(
    world: World,
) -> None:
    world.cluster.apply(_plan_rbac())

    # The start, the group, the first node; the second node is past the time.
    answer = _check(world, clock=_Clock(0.0, 0.0, 0.0, PLAN_SECONDS + 1))

    [group] = answer["plan"]["groups"]
    assert len(group["nodes"]) == 1
    assert group["not_planned"] == (
        "not planned: 1 of its 2 node(s) past the self-check's 60 s for its plan; plan it "
        "with eks-node-drainer plan --asg eks-workers"
    )
    assert group["summary"] == f"plan of group eks-workers: {group['not_planned']}"


def test_plan_part__no_group_named__not_planned_saying_why(world: World) -> None:
    world.cluster.apply(_plan_rbac())

    answer = _check(world, allowed_asgs=frozenset())

    assert answer["result"] == "check_passed"
    assert answer["plan"]["not_planned"].startswith(
        "not planned: no group to plan: ALLOWED_ASGS and ASG_TAG name none"
    )


@pytest.mark.parametrize(
    ("settings", "flags"),
    [
        ({}, ["--timeout", "3600s", "--force", "--delete-emptydir-data", "--ignore-daemonsets"]),
        (
            {"evict_unreplicated_pods": False, "evict_emptydir_pods": False,
             "evict_daemonset_pods": True, "honor_do_not_disrupt": False,
             "drain_timeout_seconds": 600},
            ["--timeout", "600s", "--evict-daemonset-pods", "--ignore-do-not-disrupt"],
        ),
    ],
)  # fmt: skip
def test_plan_flags__the_functions_options__plan_parses_them_back(
    settings: dict[str, Any], flags: list[str]
) -> None:
    options = Settings(**settings).drain_options()
    chosen = plan_flags(options, Settings(**settings).drain_timeout_seconds)
    assert chosen == flags
    parsed = arguments.parse(["plan", "n1", *chosen], arguments.COMMAND)
    again = options_from(parsed)
    assert (again.filters, again.honor_do_not_disrupt) == (
        options.filters,
        options.honor_do_not_disrupt,
    )


def test_plan_part__planning_itself_fails__said_not_planned__check_passes(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """A fault of the planning (not a read refused: those are said by the planner) is
    one error line with its traceback and a plan part saying so: never the check's
    failure, nor a traceback out of the handler."""

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("a quantity the model cannot read: '1.5.3Gi'")

    session = boto3.Session(region_name=world.region)
    settings = Settings(cluster_name="demo", allowed_asgs=frozenset({"eks-workers"}))
    tools = Tools(settings, aws.make_clients(session), eks_kube(session, world.region))

    with caplog.at_level(logging.INFO, logger="drainer.lifecycle.checks"):
        answer = checks.handle(SelfCheckEvent(""), tools, forecast=broken)

    assert answer["result"] == "check_passed"
    assert answer["plan"]["not_planned"] == (
        "not planned: planning the groups failed "
        "(ValueError: a quantity the model cannot read: '1.5.3Gi')"
    )
    assert str(answer["message"]).splitlines()[1].startswith("plan: not planned: planning")
    [error] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert error.exc_info is not None


def test_no_delete_on_pods__spot_drains_on__said__not_every_permission_granted(
    world: World,
) -> None:
    """The role without its pods/delete rule (docs/operations.md, "Dropping delete on
    pods"), TIMEOUT_POLICY continue, the EC2 drains on as by default: a spot drain that
    reaches its deadline deletes the pods still held, and is refused. The check passed
    saying "every permission granted"."""
    (role,) = [d for d in rbac_manifests() if d["kind"] == "ClusterRole"]
    role["rules"] = [r for r in role["rules"] if r["verbs"] != ["delete"]]
    world.cluster.apply([role], replace=True)

    answer = _check(world)

    assert answer["result"] == "check_passed"
    assert "every permission granted" not in answer["message"]
    assert "not allowed to delete pods" in answer["message"]
    assert "SPOT_INTERRUPTION_DRAIN" in answer["message"]
