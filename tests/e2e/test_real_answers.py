"""Drains through the answers that used to abort real drains: a pod in a namespace
being deleted (403 NamespaceTerminating, not an RBAC denial), pods under two
PodDisruptionBudgets (a Failure Status, whatever the HTTP status), and a dry run
that meets them."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on, wait_until

from .conftest import BudgetWatcher, Invoke, LogCapture
from .test_faults import check_invariants, nearly_timed_out


def _two_budgets(world: World, node: str) -> None:
    place_on(
        world,
        node,
        [
            w.deployment("web", 2),
            w.budget("web-a", {"app": "web"}, max_unavailable=1),
            w.budget("web-b", {"app": "web"}, min_available=1),
        ],
    )


def test_pods_under_two_budgets__timeout_message_names_both__continue(
    world: World, invoke: Invoke, budgets: BudgetWatcher
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _two_budgets(world, node)
    budgets.start()
    # Room for the handler's start before the first eviction: with 6 s, one loaded run
    # reached its deadline before evicting anything ("drain deadline in -1 s")
    event = nearly_timed_out(world.terminate(instance), seconds_left=10.0)

    summary = invoke(event, TIMEOUT_POLICY="continue", DRAIN_TIMEOUT_SECONDS=60)

    assert summary["result"] == "timed_out"
    assert summary["lifecycle_result"] == "CONTINUE"
    assert "default/web-a" in summary["message"] and "default/web-b" in summary["message"]
    assert set(summary["multiple_budgets"]) == {
        f"default/{p['metadata']['name']}" for p in pods_on(world.cluster, node)
    }
    left = pods_on(world.cluster, node)
    assert len(left) == 2 and not any(p["metadata"].get("deletionTimestamp") for p in left)
    assert budgets.violations() == {}


def test_dry_run_with_two_budgets__changes_nothing__names_both(
    world: World, invoke: Invoke
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _two_budgets(world, node)
    before = {p["metadata"]["uid"] for p in pods_on(world.cluster, node)}

    summary = invoke(world.terminate(instance), DRY_RUN="true")

    assert summary["result"] == "dry_run"
    assert summary["evicted"] == 0
    assert "default/web-a" in summary["message"] and "default/web-b" in summary["message"]
    assert {p["metadata"]["uid"] for p in pods_on(world.cluster, node)} == before
    assert not any(p["metadata"].get("deletionTimestamp") for p in pods_on(world.cluster, node))
    assert not world.cluster.get("Node", node)["spec"].get("unschedulable")


@pytest.mark.kubesim_only(
    "holds the namespace controller so that a live pod sits in a terminating namespace "
    "when the drain evicts it (on a real cluster a race; the conformance table checks "
    "the real server's 403 NamespaceTerminating answer itself)"
)
def test_pod_in_terminating_namespace__goes_with_it__drain_not_aborted(
    world: World, invoke: Invoke, budgets: BudgetWatcher, drainer_logs: LogCapture
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    world.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    place_on(
        world,
        node,
        [w.deployment("web", 2, namespace="default"), w.deployment("cart", 2, namespace="shop")],
    )
    budgets.start()
    sim = world.cluster.kubesim
    held = sim.simulator.paused()
    held.__enter__()
    released = False
    try:
        world.cluster.delete("Namespace", "shop")
        wait_until(
            lambda: world.cluster.get("Namespace", "shop")["status"].get("phase") == "Terminating"
        )
        results: list[dict[str, Any]] = []
        runner = threading.Thread(target=lambda: results.append(invoke(world.terminate(instance))))
        runner.start()
        # Release the controllers once the drain has met the namespace's 403 for both
        # of its pods (released after the first, the namespace controller could delete
        # the second before its eviction was sent: gone, not going with it).
        wait_until(
            lambda: sum("being deleted" in m for m in drainer_logs.messages()) >= 2, timeout=20
        )
        held.__exit__(None, None, None)
        released = True
        runner.join(60)
    finally:
        if not released:
            held.__exit__(None, None, None)

    [summary] = results
    assert summary["result"] == "drained"
    assert summary["lifecycle_result"] == "CONTINUE"
    assert summary["going_with_namespace"] == 2
    assert not any("RBAC denied" in m for m in drainer_logs.messages())
    check_invariants(world, budgets, instance, "CONTINUE")
    wait_until(lambda: world.cluster.find("Namespace", "shop") is None, timeout=20)
