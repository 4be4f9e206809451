"""`python -m bench [--quick] [--backend kubesim|real] [--runs N] [--out PATH]`: the benchmark.

Drains the same nodes with our engine and with the real `kubectl drain`, side by
side in one run, prints a table and the issue's targets, and writes every figure as
JSON (bench/results/results.json by default; bench/results/results-real.json for
the real backend).

--backend kubesim (the default): the emulator over HTTPS; figures from its records.
--backend real: the real control plane (testbed.controlplane: kube-apiserver,
controller-manager, scheduler, etcd, kwok), one per drain; figures from the
clients' side (their own request logs, this host's clock, a watch for when the
node is empty). Scenarios too large for it on two cores are scaled down (said so
in the output).

--quick: small sizes, one run, pods' start and stop at 10x speed; a smoke test of
the whole path (no verdict on the targets), used by `make test`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DEFAULT_OUT = {"kubesim": RESULTS / "results.json", "real": RESULTS / "results-real.json"}
# kubectl drain takes ~150 s for 737 pods (client-side throttling), ~45 s for the
# PDB scenario (5 s sleep after each refusal), 20+ s for scenarios 1 and 4, and its
# figures barely move between runs (its own sleeps and throttle set them): fewer
# runs of those keep `make bench` under ten minutes. Our engine always gets --runs.
# Scenario 6 lasts its drain timeout for both clients (its budget-blocked pods never go).
# The CPU scenarios (bench.scenarios.CPU_RUNS) compare ours with the floor only: none.
KUBECTL_RUNS = {"1": 2, "2": 1, "3": 2, "4": 2, "6": 2, "7": 1}


# Where each figure comes from, by backend: printed under the table, and in the JSON.
FIGURE_SOURCES = {
    "kubesim": {
        "window": "kubesim's clock: from the client's cordon to the end of its last request",
        "requests": "kubesim's records of the client's user",
        "latency": "sim ms: kubesim's handling time per request (watches aside)",
        "sim_busy": "share of the window kubesim's controllers held the store lock",
        "wall, peak_mb, cpu": "the client's own process (bench/launch.py)",
        "gone": "scenario 6: from the client's cordon until kubesim's store deleted the "
        "last budget-free pod (kubesim's clock; overhead = gone - ideal)",
    },
    "real": {
        "window": "the client's own request log on this host's clock: from its cordon "
        "to the answer of its last request (ours: bench.child --records; kubectl: -v=6)",
        "requests": "the client's own request log (ours: its records, which must match "
        "its own count; kubectl: its -v=6 lines)",
        "latency": "rtt ms: each request's round trip as the client saw it (watches aside; "
        "kubectl logs whole milliseconds)",
        "emptied": "empty s: from the client's cordon to the node's last pod gone "
        "(DaemonSet pods aside), as the bench's own watch saw it",
        "wall, peak_mb, cpu": "the client's own process (bench/launch.py)",
        "gone": "scenario 6: from the client's cordon until a watch of the bench's own "
        "saw the last budget-free pod gone (overhead = gone - ideal)",
    },
}
FIGURES = {
    "kubesim": (
        "Figures from kubesim (backend kubesim). window: kubesim's clock, from the client's "
        "cordon to its last request; overhead = window - ideal; wall: the whole process; "
        "peak MB: its max RSS; sim ms: kubesim's handling time per request; sim busy: share "
        "of the window kubesim's controllers held the store lock (no request is served "
        "meanwhile). Scenario 5 has no kubectl equivalent (kubectl cannot look a node up by "
        "instance). Scenario 6: overhead = gone - ideal, gone from the cordon until "
        "kubesim deleted the last budget-free pod (the window lasts the clients' timeout)."
    ),
    "real": (
        "Figures from the real control plane (backend real: Kubernetes {servers}, kwok as "
        "the kubelets, a fresh one per drain), measured on the clients' side. window: the "
        "client's own request log on this host's clock, from its cordon (scenario 5: its "
        "first request) to the answer of its last request (ours: its own records; kubectl: "
        "its -v=6 log); overhead = window - ideal; requests: the same logs; wall: the whole "
        "process; peak MB: its max RSS; rtt ms: round trip per request as the client saw "
        "it; empty s: from the cordon until the bench's own watch saw the node's last pod "
        "gone. Scenario 5 has no kubectl equivalent (kubectl cannot look a node up by "
        "instance). Scenario 6: overhead = gone - ideal, gone from the cordon until the "
        "bench's watch saw the last budget-free pod go (the window lasts the clients' "
        "timeout)."
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one run, 10x speed")
    parser.add_argument("--runs", type=int, help="runs per scenario (default 3; quick: 1)")
    parser.add_argument(
        "--backend",
        choices=("kubesim", "real"),
        default="kubesim",
        help="kubesim (default) or the real control plane (testbed.controlplane)",
    )
    parser.add_argument("--out", type=Path, help="JSON results file")
    parser.add_argument(
        "--only", default="", help="comma-separated scenarios to run, e.g. 1,3,5,coldstart"
    )
    parser.add_argument("--no-kubectl", action="store_true", help="our engine only")
    args = parser.parse_args(argv)
    if args.runs is not None and args.runs < 1:
        parser.error("--runs must be at least 1")
    out: Path = args.out or DEFAULT_OUT[args.backend]
    backend: str = args.backend

    from bench import coldstart, forecast, report, startup
    from bench.clients import find_kubectl, kubectl_version
    from bench.run import run_all, warm_up
    from bench.scenarios import CPU_RUNS, many_pods, plan

    started = time.perf_counter()
    chosen = plan(quick=args.quick, runs=args.runs, backend=backend)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    scenarios = tuple(s for s in chosen.scenarios if not only or s.key in only)
    lookup_nodes = chosen.lookup_nodes if not only or "5" in only else 0
    kubectl = None if args.no_kubectl else find_kubectl()
    kubectl_runs = {} if args.quick else {**KUBECTL_RUNS, **dict.fromkeys(CPU_RUNS, 0)}
    scenario_runs = {} if args.quick or args.runs is not None else dict(CPU_RUNS)
    where = "kubesim" if backend == "kubesim" else "the real control plane, one per drain"
    print(
        f"bench: {'quick' if args.quick else 'full'}, on {where}, {chosen.runs} run(s), "
        f"speed {chosen.speed:g}, kubectl {kubectl_version(kubectl) if kubectl else 'not used'}, "
        f"{os.cpu_count()} CPUs",
        file=sys.stderr,
        flush=True,
    )
    for note in chosen.notes:
        print(f"bench: scaled down: {note}", file=sys.stderr, flush=True)
    for key in sorted(k for k in scenario_runs if any(s.key == k for s in scenarios)):
        print(f"bench: scenario {key}: {scenario_runs[key]} runs", file=sys.stderr, flush=True)
    if kubectl is None and not args.no_kubectl:
        print("bench: no kubectl on PATH; running our engine only", file=sys.stderr)
    if backend == "real":
        from testbed.controlplane import ControlPlaneBuildError, binaries

        try:
            binaries()  # build once here (the first time: tens of minutes), not mid-run
        except ControlPlaneBuildError as e:
            print(f"bench: {e}", file=sys.stderr)
            return 2
    # On the real control plane each drain starts one of its own, so a warm-up drain
    # there warms the page cache and this process's own code paths (set-up, forecast),
    # not the drains' processes: worth its 20 s for figures, not in quick mode.
    if scenarios and not (args.quick and backend == "real"):
        warm_up(chosen.speed, kubectl, many_pods(5, 5), backend)
    results = run_all(
        scenarios,
        runs=chosen.runs,
        kubectl_runs=kubectl_runs,
        scenario_runs=scenario_runs,
        speed=chosen.speed,
        kubectl=kubectl,
        lookup_nodes=lookup_nodes,
        backend=backend,
    )
    cold = None
    if not only or "coldstart" in only:
        print("cold start: measuring the Lambda zip under the runtime's Python", file=sys.stderr)
        cold = coldstart.measure(3 if args.quick else 9, build=not args.quick)
    launch = None
    if not only or "startup" in only:
        print("CLI start-up: python -m drainer to its first request (kubesim)", file=sys.stderr)
        launch = startup.measure(3 if args.quick else 7)
    summaries = report.summarise(results)
    found = report.targets(summaries, chosen.scenarios, cold, lookup_nodes, launch)
    elapsed = time.perf_counter() - started

    servers = sorted({r.server for r in results if r.server})
    print()
    print(report.table(summaries, chosen.scenarios, backend))
    print()
    print(FIGURES[backend].format(servers=", ".join(servers) or "?"))
    for note in chosen.notes:
        print(f"Scaled down: {note}.")
    if kubectl is not None:
        print(
            "kubectl drain: client-side throttling (about 10 requests/s), a 5 s sleep after "
            "each PDB refusal, a GET per pod per second while waiting; runs: "
            + ", ".join(f"scenario {k}: {v}" for k, v in sorted(kubectl_runs.items()))
            if kubectl_runs
            else "kubectl drain: client-side throttling, 5 s sleep after each PDB refusal."
        )
    print()
    print(report.evictions_text(summaries))
    print()
    against = report.floor_text(summaries, chosen.scenarios)
    if against:
        print(against)
        print()
    cpu = report.cpu_text(summaries)
    if cpu:
        print(cpu)
        print()
    forecasts = forecast.text(results, chosen.scenarios)
    if forecasts:
        print(forecasts)
        print()
    head_of_line = report.head_of_line_text(summaries, chosen.scenarios)
    if head_of_line:
        print(head_of_line)
        print()
    if cold is not None:
        print(report.coldstart_text(cold))
        print()
    if launch is not None:
        print(startup.text(launch))
        print()
    print(report.targets_text(found, args.quick, backend))
    print(f"\nbench: {elapsed:.0f} s in all; results in {out}")

    out.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "mode": "quick" if args.quick else "full",
        "backend": backend,
        "servers": servers,
        "figures": FIGURE_SOURCES[backend],
        "notes": list(chosen.notes),
        "runs": chosen.runs,
        "speed": chosen.speed,
        "kubectl": kubectl_version(kubectl) if kubectl else None,
        "kubectl_runs": kubectl_runs,
        "cpus": os.cpu_count(),
        "seconds": elapsed,
        "scenarios": [
            {
                "key": s.key,
                "title": s.title,
                "pods": s.pods,
                "ideal": s.ideal,
                "note": s.ideal_note,
                "forecast": forecast.document(results, s),
            }
            for s in chosen.scenarios
        ],
        "summary": [asdict(s) for s in summaries],
        "targets": [asdict(t) for t in found],
        "coldstart": asdict(cold) if cold is not None else None,
        "cli_startup": asdict(launch) if launch is not None else None,
        "runs_detail": [asdict(r) for r in results],
    }
    out.write_text(json.dumps(document, indent=2) + "\n")
    for result in forecast.flagged(results):
        print(f"bench: {forecast.flag_text(result)}", file=sys.stderr)
    failed = [r for r in results if not r.ok]
    for result in failed:
        print(
            f"bench: scenario {result.scenario} {result.client} run {result.run} failed: "
            f"{result.problem}",
            file=sys.stderr,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
