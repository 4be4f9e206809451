"""`plan` on both backends, as the drainer identity: the forecast of a node paced
by its budget, then the same node drained by the CLI (the forecast within 25 % of
the measured drain, plus 2 s); a node whose only replica no budget lets go,
reported deadlocked with the budget and the pod named, exit 1; a critical pod
next to a deadlocked one, which the plan and the drain both let go at the reserve."""

from __future__ import annotations

import io
import json
import threading
import time
from typing import Any

from drainer.cli.main import main
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on, wait_until

STARTUP = 60.0
"""Seconds of emulated time from binding to Ready (3 s at the tests' speed of 20):
long enough that the API server's whole-second timestamps (creation, Ready) do not
decide the forecast."""


def _cli(world: World, *words: str) -> tuple[int, str]:
    out = io.StringIO()
    where = ["--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"]
    code = main([*words, *where], stdout=out)
    return code, out.getvalue()


def _budget_counted(world: World, name: str, pods: int, namespace: str = "default") -> None:
    """Until the disruption controller has written the budget's status for its pods."""

    def counted() -> bool:
        budget = world.cluster.get("PodDisruptionBudget", name, namespace)
        status = budget.get("status") or {}
        return status.get("expectedPods") == pods and status.get("currentHealthy") == pods

    wait_until(counted, 20)


def _plan(world: World, node: str) -> tuple[int, dict[str, Any]]:
    code, out = _cli(world, "plan", node, "--ignore-daemonsets", "-o", "json")
    return code, json.loads(out)


def test_plan__budget_paced_node__forecast_within_a_quarter_of_the_drain(world: World) -> None:
    node = world.nodes[world.instance_ids[0]]
    # Four replicas, one at a time: three replacements to wait for, each Ready
    # STARTUP after it is created; each pod stops within its grace period (1 s).
    web = w.deployment("web", 4, startup=STARTUP, shutdown=20.0, grace=1)
    place_on(world, node, [web, w.budget("web", {"app": "web"}, max_unavailable=1)], timeout=30)
    _budget_counted(world, "web", 4)

    code, plan = _plan(world, node)

    assert (code, plan["result"], plan["deadlocked"]) == (0, "planned", False), plan
    [forecast] = plan["nodes"]
    assert (forecast["node"], forecast["pods"], forecast["blockers"]) == (node, 4, [])
    assert "PodDisruptionBudget default/web: 4 waves" in forecast["paced_by"]
    assert forecast["eta_max_seconds"] >= forecast["eta_seconds"]

    started = time.monotonic()
    code, out = _cli(world, "drain", node, "--ignore-daemonsets", "--timeout", "120s")
    measured = time.monotonic() - started

    assert code == 0, out
    print(f"forecast {forecast['eta_seconds']} s (up to {forecast['eta_max_seconds']} s), "
          f"measured {measured:.1f} s")  # fmt: skip
    error = abs(forecast["eta_seconds"] - measured)
    assert error <= 0.25 * measured + 2, (forecast, measured)


def test_plan__single_replica_min_available_one__deadlocked_exit_1(world: World) -> None:
    node = world.nodes[world.instance_ids[0]]
    budget = w.budget("solo", {"app": "solo"}, min_available=1)
    place_on(world, node, [w.deployment("solo", 1), budget])
    _budget_counted(world, "solo", 1)

    code, plan = _plan(world, node)

    assert (code, plan["result"], plan["exit_code"], plan["deadlocked"]) == (1, "blocked", 1, True)
    [forecast] = plan["nodes"]
    [blocker] = forecast["blockers"]
    assert blocker["pod"].startswith("default/solo-")
    assert blocker["budget"] == "default/solo"
    assert "scale the workload to 2 replicas" in blocker["fix"]
    assert forecast["eta_seconds"] == 3600  # it would wait for the drain's timeout
    # Read-only: the node is not cordoned and the pod still runs.
    assert not world.cluster.get("Node", node)["spec"].get("unschedulable")
    code, table = _cli(world, "plan", node, "--ignore-daemonsets")
    assert code == 1
    assert "deadlock" in table and "default/solo" in table and "fix: scale" in table


def test_plan__ordinary_pod_deadlocked__critical_pod_goes_at_the_reserve_as_drained(
    world: World,
) -> None:
    """A 5 s timeout under the drain's 120 s critical reserve: once the ordinary pod's
    budget refuses, the critical tier starts (the engine's rule, the forecast's
    too). The plan names the deadlocked pod alone and says coredns goes before the
    timeout; the drain evicts coredns within a second or two and times out on api."""
    node = world.nodes[world.instance_ids[0]]
    dns = w.deployment(
        "dns", 1, namespace="kube-system", priority_class="system-cluster-critical", grace=1
    )
    place_on(
        world,
        node,
        [
            w.deployment("api", 1),
            w.budget("api", {"app": "api"}, max_unavailable=0),
            dns,
            w.budget("dns", {"app": "dns"}, namespace="kube-system", max_unavailable=1),
        ],
    )
    _budget_counted(world, "api", 1)
    _budget_counted(world, "dns", 1, namespace="kube-system")
    flags = ("--ignore-daemonsets", "--timeout", "5s")

    code, out = _cli(world, "plan", node, *flags, "-o", "json")

    plan = json.loads(out)
    assert (code, plan["deadlocked"]) == (1, True), plan
    [forecast] = plan["nodes"]
    named = [x["pod"] for x in forecast["blockers"]]
    assert len(named) == 1 and named[0].startswith("default/api-"), forecast["blockers"]
    assert forecast["eta_seconds"] == 5  # api never goes: the drain runs to its timeout

    [coredns] = [
        p["metadata"]["name"] for p in pods_on(world.cluster, node)
        if p["metadata"]["namespace"] == "kube-system"
    ]  # fmt: skip
    drained: dict[str, Any] = {}
    started = time.monotonic()
    drain = threading.Thread(
        target=lambda: drained.update(out=_cli(world, "drain", node, *flags)), daemon=True
    )
    drain.start()

    def evicted() -> bool:
        pod = world.cluster.find("Pod", coredns, "kube-system")
        return pod is None or bool(pod["metadata"].get("deletionTimestamp"))

    wait_until(evicted, 5, what="coredns evicted before the drain's timeout")
    measured = time.monotonic() - started
    drain.join(30)
    print(
        f"coredns: planned to go before the 5 s timeout (no blocker), evicted at {measured:.1f} s"
    )
    assert measured <= 2, measured
    code, text = drained["out"]
    assert code != 0 and "default/api-" in text, text
    assert world.cluster.find("Pod", named[0].split("/")[1], "default") is not None
