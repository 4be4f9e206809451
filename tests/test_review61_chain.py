"""Review 61: a scheduled change's drain handed over from invocation to invocation,
and the change's close between two of them: the close releases the node, and the
next invocation must not cordon it again for a change that is over."""

from __future__ import annotations

import json
import time

import pytest
from test_review60_ec2 import (
    TOPIC,
    _db_pods,
    _guarded,
    _invoke,
    _node,
    _record,
    close_change,
    published,
    world,
)

from drainer.lifecycle.ec2_handover import HANDED_OVER, SoFar
from testbed import World

__all__ = ["published", "world"]  # the fixtures, shared with review 60


def _handed_over_once(world: World, monkeypatch: pytest.MonkeyPatch, update: dict) -> dict:
    """The change's drain, cut to a 10 s invocation with a pod its budget holds: the
    mark the next invocation gets."""
    first = _invoke(world, monkeypatch, update, lambda_seconds=10.0)
    assert first["result"] == "handed_over", first
    (queued,) = world.aws.pending_invocations()
    world.aws.pop_invocation()
    payload = queued["payload"]
    return dict((payload if isinstance(payload, dict) else json.loads(payload))[HANDED_OVER])


def test_change_closed_while_its_drain_is_handed_over__the_next_invocation_leaves_the_node_released(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """The change closed between two invocations of its drain, and its close released
    the node (its drain's record had ended, cut to the first invocation). EC2 did not
    list the change's event as over yet, so the next invocation drained on: it
    cordoned the node again, for a change that is over, and kept it so."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    update = world.scheduled_change([instance], starts_in=600)
    mark = _handed_over_once(world, monkeypatch, update)
    closed = close_change(world, monkeypatch, update)
    assert closed["released"] == [instance], closed
    assert not _node(world, node)["spec"].get("unschedulable")
    published.clear()

    later = _invoke(
        world,
        monkeypatch,
        {**update, HANDED_OVER: mark},
        lambda_seconds=10.0,
        NOTIFICATION_TOPIC_ARN=TOPIC,
    )

    assert not _node(world, node)["spec"].get("unschedulable"), ("cordoned again", later)
    assert not _record(world, node), _record(world, node)
    assert not world.aws.pending_invocations(), "the chain ends"
    assert _db_pods(world, node), "the held pod stays on its instance"
    assert later["result"] == "released", later
    assert "released since" in later["message"], later
    (subject, text), *_ = published or [("", "")]
    assert "released" in subject and "release" in text, published


def test_change_still_on__the_next_invocation_drains_on(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same chain without a close: its record is there, and the drain goes on."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    update = world.scheduled_change([instance], starts_in=600)
    mark = _handed_over_once(world, monkeypatch, update)

    later = _invoke(world, monkeypatch, {**update, HANDED_OVER: mark}, lambda_seconds=10.0)

    assert later["result"] == "handed_over", later
    assert _node(world, node)["spec"].get("unschedulable")


def test_hand_over_mark__recorded_read_as_a_bool_or_the_mark_is_none() -> None:
    """The mark says whether an invocation before recorded the drain on the node; a
    mark from before that field (an upgrade mid-chain) is one that did not; a value
    that is not a bool makes the whole mark none (a forged one)."""
    began = time.time() - 60
    base = {"handovers": 1, "evicted": 2, "forced": 0, "started_at": began}

    assert SoFar.of({HANDED_OVER: base}) == SoFar(1, 2, 0, began, False)
    assert SoFar.of({HANDED_OVER: {**base, "recorded": True}}) == SoFar(1, 2, 0, began, True)
    assert SoFar.of({HANDED_OVER: {**base, "recorded": "yes"}}) is None
    assert SoFar.of({HANDED_OVER: {**base, "recorded": 1}}) is None
