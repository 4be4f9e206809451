"""The plan of the groups the function drains, for its self-check: each group's nodes
(drainer/plan/members.py) and what would block each one's drain, from the model
`plan` runs (drainer/plan/model.py), with the function's own drain options
(Settings.drain_options) and its drain timeout. Each node is planned as the
function's scale-in drains it: alone, the group's other nodes still there to take
its pods.

Warnings only: a blocker never fails the self-check. The plan reads, beyond what a
drain reads, every pod of the cluster (each workload's time to Ready) and the
PersistentVolumes of the evicted pods' claims (k8s-rbac/plan/, optional): without
that ClusterRole the answer says the groups were not planned and how to enable it,
and the check passes as before. A group whose AWS calls fail is not planned, said
so, and the others are. Bounded: past its time, the groups left are not planned,
each with the command that plans it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from drainer import aws
from drainer.engine.options import DrainOptions
from drainer.errors import AwsError, KubeError, KubeForbidden
from drainer.k8s.kube import Kube
from drainer.k8s.selfcheck import FORECAST_READS, describe
from drainer.plan.cordons import Placements
from drainer.plan.function_drain import EVICTS_ALL
from drainer.plan.members import group_nodes
from drainer.plan.model import Cluster, NodePlan, plan_node
from drainer.plan.observed import read as read_stops
from drainer.plan.timing import startups
from drainer.plan.volumes import PLAN_RBAC, ApiVolumes

log = logging.getLogger(__name__)

PLAN_SECONDS = 60.0
"""The longest the self-check's plan may take (its reads, its groups), so that a
large cluster delays make deploy by a minute at most."""


@dataclass(frozen=True)
class GroupPlan:
    """One group's plan: its nodes' plans, or why it was not planned."""

    group: str
    nodes: list[NodePlan] = field(default_factory=list)
    without_node: list[str] = field(default_factory=list)
    not_planned: str = ""

    @property
    def blockers(self) -> int:
        return sum(len(p.blockers) for p in self.nodes)

    @property
    def deadlocked(self) -> bool:
        return any(p.deadlocked for p in self.nodes)

    def doc(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "nodes": [{**_node_doc(p), "deadlocked": p.deadlocked} for p in self.nodes],
            "deadlocked": self.deadlocked,
            "instances_without_node": self.without_node,
            "not_planned": self.not_planned,
            "summary": self.line(),
        }

    def line(self) -> str:
        """The group in one line: its blockers, or that nothing blocks, or why not planned."""
        head = f"plan of group {self.group}"
        if self.not_planned:
            return f"{head}: {self.not_planned}"
        if not self.nodes:
            return f"{head}: no node to plan ({len(self.without_node)} instance(s), none a node)"
        count = f"{len(self.nodes)} node(s)"
        if not self.blockers:
            return f"{head}: {count}, nothing blocks their drains"
        deadlocked = [p.node for p in self.nodes if p.deadlocked]
        said = f"{head}: {count}, {self.blockers} blocker(s)"
        if deadlocked:
            said += f", deadlocked on {', '.join(deadlocked)}"
        first = next(x for p in self.nodes for x in p.blockers)
        more = f" (and {self.blockers - 1} more)" if self.blockers > 1 else ""
        return f"{said}: {first.pod}: {first.reason}; fix: {first.fix}{more}"


@dataclass(frozen=True)
class GroupsPlan:
    """The self-check's `plan` part."""

    groups: list[GroupPlan] = field(default_factory=list)
    not_planned: str = ""
    notes: list[str] = field(default_factory=list)
    """What the plan could not read and took a bound for (the observed stop times)."""

    def doc(self) -> dict[str, Any]:
        return {
            "groups": [g.doc() for g in self.groups],
            "not_planned": self.not_planned,
            "notes": self.notes,
        }

    def lines(self) -> list[tuple[str, bool]]:
        """A line per group (or one for the part not planned), each with whether it
        warns: a blocker, or something not planned."""
        if self.not_planned:
            return [(f"plan: {self.not_planned}", True)]
        return [(g.line(), bool(g.blockers or g.not_planned)) for g in self.groups]


def not_planned(why: str) -> GroupsPlan:
    return GroupsPlan(not_planned=f"not planned: {why}")


@dataclass(frozen=True)
class _Reads:
    nodes: list[dict[str, Any]]
    every_pod: list[dict[str, Any]]
    budgets: list[dict[str, Any]]
    cluster: Cluster
    """Without capacity: each node's plan gets its own, with that node leaving."""
    volumes: ApiVolumes
    listed: float


def forecast_groups(
    kube: Kube,
    clients: aws.AwsClients,
    groups: Callable[[], Sequence[str]],
    options: DrainOptions,
    *,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
    seconds: float = PLAN_SECONDS,
) -> GroupsPlan:
    """Each of the groups' nodes planned as the function drains them (`groups`: lists
    them; `timeout`: its drain timeout); never raises for a read refused or failing:
    it says so instead."""
    deadline = clock() + seconds
    try:
        names = list(groups())
    except AwsError as e:
        return not_planned(f"the groups the function drains could not be listed ({e})")
    if not names:
        return not_planned(
            "no group to plan: ALLOWED_ASGS and ASG_TAG name none that exists (with both "
            "empty the function takes any group's events)"
        )
    try:
        denied = [describe(p) for p in FORECAST_READS if not kube.can_i(*p)]
        if denied:
            return not_planned(_enable(f"this function may not {', '.join(denied)}"))
        reads = _read(kube)
    except KubeForbidden as e:
        return not_planned(_enable(str(e)))
    except KubeError as e:
        return not_planned(f"the cluster could not be read ({e})")
    planned = []
    for group in names:
        left = _Left(clock, deadline, seconds, group)
        planned.append(
            _plan_group(kube, clients, group, reads, options=options, timeout=timeout, left=left)
        )
    notes = [n for n in (reads.cluster.stops.note, reads.volumes.note()) if n]
    return GroupsPlan(planned, notes=notes)


@dataclass(frozen=True)
class _Left:
    """The plan's time left, checked before each group and each node."""

    clock: Callable[[], float]
    deadline: float
    seconds: float
    group: str

    def out(self, done: int = 0, of: int = 0) -> str:
        """ "" while there is time; else the group's not_planned text."""
        if self.clock() <= self.deadline:
            return ""
        nodes = f"{of - done} of its {of} node(s) " if of else ""
        return (
            f"not planned: {nodes}past the self-check's {self.seconds:g} s for its plan; "
            f"plan it with eks-node-drainer plan --asg {self.group}"
        )


def _enable(why: str) -> str:
    return f"{why}, a read only the plan makes; to see the plan's blockers here: {PLAN_RBAC}"


def _read(kube: Kube) -> _Reads:
    every_pod, _ = kube.list_pods()
    budgets, _ = kube.list_budgets()
    nodes = list(kube.list_nodes())
    cluster = Cluster(budgets, startups(every_pod), None, read_stops(kube))
    return _Reads(nodes, every_pod, budgets, cluster, ApiVolumes(kube), time.time())


def _plan_group(
    kube: Kube,
    clients: aws.AwsClients,
    group: str,
    reads: _Reads,
    *,
    options: DrainOptions,
    timeout: float,
    left: _Left,
) -> GroupPlan:
    """The group's nodes planned while there is time; a node the model fails on is
    said (a fault of ours must not fail the check), not passed over."""
    if left.out():
        return GroupPlan(group, not_planned=left.out())
    try:
        members = group_nodes(kube, clients, group)
    except (AwsError, KubeError) as e:
        return GroupPlan(group, not_planned=f"not planned: {e}")
    if members is None:
        return GroupPlan(group, not_planned="not planned: no Auto Scaling group of that name")
    plans: list[NodePlan] = []
    for node in members.nodes:
        if left.out(len(plans), len(members.nodes)):
            return GroupPlan(
                group, plans, members.without_node, left.out(len(plans), len(members.nodes))
            )
        try:
            plans.append(_plan_node(node, reads, options, timeout))
        except Exception as e:  # a fault of the model: said, the check goes on
            log.exception("self-check: the plan of node %s failed", node)
            why = f"not planned: the plan of node {node} failed ({type(e).__name__}: {e})"
            return GroupPlan(group, plans, members.without_node, why)
    return GroupPlan(group, plans, members.without_node)


def _plan_node(node: str, reads: _Reads, options: DrainOptions, timeout: float) -> NodePlan:
    """The node's drain alone, as a scale-in drains it."""
    room = Placements(reads.nodes, reads.every_pod, planned={node}, volumes=reads.volumes)
    room.leaving([node])
    cluster = Cluster(reads.budgets, reads.cluster.startups, room, reads.cluster.stops)
    on_node = [p for p in reads.every_pod if (p.get("spec") or {}).get("nodeName") == node]
    return plan_node(node, on_node, cluster, options, EVICTS_ALL, timeout=timeout, now=reads.listed)


def _node_doc(plan: NodePlan) -> dict[str, object]:
    doc = plan.doc()
    doc.pop("stops", None)
    return doc
