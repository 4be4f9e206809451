"""Review 62: EventBridge delivers an event at least once. An AWS Health scheduled
change delivered again while its drain is under way (running, or just handed over to
the next invocation) started a second chain of invocations beside the first: twice the
invocations for the rest of the window, and a second end notice for one drain."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from test_review60_ec2 import TOPIC, _guarded, _invoke, _node, _record, published, world

from drainer.k8s.cordon import DRAINING, PROGRESS_ANNOTATION
from testbed import World

__all__ = ["published", "world"]


def _set_record(world: World, node: str, **fields: object) -> None:
    record = {**_record(world, node), **fields}
    annotations = {PROGRESS_ANNOTATION: json.dumps(record)}
    world.cluster.client.patch("Node", node, {"metadata": {"annotations": annotations}})


def _first(world: World, monkeypatch: pytest.MonkeyPatch) -> tuple[str, dict]:
    """The change's first invocation, cut to 10 s with a pod its budget holds: handed
    over, its next invocation queued."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    update = world.scheduled_change([instance], starts_in=600)
    first = _invoke(world, monkeypatch, update, lambda_seconds=10.0, NOTIFICATION_TOPIC_ARN=TOPIC)
    assert first["result"] == "handed_over", first
    assert len(world.aws.pending_invocations()) == 1
    return node, update


def queued(world: World) -> dict[str, Any]:
    """The chain's next invocation, taken off Lambda's queue: the event, marked."""
    (invocation,) = world.aws.pending_invocations()
    world.aws.pop_invocation()
    payload = invocation["payload"]
    marked: dict[str, Any] = payload if isinstance(payload, dict) else json.loads(payload)
    return marked


def test_the_change_delivered_again_after_its_hand_over__no_second_chain_no_second_notice(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    node, update = _first(world, monkeypatch)
    record = _record(world, node)
    published.clear()

    again = _invoke(world, monkeypatch, update, lambda_seconds=10.0, NOTIFICATION_TOPIC_ARN=TOPIC)

    assert again["result"] == "redelivered", again
    assert "delivered again" in again["message"], again
    left_to_the_chain(world, node, record, published)


def left_to_the_chain(
    world: World, node: str, record: dict[str, Any], published: list[tuple[str, str]]
) -> None:
    """Nothing done: one chain queued, no notice, the record and the cordon as they were."""
    assert len(world.aws.pending_invocations()) == 1, "one chain"
    assert published == [], "no notice for a delivery that did nothing"
    assert _record(world, node) == record, "the chain's record stays as it was"
    assert _node(world, node)["spec"].get("unschedulable"), "still cordoned for the chain"


def test_the_change_delivered_again_while_its_drain_runs__left_to_that_drain(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    node, update = _first(world, monkeypatch)
    world.aws.pop_invocation()
    _set_record(world, node, phase=DRAINING, since=int(time.time()) - 60, until=time.time() + 300)

    again = _invoke(world, monkeypatch, update, lambda_seconds=10.0)

    assert again["result"] == "redelivered", again
    assert not world.aws.pending_invocations()


def test_a_chain_gone_quiet_long_ago__the_delivery_drains_as_before(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record an hour old: the chain it names is no longer running (its next
    invocation never came), so the delivery is not left to it."""
    node, update = _first(world, monkeypatch)
    world.aws.pop_invocation()
    _set_record(world, node, at=int(time.time()) - 3600)

    again = _invoke(world, monkeypatch, update, lambda_seconds=10.0)

    assert again["result"] == "handed_over", again


def test_the_chain_itself_drains_on(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The handed-over invocation carries the same event, marked: it is the chain, not a
    redelivery."""
    node, _ = _first(world, monkeypatch)
    marked = queued(world)

    later = _invoke(world, monkeypatch, marked, lambda_seconds=10.0)

    assert later["result"] == "handed_over", later
    delivery = _record(world, node)["delivery"]
    assert (delivery["event"], delivery["step"]) == (marked["id"], 1), delivery


def test_a_hand_over_delivered_twice__one_chain(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """Lambda's queue may hand an asynchronous invocation to the function twice: the
    chain's next step, run twice in two requests, went on as two chains."""
    _first(world, monkeypatch)
    marked = queued(world)
    later = _invoke(world, monkeypatch, marked, lambda_seconds=10.0)
    assert later["result"] == "handed_over", later
    published.clear()

    twice = _invoke(world, monkeypatch, marked, lambda_seconds=10.0, NOTIFICATION_TOPIC_ARN=TOPIC)

    assert twice["result"] == "redelivered", twice
    assert len(world.aws.pending_invocations()) == 1, "one chain"
    assert published == []
