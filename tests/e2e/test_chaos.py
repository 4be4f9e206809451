"""Seeded chaos, first slice (issue 16): a random workload on the node, a random
schedule of API and workload faults during its drain, and invariants checked from
an independent observer, not from the drainer's word.

Each seed decides everything, so a failing seed replays: `make chaos SEED=<n>`.
`CHAOS_SEEDS=N` runs seeds 0..N-1 (`make chaos SEEDS=N`); `make test` runs the
first few. kubesim only for now: the API faults are kubesim's (kubesim/faults.py).

Faults, each drawn or not per seed:
- API: 5xx bursts and 429 with Retry-After on evictions, latency on pod lists,
  dropped connections, broken watches (410 Gone);
- workload: the node uncordoned by someone else mid-drain, a pod created on the
  node mid-drain.

Invariants:
- no budget below its minimum (the BudgetWatcher's own count of Ready pods);
- the lifecycle action completed exactly once, with CONTINUE (TIMEOUT_POLICY=continue);
- a node reported drained has no pod left that the filters would evict;
- the drain over by its deadline plus a margin;
- no traceback in the drainer's log; the node's record names how it ended.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from drainer.cordon import PROGRESS_ANNOTATION
from kubesim.faults import Fault
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on

from .conftest import BudgetWatcher, Invoke, LogCapture

DRAINER = "eks-node-drainer"
DEADLINE = 60  # DRAIN_TIMEOUT_SECONDS' minimum
MARGIN = 15.0
RESULTS = Path(os.environ.get("CHAOS_RESULTS", "")) if os.environ.get("CHAOS_RESULTS") else None


def chaos_seeds() -> list[int]:
    """SEED=n: that seed; CHAOS_SEEDS=N: seeds 0..N-1; else the few make test runs."""
    if os.environ.get("CHAOS_SEED", "").strip():
        return [int(os.environ["CHAOS_SEED"])]
    return list(range(int(os.environ.get("CHAOS_SEEDS", "4") or 4)))


def _workload(rng: random.Random) -> list[dict[str, Any]]:
    """Objects for the node: deployments under budgets of every kind, maybe a
    critical pod and a DaemonSet."""
    objects: list[dict[str, Any]] = []
    for i in range(rng.randint(1, 3)):
        name = f"app{i}"
        replicas = rng.randint(1, 5)
        objects.append(
            w.deployment(
                name,
                replicas,
                startup=rng.choice([0.0, 0.5, 1.0]),
                shutdown=rng.choice([0.0, 0.5, 2.0]),
            )
        )
        kind = rng.choice(["none", "max1", "max2", "min", "percent"])
        selector = {"app": name}
        if kind == "max1":
            objects.append(w.budget(name, selector, max_unavailable=1))
        elif kind == "max2":
            objects.append(w.budget(name, selector, max_unavailable=2))
        elif kind == "min":
            objects.append(w.budget(name, selector, min_available=max(0, replicas - 1)))
        elif kind == "percent":
            objects.append(w.budget(name, selector, max_unavailable="50%"))
    if rng.random() < 0.5:
        objects.append(
            w.deployment(
                "dns", 1, namespace="kube-system", priority_class="system-cluster-critical"
            )
        )
    if rng.random() < 0.5:
        objects.append(w.daemonset("agent"))
    return objects


def _api_faults(rng: random.Random) -> list[dict[str, Any]]:
    """Fault rules for the drainer's requests."""
    pool = [
        {"kind": "status", "status": 500, "method": "POST", "path": "/eviction$", "count": 2},
        {"kind": "status", "status": 503, "method": "GET", "path": "/pods$", "count": 1},
        {
            "kind": "status",
            "status": 429,
            "retry_after": 1,
            "method": "POST",
            "path": "/eviction$",
            "count": 2,
        },
        {"kind": "latency", "latency": 0.3, "method": "GET", "path": "/pods$", "count": 3},
        {"kind": "drop", "method": "POST", "path": "/eviction$", "count": 1},
        {"kind": "break_watch", "path": "/pods$", "after_events": 2, "count": 1, "expire": True},
        {
            "kind": "break_watch",
            "path": "/poddisruptionbudgets$",
            "after_events": 1,
            "count": 1,
            "expire": True,
        },
    ]
    return [dict(f, user=DRAINER) for f in rng.sample(pool, rng.randint(0, 3))]


def _workload_faults(rng: random.Random) -> list[tuple[float, str]]:
    """(delay, kind) of the changes someone else makes during the drain."""
    kinds = rng.sample(["uncordon", "pod_on_node"], rng.randint(0, 2))
    return [(rng.uniform(0.05, 1.0), kind) for kind in kinds]


def _do(world: World, node: str, kind: str, seed: int) -> None:
    client = world.cluster.client
    if kind == "uncordon":
        client.patch("Node", node, {"spec": {"unschedulable": False}})
    elif kind == "pod_on_node":
        world.cluster.apply([w.bare_pod(f"late-{seed}", node=node)])


@pytest.mark.kubesim_only("the API faults are kubesim's")
@pytest.mark.parametrize("seed", chaos_seeds())
def test_seeded_chaos__invariants_hold(
    seed: int, world: World, invoke: Invoke, drainer_logs: LogCapture, budgets: BudgetWatcher
) -> None:
    rng = random.Random(seed)
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    objects = _workload(rng)
    place_on(world, node, objects)
    budgets.start()  # from here on: every pod Ready, every budget met
    api = _api_faults(rng)
    changes = _workload_faults(rng)
    for spec in api:
        world.cluster.kubesim.faults.add(Fault.from_json(spec))
    errors: list[str] = []
    done_at: dict[str, float] = {}

    def change_later(delay: float, kind: str) -> None:
        time.sleep(delay)  # the moment someone else acts, relative to the drain's start
        done_at[kind] = time.time()
        try:
            _do(world, node, kind, seed)
        except Exception as e:
            errors.append(f"{kind}: {e}")

    threads = [threading.Thread(target=change_later, args=c, daemon=True) for c in changes]
    for thread in threads:
        thread.start()
    started = time.monotonic()
    summary = invoke(world.terminate(instance), DRAIN_TIMEOUT_SECONDS=DEADLINE)
    seconds = time.monotonic() - started
    for thread in threads:
        thread.join(5)
    _record(seed, api, changes, summary)

    replay = f"replay: make chaos SEED={seed}"
    assert not errors, (errors, replay)
    assert budgets.violations() == {}, replay
    completions = [c["LifecycleActionResult"] for c in world.completions()]
    assert completions == ["CONTINUE"], (completions, summary, replay)
    assert summary["result"] in ("drained", "timed_out"), (summary, replay)
    assert seconds < DEADLINE + MARGIN, (seconds, replay)
    assert "Traceback" not in drainer_logs.text, replay
    found = world.cluster.client.get("Node", node)
    record = json.loads((found["metadata"].get("annotations") or {})[PROGRESS_ANNOTATION])
    assert record["phase"] == summary["result"], (record, summary, replay)
    # A pod created on the node once the drain had ended (its record's `at`, whole
    # seconds: a pod of the same second counts as late) is not the drain's to evict.
    late = done_at.get("pod_on_node", 0.0) >= record["at"]
    if summary["result"] == "drained":
        left = [
            p["metadata"]["name"]
            for p in pods_on(world.cluster, node)
            if not p["metadata"].get("deletionTimestamp")
            and not (late and p["metadata"]["name"] == f"late-{seed}")
            and not any(
                o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences") or []
            )
        ]
        assert left == [], (left, replay)


def _record(
    seed: int, api: list[dict[str, Any]], changes: list[tuple[float, str]], summary: dict[str, Any]
) -> None:
    """One line per seed, for `make chaos`'s report (CHAOS_RESULTS)."""
    if RESULTS is None:
        return
    kinds = Counter(
        f"api:{f['kind']}{'/' + str(f['status']) if f['kind'] == 'status' else ''}" for f in api
    )
    kinds.update(f"workload:{kind}" for _, kind in changes)
    line = {
        "seed": seed,
        "faults": dict(kinds),
        "result": summary.get("result"),
        "seconds": summary.get("seconds"),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as out:
        out.write(json.dumps(line) + "\n")
