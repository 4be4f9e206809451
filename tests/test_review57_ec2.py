"""Review 57: EC2 and AWS Health events that come late, twice or out of order,
through the real handler (moto with awssim, kubesim)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from drainer import handler
from drainer.k8s.cordon import PROGRESS_ANNOTATION, cordon_patch
from kubesim import KubeSim
from testbed import LambdaContext, World
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import place_on, pods_on


@pytest.fixture
def world(moto_aws: None) -> Iterator[World]:
    with KubeSim(speed=20, cluster_name="demo") as running:
        yield World(Cluster.of_kubesim(running), size=2)


def _invoke(
    world: World, monkeypatch: pytest.MonkeyPatch, event: dict[str, Any], **env: Any
) -> dict[str, Any]:
    for key, value in world.env(**env).items():
        monkeypatch.setenv(key, value)
    handler.reset()
    return handler.lambda_handler(json.loads(json.dumps(event)), LambdaContext(900.0))


def _record(world: World, node: str) -> dict[str, Any]:
    annotations = world.cluster.client.get("Node", node)["metadata"].get("annotations") or {}
    raw = annotations.get(PROGRESS_ANNOTATION)
    return json.loads(raw) if raw else {}


def test_window_moved_earlier__older_updates_drain_under_way__held_pod_deleted_before_window(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWS Health announced a retirement five days away: its drain (another invocation,
    budgets respected, its own deadline) is under way. An update moves the window to
    30 s from now: per the docs a pod its budget still holds is deleted its grace
    before the window. The update's drain waits for the older, non-forcing drain
    instead, times out 'still waiting', and the pod dies with the instance."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    guarded = [
        w.deployment("db", 1, grace=5, labels={"app": "db"}),
        w.budget("db", {"app": "db"}, max_unavailable=0),
    ]
    place_on(world, node, guarded)
    first = world.scheduled_change([instance], starts_in=5 * 86400, age=3600)
    now = time.time()
    # What the first update's drain (ProgressRecord.begin) wrote on the node: a drain of
    # the change under way until its invocation's end, a deadline EC2 does not keep.
    patch, _ = cordon_patch(
        world.cluster.client.get("Node", node),
        now - 30,
        trigger="scheduled-change",
        until=now + 600,
        change=first["detail"]["eventArn"],
        own_deadline=True,
    )
    world.cluster.client.patch("Node", node, patch)
    update = world.scheduled_change([instance], starts_in=30)
    update["detail"]["eventArn"] = first["detail"]["eventArn"]

    summary = _invoke(world, monkeypatch, update)

    assert "still waiting" not in summary.get("message", ""), summary
    assert pods_on(world.cluster, node) == [], "the held pod was not deleted before the window"


def test_rebalance_recommendation_after_the_spot_warnings_drain__end_line_and_record_not_rewound(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recommendation (delivered late, after the warning) finds the node the
    warning's drain emptied. It overwrites that drain's record with a rebalance cordon
    and its end line says the pods stay until the interruption warning drains them,
    a warning that has come and gone (and tells to `release` a node EC2 ends)."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2)])
    warned = _invoke(world, monkeypatch, world.spot_warning(instance), REBALANCE_ACTION="cordon")
    assert warned["result"] == "drained", warned

    summary = _invoke(world, monkeypatch, world.rebalance(instance), REBALANCE_ACTION="cordon")

    assert "stay until the interruption warning" not in summary.get("message", ""), summary
    assert _record(world, node).get("trigger") == "spot-interruption", _record(world, node)
