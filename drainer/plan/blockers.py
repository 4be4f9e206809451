"""What would stop a node's drain, each with the pod, the reason, the budget
involved and a fix computed for that workload."""

from __future__ import annotations

import math
from dataclasses import dataclass

from drainer.engine import filters, pods
from drainer.engine.pods import Pod
from drainer.plan import budgets as b
from drainer.plan.forecast import Forecast, Going


@dataclass(frozen=True)
class Blocker:
    pod: str
    reason: str
    budget: str | None
    fix: str
    deadlock: bool = False

    def doc(self) -> dict[str, str | None]:
        return {"pod": self.pod, "reason": self.reason, "budget": self.budget, "fix": self.fix}


_REFUSAL_FIX = {
    filters.DAEMONSET_REFUSED: "--ignore-daemonsets (its DaemonSet keeps it on the node)",
    filters.EMPTYDIR_REFUSED: "--delete-emptydir-data (its emptyDir data is deleted with it)",
    filters.UNREPLICATED_REFUSED: "--force (the pod is lost: nothing recreates it), or run "
    "it under a Deployment",
}


def refused(pod_list: list[Pod], overrides: filters.Overrides) -> list[Blocker]:
    """The pods the drain refuses to start on without its override flags (kubectl's)."""
    return [
        Blocker(name, message, None, _REFUSAL_FIX[message])
        for message, names in filters.refusals(pod_list, overrides).items()
        for name in names
    ]


def left(
    going: list[Going],
    budget_list: list[b.Budget],
    run: Forecast,
    timeout: float,
    *,
    honor_do_not_disrupt: bool,
) -> list[Blocker]:
    """The pods the forecast leaves on the node, or that go after the timeout. A pod
    the run held for its do-not-disrupt annotation (honoured) is named for it, and
    for its budget too when that deadlocks: what holds it once the annotation goes."""
    by_name = {b.name(x): x for x in budget_list}
    found = []
    for one in going:
        name = pods.name(one.pod)
        annotation = pods.opted_out(one.pod) if honor_do_not_disrupt else ""
        if len(one.budgets) > 1:
            found.append(_several(name, one.budgets))
        elif annotation and name in run.left:
            found.append(_annotated(name, one.pod, annotation))
            budget = _held(name, one, by_name)
            found += [budget] if budget.deadlock else []
        elif name in run.left:
            found.append(_held(name, one, by_name))
        elif run.gone.get(name, 0.0) > timeout:
            found.append(_late(name, one.pod, run, timeout))
    return found


def _annotated(name: str, pod: Pod, annotation: str) -> Blocker:
    why = f"annotated {annotation}=true: held until the timeout, then left on the node"
    fix = "remove the annotation once it may go (kubectl annotate pod -n "
    fix += f"{pod['metadata'].get('namespace')} {pod['metadata']['name']} "
    return Blocker(name, why, None, fix + f"{annotation}-)")


def _several(name: str, under: list[str]) -> Blocker:
    why = f"selected by {len(under)} PodDisruptionBudgets ({', '.join(under)}): the eviction "
    why += "API refuses a pod under more than one"
    fix = f"make the budgets select disjoint pods, or delete all but one of {', '.join(under)}"
    return Blocker(name, why, under[0], fix, deadlock=True)


def _held(name: str, one: Going, by_name: dict[str, b.Budget]) -> Blocker:
    budget = by_name.get(one.budgets[0]) if one.budgets else None
    if budget is None:
        return Blocker(name, "never sent before the timeout", None, "a longer --timeout")
    failed = b.sync_failed(budget)
    if failed is not None:
        return _unsized(name, b.name(budget), failed)
    status = budget.get("status") or {}
    allowed = int(status.get("disruptionsAllowed") or 0)
    healthy, expected = status.get("currentHealthy", 0), status.get("expectedPods", 0)
    if b.deadlocked(budget):
        why = f"PodDisruptionBudget {b.name(budget)} allows {allowed} disruptions with all "
        why += f"{expected} of its pods healthy: nothing the drain does can raise it (deadlock)"
        return Blocker(name, why, b.name(budget), b.fix(budget), deadlock=True)
    why = f"PodDisruptionBudget {b.name(budget)} allows {allowed} disruptions: {healthy} of "
    why += f"{expected} pods healthy"
    fix = "make the workload's unhealthy pods Ready (or delete them) before the refresh"
    if int(status.get("desiredHealthy") or 0) < int(expected or 0):
        return Blocker(name, f"{why}; it waits for the others to become Ready", b.name(budget), fix)
    # It desires every pod healthy (maxUnavailable 0, minAvailable the replicas).
    why += f", and it desires all {expected}: it allows none even once the others are Ready"
    return Blocker(name, why, b.name(budget), f"{b.fix(budget)}, and {fix}")


def _unsized(name: str, budget: str, message: str) -> Blocker:
    """A budget the disruption controller could not compute (SyncFailed): it allows no
    disruption until it can, whatever its value or the pods' health."""
    why = f"PodDisruptionBudget {budget} allows no disruption: the disruption controller "
    why += f"could not compute it (SyncFailed: {message}), whatever its value; nothing the "
    why += "drain does can raise it (deadlock)"
    fix = "fix what the message names: give the pods a controller whose scale the "
    fix += "disruption controller can read (a Deployment, ReplicaSet, StatefulSet, or a "
    fix += "custom resource with a scale subresource), or give PodDisruptionBudget "
    fix += f"{budget} an integer minAvailable, which counts the pods without a scale"
    return Blocker(name, why, budget, fix, deadlock=True)


def _late(name: str, pod: Pod, run: Forecast, timeout: float) -> Blocker:
    end = run.gone[name]
    if name not in run.evicted:
        why = f"already terminating, its deletion deadline ~{end:.0f} s away: after the "
        why += f"timeout ({timeout:g} s)"
        return Blocker(name, why, None, f"--timeout {math.ceil(end) + 1}s")
    start = run.evicted[name]
    grace = pods.grace_period(pod)
    why = f"evicted at ~{start:.0f} s, its grace period ({grace} s) ends at ~{end:.0f} s, "
    why += f"after the timeout ({timeout:g} s)"
    budget = run.paced_by.get(name)
    fix = f"--timeout {math.ceil(end) + 1}s"
    if start >= timeout:  # no grace period would do: it is sent too late
        why = f"not evicted before the timeout ({timeout:g} s): {run.waited(name, pod)}"
    elif timeout - start >= 1:
        fix += f", or a terminationGracePeriodSeconds under {math.floor(timeout - start)} s"
    return Blocker(name, why, budget, fix)
