"""`python -m drainer drain`: the same engine from a terminal.

For operators (drain a node by hand, the way the Lambda would) and for testing
RBAC before deploying (`--context` of a user in the eks-node-drainer group,
`--dry-run` to check permissions without touching anything).

    python -m drainer drain --node NAME [--kubeconfig PATH] [--context NAME]
                            [--timeout SECONDS] [--dry-run]
    python -m drainer drain --instance-id ID ...   (looks the node up through EC2)

Exit status: 0 drained (or dry run done), 1 not drained (timeout, pods left),
2 usage or configuration error, 3 API error (RBAC, TLS, unreachable).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from drainer.drain import Drain, DrainEvent, DrainOptions, Outcome
from drainer.errors import DrainerError, KubeError
from drainer.filters import FilterOptions
from drainer.kube import Kube
from drainer.nodes import find_node

_SYMBOLS = {
    "cordoned": "cordoned",
    "skipped": "skip",
    "evicting": "evict",
    "evicted": "evicted",
    "blocked": "blocked",
    "gone": "gone",
    "stuck": "stuck",
    "forced": "forced",
    "volume_detached": "detached",
    "would_evict": "would evict",
    "namespace_terminating": "goes with ns",
}


class Progress:
    """Human-readable progress lines on a terminal (or any stream)."""

    def __init__(self, stream: TextIO, verbose: bool = False) -> None:
        self.stream = stream
        self.verbose = verbose
        self.started = time.monotonic()
        self._blocked: set[str] = set()

    def __call__(self, event: DrainEvent) -> None:
        if event.kind == "evicting" and not self.verbose:
            return
        if event.kind == "blocked":
            # One line per pod and budget, not one per retry.
            key = f"{event.pod}|{event.budget}"
            if key in self._blocked:
                return
            self._blocked.add(key)
        label = _SYMBOLS.get(event.kind, event.kind)
        subject = event.pod or event.message
        detail = ""
        if event.kind == "blocked" and "," in event.budget:
            detail = f" by more than one PodDisruptionBudget ({event.budget}): fix them"
        elif event.kind == "blocked":
            detail = f" by PodDisruptionBudget {event.budget}; retrying when it allows"
        elif event.kind == "namespace_terminating":
            detail = " (its namespace is being deleted; not evicted, waited for)"
        elif event.kind == "skipped":
            detail = f" ({event.message})"
        elapsed = time.monotonic() - self.started
        print(f"[{elapsed:6.1f}s] {label:>11}  {subject}{detail}", file=self.stream, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m drainer", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    drain = commands.add_parser(
        "drain", help="cordon and drain one node, respecting PodDisruptionBudgets"
    )
    target = drain.add_mutually_exclusive_group(required=True)
    target.add_argument("--node", help="the Kubernetes node name")
    target.add_argument("--instance-id", help="an EC2 instance id; the node is found through EC2")
    drain.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)"
    )
    drain.add_argument("--context", help="kubeconfig context (default: the current one)")
    drain.add_argument(
        "--timeout",
        type=float,
        default=3600.0,
        help="give up after this many seconds (default 3600)",
    )
    drain.add_argument(
        "--dry-run", action="store_true", help="show what would be evicted; change nothing"
    )
    drain.add_argument(
        "--concurrency", type=int, default=32, help="evictions in flight at once (default 32)"
    )
    drain.add_argument(
        "--grace-period",
        type=int,
        default=-1,
        help="seconds each pod gets to stop (default: the pod's own)",
    )
    drain.add_argument(
        "--stuck-pod-seconds",
        type=float,
        default=60.0,
        help="stop waiting for pods stuck terminating this long past their grace period",
    )
    drain.add_argument(
        "--evict-daemonset-pods", action="store_true", help="evict DaemonSet pods too"
    )
    drain.add_argument(
        "--skip-unreplicated", action="store_true", help="leave pods without a controller"
    )
    drain.add_argument(
        "--skip-emptydir", action="store_true", help="leave pods with emptyDir volumes"
    )
    drain.add_argument(
        "--verbose", "-v", action="store_true", help="print every eviction attempt and debug logs"
    )
    return parser


def _node_for_instance(kube: Kube, instance_id: str) -> str | None:
    from drainer import aws

    session = aws.Session()
    identity = aws.describe_instance(aws.make_clients(session).ec2, instance_id)
    return find_node(
        kube, identity.private_dns_name, identity.hostname_candidates, identity.provider_id_suffix
    )


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    out = stdout or sys.stdout
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.timeout <= 0 or args.concurrency < 1:
        print("error: --timeout must be positive and --concurrency at least 1", file=sys.stderr)
        return 2
    try:
        kube = Kube.from_kubeconfig(args.kubeconfig, args.context, pool_size=args.concurrency + 4)
    except DrainerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        node = args.node or _node_for_instance(kube, args.instance_id)
        if node is None:
            print(f"no Kubernetes node for instance {args.instance_id}: nothing to drain", file=out)
            return 0
        options = DrainOptions(
            filters=FilterOptions(
                evict_unreplicated=not args.skip_unreplicated,
                evict_emptydir=not args.skip_emptydir,
                evict_daemonset=args.evict_daemonset_pods,
            ),
            concurrency=args.concurrency,
            grace_period_seconds=args.grace_period if args.grace_period >= 0 else None,
            stuck_pod_seconds=args.stuck_pod_seconds,
            dry_run=args.dry_run,
        )
        print(f"draining node {node}{' (dry run)' if args.dry_run else ''}", file=out, flush=True)
        report = Drain(kube, node, options, on_event=Progress(out, args.verbose)).run(
            time.time() + args.timeout
        )
    except KubeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    except DrainerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        kube.close()
    summary = ", ".join(f"{k}={v}" for k, v in report.summary().items())
    for message, names in report.warnings.items():
        print(f"warning: {message}: {', '.join(names)}", file=out)
    if report.outcome == Outcome.DRY_RUN:
        print(f"dry run: would evict {len(report.would_evict)} pods; {summary}", file=out)
        return 0
    if report.outcome in (Outcome.DRAINED, Outcome.NODE_GONE):
        print(f"node {node} drained: {summary}", file=out)
        return 0
    print(f"node {node} NOT drained: {report.timeout_message()}; {summary}", file=out)
    return 1


if __name__ == "__main__":
    sys.exit(main())
