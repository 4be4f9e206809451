"""PodDisruptionBudgets on the forecast clock: the allowance the API server would
give each eviction (disruptionsAllowed now, one less per healthy pod evicted, one
more per replacement that becomes Ready), unhealthyPodEvictionPolicy, and the
fix that unblocks a budget that allows none."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from drainer.engine import pods
from drainer.engine.pods import Pod
from drainer.engine.watchers import selects

Budget = dict[str, Any]


def name(budget: Budget) -> str:
    return f"{budget['metadata'].get('namespace', '')}/{budget['metadata']['name']}"


def matching(pod: Pod, budgets: list[Budget]) -> list[str]:
    """The budgets whose selector selects the pod, as the engine's budget watch says."""
    labels = pod["metadata"].get("labels") or {}
    namespace = pod["metadata"].get("namespace", "")
    return sorted(
        name(b)
        for b in budgets
        if b["metadata"].get("namespace", "") == namespace
        and selects((b.get("spec") or {}).get("selector"), labels)
    )


@dataclass
class Allowance:
    """One budget's status, as it would move while the drain runs."""

    allowed: int
    healthy: int
    desired: int
    always_allow_unhealthy: bool
    version: int = 0

    @classmethod
    def of(cls, budget: Budget) -> Allowance:
        status = budget.get("status") or {}
        policy = (budget.get("spec") or {}).get("unhealthyPodEvictionPolicy")
        return cls(
            allowed=int(status.get("disruptionsAllowed") or 0),
            healthy=int(status.get("currentHealthy") or 0),
            desired=int(status.get("desiredHealthy") or 0),
            always_allow_unhealthy=policy == "AlwaysAllow",
        )

    def spares(self, pod: Pod) -> bool:
        """Whether the eviction API lets this pod go without using the budget (as
        eviction.go decides it): not Ready, and the policy AlwaysAllow or (the
        default, IfHealthyBudget) the budget healthy while it desires some pods. A
        budget desiring none (maxUnavailable 100%, minAvailable 0) spares nothing."""
        if pods.is_ready(pod):
            return False
        healthy = self.desired > 0 and self.healthy >= self.desired
        return self.always_allow_unhealthy or healthy

    def admits(self, pod: Pod) -> bool:
        """Whether the eviction API would accept this pod's eviction now: spared, or
        an allowed disruption left."""
        return self.spares(pod) or self.allowed > 0

    def evicted(self, pod: Pod) -> None:
        if not self.spares(pod):
            self.allowed -= 1
        if pods.is_ready(pod):
            self.healthy -= 1
        self.version += 1

    def replaced(self) -> None:
        self.healthy += 1
        self.allowed = max(0, self.healthy - self.desired)
        self.version += 1


@dataclass
class ForecastBudgets:
    """The engine's BudgetView (drainer/engine/schedule.py) on the forecast clock."""

    by_name: dict[str, Allowance] = field(default_factory=dict)

    @classmethod
    def of(cls, budgets: list[Budget]) -> ForecastBudgets:
        return cls({name(b): Allowance.of(b) for b in budgets})

    def allowed(self, namespace: str, name: str) -> int | None:
        found = self.by_name.get(f"{namespace}/{name}")
        return None if found is None else found.allowed

    def seen(self, namespace: str, name: str) -> int:
        found = self.by_name.get(f"{namespace}/{name}")
        return 0 if found is None else found.version


IGNORED_PHASES = ("Pending", "Succeeded", "Failed")


def ignores(pod: Pod) -> bool:
    """Whether the eviction API deletes the pod without reading its budgets (eviction.go's
    canIgnorePDB): its phase Pending, Succeeded or Failed. No budget holds it, and the
    number of budgets selecting it does not matter."""
    return (pod.get("status") or {}).get("phase") in IGNORED_PHASES


def sync_failed(budget: Budget) -> str | None:
    """The message of the budget's DisruptionAllowed=False condition when its reason is
    SyncFailed (the disruption controller could not compute it: pods with no controller,
    one with no scale it can read; it allows nothing until it can); None otherwise."""
    for condition in (budget.get("status") or {}).get("conditions") or []:
        kind = (condition.get("type"), condition.get("status"), condition.get("reason"))
        if kind == ("DisruptionAllowed", "False", "SyncFailed"):
            return str(condition.get("message") or "no message")
    return None


def deadlocked(budget: Budget) -> bool:
    """The budget allows no disruption, and nothing a drain does can raise it: every
    pod it expects is healthy already, so no replacement will come to free one."""
    status = budget.get("status") or {}
    allowed = int(status.get("disruptionsAllowed") or 0)
    healthy = int(status.get("currentHealthy") or 0)
    expected = int(status.get("expectedPods") or 0)
    return allowed <= 0 and healthy >= expected


def fix(budget: Budget) -> str:
    """What would let one pod through: the budget's value, or the replica count."""
    spec = budget.get("spec") or {}
    status = budget.get("status") or {}
    expected = int(status.get("expectedPods") or 0)
    desired = int(status.get("desiredHealthy") or 0)
    where = name(budget)
    if "maxUnavailable" in spec:
        value = spec["maxUnavailable"]
        if isinstance(value, str) and value.endswith("%"):
            # The controller rounds maxUnavailable up: the largest percentage that lets
            # exactly one pod through is floor(100/n) (33% of 3; 34% lets 2 go).
            most = 100 // max(expected, 1)
            if most == 0:  # over 100 pods: any percentage lets more than one through
                return f"set maxUnavailable to 1 on PodDisruptionBudget {where} (it is {value})"
            return f"set maxUnavailable to {most}% (or 1) on PodDisruptionBudget {where}"
        return f"set maxUnavailable to 1 on PodDisruptionBudget {where} (it is {value})"
    value = spec.get("minAvailable")
    if isinstance(value, str) and value.endswith("%"):
        return (
            f"lower minAvailable on PodDisruptionBudget {where} below {value} (with "
            f"{expected} pods, to {int(100 * (expected - 1) / max(expected, 1))}%), or "
            "use maxUnavailable: 1"
        )
    return (
        f"scale the workload to {desired + 1} replicas (it has {expected}), or lower "
        f"minAvailable on PodDisruptionBudget {where} to {max(0, expected - 1)}"
    )
