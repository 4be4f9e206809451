"""Review of b26619c, 615bbb6 and 28e16a7 (a release's drain_released; a terminate
hook's chain left released; a scheduled change's drain set for the earlier of the
event's window and EC2's time, the chain's mark carrying EC2's time).

Each test asserts what an operator expects and fails on 28e16a7 (86a437c)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from test_review60_ec2 import _db_pods, _guarded, _invoke, _node, published, world
from test_review62_redelivery import queued
from test_review63_second import ROLE, _listed, _start, _update
from test_review64_hook_release import SHORT
from test_review64_hook_release import _guarded as _hook_guarded
from test_scale_in import Scene, _handed_over, kubesim, scene_for  # noqa: F401

from awssim.instances import schedule_events
from drainer.lifecycle.outcomes import Result
from drainer.lifecycle.settings import Settings
from testbed import World
from testbed.cluster import Cluster

__all__ = ["published", "world"]

LEAD = 3600
MARGIN = 15
SCHEDULER = {"SCHEDULED_CHANGE_LEAD_SECONDS": LEAD, "SCHEDULER_ROLE_ARN": ROLE}


def _ec2_lists(world: World, instance: str, *events: tuple[float, str]) -> None:
    """EC2 lists the instance's retirement at each (start, "" or "[Canceled] ")."""
    schedule_events(world.aws.account_id, world.region, instance, _listed(*events))


def _at(at: float) -> str:
    """An EventBridge Scheduler one-time expression for `at`."""
    return f"at({datetime.fromtimestamp(at, UTC).strftime('%Y-%m-%dT%H:%M:%S')})"


def _held(world: World, name: str) -> tuple[str, dict[str, Any]]:
    """The schedule's expression and the event it delivers."""
    schedule = boto3.client("scheduler", region_name=world.region).get_schedule(Name=name)
    return schedule["ScheduleExpression"], json.loads(schedule["Target"]["Input"])


# --- 615bbb6: a terminate hook's chain and a node without its record ---------------------


def test_hook_chain__node_re_registered_between_invocations__drained_not_taken_for_released(
    scene_for: Callable[..., Scene],  # noqa: F811
) -> None:
    """The terminate hook's drain hands over (recorded). Before the next invocation the
    instance's Node object is deleted and registered again under the same name (a
    kubelet restarted after `kubectl delete node`): a new object, same instance, no
    record. Nobody released anything, and the instance is being terminated; the next
    invocation takes the missing record for a release, ends `released`, leaves the new
    node uncordoned with its pods and the lifecycle action to the hook's timeout.
    Before 615bbb6 it drained the node; the hand-over could carry the node's UID to
    tell a new object from a release."""
    scene = scene_for()
    node = _hook_guarded(scene)
    first = scene.drain(Settings(), time.time, invocation=SHORT)
    assert first.result == Result.HANDED_OVER, first.message
    assert first.handover is not None and first.handover.recorded
    cluster = Cluster.of_kubesim(scene.kubesim)
    old_uid = cluster.get("Node", node)["metadata"]["uid"]
    cluster.client.delete("Node", node)
    scene.kubesim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    assert cluster.get("Node", node)["metadata"]["uid"] != old_uid

    second = scene.drain(
        Settings(), time.time, event=_handed_over(scene, first.handover), invocation=SHORT
    )

    assert second.result != Result.RELEASED, ("a re-registered node taken for released", second)
    assert cluster.get("Node", node)["spec"].get("unschedulable"), "the instance's node drained"


# --- 28e16a7: the schedule at the earlier of the event's window and EC2's time -----------


def test_scheduler__update_moving_window_later_before_ec2_lists_it__drain_stays_days_early(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lead 1 h. The change (window in 3 days) is scheduled at window - 1 h. AWS
    Health's update moves the window two days later and is delivered while EC2 still
    lists the old time (the case 28e16a7 names for a move earlier: EC2 lists the new
    date a minute or two after). The min rule keeps the schedule at the old window - 1 h;
    it fires then and, EC2 listing the new time by then, drains at once toward a
    window two days away: budgets respected, no hand-over, no schedule made again. The
    node is cordoned two days early and nothing drains it before EC2 acts. Before
    131f77a the schedule moved to the update's window - 1 h."""
    instance = world.instance_ids[0]
    change = world.scheduled_change([instance], starts_in=3 * 86400)
    window = _start(change)
    _ec2_lists(world, instance, (window, ""))
    made = _invoke(world, monkeypatch, change, lambda_seconds=10.0, **SCHEDULER)
    assert made["result"] == "scheduled", made

    later = window + 2 * 86400
    update = _update(change, start=later)  # EC2 still lists `window`
    moved = _invoke(world, monkeypatch, update, lambda_seconds=10.0, **SCHEDULER)
    _ec2_lists(world, instance, (later, ""))  # EC2 catches up; nothing else is delivered

    assert moved["result"] == "scheduled", moved
    _, held = _held(world, made["schedule"])
    assert held["id"] == update["id"], "the schedule holds the update"
    # The schedule fires at the old window less the lead (the earlier of the two, then):
    # EC2 lists the later time by then, and the drain is scheduled again for it.
    fired = {**update, "drainer_schedule": made["schedule"]}
    again = _invoke(world, monkeypatch, fired, lambda_seconds=10.0, **SCHEDULER)
    assert again["result"] == "scheduled", (
        "the only drain fires two days before the change, and drains no later",
        again,
    )
    assert _held(world, again["schedule"])[0] == _at(later - LEAD)


def test_scheduler__older_update_due_now_by_ec2s_earlier_time__left_to_a_schedule_too_late(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lead 1 h, window 3 h away: the schedule holds the change's update, at window - 1 h.
    EC2 then lists the change 30 min from now (the owner moved it earlier; no Health
    event). A late delivery of the change's first event (EventBridge retries for a day)
    finds its drain due now, by EC2's time, and leaves it to the schedule because the
    schedule holds a newer update: 'the schedule says when' - at window - 1 h, 90 min
    after EC2 acts. Recency of an update says nothing about EC2's time."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    change = world.scheduled_change([instance], starts_in=3 * 3600)
    window = _start(change)
    _ec2_lists(world, instance, (window, ""))
    update = _update(change)
    made = _invoke(world, monkeypatch, update, lambda_seconds=10.0, **SCHEDULER)
    assert made["result"] == "scheduled", made

    _ec2_lists(world, instance, (time.time() + 1800, ""))  # moved earlier
    late = _invoke(world, monkeypatch, change, lambda_seconds=10.0, **SCHEDULER)

    expression, _ = _held(world, made["schedule"])
    assert late["result"] != "scheduled", (
        "left to a schedule that fires after EC2 acts",
        late,
        expression,
    )
    assert _node(world, node)["spec"].get("unschedulable"), "the node drained before EC2 acts"


# --- 131f77a/28e16a7: the chain's moved time and EC2's listing of it over ----------------


def test_chain_toward_moved_time__ec2_cancels_it__drains_on_toward_the_old_window(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DRAIN_TIMEOUT_SECONDS one day. The event's window is 2 h away; EC2 lists the
    retirement 60 s from now (moved earlier). The first step drains toward EC2's time
    and hands over (its mark's ec2_at). EC2 then lists that event canceled. The next
    step finds nothing at the event's window and nothing pending elsewhere, so it takes
    the change for neither moved nor over: it drains on toward the old window, a
    chain to 2 h from now ending with the held pod force-deleted there, for a change
    EC2 canceled. A change canceled at its own window is released (SoFar.over); one
    canceled at the time the chain drained toward (ec2_at) should be too."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    env = {"DRAIN_TIMEOUT_SECONDS": 86400}
    change = world.scheduled_change([instance], starts_in=7200)
    moved = time.time() + MARGIN + 45
    _ec2_lists(world, instance, (moved, ""))
    first = _invoke(world, monkeypatch, change, lambda_seconds=10.0, **env)
    assert first["result"] == "handed_over", first
    step = queued(world)

    _ec2_lists(world, instance, (moved, "[Canceled] "))
    second = _invoke(world, monkeypatch, step, lambda_seconds=10.0, **env)

    assert second["result"] != "handed_over", (
        "a chain toward the old window for a change EC2 canceled",
        second,
    )
    assert _db_pods(world, node), second
