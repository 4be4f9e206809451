"""Twenty nodes of one cluster drained at once by twenty concurrent handler runs,
sharing PodDisruptionBudgets: all finish, no budget is violated, and the total
time stays close to what the budgets allow."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from drainer import handler
from testbed import LambdaContext, World
from testbed import workloads as w
from testbed.world import all_ready, set_schedulable, wait_until

from .conftest import SPEED, BudgetWatcher

# Its bound is on wall time, and twenty drains, the in-process kubesim and moto share
# one interpreter: beside the other workers (three in all) the window came to 20-32 s
# against the bound of 30, with four in all 34 s. Alone (after the others) 13-15 s.
pytestmark = pytest.mark.alone

DRAINED = 20
SPARE = 5
APPS = 4
REPLICAS = 20  # one pod of every app on every node to drain
STARTUP = 10.0  # simulated seconds until a replacement is Ready
MAX_UNAVAILABLE = 2


@pytest.mark.parametrize("world", [{"size": DRAINED + SPARE}], indirect=True)
def test_twenty_nodes_at_once__all_drained__budgets_hold__time_close_to_budget_pace(
    world: World, budgets: BudgetWatcher
) -> None:
    instances = list(world.instance_ids)
    to_drain, spare = instances[:DRAINED], instances[DRAINED:]
    spare_nodes = [world.nodes[i] for i in spare]
    set_schedulable(world.cluster, spare_nodes, False)
    objects: list[dict[str, Any]] = []
    for app in range(APPS):
        name = f"app{app}"
        objects.append(w.deployment(name, REPLICAS, startup=STARTUP, shutdown=1.0))
        objects.append(w.budget(name, {"app": name}, max_unavailable=MAX_UNAVAILABLE))
    world.cluster.apply(objects)
    wait_until(
        lambda: len(world.cluster.list("Pod")) == APPS * REPLICAS and all_ready(world.cluster), 30
    )
    set_schedulable(world.cluster, spare_nodes, True)
    budgets.start()
    events = [world.terminate(i) for i in to_drain]
    os.environ.update(world.env(LOG_LEVEL="WARNING"))
    handler.reset()
    results: dict[str, dict[str, Any]] = {}

    def drain(event: dict[str, Any]) -> None:
        results[event["detail"]["EC2InstanceId"]] = handler.lambda_handler(
            event, LambdaContext(900)
        )

    started = time.monotonic()
    threads = [threading.Thread(target=drain, args=(e,)) for e in events]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    elapsed = time.monotonic() - started

    assert sorted(r["result"] for r in results.values()) == ["drained"] * DRAINED
    # A replacement may land on a node whose drain has not cordoned it yet; that
    # drain evicts it again, so there are at least as many evictions as pods.
    assert sum(r["evicted"] for r in results.values()) >= APPS * REPLICAS
    drained_nodes = {world.nodes[i] for i in to_drain}

    def all_on_spare_nodes() -> bool:
        pods = world.cluster.list("Pod")
        running = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return len(running) == APPS * REPLICAS and not [
            p for p in pods if p["spec"].get("nodeName") in drained_nodes
        ]

    wait_until(all_on_spare_nodes, 30)
    assert budgets.violations() == {}
    completions = [c["LifecycleActionResult"] for c in world.completions()]
    assert completions == ["CONTINUE"] * DRAINED
    # Each app's 20 pods leave MAX_UNAVAILABLE at a time, each batch waiting for its
    # replacements to become Ready: the pace the budgets allow. The drain window is
    # kubesim's clock from the drainers' first request to their last. The AWS calls
    # before it run against one in-process moto shared by twenty threads (where each
    # real invocation would have its own container), so the drainers reach
    # Kubernetes up to several seconds apart, more under coverage; the bound allows
    # for that and still fails a drainer that sleeps blindly after refusals (a 5 s
    # sleep per refusal would take over 50 s here).
    # On the real backend, which keeps no request records, the window is the wall
    # time of the twenty invocations, moto's share included.
    ideal = REPLICAS / MAX_UNAVAILABLE * STARTUP / SPEED
    window = elapsed
    if world.cluster.backend == "kubesim":
        requests = world.cluster.kubesim.requests("eks-node-drainer")
        window = max(r.done for r in requests) - min(r.at for r in requests)
    print(f"20 concurrent drains: window {window:.2f} s, pace {ideal:.2f} s, wall {elapsed:.2f} s")
    # 4x + 10 s leaves room for a slow or shared machine (coverage alone makes it
    # 13-15 s) and still fails a blind 5 s sleep per refusal (> 50 s).
    assert window < 4 * ideal + 10, f"{window:.1f} s is far from the {ideal:.1f} s budgets allow"
