"""`python -m demo`: watch the drainer handle an Auto Scaling scale-in, end to end.

Starts kubesim (the Kubernetes API) and awssim (moto, for EC2, Auto Scaling, EKS
and Lambda) as local servers, builds a small EKS cluster whose nodes are the
instances of an Auto Scaling group with a terminate lifecycle hook, scales the
group in by one and hands the lifecycle event to drainer.handler.lambda_handler
in a separate process, as EventBridge and Lambda would. Prints what happens live,
then a summary. Ctrl-C stops everything.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from demo.run import Options, main


def _positive(
    kind: type[int] | type[float], low: float, high: float
) -> Callable[[str], int | float]:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is not between {low:g} and {high:g}")
        return value

    return parse


def parse_args(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m demo", description=__doc__.split("\n\n")[0].split(": ", 1)[1]
    )
    parser.add_argument(
        "--nodes", type=_positive(int, 2, 10), default=3, help="worker nodes (2-10, default 3)"
    )
    parser.add_argument(
        "--pods-per-node",
        type=_positive(int, 1, 10),
        default=2,
        help="web replicas per node (1-10, default 2)",
    )
    parser.add_argument(
        "--stubborn-pdb",
        action="store_true",
        help="add a PodDisruptionBudget that never allows an eviction, to show the drain "
        "timeout and TIMEOUT_POLICY",
    )
    parser.add_argument(
        "--timeout-policy",
        choices=("continue", "force", "abandon"),
        default="",
        help="TIMEOUT_POLICY for this run (default: template.yaml's)",
    )
    parser.add_argument(
        "--speed",
        type=_positive(float, 0.1, 100),
        default=1.0,
        help="divide simulated pod start, stop and detach times by this (default 1)",
    )
    parser.add_argument(
        "--lambda-timeout",
        type=_positive(float, 62, 900),
        default=None,
        help="the function's timeout in seconds (default: template.yaml's); "
        "under 60 + the drain's length shows hand-overs",
    )
    parser.add_argument(
        "--spot",
        action="store_true",
        help="EC2 sends a spot interruption warning instead of a scale-in: the node is "
        "drained within the warning's 2 minutes; the terminate hook's event that follows "
        "waits for that drain",
    )
    parser.add_argument(
        "--health",
        action="store_true",
        help="AWS Health schedules the node's instance for retirement in 10 minutes "
        "instead of a scale-in: the node is drained before the window; the terminate "
        "hook's event that follows waits for that drain",
    )
    parser.add_argument(
        "--launch-hook",
        action="store_true",
        help="the group first scales out by one, as an instance refresh does: the new "
        "instance waits on the launch hook until its node is Ready, then the scale-in",
    )
    parser.add_argument(
        "--warm-pool",
        action="store_true",
        help="the group has a warm pool that keeps instances on scale-in: the node is "
        "drained, the instance stops in the pool, then the group scales out from the pool "
        "and the launch hook releases the node once it is Ready again",
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="before the drain, print the plan of the node (`python -m drainer plan NODE`, "
        "as the drainer identity); the summary shows its forecast against the drain "
        "measured. The pods' grace periods are their stop times here (the plan's bound), "
        "and only at --speed 1 are the forecast's seconds the drain's",
    )
    parser.add_argument("--plain", action="store_true", help="plain lines, no live status line")
    parser.add_argument("--no-color", action="store_true", help="no colours")
    parser.add_argument(
        "--summary-json", type=Path, default=None, help="also write the summary to this file"
    )
    parser.add_argument(
        "--logs", type=Path, default=None, help="logs directory (default demo-logs/<time>/)"
    )
    args = parser.parse_args(argv)
    if args.spot and args.stubborn_pdb:
        parser.error("--spot and --stubborn-pdb: pick one (a spot drain has 2 minutes at most)")
    if args.health and (args.spot or args.stubborn_pdb):
        parser.error("--health: not with --spot or --stubborn-pdb (one scenario at a time)")
    if args.warm_pool and (args.spot or args.health or args.stubborn_pdb or args.launch_hook):
        parser.error("--warm-pool: a scale-in and its return on its own (one scenario at a time)")
    if args.plan and args.speed != 1:
        parser.error(
            "--plan: only at --speed 1 (the plan's grace periods are seconds that --speed "
            "does not divide, so the forecast would not be the drain's)"
        )
    return Options(
        nodes=args.nodes,
        pods_per_node=args.pods_per_node,
        stubborn_pdb=args.stubborn_pdb,
        timeout_policy=args.timeout_policy,
        speed=args.speed,
        plain=args.plain,
        no_color=args.no_color,
        summary_json=args.summary_json,
        logs=args.logs,
        lambda_timeout=args.lambda_timeout,
        spot=args.spot,
        health=args.health,
        launch_hook=args.launch_hook,
        warm_pool=args.warm_pool,
        plan=args.plan,
    )


if __name__ == "__main__":
    sys.exit(main(parse_args()))
