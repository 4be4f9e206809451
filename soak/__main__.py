"""python -m soak --backend kubesim|real [--nodes 30 --batch 3 --pods 600 --speed S
--times T --out build/soak]: an instance refresh of the whole node group, drained by the real
handler; prints the report, writes report.json, summary.txt, drainer.log and
soak.png to --out. Exits 1 when an invariant fails."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__)
    parser.add_argument("--backend", choices=("kubesim", "real"), default="kubesim")
    parser.add_argument("--nodes", type=int, default=30, help="instances in the node group")
    parser.add_argument("--batch", type=int, default=3, help="instances replaced at a time")
    parser.add_argument("--pods", type=int, default=600, help="pods in the workload (about)")
    parser.add_argument(
        "--speed", type=float, default=5.0, help="divide the pods' start and stop times by this"
    )
    parser.add_argument(
        "--drain-timeout", type=int, default=600, help="DRAIN_TIMEOUT_SECONDS of each drain"
    )
    parser.add_argument(
        "--times",
        type=float,
        default=1.0,
        help="scale the workload's start and stop times by this (whole seconds, at least 1)",
    )
    parser.add_argument("--out", type=Path, default=Path("build/soak"))
    args = parser.parse_args(argv)

    from soak import plot, report
    from soak.run import Config, run

    try:
        config = Config(
            backend=args.backend,
            nodes=args.nodes,
            batch=args.batch,
            pods=args.pods,
            speed=args.speed,
            out=args.out,
            drain_timeout=args.drain_timeout,
            times=args.times,
        )
    except ValueError as e:
        parser.error(str(e))
    outcome = run(config)
    picture = plot.draw(outcome, config.out / "soak.png")
    print(report.write(outcome, str(picture)), end="")
    return 0 if report.passed(outcome) else 1


if __name__ == "__main__":
    sys.exit(main())
