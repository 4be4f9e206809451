"""A deadlock that only a refresh's own cordons create: a budget that allows a
disruption today, but whose evicted pods' replacements fit on no node left while
the batch is cordoned (the nodes left hold no more of its replicas: required
anti-affinity per hostname, or pods that fit only on the batch's own nodes). Each
such eviction takes one disruption for good: the replacement stays Pending until new
nodes come, and they come only once the batch is drained, which waits for the
budget. So a budget deadlocks a batch when more of its pods there fit nowhere than
it allows disruptions (the pods whose replacement does land go first, and the budget
recovers as each is Ready). The fix is computed for that budget: the largest --batch
at which it does not, or the budget value that allows as many disruptions as its
pods that fit nowhere."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from drainer.engine import pods
from drainer.engine.pods import Pod
from drainer.plan import budgets as b
from drainer.plan.blockers import Blocker
from drainer.plan.capacity import Capacity


class Placements(Capacity):
    """The plan's capacity, recording the pods whose replacement fits on no node left."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.homeless: list[Pod] = []

    def place(self, pod: Pod) -> str | None:
        where = super().place(pod)
        if where is None:
            self.homeless.append(pod)
        return where


@dataclass(frozen=True)
class Stuck:
    """A budget that the batch's cordons deadlock."""

    budget: b.Budget
    allowed: int
    pods: list[Pod] = field(default_factory=list)
    """Its pods on the batch whose replacement fits on no node left."""

    @property
    def name(self) -> str:
        return b.name(self.budget)


def stuck(homeless: list[Pod], budget_list: list[b.Budget]) -> list[Stuck]:
    """The budgets that allow a disruption today but fewer than their pods on the batch
    that fit nowhere (a pod under several budgets is a deadlock of its own; a Pending,
    Succeeded or Failed pod, deleted without its budgets read, takes none)."""
    by_name = {b.name(x): x for x in budget_list}
    under: dict[str, list[Pod]] = {}
    for pod in homeless:
        if b.ignores(pod):  # deleted past its budgets: it takes none of their disruptions
            continue
        matched = b.matching(pod, budget_list)
        if len(matched) == 1:
            under.setdefault(matched[0], []).append(pod)
    found = []
    for name, held in sorted(under.items()):
        allowed = int((by_name[name].get("status") or {}).get("disruptionsAllowed") or 0)
        if 0 < allowed < len(held):
            found.append(Stuck(by_name[name], allowed, held))
    return found


def budget_fix(one: Stuck) -> str:
    """The budget value that allows as many disruptions as its pods that fit nowhere."""
    spec = one.budget.get("spec") or {}
    status = one.budget.get("status") or {}
    healthy = int(status.get("currentHealthy") or 0)
    expected = int(status.get("expectedPods") or 0)
    need = len(one.pods)
    if "maxUnavailable" in spec:
        value = expected - healthy + need
        return f"set maxUnavailable to {value} on PodDisruptionBudget {one.name} (it is " + (
            f"{spec['maxUnavailable']})"
        )
    value = max(0, healthy - need)
    return f"set minAvailable to {value} on PodDisruptionBudget {one.name} (it is " + (
        f"{spec.get('minAvailable')})"
    )


def blockers(one: Stuck, batch: list[str], number: int, smaller: int | None) -> list[Blocker]:
    """One blocker per pod of the budget that fits nowhere, each naming the budget, the
    batch and the others; its fix: `smaller` (the largest --batch that clears the
    budget, None: none does), else the budget value."""
    names = [pods.name(p) for p in one.pods]
    why = (
        f"PodDisruptionBudget {one.name} allows {one.allowed} disruption(s) today, but the "
        f"replacements of {len(names)} of its pods ({', '.join(names)}) fit on no node left "
        f"while batch {number} ({', '.join(batch)}) is cordoned: after {one.allowed} "
        "eviction(s) it allows none until new nodes come, and they come only once the "
        "batch is drained (a deadlock the refresh's own cordons create)"
    )
    fix = budget_fix(one)
    if smaller is not None:
        fix = f"--batch {smaller}, or {fix}"
    return [Blocker(name, why, one.name, fix, deadlock=True) for name in names]


def node_of(pod: Pod) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")
