"""Review of e327e1b (an update EC2 does not confirm never moves a schedule later than
the drain it holds: HELD). Each test asserts what an operator expects and fails on
e327e1b for the reason its docstring gives."""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest
from support.said import said
from test_review60_ec2 import _guarded, _invoke, published, world
from test_review63_second import _start, _update
from test_review64_moved_review import SCHEDULER, _ec2_lists, _held, _iso
from test_review65_unasked import _made, _unasked

from awssim import ec2_events as spot
from drainer.aws.scheduler import held_at
from drainer.lifecycle.events_ec2 import SETTLED_KEY
from drainer.lifecycle.scheduled import other_name
from testbed import World

__all__ = ["published", "said", "world"]

LEAD = 3600
DAY = 86400


def _drains_to_come(world: World, *names: str) -> dict[str, float]:
    """Of the schedules `names`, those that hold a drain (not settled): their time."""
    scheduler = boto3.client("scheduler", region_name=world.region)
    found: dict[str, float] = {}
    for name in names:
        try:
            expression, held = _held(world, name)
        except scheduler.exceptions.ResourceNotFoundException:
            continue
        at = held_at(expression)
        if SETTLED_KEY not in held and at is not None:
            found[name] = at
    return found


def _again_made(
    world: World, monkeypatch: pytest.MonkeyPatch, *, ec2_in: float, guarded: bool = True
) -> tuple[dict[str, Any], str, float]:
    """The change's schedule fired; EC2 lists the change `ec2_in` seconds from now, so
    the drain was made again under `<name>-again` (for EC2's time less the lead), and
    Scheduler deleted the one that fired. The change, its schedule's name, EC2's time."""
    instance = world.instance_ids[0]
    if guarded:
        _guarded(world, world.nodes[instance])
    change = world.scheduled_change([instance], starts_in=LEAD + 300)
    window = _start(change)
    _ec2_lists(world, instance, window)
    made = _invoke(world, monkeypatch, change, lambda_seconds=10.0, **SCHEDULER)
    assert made["result"] == "scheduled", made
    name = made["schedule"]

    ec2_at = time.time() + ec2_in  # the owner's reschedule, in EC2 only
    _ec2_lists(world, instance, ec2_at)
    fired = {**change, "drainer_schedule": name}
    again = _invoke(world, monkeypatch, fired, lambda_seconds=10.0, **SCHEDULER)
    assert again["schedule"] == other_name(name), again
    boto3.client("scheduler", region_name=world.region).delete_schedule(Name=name)
    return change, name, ec2_at


def _first_drain_by(world: World, names: tuple[str, ...], at: float, why: str) -> None:
    """Of the schedules `names`, one holds a drain set for `at` or before."""
    to_come = _drains_to_come(world, *names)
    assert to_come, "no drain left at all"
    found = {k: _iso(v) for k, v in to_come.items()}
    assert min(to_come.values()) <= at, (why, found, _iso(at))


def test_again_schedule_holds_ec2s_time__an_update_ec2_cannot_confirm_moves_the_drain_past_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lead 1 h. The owner moved the instance's event a day later in EC2; the change's
    schedule fired at the window less the lead, read EC2, and made the drain again
    for EC2's time under `<name>-again` (Scheduler deleted the one that fired). AWS
    Health then sends an update moving the window three days later, delivered while
    DescribeInstanceStatus fails. HELD only guards the schedule under the change's own
    name, which is gone: the update creates it at its own window (less the lead) and
    `_settle_other` settles the `-again` schedule, the one EC2 confirmed. The node's
    only drain now fires two days after EC2 acts - the very hole e327e1b closes for
    the first name ("never moves a schedule later than the drain it holds")."""
    change, name, ec2_at = _again_made(world, monkeypatch, ec2_in=LEAD + 300 + DAY)
    window = _start(change)

    _unasked(monkeypatch)
    update = _update(change, start=window + 3 * DAY)
    answer = _invoke(world, monkeypatch, update, lambda_seconds=10.0, **SCHEDULER)

    assert answer["result"] == "scheduled", answer
    why = "the drain EC2 confirmed was settled for an unconfirmed, later one after EC2 acts"
    _first_drain_by(world, (name, other_name(name)), ec2_at - LEAD, why)


def test_held_update_delivered_again__its_answer_and_log_say_the_time_the_schedule_is_set_for(
    world: World, monkeypatch: pytest.MonkeyPatch, said: list[str]
) -> None:
    """An update EC2 does not confirm is HELD at EC2's earlier time, and its answer says
    that time. EventBridge delivers events at least once: the same update delivered
    again (EC2 still not answering) finds the schedule holding it (KEPT), and
    `_moved` answers KEPT with the time asked for, not the schedule's: the answer's
    drain_at and the log line ("its drain is scheduled for ...; the schedule existed
    already") name the update's window less the lead, two days after the time the
    schedule is really set for. `Scheduled.at` is documented as "the time the
    schedule is set for"; for KEPT it is not."""
    change, ec2_at, made = _made(world, monkeypatch)
    _unasked(monkeypatch)
    update = _update(change, start=_start(change) + DAY)
    first = _invoke(world, monkeypatch, update, lambda_seconds=10.0, **SCHEDULER)
    assert first["drain_at"] == _iso(ec2_at - LEAD), first

    said.clear()
    again = _invoke(world, monkeypatch, update, lambda_seconds=10.0, **SCHEDULER)

    expression, held = _held(world, made["schedule"])
    assert held["id"] == update["id"], held
    set_for = _iso(held_at(expression) or 0.0)
    assert again.get("drain_at") == set_for, (
        "the same update, delivered twice, answered two drain times; the second is not "
        "the schedule's",
        again,
        expression,
    )
    lines = [line for line in said if "its drain is scheduled for" in line]
    assert lines and all(f"scheduled for {set_for}" in line for line in lines), lines


def _termination(world: World, starts_in: float) -> dict[str, Any]:
    return spot.scheduled_change(
        world.aws.account_id,
        world.region,
        [world.instance_ids[0]],
        starts_in=starts_in,
        code="AWS_EC2_INSTANCE_TERMINATION_SCHEDULED",
    )


def test_kind_ec2_never_lists__an_update_postponing_the_change_never_moves_its_schedule(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scheduled termination: a kind EC2's DescribeInstanceStatus never lists
    (`ec2_code` is "" for it), so `listed_at` is None for every update of it, with EC2
    answering. AWS Health postpones the change by a week: the update is HELD at the
    old window less the lead, though EC2 was asked and nothing contradicts the update.
    The schedule then fires at the old time, `_fired` finds EC2 listing nothing
    (listed_at None) and drains the node then - a week before the termination, the
    node cordoned all that week. The HELD log line says EC2 "does not list the change
    at this one ... its invocation reads EC2 again", which can never confirm it. Before
    e327e1b the schedule moved with the update."""
    instance = world.instance_ids[0]
    _guarded(world, world.nodes[instance])
    change = _termination(world, starts_in=3 * DAY)
    window = _start(change)
    made = _invoke(world, monkeypatch, change, lambda_seconds=10.0, **SCHEDULER)
    assert made["result"] == "scheduled", made
    assert made["drain_at"] == _iso(window - LEAD), made

    postponed = window + 7 * DAY
    moved = _invoke(
        world, monkeypatch, _update(change, start=postponed), lambda_seconds=10.0, **SCHEDULER
    )

    assert moved["result"] == "scheduled", moved
    expression, _ = _held(world, made["schedule"])
    assert expression == f"at({_iso(postponed - LEAD).rstrip('Z')})", (
        "held at the old window: drained a week before the termination",
        expression,
        moved,
    )
