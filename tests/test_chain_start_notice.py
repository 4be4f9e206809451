"""NOTIFY_ON_START down a chain of invocations.

A drain's start notice goes once its own cordon took. Only a chain's first
invocation armed it, so a chain whose first invocation never cordoned (the API
server failed for the whole of it; it handed over with the node untouched) sent no
start notice at all: the operator heard of the drain only at its end. Now the
hand-over carries that the notice is still to be told (`start_untold`, the terminate
hook's and an EC2 event's alike), and the step that cordons tells it, once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_review60_ec2 import TOPIC, _guarded, _invoke, published, world

from drainer.lifecycle.ec2_handover import HANDED_OVER, SoFar
from drainer.lifecycle.events_fields import Malformed as HandoverMalformed
from drainer.lifecycle.handover import HANDOVER_KEY, Handover, parse_handover
from kubesim.faults import Fault
from testbed import World

__all__ = ["published", "world"]

NOTIFY = {
    "NOTIFICATION_TOPIC_ARN": TOPIC,
    "NOTIFY_ON_START": "true",
    "HANDOVER_MARGIN_SECONDS": "5",
}


def _starts(published: list[tuple[str, str]]) -> list[str]:
    """The start notices' subjects ("eks-node-drainer: draining INSTANCE (GROUP)")."""
    return [subject for subject, _ in published if ": draining " in subject]


def _queued(world: World) -> dict[str, Any]:
    """The next step's payload, taken off Lambda's queue."""
    (queued,) = world.aws.pending_invocations()
    world.aws.pop_invocation()
    payload = queued["payload"]
    return dict(payload if isinstance(payload, dict) else json.loads(payload))


def _node_unwritable(world: World, node: str) -> None:
    """Every write of the node fails (503) until cleared: no cordon takes."""
    world.cluster.kubesim.faults.add(
        Fault(kind="status", status=503, method="PATCH", path=f"/api/v1/nodes/{node}$")
    )


@pytest.mark.parametrize("trigger", ["terminate-hook", "scheduled-change"])
def test_first_step_never_cordoned__the_step_that_cordons_tells_the_start_once(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]], trigger: str
) -> None:
    """The first invocation cannot cordon (the node's writes fail throughout) and
    hands over, saying the start is untold; the next one cordons, tells the start and
    hands over (the budget still holds) saying it is told. One start notice."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    event = (
        world.terminate(instance)
        if trigger == "terminate-hook"
        else world.scheduled_change([instance], starts_in=600)
    )
    _node_unwritable(world, node)

    first = _invoke(world, monkeypatch, event, lambda_seconds=8.0, **NOTIFY)
    assert first["result"] == "handed_over", first
    assert _starts(published) == [], "a start notice for a drain that never began"
    world.cluster.kubesim.faults.clear()

    key = HANDOVER_KEY if trigger == "terminate-hook" else HANDED_OVER
    step = _queued(world)
    assert step[key].get("start_untold") is True, step[key]
    second = _invoke(world, monkeypatch, step, lambda_seconds=8.0, **NOTIFY)
    assert second["result"] == "handed_over", second
    assert world.cluster.client.get("Node", node)["spec"].get("unschedulable")
    assert len(_starts(published)) == 1, published

    assert "start_untold" not in _queued(world)[key], "the step after would tell it again"


def test_the_marks_flag__read_as_a_bool__absent_in_a_version_befores() -> None:
    """`start_untold` is written only when set (a hand-over of a version before has
    none: told, as it was), read as a bool, and anything else in it refused (the
    hook's hand-over: Malformed) or the mark read as none (an EC2 event's)."""
    base = {"started_at": 1.0e9, "handovers": 1, "heartbeats": 0}
    hook = parse_handover(base, None, 1.0e9 + 60)
    assert hook is not None and not hook.start_untold
    assert "start_untold" not in Handover(1.0e9, 1, 0).as_dict()
    untold = parse_handover({**base, "start_untold": True}, None, 1.0e9 + 60)
    assert untold is not None and untold.start_untold
    assert untold.as_dict()["start_untold"] is True
    with pytest.raises(HandoverMalformed):
        parse_handover({**base, "start_untold": "yes"}, None, 1.0e9 + 60)

    mark = {"handovers": 1, "evicted": 0, "forced": 0, "started_at": 1.0e9}
    so_far = SoFar.of({HANDED_OVER: mark})
    assert so_far is not None and not so_far.start_untold
    told = SoFar.of({HANDED_OVER: {**mark, "start_untold": True}})
    assert told is not None and told.start_untold
    assert SoFar.of({HANDED_OVER: {**mark, "start_untold": 1}}) is None
