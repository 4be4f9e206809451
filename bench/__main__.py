"""`python -m bench [--quick] [--runs N] [--out PATH]`: the drain benchmark.

Drains the same emulated nodes (kubesim over HTTPS) with our engine and with the
real `kubectl drain`, side by side in one run, prints a table and the issue's
targets, and writes every figure as JSON (bench/results/results.json by default).

--quick: small sizes, one run, kubesim at 10x speed; a smoke test of the whole
path (no verdict on the targets), used by `make test`.
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
DEFAULT_OUT = ROOT / "bench" / "results" / "results.json"
# kubectl drain takes ~150 s for 737 pods (client-side throttling), ~45 s for the
# PDB scenario (5 s sleep after each refusal), 20+ s for scenarios 1 and 4, and its
# figures barely move between runs (its own sleeps and throttle set them): fewer
# runs of those keep `make bench` under ten minutes. Our engine always gets --runs.
KUBECTL_RUNS = {"1": 2, "2": 1, "3": 2, "4": 2}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one run, 10x speed")
    parser.add_argument("--runs", type=int, help="runs per scenario (default 3; quick: 1)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results file")
    parser.add_argument(
        "--only", default="", help="comma-separated scenarios to run, e.g. 1,3,5,coldstart"
    )
    parser.add_argument("--no-kubectl", action="store_true", help="our engine only")
    args = parser.parse_args(argv)
    if args.runs is not None and args.runs < 1:
        parser.error("--runs must be at least 1")

    from bench import coldstart, report
    from bench.clients import find_kubectl, kubectl_version
    from bench.run import run_all, warm_up
    from bench.scenarios import many_pods, plan

    started = time.perf_counter()
    chosen = plan(quick=args.quick, runs=args.runs)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    scenarios = tuple(s for s in chosen.scenarios if not only or s.key in only)
    lookup_nodes = chosen.lookup_nodes if not only or "5" in only else 0
    kubectl = None if args.no_kubectl else find_kubectl()
    kubectl_runs = {} if args.quick else dict(KUBECTL_RUNS)
    print(
        f"bench: {'quick' if args.quick else 'full'}, {chosen.runs} run(s), kubesim speed "
        f"{chosen.speed:g}, kubectl {kubectl_version(kubectl) if kubectl else 'not used'}, "
        f"{os.cpu_count()} CPUs",
        file=sys.stderr,
        flush=True,
    )
    if kubectl is None and not args.no_kubectl:
        print("bench: no kubectl on PATH; running our engine only", file=sys.stderr)
    if scenarios:
        warm_up(chosen.speed, kubectl, many_pods(5, 5))
    results = run_all(
        scenarios,
        runs=chosen.runs,
        kubectl_runs=kubectl_runs,
        speed=chosen.speed,
        kubectl=kubectl,
        lookup_nodes=lookup_nodes,
    )
    cold = None
    if not only or "coldstart" in only:
        print("cold start: measuring the Lambda zip under the runtime's Python", file=sys.stderr)
        cold = coldstart.measure(3 if args.quick else 9, build=not args.quick)
    summaries = report.summarise(results)
    found = report.targets(summaries, chosen.scenarios, cold, lookup_nodes)
    elapsed = time.perf_counter() - started

    print()
    print(report.table(summaries, chosen.scenarios))
    print()
    print(
        "window: kubesim's clock, from the client's cordon to its last request; "
        "overhead = window - ideal; wall: the whole process; peak MB: its max RSS; "
        "sim ms: kubesim's handling time per request; sim busy: share of the window "
        "kubesim's controllers held the store lock (no request is served meanwhile). "
        "Scenario 5 has no kubectl equivalent (kubectl cannot look a node up by instance)."
    )
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
    if cold is not None:
        print(report.coldstart_text(cold))
        print()
    print(report.targets_text(found, args.quick))
    print(f"\nbench: {elapsed:.0f} s in all; results in {args.out}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "mode": "quick" if args.quick else "full",
        "runs": chosen.runs,
        "speed": chosen.speed,
        "kubectl": kubectl_version(kubectl) if kubectl else None,
        "kubectl_runs": kubectl_runs,
        "cpus": os.cpu_count(),
        "seconds": elapsed,
        "scenarios": [
            {"key": s.key, "title": s.title, "pods": s.pods, "ideal": s.ideal, "note": s.ideal_note}
            for s in chosen.scenarios
        ],
        "summary": [asdict(s) for s in summaries],
        "targets": [asdict(t) for t in found],
        "coldstart": asdict(cold) if cold is not None else None,
        "runs_detail": [asdict(r) for r in results],
    }
    args.out.write_text(json.dumps(document, indent=2) + "\n")
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
