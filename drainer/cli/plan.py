"""`plan NODE...` / `plan -l SELECTOR` / `plan --asg NAME` (an instance refresh,
batch by batch: drainer/cli/refresh.py): before a refresh, how long each node's drain
would take and what would block it (drainer/plan/), as a table for people or one
JSON document (docs/cli-output.schema.json, `plan`). Reads only: the nodes, every
pod (each workload's time to Ready comes from its pods anywhere in the cluster) and
the budgets, which the drainer's ClusterRole (k8s-rbac/) already lets it list.
Exit 0 nothing blocks, 1 something does (or a deadlock), 2 usage, 3 the API."""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Any

from drainer.cli import output
from drainer.cli.arguments import DEFAULTS, filter_options, overrides_from
from drainer.cli.impersonate import from_args as impersonation_from
from drainer.cli.refresh import NoGroup, RefreshNodes, refresh_nodes
from drainer.engine.options import DrainOptions
from drainer.errors import DrainerError, InstanceNotFound, KubeError
from drainer.k8s.kube import Kube
from drainer.plan.capacity import Capacity
from drainer.plan.model import Cluster, NodePlan, plan_node
from drainer.plan.refresh import batches, total
from drainer.plan.timing import startups

HEADERS = ("NODE", "PODS", "ETA", "UP TO", "PACED BY", "BLOCKERS")


def run_plan(args: argparse.Namespace, terminal: Any) -> int:
    """The plan of the nodes named or selected; the exit status."""
    if not args.asg and _refresh_flags(args):
        return _failed(terminal, args, 2, f"{_refresh_flags(args)} is only for plan --asg")
    try:
        kube = Kube.from_kubeconfig(
            args.kubeconfig, args.context, impersonate=impersonation_from(args)
        )
    except DrainerError as e:
        return _failed(terminal, args, 2, str(e))
    try:
        return _plan(kube, args, terminal)
    except (NoGroup, InstanceNotFound) as e:
        return _failed(terminal, args, 1, str(e), result="no_node")
    except KubeError as e:
        if e.status == 400 and (args.selector or args.pod_selector):  # a selector's syntax
            return _failed(terminal, args, 2, f"a label selector the API server refuses: {e}")
        return _failed(terminal, args, 3, str(e))
    except DrainerError as e:
        return _failed(terminal, args, 2, str(e))
    finally:
        kube.close()


def _failed(terminal: Any, args: argparse.Namespace, code: int, message: str, **more: Any) -> int:
    from drainer.cli.main import _failed as failed

    return failed(terminal, args, code, message, **more)


def options_from(args: argparse.Namespace) -> DrainOptions:
    """The drain's options, as `drain` would take them from the same flags."""
    return dataclasses.replace(
        DEFAULTS,
        filters=filter_options(args),
        pod_selector=args.pod_selector or "",
        honor_do_not_disrupt=not args.ignore_do_not_disrupt,
    )


def _refresh_flags(args: argparse.Namespace) -> str:
    """The first refresh flag given ("" none)."""
    given = [
        ("--batch", args.batch),
        ("--min-healthy-percentage", args.min_healthy_percentage),
        ("--instance-warmup", args.instance_warmup),
    ]
    return next((flag for flag, value in given if value is not None), "")


def _plan(kube: Kube, args: argparse.Namespace, terminal: Any) -> int:
    refresh = refresh_nodes(kube, args) if args.asg else None
    if refresh is not None:
        for instance in refresh.without_node:
            print(
                f"note: instance {instance} of {refresh.asg} has no node: replaced without a drain",
                file=terminal.err,
            )
        if not refresh.nodes:
            why = f"no node for any InService instance of Auto Scaling group {refresh.asg}"
            return _failed(terminal, args, 1, why, result="no_node")
    names = refresh.nodes if refresh is not None else _nodes(kube, args)
    if names is None:
        missing = ", ".join(_missing(kube, args))
        return _failed(terminal, args, 1, f"node(s) not found: {missing}", result="no_node")
    if not names:
        why = f"no node matches --selector {args.selector}"
        return _failed(terminal, args, 1, why, result="no_node")
    every_pod = _all_pods(kube)
    budgets, _ = kube.list_budgets()
    # A refresh drains batch by batch: the nodes of later batches still take pods
    # until theirs comes, and each batch's new instances take the next batch's.
    # Nodes named or selected are all cordoned first (drain -l).
    leaving = batches(names, refresh.batch) if refresh is not None else [names]
    room = Capacity(kube.list_nodes(), every_pod, planned=set(leaving[0]))
    cluster = Cluster(budgets, startups(every_pod), room)
    options, overrides = options_from(args), overrides_from(args)
    plans = []
    for node in names:
        batch = next(i for i, b in enumerate(leaving) if node in b)
        if refresh is not None and batch and node == leaving[batch][0]:
            room.replaced(leaving[batch - 1])  # the last batch's new instances, now in
        room.leaving(leaving[batch])
        on_node, _ = kube.list_pods_on_node(node, args.pod_selector or "")
        listed = time.time()  # only for the deletion deadlines of pods already terminating
        plans.append(
            plan_node(node, on_node, cluster, options, overrides, timeout=args.timeout, now=listed)
        )
    blocked = any(p.blockers for p in plans)
    code = 1 if blocked else 0
    if args.output == "json":
        output.emit(terminal.out, _document(plans, code, refresh))
    else:
        print(table(plans), file=terminal.out)
        print(_verdict(plans, refresh), file=terminal.out)
    return code


def _refresh_total(plans: list[NodePlan], refresh: RefreshNodes) -> tuple[float, list[list[str]]]:
    """A refresh's ETA (each batch: its slowest node, then the warm-up) and its batches."""
    eta = {p.node: p.eta_seconds for p in plans}
    grouped = batches(refresh.nodes, refresh.batch)
    return total([[eta[n] for n in b] for b in grouped], refresh.warmup), grouped


def _nodes(kube: Kube, args: argparse.Namespace) -> list[str] | None:
    """The nodes to plan, in the order given (None: one named does not exist)."""
    if args.selector:
        return sorted(
            str(n["metadata"]["name"]) for n in kube.list_nodes(label_selector=args.selector)
        )
    if _missing(kube, args):
        return None
    return list(dict.fromkeys(args.nodes))


def _missing(kube: Kube, args: argparse.Namespace) -> list[str]:
    return [n for n in args.nodes if kube.get_node(n) is None]


def _all_pods(kube: Kube) -> list[dict[str, Any]]:
    """Every pod in the cluster: each workload's time to Ready, from its own pods.
    (Through the client's paged list: Kube has no named call for it yet.)"""
    items, _ = kube.list_pods()
    return items


def _document(plans: list[NodePlan], code: int, refresh: RefreshNodes | None) -> dict[str, Any]:
    more: dict[str, Any] = {}
    eta = sum(p.eta_seconds for p in plans)
    if refresh is not None:
        eta, grouped = _refresh_total(plans, refresh)
        more["refresh"] = {
            "asg": refresh.asg,
            "batch": refresh.batch,
            "instance_warmup_seconds": refresh.warmup,
            "batches": grouped,
            "instances_without_node": refresh.without_node,
        }
    return output.document(
        "blocked" if code else "planned",
        code,
        nodes=[p.doc() for p in plans],
        total_eta_seconds=round(eta, 1),
        deadlocked=any(p.deadlocked for p in plans),
        **more,
    )


def _duration(seconds: float) -> str:
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def table(plans: list[NodePlan]) -> str:
    """One row per node, then each blocker with its fix under it."""
    rows = [HEADERS] + [
        (
            p.node,
            str(p.pods),
            _duration(p.eta_seconds),
            _duration(p.eta_max_seconds),
            p.paced_by,
            str(len(p.blockers)) if p.blockers else "none",
        )
        for p in plans
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS) - 1)]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "   " + r[-1]
        for r in rows
    ]
    for p in plans:
        for blocker in p.blockers:
            lines.append(f"  {p.node}: {blocker.pod}: {blocker.reason}")
            lines.append(f"    fix: {blocker.fix}")
    return "\n".join(line.rstrip() for line in lines)


def _verdict(plans: list[NodePlan], refresh: RefreshNodes | None) -> str:
    whole = _duration(sum(p.eta_seconds for p in plans))
    how = "one node after the other"
    if refresh is not None:
        eta, grouped = _refresh_total(plans, refresh)
        whole = _duration(eta)
        how = (
            f"{len(grouped)} batch(es) of up to {refresh.batch}, each its slowest node's "
            f"drain then a {refresh.warmup:g} s warm-up"
        )
    blocked = sum(len(p.blockers) for p in plans)
    if any(p.deadlocked for p in plans):
        return f"deadlocked: {blocked} blocker(s); the drain waits for its timeout ({whole} in all)"
    if blocked:
        return f"{blocked} blocker(s); forecast {whole} in all, {how}"
    return f"nothing blocks; forecast {whole} in all, {how}"
