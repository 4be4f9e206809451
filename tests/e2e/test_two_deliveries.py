"""Two deliveries of one scheduled change meet at the cordon, on both backends.

The other delivery's drain writes its record between this one's read of the node and
its cordon's write. The cordon's merge patch carries the resourceVersion it read, so
the API server (the real one as well as kubesim) refuses it, 409; the node is read
again, its record is not the one this delivery decided on, and the runner decides
again: left to the other drain (`redelivered`), nothing written over, nothing evicted
(tests/test_two_deliveries.py holds the rest on kubesim)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from drainer.k8s.cordon import DRAINING, PROGRESS_ANNOTATION
from drainer.k8s.kube import Kube
from drainer.lifecycle.events_ec2 import Ec2Kind
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on

from .conftest import Invoke, LogCapture


def _record(world: World, node: str) -> dict[str, Any]:
    annotations = world.cluster.get("Node", node)["metadata"].get("annotations") or {}
    return json.loads(annotations.get(PROGRESS_ANNOTATION) or "{}")


def test_the_other_cordon_lands_between_this_ones_read_and_write__409__left_to_it(
    world: World, invoke: Invoke, drainer_logs: LogCapture, monkeypatch: pytest.MonkeyPatch
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 1, grace=5)])
    before = sorted(p["metadata"]["name"] for p in pods_on(world.cluster, node))
    change = world.scheduled_change([instance], starts_in=600)
    now = int(time.time())
    other = {
        "phase": DRAINING,
        "trigger": str(Ec2Kind.SCHEDULED_CHANGE),
        "delivery": {"event": change["id"], "request": "the-other-delivery", "step": 0},
        "since": now,
        "until": now + 600,
        "added": ["cordon"],
    }
    real_patch = Kube.patch_node
    sent: list[dict[str, Any]] = []

    def the_other_writes_first(self: Kube, name: str, patch: Any, **kwargs: Any) -> Any:
        if not sent and (patch.get("spec") or {}).get("unschedulable"):
            sent.append(patch)  # this delivery's cordon, as the node was read
            annotations = {PROGRESS_ANNOTATION: json.dumps(other)}
            world.cluster.patch(
                "Node",
                node,
                {"metadata": {"annotations": annotations}, "spec": {"unschedulable": True}},
            )
        return real_patch(self, name, patch, **kwargs)

    monkeypatch.setattr(Kube, "patch_node", the_other_writes_first)

    summary = invoke(change, timeout=30.0)

    assert sent and sent[0]["metadata"].get("resourceVersion"), "the cordon is conditional"
    assert summary["result"] == "redelivered", summary
    assert any("changed as the drain cordoned it" in m for m in drainer_logs.messages())
    assert _record(world, node) == other, "the other drain's record, not written over"
    after = sorted(p["metadata"]["name"] for p in pods_on(world.cluster, node))
    assert after == before, "this delivery evicted"
