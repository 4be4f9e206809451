"""Review of 131f77a (a scheduled change EC2 moved is drained toward EC2's time).

Each test asserts what an operator expects and fails on 131f77a."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from test_review60_ec2 import _db_pods, _guarded, _invoke, published, world
from test_review62_redelivery import queued
from test_review63_second import ROLE, _listed, _start, _update

from awssim.instances import schedule_events
from drainer import aws
from drainer.errors import AwsError
from testbed import World

__all__ = ["published", "world"]

LEAD = 3600
MARGIN = 15
SCHEDULER = {"SCHEDULED_CHANGE_LEAD_SECONDS": LEAD, "SCHEDULER_ROLE_ARN": ROLE}


def _ec2_lists(world: World, instance: str, *starts: float) -> None:
    """EC2 lists the instance's retirement (pending) at each of `starts`."""
    schedule_events(
        world.aws.account_id, world.region, instance, _listed(*((at, "") for at in starts))
    )


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _scheduled(
    world: World, monkeypatch: pytest.MonkeyPatch, starts_in: float
) -> tuple[str, dict[str, Any], float, dict[str, Any]]:
    """A change of the first instance, its window `starts_in` away and listed there by
    EC2, scheduled: (instance, change, window, the first invocation's answer)."""
    instance = world.instance_ids[0]
    change = world.scheduled_change([instance], starts_in=starts_in)
    window = _start(change)
    _ec2_lists(world, instance, window)
    made = _invoke(world, monkeypatch, change, lambda_seconds=10.0, **SCHEDULER)
    assert made["result"] == "scheduled", made
    return instance, change, window, made


def _held(world: World, name: str) -> tuple[str, dict[str, Any]]:
    """The schedule's expression and the event it delivers."""
    schedule = boto3.client("scheduler", region_name=world.region).get_schedule(Name=name)
    return schedule["ScheduleExpression"], json.loads(schedule["Target"]["Input"])


def _holds_for(world: World, name: str, update: dict[str, Any], at: float, why: str) -> None:
    """The schedule `name` holds `update` and is set for `at`."""
    expression, held = _held(world, name)
    assert held["id"] == update["id"], "the schedule holds the update"
    assert expression == f"at({_iso(at).rstrip('Z')})", (why, expression, _iso(at))


def test_scheduler__update_moving_window_earlier_before_ec2_lists_it__fires_after_ec2_acts(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lead 1 h. The change (window in 3 days) is scheduled at its window - 1 h. AWS
    Health's update moves the window two days earlier and is delivered while
    DescribeInstanceStatus still lists the old time (EC2 shows a new date "a minute or
    two" later). The update's schedule is taken from EC2's (stale) time: it stays at the
    old window - 1 h, two days after EC2 acts. No event comes once EC2 catches up, so the
    node is never drained before EC2 takes the instance. Before 131f77a the schedule
    moved to the update's window - 1 h; scheduling at the earlier of the two (the fired
    schedule re-reads EC2 anyway) has no such hole."""
    instance, change, window, made = _scheduled(world, monkeypatch, 3 * 86400)

    earlier = window - 2 * 86400
    update = _update(change, start=earlier)  # EC2 still lists `window`
    moved = _invoke(world, monkeypatch, update, lambda_seconds=10.0, **SCHEDULER)
    _ec2_lists(world, instance, earlier)  # EC2 catches up; nothing else is delivered

    assert moved["result"] == "scheduled", moved
    why = "the only drain of the node fires after EC2 acts (at the update's window)"
    _holds_for(world, made["schedule"], update, earlier - LEAD, why)


def test_moved_later_in_ec2__an_update_keeps_the_schedule_at_the_window__fires_before_the_close(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lead 1 h, a change whose window is 2 h away, scheduled at window - 1 h. The owner
    moves this instance's event a day later (ModifyInstanceEventStartTime: no Health
    update about it); an update of the change that keeps its window (a new description)
    moved the schedule to EC2's time - 1 h, past the change's close, which then settled
    that schedule: the instance's only drain, EC2 retiring it a day later undrained.
    The schedule stays at the earlier of the two (the window's): it fires before the
    close, and its invocation drains toward EC2's time."""
    instance, change, window, made = _scheduled(world, monkeypatch, 2 * 3600)

    _ec2_lists(world, instance, window + 86400)  # the owner's reschedule
    again = _invoke(world, monkeypatch, _update(change), lambda_seconds=10.0, **SCHEDULER)

    assert again.get("drain_at") == _iso(window - LEAD), again
    expression, _ = _held(world, made["schedule"])
    assert expression == f"at({_iso(window - LEAD).rstrip('Z')})", expression


def test_chain_toward_ec2s_time__one_failed_describe_instance_status__forces_at_the_old_window(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DRAIN_TIMEOUT_SECONDS one day. The event's window is 23 s away; EC2 lists the
    retirement two hours later. The first step drains toward EC2's time and hands over.
    The next step's DescribeInstanceStatus fails (after botocore's retries): the step
    falls back to the event's window, EC2's moment again, and force-deletes the pod the
    budget holds right before it, two hours before EC2 acts. The chain knew EC2's time;
    its hand-over mark does not carry it."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    env = {"DRAIN_TIMEOUT_SECONDS": 86400}
    change = world.scheduled_change([instance], starts_in=MARGIN + 8)
    _ec2_lists(world, instance, _start(change) + 7200)
    first = _invoke(world, monkeypatch, change, lambda_seconds=10.0, **env)
    assert first["result"] == "handed_over", first
    step = queued(world)

    def failing(ec2: Any, instance_id: str) -> Any:
        raise AwsError(f"DescribeInstanceStatus {instance_id}: RequestLimitExceeded")

    monkeypatch.setattr(aws, "scheduled_events", failing)
    second = _invoke(world, monkeypatch, step, lambda_seconds=10.0, **env)

    assert not second.get("forced"), ("forced at the old window, 2 h before EC2 acts", second)
    assert _db_pods(world, node), second
