"""A node released while its drain runs (review 63). `release` (the CLI's, and a
scheduled change's close) removes the drain's record and the cordon the drain added.
A drain still running took the uncordon for someone else's and cordoned the node
again, so a release never held while the drain ran: an operator had to stop the drain
first, and the Lambda's could not be stopped; a scheduled change cancelled mid-drain
went on evicting pods until the invocation's end. Now the drain's watch sees its
record gone and the drain stops, leaving the node as the release left it. Both
backends. (`kubectl uncordon` leaves the record: the drain cordons the node again, as
tests/e2e/test_hostile.py holds.)"""

from __future__ import annotations

import time

from drainer.k8s.cordon import PROGRESS_ANNOTATION, release_patch
from testbed import World
from testbed.world import pods_on

from .conftest import Invoke, LogCapture, invoke_meanwhile, place_guarded

DRAIN_TIMEOUT = 120


def _release(world: World, node: str) -> None:
    """What `release` does: the patch that undoes what the drain added."""
    patch, _ = release_patch(world.cluster.get("Node", node))
    world.cluster.patch("Node", node, patch)


def test_released_mid_drain__the_drain_stops_and_leaves_it_released(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    instance = world.instance_ids[0]
    node = place_guarded(world, 2)  # a budget that allows none: the drain waits

    summary, released_at = invoke_meanwhile(
        invoke,
        world.terminate(instance),
        drainer_logs,
        "refused by PodDisruptionBudget",
        lambda: _release(world, node),
        DRAIN_TIMEOUT_SECONDS=DRAIN_TIMEOUT,
    )
    ended = time.time()

    assert summary["result"] == "released", summary
    assert "released mid-drain" in summary["message"], summary
    assert ended - released_at < 10.0, f"{ended - released_at:.1f} s after the release"
    # What the cluster shows, a moment later: released, and left so.
    time.sleep(1.0)  # a re-cordon, were there one, comes within the watch's latency
    current = world.cluster.get("Node", node)
    assert not current["spec"].get("unschedulable"), "cordoned again after the release"
    assert PROGRESS_ANNOTATION not in (current["metadata"].get("annotations") or {})
    assert len(pods_on(world.cluster, node)) == 2, "the held pods stay"
    assert not drainer_logs.events("recordoned")
    # The lifecycle action is left to the hook's timeout: no answer on a release.
    assert summary["lifecycle_result"] == "none", summary
    assert not [c for c in world.completions() if c["InstanceId"] == instance]
    # Asked for, not a failure: a warning (an ERROR line would page whoever alarms on them).
    assert not drainer_logs.events("drain_stopped")
    [stopped] = drainer_logs.events("drain_released")
    assert "released" in str(stopped.get("reason")), stopped
    assert stopped.get("level") == "WARNING", stopped
