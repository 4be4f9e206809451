"""`plan NODE...` / `plan -l SELECTOR` / `plan --asg NAME` (an instance refresh,
batch by batch: drainer/cli/refresh.py): before a refresh, how long each node's drain
would take and what would block it (drainer/plan/), as a table for people or one
JSON document (docs/cli-output.schema.json, `plan`). Reads only: the nodes, every
pod (each workload's time to Ready comes from its pods anywhere in the cluster) and
the budgets, which the drainer's ClusterRole (k8s-rbac/) already lets it list.
Exit 0 nothing blocks, 1 something does (or a deadlock), 2 usage, 3 the API or AWS
(refused, unreachable, no credentials or region)."""

from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from drainer.cli import output
from drainer.cli.arguments import DEFAULTS, filter_options, overrides_from
from drainer.cli.impersonate import from_args as impersonation_from
from drainer.cli.refresh import NoGroup, RefreshNodes, refresh_nodes
from drainer.engine.options import DrainOptions
from drainer.errors import DrainerError, InstanceNotFound, KubeError
from drainer.k8s.kube import Kube
from drainer.plan.blockers import Blocker
from drainer.plan.cordons import Placements, blockers, node_of, stuck
from drainer.plan.history import NewNodes, new_node_wait
from drainer.plan.model import Cluster, NodePlan, batch_eta, plan_node
from drainer.plan.observed import Stop, Stops
from drainer.plan.observed import read as read_stops
from drainer.plan.refresh import batch_times, batches
from drainer.plan.timing import startups
from drainer.plan.volumes import ApiVolumes

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
    except DrainerError as e:  # AWS's (--asg) is 3, as the API's; the rest a usage error
        return _failed(terminal, args, 3 if isinstance(e, _aws_problems()) else 2, str(e))
    finally:
        kube.close()


def _aws_problems() -> tuple[type[DrainerError], ...]:
    """What keeps plan --asg from AWS's answers, exit 3: drain --instance-id's
    (drainer/cli/main.py's AWS_PROBLEMS, the one definition)."""
    from drainer.cli.main import AWS_PROBLEMS

    return AWS_PROBLEMS


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
    reads = _read(kube, args, names)
    if refresh is None:
        plans, _ = _walk(reads, [names], args, refreshing=False)
        whole = None
    else:
        whole = _refresh_plan(reads, refresh, args, terminal)
        plans = whole.plans
    if reads.volumes.note():
        print(f"note: {reads.volumes.note()}", file=terminal.err)
    if reads.stops.note:
        print(f"note: {reads.stops.note}", file=terminal.err)
    code = 1 if any(p.blockers for p in plans) else 0
    if args.output == "json":
        output.emit(terminal.out, _document(plans, code, whole))
    else:
        print(table(plans), file=terminal.out)
        if whole is not None and whole.new_nodes is not None:
            print(f"new nodes: {whole.new_nodes.detail}", file=terminal.out)
        print(_verdict(plans, whole), file=terminal.out)
    return code


@dataclass(frozen=True)
class Reads:
    """What the plan read of the cluster, once: planned again with other batches for
    a deadlock's fix."""

    nodes: list[dict[str, Any]]
    every_pod: list[dict[str, Any]]
    budgets: list[dict[str, Any]]
    on_node: dict[str, list[dict[str, Any]]]
    volumes: ApiVolumes
    """The evicted pods' claims' volumes, read as the plan asks (each once)."""
    stops: Stops
    """The stop times the drains observed (drainer/plan/observed.py)."""
    listed: float
    """The wall clock at the listing: only for the deletion deadlines of pods already
    terminating."""


def _read(kube: Kube, args: argparse.Namespace, names: list[str]) -> Reads:
    every_pod = _all_pods(kube)
    budgets, _ = kube.list_budgets()
    on_node = {n: kube.list_pods_on_node(n, args.pod_selector or "")[0] for n in names}
    nodes = list(kube.list_nodes())
    stops = read_stops(kube)
    return Reads(nodes, every_pod, budgets, on_node, ApiVolumes(kube), stops, time.time())


def _walk(
    reads: Reads, leaving: list[list[str]], args: argparse.Namespace, *, refreshing: bool
) -> tuple[list[NodePlan], list[list[dict[str, Any]]]]:
    """Each node's plan, batch by batch; and per batch, the pods whose replacement
    fits on no node left. A refresh drains batch by batch: the nodes of later batches
    still take pods until theirs comes, and each batch's new instances take the next
    batch's. Nodes named or selected are all cordoned first (drain -l): one batch."""
    room = Placements(reads.nodes, reads.every_pod, planned=set(leaving[0]), volumes=reads.volumes)
    cluster = Cluster(reads.budgets, startups(reads.every_pod), room, reads.stops)
    options, overrides = options_from(args), overrides_from(args)
    plans, homeless = [], []
    for number, batch in enumerate(leaving):
        if refreshing and number:
            room.replaced(leaving[number - 1])  # the last batch's new instances, now in
        room.leaving(batch)
        before = len(room.homeless)
        for node in batch:
            on_node = reads.on_node[node]
            plans.append(
                plan_node(
                    node,
                    on_node,
                    cluster,
                    options,
                    overrides,
                    timeout=args.timeout,
                    now=reads.listed,
                )
            )
        homeless.append(room.homeless[before:])
    return plans, homeless


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


def _document(plans: list[NodePlan], code: int, whole: RefreshPlan | None) -> dict[str, Any]:
    more: dict[str, Any] = {}
    eta = sum(p.eta_seconds for p in plans)
    if whole is not None:
        eta = sum(whole.times)
        more["refresh"] = whole.doc()
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
        seen = [s for s in p.stops if s.observed]
        if seen:
            lines.append(f"  {p.node}: {_stops(seen, len(p.stops) - len(seen))}")
        for blocker in p.blockers:
            lines.append(f"  {p.node}: {blocker.pod}: {blocker.reason}")
            lines.append(f"    fix: {blocker.fix}")
    return "\n".join(line.rstrip() for line in lines)


def _stops(seen: list[Stop], bounds: int) -> str:
    """The observed stop times the ETA uses, and how many owners' are bounds."""
    words = ", ".join(f"{'/'.join(s.owner or ())} ~{s.seconds:.1f} s ({s.samples})" for s in seen)
    rest = f"; {bounds} other owner(s): their grace period (a bound)" if bounds else ""
    return f"stops observed in earlier drains (median, stops seen): {words}{rest}"


def _verdict(plans: list[NodePlan], whole: RefreshPlan | None) -> str:
    eta = _duration(sum(p.eta_seconds for p in plans))
    how = "one node after the other"
    if whole is not None:
        eta = _duration(sum(whole.times))
        how = (
            f"{len(whole.batches)} batch(es) of up to {whole.refresh.batch}, each its slowest "
            f"node's drain then a {whole.refresh.warmup:g} s warm-up"
        )
        if whole.new_nodes is not None:
            how += (
                f"; {sum(whole.waits)} batch(es) also wait for new nodes ({whole.new_nodes.short})"
            )
    blocked = sum(len(p.blockers) for p in plans)
    if any(p.deadlocked for p in plans):
        return f"deadlocked: {blocked} blocker(s); the drain waits for its timeout ({eta} in all)"
    if blocked:
        return f"{blocked} blocker(s); forecast {eta} in all, {how}"
    return f"nothing blocks; forecast {eta} in all, {how}"


@dataclass(frozen=True)
class RefreshPlan:
    """A refresh planned: its nodes' plans, its batches, each batch's time and whether
    it waits for new nodes, and how long that wait lasts (None: no batch waits)."""

    refresh: RefreshNodes
    plans: list[NodePlan]
    batches: list[list[str]]
    waits: list[bool]
    new_nodes: NewNodes | None
    times: list[float]

    def doc(self) -> dict[str, Any]:
        return {
            "asg": self.refresh.asg,
            "batch": self.refresh.batch,
            "instance_warmup_seconds": self.refresh.warmup,
            "batches": self.batches,
            "batch_eta_seconds": [round(t, 1) for t in self.times],
            "waits_for_new_nodes": self.waits,
            "new_nodes": None if self.new_nodes is None else self.new_nodes.doc(),
            "instances_without_node": self.refresh.without_node,
        }


def _refresh_plan(
    reads: Reads, refresh: RefreshNodes, args: argparse.Namespace, terminal: Any
) -> RefreshPlan:
    """The refresh batch by batch: its deadlocks, and its waits for new nodes timed
    from the group's own launches (read only when a batch waits)."""
    grouped = batches(refresh.nodes, refresh.batch)
    plans, homeless = _walk(reads, grouped, args, refreshing=True)
    plans = _cordon_deadlocks(plans, homeless, reads, grouped, args)
    waits = [bool(h) for h in homeless]
    new_nodes = _new_nodes(reads, refresh, args, terminal) if any(waits) else None
    if new_nodes is not None:
        plans = [_waiting(p, new_nodes) for p in plans]
    eta = {p.node: p.eta_seconds for p in plans}
    wait = new_nodes.seconds if new_nodes is not None else 0.0
    etas = [[eta[n] for n in b] + [_together(reads, b, args)] for b in grouped]
    times = batch_times(etas, refresh.warmup, [wait if w else 0.0 for w in waits])
    return RefreshPlan(refresh, plans, grouped, waits, new_nodes, times)


def _together(reads: Reads, batch: list[str], args: argparse.Namespace) -> float:
    """The batch's drains side by side, sharing their budgets (model.batch_eta): a
    batch lasts at least that long, however fast each node alone would go."""
    cluster = Cluster(reads.budgets, startups(reads.every_pod), None, reads.stops)
    pod_lists = [reads.on_node[n] for n in batch]
    options = options_from(args)
    return batch_eta(pod_lists, cluster, options, timeout=args.timeout, now=reads.listed)


WAITS = "waits for new nodes:"
"""How drainer/plan/model.py's paced_by begins for a node whose pods fit nowhere."""


def _waiting(plan: NodePlan, new_nodes: NewNodes) -> NodePlan:
    if not plan.paced_by.startswith(WAITS):
        return plan
    paced_by = f"waits for new nodes ({new_nodes.short}):" + plan.paced_by[len(WAITS) :]
    return dataclasses.replace(plan, paced_by=paced_by)


def _new_nodes(
    reads: Reads, refresh: RefreshNodes, args: argparse.Namespace, terminal: Any
) -> NewNodes:
    """The wait for new nodes from the group's recent launches; with none (or no
    access to them), the drain's --timeout as the bound, said so."""
    from drainer import aws
    from drainer.cli.main import _aws_session

    bound = (
        f"no launch of {refresh.asg} among its last 100 scaling activities (Auto Scaling "
        "keeps six weeks of them): how long new nodes take is not known; counted as the "
        f"drain's --timeout ({args.timeout:g} s), a bound: the longest the plan lets "
        "one wait last"
    )
    try:
        clients = aws.make_clients(_aws_session())
        launches = aws.recent_launches(clients.autoscaling, refresh.asg)
    except DrainerError as e:
        print(f"note: the wait for new nodes is a bound: {e}", file=terminal.err)
        bound = (
            f"the group's scaling activities could not be read ({e})" + bound[bound.index(":") :]
        )
        launches = []
    return new_node_wait(launches, reads.nodes, bound=args.timeout, bound_why=bound)


def _cordon_deadlocks(
    plans: list[NodePlan],
    homeless: list[list[dict[str, Any]]],
    reads: Reads,
    grouped: list[list[str]],
    args: argparse.Namespace,
) -> list[NodePlan]:
    """The budgets the batches' own cordons deadlock: a blocker on each of their pods
    that fit nowhere, with the largest --batch that clears the budget; those nodes'
    drains wait for the timeout."""
    found = [(i, one) for i, pods in enumerate(homeless) for one in stuck(pods, reads.budgets)]
    if not found:
        return plans
    smaller = _smaller_batch({one.name for _, one in found}, reads, grouped, args)
    extra: dict[str, list[Blocker]] = {}
    for i, one in found:
        for pod, blocker in zip(
            one.pods, blockers(one, grouped[i], i + 1, smaller.get(one.name)), strict=True
        ):
            extra.setdefault(node_of(pod), []).append(blocker)
    return [_deadlocked(p, extra[p.node], args.timeout) if p.node in extra else p for p in plans]


def _smaller_batch(
    names: set[str], reads: Reads, grouped: list[list[str]], args: argparse.Namespace
) -> dict[str, int]:
    """For each budget named, the largest batch size below this one at which no batch
    deadlocks it (a budget no size clears is left out)."""
    nodes = [n for b in grouped for n in b]
    cleared: dict[str, int] = {}
    for size in range(len(grouped[0]) - 1, 0, -1):
        _, homeless = _walk(reads, batches(nodes, size), args, refreshing=True)
        still = {one.name for pods in homeless for one in stuck(pods, reads.budgets)}
        cleared.update({n: size for n in names - still - set(cleared)})
        if set(cleared) == names:
            break
    return cleared


def _deadlocked(plan: NodePlan, more: list[Blocker], timeout: float) -> NodePlan:
    budgets = ", ".join(sorted({x.budget or "" for x in more}))
    paced_by = (
        f"deadlock: PodDisruptionBudget {budgets}: its pods' replacements fit on no node left "
        f"while the batch is cordoned; the drain waits for its timeout ({timeout:g} s)"
    )
    return dataclasses.replace(
        plan,
        eta_seconds=timeout,
        eta_max_seconds=timeout,
        paced_by=paced_by,
        blockers=plan.blockers + more,
    )
