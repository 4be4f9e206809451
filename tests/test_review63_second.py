"""Review 63, second look: an AWS Health update that keeps the change's window is
left to "the drain under way" whenever the node's record names a drain of the
change toward that window that began, ended or handed over within REDELIVERY_GAP.
The record does not say whether a chain of invocations goes on from it: a drain
that ended for good (not handed over) leaves the update with nothing to be left to,
and the node with no drain until the window."""

from __future__ import annotations

import time
import uuid
from email.utils import formatdate, parsedate_to_datetime
from typing import Any

import pytest
from test_review60_ec2 import _db_pods, _guarded, _invoke, _record, published, world
from test_review62_redelivery import queued

from awssim.instances import schedule_events
from testbed import World

__all__ = ["published", "world"]

ROLE = "arn:aws:iam::123456789012:role/eks-node-drainer-SchedulerRole-ABC123"


def _update(change: dict[str, Any], *, start: float | None = None) -> dict[str, Any]:
    """AWS Health's update of `change`: a new event, the same eventArn, updated now,
    its window at `start` (kept when None)."""
    detail = dict(change["detail"])
    if start is not None:
        detail["startTime"] = formatdate(start, usegmt=True)
        detail["endTime"] = formatdate(start + 7200, usegmt=True)
    time.sleep(1.1)  # RFC 1123: a later lastUpdatedTime, to the second
    detail["lastUpdatedTime"] = formatdate(time.time(), usegmt=True)
    detail["eventDescription"] = [{"language": "en_US", "latestDescription": "updated"}]
    return {**change, "id": str(uuid.uuid4()), "detail": detail}


def _start(change: dict[str, Any]) -> float:
    return parsedate_to_datetime(change["detail"]["startTime"]).timestamp()


def test_update_after_a_drain_that_did_not_hand_over__left_to_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No SCHEDULED_CHANGE_LEAD_SECONDS (the default). The change came while its window
    was further than DRAIN_TIMEOUT_SECONDS (+ margin): its drain has its own deadline,
    respects budgets and never hands over; it ends timed_out with the held pod on the
    node. An update of the change with the same window comes a little later, the window
    now within DRAIN_TIMEOUT_SECONDS: before this change it began the chain to the
    window (the held pod deleted its grace before it). Now it is 'left to that drain',
    which is over: no invocation is queued, and the pod dies with the instance."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    timeout, margin = 60, 15
    env = {"DRAIN_TIMEOUT_SECONDS": timeout, "SPOT_DEADLINE_MARGIN_SECONDS": margin}
    change = world.scheduled_change([instance], starts_in=timeout + margin + 8)

    first = _invoke(world, monkeypatch, change, lambda_seconds=10.0, **env)
    assert first["result"] == "timed_out", first  # its own deadline: no hand-over
    assert not world.aws.pending_invocations()
    assert _db_pods(world, node), "the budget holds the pod"
    # Time passes (here seconds; in production a quarter of an hour): the window is
    # now within DRAIN_TIMEOUT_SECONDS, so EC2 fixes the drain's end.
    while _start(change) - margin - time.time() > timeout - 3:
        time.sleep(0.5)

    updated = _invoke(world, monkeypatch, _update(change), lambda_seconds=10.0, **env)

    assert updated["result"] != "redelivered", (
        "left to a drain that ended for good: nothing drains the node until the window",
        updated,
    )
    assert world.aws.pending_invocations(), "a chain to the window"


def _listed(*events: tuple[float, str]) -> list[dict[str, object]]:
    """EC2's scheduled events for the instance: (its start, "" or "[Canceled] ")."""
    from datetime import UTC, datetime

    return [
        {
            "Code": "instance-retirement",
            "Description": f"{over}The instance is scheduled for retirement.",
            "NotBefore": datetime.fromtimestamp(at, UTC),
        }
        for at, over in events
    ]


def test_window_moved_then_moved_back__the_update_left_to_a_chain_that_ended(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SCHEDULED_CHANGE_LEAD_SECONDS=3600 (the Scheduler path), a window 10 minutes
    away: the change drains now, a chain. AWS Health moves the window two hours later
    (U1: its drain scheduled; EC2 lists the old window canceled), so the chain's next
    step finds its window over and stops. AWS Health moves the window back (U2), within
    the quarter hour: U2 settles U1's schedule (it would drain the node at the wrong
    time) and then is 'left to' the chain of the first event, whose record is still
    fresh, though that chain stopped. Both stop: the node stays cordoned with the held
    pod and nothing drains it before the window."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    env = {"SCHEDULED_CHANGE_LEAD_SECONDS": 3600, "SCHEDULER_ROLE_ARN": ROLE}
    change = world.scheduled_change([instance], starts_in=600)
    window = _start(change)
    schedule_events(world.aws.account_id, world.region, instance, _listed((window, "")))
    first = _invoke(world, monkeypatch, change, lambda_seconds=10.0, **env)
    assert first["result"] == "handed_over", first
    step = queued(world)

    moved = _update(change, start=window + 7200)
    schedule_events(
        world.aws.account_id,
        world.region,
        instance,
        _listed((window, "[Canceled] "), (window + 7200, "")),
    )
    later = _invoke(world, monkeypatch, moved, lambda_seconds=10.0, **env)
    assert later["result"] == "scheduled", later
    stopped = _invoke(world, monkeypatch, step, lambda_seconds=10.0, **env)
    assert stopped["result"] == "skipped", stopped  # the old window: the chain ends
    assert not world.aws.pending_invocations()

    back = _update(moved, start=window)
    schedule_events(
        world.aws.account_id,
        world.region,
        instance,
        _listed((window + 7200, "[Canceled] "), (window, "")),
    )
    assert _record(world, node)["delivery"]["event"] == change["id"]  # the stopped chain's
    again = _invoke(world, monkeypatch, back, lambda_seconds=10.0, **env)

    assert again["result"] != "redelivered", (
        "left to the first event's chain, which stopped: no drain before the window",
        again,
    )
    assert world.aws.pending_invocations(), "a chain to the window"
    assert _db_pods(world, node)
