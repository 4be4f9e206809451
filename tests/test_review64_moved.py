"""Session 64: a scheduled change whose window EC2 moved, without marking the old one.

EC2 keeps one scheduled event per change: rescheduled (by AWS, or by the owner's
ModifyInstanceEventStartTime for one instance), DescribeInstanceStatus lists it at its
new time and nothing at the old, and AWS Health may send no update (the owner's move of
one instance of a change keeps the change's window). A drain toward the event's window
then drained toward a time EC2 no longer keeps: moved later, the last step of the chain
force-deleted the pods budgets held at the old window, hours before EC2 acts; moved
earlier, nothing deleted them before EC2 took the instance. Now each invocation takes
the change's time from EC2 when EC2 lists the change's kind pending elsewhere and
nothing at the window: the drain, or its schedule, goes toward EC2's time."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import boto3
import pytest
from test_review60_ec2 import _db_pods, _guarded, _invoke, _node, _record, published, world
from test_review62_redelivery import _first, queued
from test_review63_second import ROLE, _listed, _start, _update

from awssim.instances import schedule_events
from testbed import World

__all__ = ["published", "world"]

MARGIN = 15
"""SPOT_DEADLINE_MARGIN_SECONDS' default."""


def _ec2_lists(world: World, instance: str, *starts: float) -> None:
    """EC2 lists the instance's retirement (pending) at each of `starts`."""
    schedule_events(
        world.aws.account_id, world.region, instance, _listed(*((at, "") for at in starts))
    )


def test_window_moved_later_in_ec2__nothing_forced_at_the_old_window(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event's window is 18 s away (its drain's deadline 3 s away: EC2's moment,
    the held pod deleted its grace before it); EC2 lists the retirement two hours
    later. The pod stays, its budget respected: EC2 does not act for two hours."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    change = world.scheduled_change([instance], starts_in=MARGIN + 3)
    moved = _start(change) + 7200
    _ec2_lists(world, instance, moved)

    with _said("drainer.lifecycle.ec2_events") as said:
        summary = _invoke(world, monkeypatch, change, lambda_seconds=10.0)

    assert summary["result"] == "timed_out", summary
    assert _db_pods(world, node), ("the held pod was force-deleted at the old window", summary)
    assert not summary.get("forced"), summary
    assert _node(world, node)["spec"].get("unschedulable"), "cordoned, drained toward EC2's time"
    assert not world.aws.pending_invocations(), "no chain toward a window two hours away"
    assert any(f"at {_iso(moved)}, not at the event's window" in line for line in said), said


def test_window_moved_earlier_in_ec2__drained_toward_ec2s_time(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event's window is two hours away (its drain respects budgets, its own
    deadline); EC2 lists the retirement 18 s from now. The held pod is deleted its
    grace before EC2's moment, as for any window EC2 fixes, not left to die with the
    instance."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    change = world.scheduled_change([instance], starts_in=7200)
    _ec2_lists(world, instance, time.time() + MARGIN + 3)

    summary = _invoke(world, monkeypatch, change, lambda_seconds=10.0)

    assert summary.get("forced") == 1, summary
    assert not _db_pods(world, node), summary


def test_chain_step_after_ec2_moved_the_window_later__drains_toward_it_no_chain_to_the_old(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lead 0: the chain toward a window 10 minutes away. EC2 moves this instance's
    event two hours later, and no update comes. The next step drains toward EC2's time
    (beyond DRAIN_TIMEOUT_SECONDS: budgets respected, its own deadline) and hands over
    no more: no chain toward the old window, whose last step would force the pod."""
    node, change = _first(world, monkeypatch)
    step = queued(world)
    _ec2_lists(world, world.instance_ids[0], _start(change) + 7200)

    later = _invoke(world, monkeypatch, step, lambda_seconds=10.0)

    assert later["result"] == "timed_out", later
    assert not world.aws.pending_invocations(), later
    assert _db_pods(world, node), later
    assert _node(world, node)["spec"].get("unschedulable")
    assert _record(world, node), "the record stays: the drain is the change's"


def test_window_listed_where_the_event_says__the_chain_goes_on(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, change = _first(world, monkeypatch)
    step = queued(world)
    _ec2_lists(world, world.instance_ids[0], _start(change))

    later = _invoke(world, monkeypatch, step, lambda_seconds=10.0)

    assert later["result"] == "handed_over", later


def test_scheduler_path__window_moved_in_ec2_only__the_drain_scheduled_again_for_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SCHEDULED_CHANGE_LEAD_SECONDS=3600: the schedule fires with the event's window,
    which the owner moved a day later in EC2 (no AWS Health update: the change keeps
    its window). The drain is scheduled again for EC2's time less the lead, under the
    schedule's other name (Scheduler deletes the one that fired); the node is left as
    it is until then. That schedule firing then drains."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    env = {
        "SCHEDULED_CHANGE_LEAD_SECONDS": 3600,
        "SCHEDULER_ROLE_ARN": ROLE,
        "DRAIN_TIMEOUT_SECONDS": 7200,  # the window within it: a chain to the window
    }
    change = world.scheduled_change([instance], starts_in=3600 + 300)
    window = _start(change)
    _ec2_lists(world, instance, window)
    made = _invoke(world, monkeypatch, change, lambda_seconds=10.0, **env)
    assert made["result"] == "scheduled", made

    _ec2_lists(world, instance, window + 86400)
    fired = {**change, "drainer_schedule": made["schedule"]}
    again = _invoke(world, monkeypatch, fired, lambda_seconds=10.0, **env)

    assert again["result"] == "scheduled", again
    assert again["schedule"] == made["schedule"] + "-again", again
    assert again["drain_at"] == _iso(window + 86400 - 3600), again
    scheduler = boto3.client("scheduler", region_name=world.region)
    expression = scheduler.get_schedule(Name=again["schedule"])["ScheduleExpression"]
    assert expression == f"at({_iso(window + 86400 - 3600).rstrip('Z')})", expression
    assert not _node(world, node)["spec"].get("unschedulable"), "left as it is until then"
    assert not world.aws.pending_invocations(), "no chain toward the old window"

    _ec2_lists(world, instance, time.time() + 3600 + 30)  # its time comes: EC2's, less the lead
    fired_again = {**change, "drainer_schedule": again["schedule"]}
    drained = _invoke(world, monkeypatch, fired_again, lambda_seconds=10.0, **env)
    assert drained["result"] != "scheduled", drained
    assert _node(world, node)["spec"].get("unschedulable"), drained


def test_scheduler_path__chain_step_after_ec2_moved_the_window_later__rescheduled_and_told(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """SCHEDULED_CHANGE_LEAD_SECONDS=3600: the schedule fired, the drain cordoned the
    node and handed over (a pod its budget holds). EC2 then moves the window a day
    later. The next step schedules the drain again for EC2's time (the final drain,
    its pods' grace fitted to EC2's moment, comes then), and said nothing: no end
    line's message, no notice, the node cordoned and out of the load balancers for a
    day. It says so now, in the end line and a notice."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    env = {
        "SCHEDULED_CHANGE_LEAD_SECONDS": 3600,
        "SCHEDULER_ROLE_ARN": ROLE,
        "DRAIN_TIMEOUT_SECONDS": 7200,
        "NOTIFICATION_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:drains",
    }
    change = world.scheduled_change([instance], starts_in=3600 + 60)
    window = _start(change)
    _ec2_lists(world, instance, window)
    fired = {**change, "drainer_schedule": "eks-node-drainer-fired"}
    first = _invoke(world, monkeypatch, fired, lambda_seconds=10.0, **env)
    assert first["result"] == "handed_over", first
    step = queued(world)
    _ec2_lists(world, instance, window + 86400)
    told = len(published)

    later = _invoke(world, monkeypatch, step, lambda_seconds=10.0, **env)

    assert later["result"] == "scheduled", later
    assert later["drain_at"] == _iso(window + 86400 - 3600), later
    assert "its node stays cordoned and out of the load balancers until then" in later["message"]
    assert [t for t, _ in published[told:]] == [
        f"eks-node-drainer: {instance} drain resumes at {later['drain_at']}"
    ], published
    assert _node(world, node)["spec"].get("unschedulable")
    assert _db_pods(world, node), "nothing forced for a window a day away"


def test_update_moving_the_window_before_ec2_lists_it__nothing_skipped(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWS Health's update moves the window two hours later and arrives while EC2 still
    lists the old one: EC2's time is the one acted on. Once EC2 lists the new time,
    the old chain's next step drains toward it: neither is skipped, nothing forced."""
    node, change = _first(world, monkeypatch)
    step = queued(world)
    instance = world.instance_ids[0]
    window = _start(change)
    _ec2_lists(world, instance, window)

    update = _invoke(world, monkeypatch, _update(change, start=window + 7200), lambda_seconds=10.0)
    _ec2_lists(world, instance, window + 7200)
    old = _invoke(world, monkeypatch, step, lambda_seconds=10.0)

    assert update["result"] != "skipped", update
    assert old["result"] != "skipped", old
    assert _db_pods(world, node), (update, old)
    assert _node(world, node)["spec"].get("unschedulable")


@pytest.mark.parametrize(
    ("health", "ec2"),
    [
        ("AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", "instance-retirement"),
        ("AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED", "instance-retirement"),
        ("AWS_EC2_INSTANCE_STOP_SCHEDULED", "instance-stop"),
        ("AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED", "system-reboot"),
        ("AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED", "instance-reboot"),
        ("AWS_EC2_INSTANCE_NETWORK_MAINTENANCE_SCHEDULED", "system-maintenance"),
        ("AWS_EC2_INSTANCE_TERMINATION_SCHEDULED", ""),
    ],
)
def test_ec2_code__a_health_code_as_ec2_lists_its_kind(health: str, ec2: str) -> None:
    """A kind EC2 does not list matches nothing: its window is never taken from EC2."""
    from drainer.lifecycle.late import ec2_code

    assert ec2_code(health) == ec2


@contextmanager
def _said(logger: str) -> Iterator[list[str]]:
    """The lines `logger` logs meanwhile, at WARNING or above."""
    lines: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger(logger).addHandler(handler)
    try:
        yield lines
    finally:
        logging.getLogger(logger).removeHandler(handler)


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("listed", "moved"),
    [
        ([("instance-retirement", 7200.0, False)], 7200.0),
        ([("instance-retirement", 9000.0, False), ("instance-retirement", 7200.0, False)], 7200.0),
        ([("instance-retirement", 30.0, False), ("instance-retirement", 7200.0, False)], None),
        ([("system-reboot", 30.0, True), ("instance-retirement", 7200.0, False)], None),
        ([("instance-retirement", 7200.0, True)], None),
        ([("instance-stop", 7200.0, False)], None),
        ([("instance-retirement", None, False)], None),
        ([], None),
    ],
)
def test_moved_to__ec2s_time_only_when_nothing_is_listed_at_the_window(
    listed: list[tuple[str, float | None, bool]], moved: float | None
) -> None:
    """The change's window at 0: EC2's time is the earliest pending event of the
    change's kind elsewhere, and only when EC2 lists nothing at the window (anything
    there, over or not, of any kind, is the change's own: `_over` reads it)."""
    from drainer.lifecycle.events_ec2 import Ec2Event, Ec2Kind
    from drainer.lifecycle.late import _moved_to

    event = Ec2Event(
        Ec2Kind.SCHEDULED_CHANGE,
        "i-0123456789abcdef0",
        "e1",
        "2026-11-30T00:00:00Z",
        "us-east-1",
        "123456789012",
        detail_code="AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
        acts_at=0.0,
    )
    assert _moved_to(event, listed) == moved


def test_start_notice__says_ec2_moved_the_window(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """The notice named EC2's time as AWS Health's window: it says both."""
    instance = world.instance_ids[0]
    change = world.scheduled_change([instance], starts_in=7200)
    moved = _start(change) + 86400
    _ec2_lists(world, instance, moved)

    _invoke(
        world,
        monkeypatch,
        change,
        lambda_seconds=10.0,
        NOTIFY_ON_START="true",
        NOTIFICATION_TOPIC_ARN="arn:aws:sns:us-east-1:123456789012:drains",
    )

    started = [text for subject, text in published if "raining" in subject]
    when = datetime.fromtimestamp(moved, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert started and f"EC2 moved it to {when}" in started[0], published
