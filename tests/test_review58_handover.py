"""Review 59, a drain that spans several Lambda invocations (the hand-over): each
test fails on the code it was written against. moto is Auto Scaling, kubesim the
cluster; each invocation is drain_instance with a short Invocation, and the next
one is the same event with the hand-over the first wrote."""

from __future__ import annotations

import time
from collections.abc import Callable

from test_scale_in import Scene, _handed_over, _node, kubesim, scene_for  # noqa: F401
from test_volumes import claim

from drainer.lifecycle.outcomes import Result
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.settings_drain import TimeoutPolicy
from drainer.lifecycle.window import Invocation
from kubesim import testing as k
from kubesim.resources import for_kind
from testbed import workloads as w

SHORT = Invocation(remaining_seconds=lambda: 6.0, function_arn="arn:aws:lambda:x")
"""Each invocation drains 3 s, then hands over."""


def test_pod_force_deleted_before_a_hand_over__the_chain_never_says_drained(
    scene_for: Callable[..., Scene],  # noqa: F811
) -> None:
    """TIMEOUT_POLICY=force deletes a pod its budget holds, its grace before the
    deadline; the invocation's time ends while the pod terminates, and it hands over.
    The next invocation finds the pod gone and ends `drained` (DrainSucceeded, the
    notice and the node's record say so): the budget bypassed by the chain is told
    nowhere at its end, where a drain within one invocation says timed_out."""
    # The event came 35 s ago: the drain's deadline (60 s) is 25 s away, less than
    # the pod's grace, so the force is due at its first refusal.
    scene = scene_for(waited=35.0)
    node = scene.node_name
    _node(scene.kubesim, node)
    scene.kubesim.apply(
        [
            w.pod(
                "guarded",
                node_name=node,
                labels={"app": "guarded"},
                finalizers=["example.com/hold"],  # terminating past the hand-over
            ),
            w.budget("guard", {"app": "guarded"}, max_unavailable=0),
        ]
    )
    k.eventually(
        lambda: scene.kubesim.get("Pod", "guarded", "default")["status"].get("phase") == "Running",
        what="the guarded pod running",
    )
    settings = Settings(timeout_policy=TimeoutPolicy.FORCE, drain_timeout_seconds=60)

    first = scene.drain(settings, time.time, invocation=SHORT)
    assert first.result == Result.HANDED_OVER, first.message
    assert first.report is not None and first.report.forced == 1, "force-deleted, then handed over"
    assert first.handover is not None

    # Its finalizer removed meanwhile, the pod goes.
    scene.kubesim.api.remove_now(for_kind("v1", "Pod"), "default", "guarded")
    assert not scene.kubesim.list("Pod")
    second = scene.drain(
        settings, time.time, event=_handed_over(scene, first.handover), invocation=SHORT
    )

    assert second.result != Result.DRAINED, (
        "the chain force-deleted a pod past its budget, yet its end says drained: "
        f"{second.result} {second.message!r}"
    )


def test_volume_stuck_attached__the_chain_hands_over_past_volume_detach_timeout(
    scene_for: Callable[..., Scene],  # noqa: F811
) -> None:
    """A pod's volume stays attached (its CSI controller is down): the drain waits
    VOLUME_DETACH_TIMEOUT_SECONDS for it, then goes on. When that timeout is longer
    than an invocation's time (a 1200 s timeout, a 900 s function: here 4 s and 3 s),
    every invocation's wait is cut by its hand-over moment and starts afresh in the
    next one: the chain hands over until the drain's deadline (DRAIN_TIMEOUT_SECONDS,
    up to 48 h), holding the instance long past the wait the setting bounds."""
    scene = scene_for()
    node = scene.node_name
    _node(scene.kubesim, node)
    scene.kubesim.apply(
        [
            claim("data"),
            w.pod(
                "db-0",
                node_name=node,
                claims=("data",),
                annotations={"kubesim.io/detach-seconds": "36000"},  # stuck attached
                grace=1,
            ),
        ]
    )
    k.eventually(
        lambda: any(a["spec"]["nodeName"] == node for a in scene.kubesim.list("VolumeAttachment")),
        what="the claim's volume attached to the node",
    )
    settings = Settings(drain_timeout_seconds=3600, volume_detach_timeout_seconds=4)

    runs = [scene.drain(settings, time.time, invocation=SHORT)]
    began = time.time()
    while runs[-1].result == Result.HANDED_OVER and len(runs) < 4:
        handover = runs[-1].handover
        assert handover is not None
        runs.append(
            scene.drain(settings, time.time, event=_handed_over(scene, handover), invocation=SHORT)
        )
    waited = time.time() - began

    assert runs[0].report is not None and runs[0].report.evicted == 1
    last = runs[-1].report
    assert last is not None and not last.remaining and last.volumes_pending, "the volume's wait"
    assert runs[-1].result != Result.HANDED_OVER, (
        f"{len(runs)} invocations, {waited:.0f} s of the volume's wait after the first, "
        "past VOLUME_DETACH_TIMEOUT_SECONDS (4 s), and the chain still hands over: "
        f"{[str(r.result) for r in runs]}"
    )
