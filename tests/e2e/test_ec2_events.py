"""EC2's other ways of taking a node away, through the real handler: an AWS Health
scheduled change (every instance it names drained, each in an invocation of its
own, before the window), an instance stopping outside the terminate hook, and an
interruptible capacity reservation's two-minute warning, whose budget-held pods are
deleted each with its grace before EC2 acts. The events are built by
awssim/ec2_events.py as EventBridge delivers them; spot's own are in test_spot.py."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest

from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on

from .conftest import BudgetWatcher, Invoke, LogCapture
from .test_spot import _record, _unschedulable, full_name, parse_time


def _queued_invocations(world: World, invoke: Invoke, **env: Any) -> list[dict[str, Any]]:
    """Run every asynchronous invocation the function queued, as Lambda would."""
    results = []
    while (queued := world.aws.pop_invocation()) is not None:
        results.append(invoke(queued["payload"], **env))
    return results


def test_scheduled_change__two_instances__each_drained_in_its_own_invocation_before_the_window(
    world: World, invoke: Invoke
) -> None:
    first, second, spare = world.instance_ids
    for instance in (first, second):
        place_on(world, world.nodes[instance], [w.deployment(f"web-{instance[-4:]}", 2)])
    event = world.scheduled_change([first, second], starts_in=600)

    fanned = invoke(event)
    drains = _queued_invocations(world, invoke)

    assert fanned == {"result": "fanned_out", "instances": sorted([first, second])}
    assert sorted(d["node"] for d in drains) == sorted(world.nodes[i] for i in (first, second))
    for drain in drains:
        assert drain["result"] == "drained", drain
        assert drain["trigger"] == "scheduled-change"
        assert drain["evicted"] == 2
        assert (
            "scheduled change AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED starting"
            in (drain["deadline_source"])
        )
        assert pods_on(world.cluster, drain["node"]) == []
        assert _record(world, drain["node"])["phase"] == "drained"
    assert not _unschedulable(world, world.nodes[spare]), "an instance not named was touched"
    assert world.completions() == [], "no lifecycle action: EC2 ends the instance"


def test_scheduled_change__window_days_away__budgets_respected_nothing_forced(
    world: World, invoke: Invoke
) -> None:
    """The window is not here yet: the drain has DRAIN_TIMEOUT_SECONDS (here cut to a
    short invocation's time) and a budget that allows nothing holds its pod; no pod
    is deleted for a window days away."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    guarded = [w.deployment("web", 1), w.budget("web", {"app": "web"}, max_unavailable=0)]
    place_on(world, node, guarded)

    summary = invoke(
        world.scheduled_change([instance], starts_in=3 * 86400),
        timeout=12,
        HANDOVER_MARGIN_SECONDS=5,
    )

    assert summary["result"] == "timed_out", summary
    assert summary["deadline_source"] == (
        "DRAIN_TIMEOUT_SECONDS (3600 s), cut to this invocation's time"
    )
    assert not summary["forced_pods"], "the window is days away: no pod deleted for it"
    assert len(pods_on(world.cluster, node)) == 1, "the budget held it, as it should"


def test_state_change__instance_stopping__drained_at_once_when_turned_on__else_left_alone(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 3)])

    off = invoke(world.state_change(instance, "stopping"))
    assert off["result"] == "skipped" and "STATE_CHANGE_DRAIN is off" in off["reason"]
    assert not _unschedulable(world, node) and drainer_logs.events("cordoned") == []

    summary = invoke(world.state_change(instance, "stopping"), STATE_CHANGE_DRAIN="true")

    assert summary["result"] == "drained", summary
    assert summary["trigger"] == "state-change"
    assert summary["evicted"] == 3
    assert summary["deadline_source"].startswith("instance stopping at")
    assert summary["seconds"] < 45, "within the minute a stopping OS leaves"
    assert pods_on(world.cluster, node) == []


def test_capacity_reservation_warning__budget_never_allows__each_pod_deleted_with_its_grace(
    world: World, invoke: Invoke, budgets: BudgetWatcher
) -> None:
    """The reservation's instance is terminated at the time the warning names,
    whatever the budgets say: each held pod is deleted its grace before (cut to the
    time left), so it gets SIGTERM on a live node."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(
        world,
        node,
        [
            w.deployment("db", 2, grace=30, labels={"app": "db"}),
            w.budget("db", {"app": "db"}, max_unavailable=0),
        ],
    )
    held = {full_name(p) for p in pods_on(world.cluster, node)}
    budgets.start()
    warning = world.capacity_interruption(instance, age=95)  # 10 s to the deadline
    deadline = parse_time(warning["detail"]["instance-termination-time"]) - 15

    summary = invoke(warning)

    assert summary["result"] == "timed_out", summary
    assert summary["trigger"] == "capacity-reservation-interruption"
    assert set(summary["forced_pods"]) == held
    started = {
        full_name(e.new): e.new["metadata"]
        for e in budgets.pod_events()
        if e.evicted and full_name(e.new) in held
    }
    assert set(started) == held, "each held pod got its SIGTERM"
    for name, metadata in started.items():
        grace = int(metadata["deletionGracePeriodSeconds"])
        ends = parse_time(metadata["deletionTimestamp"])
        print(f"{name}: grace cut from 30 to {grace} s, ends {deadline - ends:.1f} s early")
        assert 1 <= grace < 30, "its grace cut to the time left"
        assert ends <= deadline + 1.5


def test_scheduled_change_with_a_lead__schedule_first__its_invocation_drains_the_node(
    world: World, invoke: Invoke
) -> None:
    """SCHEDULED_CHANGE_LEAD_SECONDS: the event only schedules the drain (EventBridge
    Scheduler, in moto); the schedule's invocation, with the event as its input,
    drains the node."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2)])
    lead = 3600
    env = {
        "SCHEDULED_CHANGE_LEAD_SECONDS": lead,
        "SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/drainer-SchedulerRole-ABC123",
    }
    event = world.scheduled_change([instance], starts_in=lead + 600)

    scheduled = invoke(event, **env)

    assert scheduled["result"] == "scheduled", scheduled
    assert not _unschedulable(world, node), "nothing is done before the schedule's time"
    scheduler = boto3.client("scheduler", region_name=world.region)
    schedule = scheduler.get_schedule(Name=scheduled["schedule"])
    assert schedule["ScheduleExpression"] == f"at({scheduled['drain_at'].rstrip('Z')})"
    assert parse_time(scheduled["drain_at"]) == pytest.approx(time.time() + 600, abs=10)

    # Ten minutes later, EventBridge Scheduler invokes the function with its input.
    summary = invoke(json.loads(schedule["Target"]["Input"]), **env)

    assert summary["result"] == "drained", summary
    assert summary["trigger"] == "scheduled-change"
    assert pods_on(world.cluster, node) == []


def test_scheduled_change_closed__instance_runs__the_node_its_drain_cordoned_released(
    world: World, invoke: Invoke
) -> None:
    """A retirement drained at once when announced, then cancelled: AWS Health closes
    the change while the instance runs. The node stayed cordoned and out of the load
    balancers until someone ran `release`; now the close releases it. A node another
    drain cordoned is left as it is."""
    instance, other = world.instance_ids[0], world.instance_ids[1]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2)])
    event = world.scheduled_change([instance], starts_in=600)
    assert invoke(event)["result"] == "drained"
    record = _record(world, node)
    assert _unschedulable(world, node) and record["trigger"] == "scheduled-change"
    assert record["change"] == event["detail"]["eventArn"], "the record names its change"
    world.cluster.client.patch("Node", world.nodes[other], {"spec": {"unschedulable": True}})
    closed = json.loads(json.dumps(event))
    closed["id"] = "5d0c-closed"
    closed["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))
    closed["detail"]["statusCode"] = "closed"
    closed["detail"]["affectedEntities"].append({"entityValue": other})

    result = invoke(closed)

    assert result["result"] == "closed", result
    assert result["released"] == [instance]
    assert "no eks-node-drainer record" in result["kept"][other]
    assert not _unschedulable(world, node)
    labels = world.cluster.client.get("Node", node)["metadata"].get("labels") or {}
    assert "node.kubernetes.io/exclude-from-external-load-balancers" not in labels
    assert _record(world, node) == {}, "the record is gone, as `release` leaves it"
    assert _unschedulable(world, world.nodes[other]), "an operator's cordon is kept"
