"""`make chaos`'s report: what the seeds injected and how their drains ended, from
the lines tests/e2e/test_chaos*.py write (CHAOS_RESULTS), one per seed and
scenario. A line may name its scenario (test_chaos_lambda.py's say "lambda");
one without is the Kubernetes API and workload scenario's ("api").

    python -m tools.chaos_report build/chaos/results.jsonl
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path


def report(lines: Sequence[str]) -> str:
    seeds = [json.loads(line) for line in lines if line.strip()]
    if not seeds:
        return "chaos: no seed ran to its end (see the test output above)"
    faults: Counter[str] = Counter()
    results: Counter[str] = Counter()
    for seed in seeds:
        faults.update(seed.get("faults") or {})
        results[str(seed.get("result"))] += 1
    slowest = max(float(s.get("seconds") or 0.0) for s in seeds)
    scenarios = Counter(str(s.get("scenario", "api")) for s in seeds)
    out = [
        f"chaos: {len(seeds)} seed(s) ran to the end; drains: "
        + ", ".join(f"{n} {r}" for r, n in sorted(results.items())),
        *(
            ["  by scenario: " + ", ".join(f"{n} {k}" for k, n in sorted(scenarios.items()))]
            if len(scenarios) > 1 or "api" not in scenarios
            else []
        ),
        f"  faults injected: {sum(faults.values())}, by kind:",
        *(f"    {kind:28} {n}" for kind, n in sorted(faults.items())),
        f"  slowest drain: {slowest:.2f} s",
    ]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    path = Path(args[0] if args else "build/chaos/results.jsonl")
    lines = path.read_text().splitlines() if path.exists() else []
    print(report(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
