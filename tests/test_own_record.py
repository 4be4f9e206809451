"""A drain that meets its own record: the runner's retry, in the same invocation, of a
drain whose API server failed after its cordon.

The engine raises the API errors that come before its first eviction (the pod list
after the cordon, say), and the runner starts the drain again (`_with_retries`). That
retry reads the node with the record the first attempt wrote: a drain under way,
begun by this very event. An EC2 event waits for a live drain of its own kind (the
same warning delivered twice drains once: drainer/lifecycle/live.py), so the retry
waited for itself until its time ran out, its pods left on an instance EC2 was about
to reclaim."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from test_review60_ec2 import _invoke, _record, world

from awssim import ec2_events as spot
from drainer.backoff import Backoff
from drainer.errors import KubeServerError
from drainer.k8s.kube import Kube
from drainer.lifecycle import runner
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on

__all__ = ["world"]


def _cordoned(world: World, node: str) -> bool:
    return bool(world.cluster.client.get("Node", node)["spec"].get("unschedulable"))


@pytest.mark.parametrize(
    "failing",
    [["list"], ["list", "list"], ["list", "cordon"]],
    ids=["list", "list-twice", "list-then-the-retrys-cordon"],
)
@pytest.mark.parametrize(
    "event",
    [spot.interruption_warning, spot.rebalance_recommendation],
    ids=["spot-interruption", "rebalance"],
)
def test_the_api_fails_after_the_cordon__the_retry_drains__not_waiting_for_itself(
    world: World, monkeypatch: pytest.MonkeyPatch, event: Any, failing: list[str]
) -> None:
    """The drain's calls (on the invocation's thread: not the forecast's, on its own)
    answer 503 in the order `failing` names once the node is cordoned: its pod list,
    or a retry's cordon (its record never written: the node keeps the one before).
    Each retry finds a record this invocation wrote, and drains."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2, grace=5)])
    left = list(failing)

    def fails(call: str, real: Any) -> Any:
        def failing_call(self: Kube, *args: Any, **kwargs: Any) -> Any:
            drains = threading.current_thread() is threading.main_thread()
            if drains and left and left[0] == call and _cordoned(world, node):
                left.pop(0)
                raise KubeServerError("503 Service Unavailable (the API server is down)", 503)
            return real(self, *args, **kwargs)

        return failing_call

    monkeypatch.setattr(Kube, "list_pods_on_node", fails("list", Kube.list_pods_on_node))
    monkeypatch.setattr(Kube, "patch_node", fails("cordon", Kube.patch_node))
    monkeypatch.setattr(runner, "API_RETRY", Backoff(first=0.2, cap=0.4))

    ran = _invoke(
        world,
        monkeypatch,
        event(world.aws.account_id, world.region, instance),
        lambda_seconds=30.0,
        REBALANCE_ACTION="drain",
    )

    assert not left, f"{left} never failed"
    assert ran["result"] == "drained", ran
    assert not pods_on(world.cluster, node), "the pods left on the node"
    assert _record(world, node)["phase"] == "drained"
