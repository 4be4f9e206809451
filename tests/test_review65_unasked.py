"""Session 65: an update of a scheduled change delivered while EC2 cannot be asked.

Lead 1 h. EC2 lists the change a day before its window (the owner moved it earlier,
or AWS did), so its schedule is set for EC2's time less the lead. An update of the
change (a new description, the same window) is then delivered while
DescribeInstanceStatus fails: the schedule was moved to the update's window less the
lead, a day after EC2 acts, and nothing drained the node before EC2 took the
instance. Now an update that EC2 does not confirm never moves the schedule later
than it is: the fired schedule reads EC2 again (and is made again for a later time
EC2 lists then)."""

from __future__ import annotations

from typing import Any

import pytest
from test_review60_ec2 import _guarded, _invoke, published, world
from test_review63_second import _start, _update
from test_review64_moved_review import SCHEDULER, _ec2_lists, _held, _holds_for, _iso

from drainer import aws
from drainer.errors import AwsError
from testbed import World

__all__ = ["published", "world"]

LEAD = 3600


def _unasked(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(ec2: Any, instance_id: str) -> Any:
        raise AwsError(f"DescribeInstanceStatus {instance_id}: RequestLimitExceeded")

    monkeypatch.setattr(aws, "scheduled_events", failing)


def _made(world: World, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], float, dict]:
    """A change whose window is 3 days away, EC2 listing it 2 days away: scheduled."""
    instance = world.instance_ids[0]
    _guarded(world, world.nodes[instance])
    change = world.scheduled_change([instance], starts_in=3 * 86400)
    ec2_at = _start(change) - 86400
    _ec2_lists(world, instance, ec2_at)
    made = _invoke(world, monkeypatch, change, lambda_seconds=10.0, **SCHEDULER)
    assert made["result"] == "scheduled", made
    assert made["drain_at"] == _iso(ec2_at - LEAD), made
    return change, ec2_at, made


def test_update_while_ec2_cannot_be_asked__the_schedule_stays_at_ec2s_earlier_time(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    change, ec2_at, made = _made(world, monkeypatch)

    _unasked(monkeypatch)
    update = _update(change)
    moved = _invoke(world, monkeypatch, update, lambda_seconds=10.0, **SCHEDULER)

    assert moved["result"] == "scheduled", moved
    why = "moved past EC2's time: the node's only drain fires after EC2 acts"
    _holds_for(world, made["schedule"], update, ec2_at - LEAD, why)
    assert moved["drain_at"] == _iso(ec2_at - LEAD), moved


def test_update_moving_the_window_later_while_ec2_cannot_be_asked__kept_earlier(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The update moves the window a day later still: unconfirmed by EC2, the schedule
    stays where it was (the fired schedule reads EC2 then)."""
    change, ec2_at, made = _made(world, monkeypatch)

    _unasked(monkeypatch)
    update = _update(change, start=_start(change) + 86400)
    moved = _invoke(world, monkeypatch, update, lambda_seconds=10.0, **SCHEDULER)

    assert moved["result"] == "scheduled", moved
    expression, _ = _held(world, made["schedule"])
    assert expression == f"at({_iso(ec2_at - LEAD).rstrip('Z')})", expression


def test_update_moving_the_window_later_that_ec2_lists__moves_the_schedule(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same update, EC2 listing its new window: the schedule moves to it."""
    change, _, made = _made(world, monkeypatch)
    later = _start(change) + 86400
    _ec2_lists(world, world.instance_ids[0], later)

    moved = _invoke(
        world, monkeypatch, _update(change, start=later), lambda_seconds=10.0, **SCHEDULER
    )

    assert moved["drain_at"] == _iso(later - LEAD), moved
    expression, _ = _held(world, made["schedule"])
    assert expression == f"at({_iso(later - LEAD).rstrip('Z')})", expression


@pytest.mark.parametrize(
    ("expression", "at"),
    [
        ("at(2026-12-02T21:56:10)", "2026-12-02T21:56:10Z"),
        ("rate(5 minutes)", None),
        ("at(2026-13-02T21:56:10)", None),
        ("at(2026-12-02 21:56:10)", None),
    ],
)
def test_held_at__a_one_time_schedules_time_or_none(expression: str, at: str | None) -> None:
    from drainer.aws.scheduler import held_at

    found = held_at(expression)
    assert (None if found is None else _iso(found)) == at
