"""Run the scenarios: a fresh kubesim per run, each client in a process of its own,
the figures read from kubesim's records afterwards."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import measure
from bench.clients import (
    KUBECTL_USER,
    OURS_USER,
    Process,
    run_kubectl,
    run_lookup,
    run_ours,
)
from bench.scenarios import Lookup, Scenario, lookups
from kubesim import KubeSim

# Watch streams end when the client hangs up; kubesim notices at its next writes
# (bookmarks) and only then records the request: short bookmarks, and a wait until
# kubesim has recorded as many requests as our client says it made.
BOOKMARK_SECONDS = 0.2
RECORD_WAIT_SECONDS = 5.0


@dataclass
class RunResult:
    scenario: str
    client: str
    run: int
    ok: bool
    problem: str = ""
    window: float | None = None
    ideal: float | None = None
    wall: float = 0.0
    cpu: float = 0.0
    maxrss_mb: float = 0.0
    requests: int = 0
    verbs: dict[str, int] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)
    sim_passes: int = 0
    sim_busy: float = 0.0
    """Seconds of the window during which kubesim's controllers held the store lock."""
    seconds: float | None = None
    """Scenario 5: find_node's own time, measured in the client."""
    setup: float = 0.0
    evict_first: float | None = None
    evict_last: float | None = None
    """When the first and the last eviction request arrived, seconds into the window."""

    @property
    def overhead(self) -> float | None:
        if self.window is None or self.ideal is None:
            return None
        return self.window - self.ideal


Progress = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _pods_left(sim: KubeSim, node: str) -> list[str]:
    """Pods still on the node, DaemonSet pods aside."""
    left = []
    for pod in sim.list("Pod"):
        if pod["spec"].get("nodeName") != node:
            continue
        owners = pod["metadata"].get("ownerReferences") or []
        if any(o.get("kind") == "DaemonSet" for o in owners):
            continue
        left.append(pod["metadata"]["name"])
    return left


def _requests_made(process: Process) -> int:
    """The request count our client reports (its last output line, JSON)."""
    try:
        answer = json.loads(process.output.strip().splitlines()[-1])
        return int(answer["report"]["api_requests"])
    except (IndexError, ValueError, KeyError, TypeError):
        return 0


def _records(sim: KubeSim, user: str, expected: int) -> list[Any]:
    deadline = time.monotonic() + RECORD_WAIT_SECONDS
    records = sim.requests(user)
    while len(records) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
        records = sim.requests(user)
    return records


def _figures(result: RunResult, records: list[Any], window: measure.Window | None) -> None:
    result.requests = len(records)
    result.verbs = measure.by_verb(records)
    result.latency = asdict(measure.latency(records))
    if window is not None:
        result.window = window.seconds


def _process(result: RunResult, process: Process) -> None:
    result.wall = process.wall
    result.cpu = process.cpu
    result.maxrss_mb = process.maxrss_mb
    if process.timed_out:
        result.ok, result.problem = False, "timed out"
    elif process.returncode != 0:
        tail = " | ".join(process.output.strip().splitlines()[-3:])
        result.ok, result.problem = False, f"exit {process.returncode}: {tail[:300]}"


def drain_once(
    scenario: Scenario, client: str, run: int, speed: float, kubectl: Path | None
) -> RunResult:
    result = RunResult(scenario.key, client, run, ok=True, ideal=scenario.ideal)
    sim = KubeSim(speed=speed, cluster_name="bench")
    sim.bookmark_interval = BOOKMARK_SECONDS
    with sim:
        controllers = measure.ControllerClock(sim)
        started = time.perf_counter()
        prepared = scenario.prepare(sim)
        result.setup = time.perf_counter() - started
        if client == "ours":
            process = run_ours(sim.kubeconfig, prepared.node, scenario.timeout)
            user = OURS_USER
        else:
            assert kubectl is not None
            process = run_kubectl(kubectl, sim.kubeconfig, prepared.node, scenario.timeout)
            user = KUBECTL_USER
        records = _records(sim, user, _requests_made(process) if client == "ours" else 0)
        window = measure.drain_window(records)
        _figures(result, records, window)
        _process(result, process)
        if window is not None:
            result.sim_passes, result.sim_busy = controllers.busy(window.start, window.end)
            evictions = [r.at for r in records if r.resource == "pods/eviction"]
            if evictions:
                result.evict_first = min(evictions) - window.start
                result.evict_last = max(evictions) - window.start
        elif result.ok:
            result.ok, result.problem = False, "no cordon request seen"
        left = _pods_left(sim, prepared.node)
        if left and result.ok:
            result.ok = False
            result.problem = f"{len(left)} pods left on the node: {', '.join(left[:5])}"
    return result


def lookup_runs(lookup: Lookup, runs: int, progress: Progress) -> list[RunResult]:
    """Scenario 5: one cluster of `lookup.nodes` nodes, `runs` lookups in fresh
    processes. The cluster is built once: lookups only read, so each run still
    starts from the same state."""
    client = "ours (PrivateDnsName)" if lookup.naming == "dns" else "ours (providerID)"
    results = []
    sim = KubeSim(speed=1.0, cluster_name="bench")
    with sim:
        controllers = measure.ControllerClock(sim)
        setup = lookup.build(sim)
        progress(f"  5 {client}: {lookup.nodes} nodes created in {setup:.1f} s")
        for run in range(1, runs + 1):
            result = RunResult("5", client, run, ok=True, setup=setup)
            before = len(sim.requests(OURS_USER))
            process = run_lookup(sim.kubeconfig, lookup.target_dns, lookup.target_instance)
            records = sim.requests(OURS_USER)[before:]
            window = measure.lookup_window(records)
            _figures(result, records, window)
            _process(result, process)
            if window is not None:
                result.sim_passes, result.sim_busy = controllers.busy(window.start, window.end)
            if result.ok:
                answer = json.loads(process.output.strip().splitlines()[-1])
                result.seconds = float(answer["seconds"])
                if answer["node"] != lookup.expected:
                    result.ok = False
                    result.problem = f"found {answer['node']!r}, expected {lookup.expected!r}"
            progress(_line(result))
            results.append(result)
    return results


def _line(result: RunResult) -> str:
    window = f"{result.window:.3f} s" if result.window is not None else "-"
    status = "ok" if result.ok else f"FAILED: {result.problem}"
    return (
        f"  {result.scenario} {result.client:<22} run {result.run}: window {window}, "
        f"wall {result.wall:.2f} s, {result.requests} requests, {result.maxrss_mb:.0f} MB, "
        f"{status}"
    )


def warm_up(speed: float, kubectl: Path | None, scenario: Scenario) -> None:
    """One small throwaway run per client: loads kubesim's lazily imported code
    paths in this process and both clients' files into the page cache."""
    drain_once(scenario, "ours", 0, speed, kubectl)
    if kubectl is not None:
        drain_once(scenario, "kubectl", 0, speed, kubectl)


def run_all(
    scenarios: tuple[Scenario, ...],
    *,
    runs: int,
    kubectl_runs: dict[str, int],
    speed: float,
    kubectl: Path | None,
    lookup_nodes: int,
    progress: Progress = _stderr,
) -> list[RunResult]:
    """Every scenario, our engine and kubectl alternately, run by run."""
    results: list[RunResult] = []
    for scenario in scenarios:
        progress(f"scenario {scenario.key}: {scenario.title} (ideal {scenario.ideal:.2f} s)")
        for run in range(1, runs + 1):
            clients = ["ours"]
            if kubectl is not None and run <= kubectl_runs.get(scenario.key, runs):
                clients.append("kubectl")
            for client in clients:
                result = drain_once(scenario, client, run, speed, kubectl)
                progress(_line(result))
                results.append(result)
    if lookup_nodes:
        progress(f"scenario 5: node lookup among {lookup_nodes} nodes")
        for lookup in lookups(lookup_nodes):
            results.extend(lookup_runs(lookup, runs, progress))
    return results
