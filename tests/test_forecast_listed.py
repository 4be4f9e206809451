"""The drain's forecast reads what the drain listed as it began.

The function forecast a drain before it began (its ETA), reading the node's pods and
the PodDisruptionBudgets, and the drain then listed both again: every pod of the node
read and parsed twice, a tenth of the drain's CPU on a large node (issue 39, item
10). And a delivery that lost the race at the cordon to another had made its forecast
for nothing. Now the forecast is made once the drain's own cordon took, from the
drain's own lists, before its first eviction."""

from __future__ import annotations

from typing import Any

import pytest
from test_review60_ec2 import _invoke, published, world

from testbed import World
from testbed import workloads as w
from testbed.world import place_on

__all__ = ["published", "world"]

BUDGETS = "/apis/policy/v1/poddisruptionbudgets"


def _lists(world: World, resource: str, path: str) -> list[Any]:
    return [
        r
        for r in world.cluster.kubesim.requests()
        if r.verb == "list" and r.resource == resource and r.path == path
    ]


def test_the_forecast_reads_the_drains_own_lists__the_nodes_pods_and_budgets_listed_once(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scale-in through the handler, with a budget that lets pods go: drained, with
    its forecast in the end line, the node's pods listed twice (the drain's start and
    the fresh list that agrees at its end) and the budgets once, by the drain."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(
        world,
        node,
        [
            w.deployment("api", 2, grace=5, labels={"app": "api"}),
            w.budget("api", {"app": "api"}, max_unavailable=1),
        ],
    )
    event = world.terminate(instance)
    pods_before = len(_lists(world, "pods", "/api/v1/pods"))
    budgets_before = len(_lists(world, "poddisruptionbudgets", BUDGETS))

    run = _invoke(world, monkeypatch, event)

    assert run["result"] == "drained", run
    assert "forecast_seconds" in run, "no forecast made"
    assert len(_lists(world, "pods", "/api/v1/pods")) - pods_before == 2
    assert len(_lists(world, "poddisruptionbudgets", BUDGETS)) - budgets_before == 1
