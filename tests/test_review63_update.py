"""Review 63: AWS Health sends an update of a scheduled change as a new event (its
own id, the same eventArn), for a new description or status as well as for a new
window. An update that kept the window, delivered while the change's chain of
invocations ran, started a second chain beside it: twice the invocations up to the
window, two end notices for one drain. Such an update is now left to the chain under
way; one that moves the window is acted on as before."""

from __future__ import annotations

import json
import time
import uuid
from email.utils import formatdate, parsedate_to_datetime
from typing import Any

import pytest
from test_review60_ec2 import TOPIC, _invoke, _record, published, world
from test_review62_redelivery import _first, _set_record, left_to_the_chain

from drainer.outcome import DRAINING
from testbed import World

__all__ = ["published", "world"]


def _update(change: dict[str, Any], *, moved_by: float = 0.0) -> dict[str, Any]:
    """AWS Health's update of `change`: a new event, the same eventArn, its window
    moved by `moved_by` seconds."""
    detail = dict(change["detail"])
    start = parsedate_to_datetime(detail["startTime"]).timestamp() + moved_by
    detail["startTime"] = formatdate(start, usegmt=True)
    detail["endTime"] = formatdate(start + 7200, usegmt=True)
    detail["eventDescription"] = [{"language": "en_US", "latestDescription": "updated"}]
    return {**change, "id": str(uuid.uuid4()), "detail": detail}


def test_an_update_that_keeps_the_window__left_to_the_chain_under_way(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """The update comes while a step of the chain drains (the record `draining`)."""
    node, change = _first(world, monkeypatch)
    _set_record(world, node, phase=DRAINING, since=int(time.time()) - 60)
    record = _record(world, node)
    published.clear()

    updated = _invoke(
        world, monkeypatch, _update(change), lambda_seconds=10.0, NOTIFICATION_TOPIC_ARN=TOPIC
    )

    assert updated["result"] == "redelivered", updated
    assert "update" in updated["message"] and "same window" in updated["message"], updated
    left_to_the_chain(world, node, record, published)


def test_an_update_that_moves_the_window__acted_on(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new window is a new deadline: its own drain runs toward it (the old chain
    ends when EC2 lists its window as over)."""
    node, change = _first(world, monkeypatch)

    moved = _invoke(world, monkeypatch, _update(change, moved_by=1800.0), lambda_seconds=10.0)

    assert moved["result"] == "handed_over", moved
    delivery = _record(world, node)["delivery"]
    assert delivery["event"] != change["id"], delivery


def test_a_record_of_a_version_that_kept_no_window__the_update_drains_as_before(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chain begun before the record kept the change's window: an update is not
    left to it (whether the window is the same, the record cannot say)."""
    node, change = _first(world, monkeypatch)
    record = _record(world, node)
    delivery = {k: v for k, v in record["delivery"].items() if k != "window"}
    annotations = {"eks-node-drainer/progress": json.dumps({**record, "delivery": delivery})}
    world.cluster.client.patch("Node", node, {"metadata": {"annotations": annotations}})

    updated = _invoke(world, monkeypatch, _update(change), lambda_seconds=10.0)

    assert updated["result"] == "handed_over", updated


def test_the_chain_records_its_change_window(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    node, change = _first(world, monkeypatch)
    start = parsedate_to_datetime(change["detail"]["startTime"]).timestamp()

    assert _record(world, node)["delivery"]["window"] == int(start)


def test_an_update_between_two_steps__acted_on(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record `timed_out` cannot say whether a chain goes on from it (a drain that
    timed out within one invocation, a chain that stopped, say the same): the update
    drains, as before this version."""
    node, change = _first(world, monkeypatch)
    assert _record(world, node)["phase"] == "timed_out"

    updated = _invoke(world, monkeypatch, _update(change), lambda_seconds=10.0)

    assert updated["result"] == "handed_over", updated
