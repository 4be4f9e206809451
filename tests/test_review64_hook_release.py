"""Session 64: a terminate hook's drain handed over between invocations, and the node
released meanwhile (`eks-node-drainer release`). The next invocation cordoned it again
and drained on, so the release did not hold; a release while an invocation runs stops
that drain (`released`, the lifecycle action left to the hook's timeout), and an EC2
event's chain already leaves a node released between two of its invocations. Now the
terminate hook's chain does the same: an invocation whose hand-over says a drain
before it recorded itself on the node, and that finds no record, leaves the node
released."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from test_scale_in import Scene, _handed_over, _node, kubesim, scene_for  # noqa: F401

from drainer.k8s.cordon import PROGRESS_ANNOTATION, release_patch
from drainer.lifecycle.events_fields import Malformed
from drainer.lifecycle.handover import Handover, parse_handover
from drainer.lifecycle.outcomes import Result
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.window import Invocation
from kubesim import testing as k
from testbed import workloads as w
from testbed.cluster import Cluster

SHORT = Invocation(remaining_seconds=lambda: 6.0, function_arn="arn:aws:lambda:x")
"""Each invocation drains 3 s, then hands over."""


def _guarded(scene: Scene) -> str:
    node = scene.node_name
    _node(scene.kubesim, node)
    scene.kubesim.apply(
        [
            w.pod("guarded", node_name=node, labels={"app": "guarded"}),
            w.budget("guard", {"app": "guarded"}, max_unavailable=0),
        ]
    )
    k.eventually(
        lambda: scene.kubesim.get("Pod", "guarded", "default")["status"].get("phase") == "Running",
        what="the guarded pod running",
    )
    return node


def test_released_between_two_invocations__the_next_leaves_it_released(
    scene_for: Callable[..., Scene],  # noqa: F811
) -> None:
    scene = scene_for()
    node = _guarded(scene)
    first = scene.drain(Settings(), time.time, invocation=SHORT)
    assert first.result == Result.HANDED_OVER, first.message
    assert first.handover is not None and first.handover.recorded
    cluster = Cluster.of_kubesim(scene.kubesim)
    patch, _ = release_patch(cluster.get("Node", node))
    cluster.client.patch("Node", node, patch)

    second = scene.drain(
        Settings(), time.time, event=_handed_over(scene, first.handover), invocation=SHORT
    )

    assert second.result == Result.RELEASED, second.message
    assert "hook's timeout" in second.message, second.message
    after = cluster.get("Node", node)
    assert not after["spec"].get("unschedulable"), "cordoned again after the release"
    assert PROGRESS_ANNOTATION not in (after["metadata"].get("annotations") or {})
    assert scene.kubesim.get("Pod", "guarded", "default"), "the pod stays"
    reasons = [
        e["reason"]
        for e in scene.kubesim.list("Event", "")
        if (e.get("regarding") or e.get("involvedObject") or {}).get("kind") == "Node"
    ]
    assert "DrainStarted" in reasons, reasons
    assert "DrainReleased" in reasons, ("the node's Events tell no end of its drain", reasons)


def test_hand_over_of_a_drain_that_never_reached_the_node__drains_on(
    scene_for: Callable[..., Scene],  # noqa: F811
) -> None:
    """A hand-over that does not say the node was recorded (a version before wrote
    it, or the invocation before never reached the node) drains on: no record is no
    release then."""
    scene = scene_for()
    node = _guarded(scene)
    handover = Handover(time.time(), 1, 0)

    second = scene.drain(
        Settings(), time.time, event=_handed_over(scene, handover), invocation=SHORT
    )

    assert second.result == Result.HANDED_OVER, second.message
    assert Cluster.of_kubesim(scene.kubesim).get("Node", node)["spec"].get("unschedulable")


def test_handover_recorded__written_when_set__read_back_only_as_a_bool() -> None:
    now = time.time()
    base = {"started_at": now, "handovers": 1, "heartbeats": 0}
    said = Handover(now, 0, 0).handed_on(0, recorded=True)
    assert said.as_dict()["recorded"] is True
    assert "recorded" not in Handover(now, 0, 0).handed_on(0).as_dict(), "as a version before"
    assert said.handed_on(0).recorded, "once recorded, every hand-over after says so"
    assert _parsed({**base, "recorded": True}, now).recorded
    assert not _parsed(base, now).recorded
    for forged in ("yes", 1, None, [True]):
        with pytest.raises(Malformed, match="recorded must be true or false"):
            parse_handover({**base, "recorded": forged}, None, now)


def _parsed(raw: dict[str, object], now: float) -> Handover:
    parsed = parse_handover(raw, None, now)
    assert parsed is not None
    return parsed
