"""Third review of e327e1b + eaf060a (an update EC2 does not confirm never brings the
drain later than one a schedule holds, under the change's name or `<name>-again`).
Each test asserts what an operator expects and fails on eaf060a for the reason its
docstring gives."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import botocore.client
import pytest
from botocore.exceptions import ClientError
from test_review60_ec2 import _invoke, published, world
from test_review63_second import _start, _update
from test_review64_moved_review import SCHEDULER, _iso
from test_review65_scheduler_review import _again_made, _drains_to_come, _first_drain_by
from test_review65_unasked import _unasked

from drainer.lifecycle.scheduled import other_name
from testbed import World

__all__ = ["published", "world"]

LEAD = 3600
DAY = 86400


def test_again_schedule_read_throttled_once__the_update_settles_it_for_a_drain_days_later(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`_unconfirmed` reads `<name>-again` with GetSchedule and swallows any failure,
    a transient one (ThrottlingException) included, as "no drain held there". The
    update then creates the change's schedule at its own window (less the lead), and
    `_settle_other`, whose GetSchedule of the same name a moment later succeeds,
    settles the `-again` schedule that held EC2's time. The node's only drain fires
    three days after EC2 acts: the hole eaf060a closes, reopened by one throttled
    call. `_moved` raises a transient error for EventBridge to deliver the event again;
    the extra read should too (or at least not settle what it could not read)."""
    change, name, ec2_at = _again_made(world, monkeypatch, ec2_in=DAY)
    other = other_name(name)

    real = botocore.client.BaseClient._make_api_call
    throttled: list[str] = []

    def once(self: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation == "GetSchedule" and params.get("Name") == other and not throttled:
            throttled.append(other)
            error = {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}
            raise ClientError({**error, "ResponseMetadata": {"HTTPStatusCode": 400}}, operation)
        return real(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", once)
    _unasked(monkeypatch)
    update = _update(change, start=_start(change) + 3 * DAY)
    # raised for EventBridge to deliver the update again would be fine too
    with contextlib.suppress(Exception):
        _invoke(world, monkeypatch, update, lambda_seconds=10.0, **SCHEDULER)
    assert throttled, "the -again schedule was never read"

    why = "one throttled GetSchedule, swallowed: the confirmed drain settled for a later one"
    _first_drain_by(world, (name, other), ec2_at - LEAD, why)


def test_update_due_by_the_again_time__delivered_again__schedules_a_drain_days_after_ec2(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`<name>-again` holds EC2's time, now less than a minute away. An update moving
    the window three days later arrives while DescribeInstanceStatus fails:
    `_unconfirmed` pulls its drain to the `-again` time, due now, so `_due_now` drains
    now and `_settle_other` settles the `-again` schedule. EventBridge delivers the
    same update again (at least once; or Lambda retries the invocation after the
    drain failed): the `-again` schedule is settled now, so `_unconfirmed` finds no
    drain held, and the same update creates the change's schedule at its own window
    less the lead - a second drain three days after EC2 took the instance (a node
    back from its maintenance cordoned and drained for nothing; for a retry of a
    failed drain, no drain before EC2 acts at all). Before the pull, a due-now update
    delivered again drained again now; `_due_now` says "the same update again (a
    retry of a drain that failed) drains again"."""
    change, name, ec2_at = _again_made(world, monkeypatch, ec2_in=LEAD + 63, guarded=False)
    other = other_name(name)
    time.sleep(max(0.0, ec2_at - LEAD - 59 - time.time()))  # -again now due within a minute

    _unasked(monkeypatch)
    update = _update(change, start=_start(change) + 3 * DAY)
    first = _invoke(world, monkeypatch, update, lambda_seconds=10.0, **SCHEDULER)
    assert first.get("result") != "scheduled", ("due by the -again time: drained now", first)

    _invoke(world, monkeypatch, update, lambda_seconds=10.0, **SCHEDULER)  # delivered again

    to_come = _drains_to_come(world, name, other)
    late = {k: _iso(v) for k, v in to_come.items() if v > ec2_at}
    assert not late, (
        "the same update delivered again scheduled a drain after EC2's time",
        late,
        _iso(ec2_at),
    )
