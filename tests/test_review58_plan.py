"""Review 58 of `plan`: where the forecast and its blockers part from the drain the
engine would run, each on hand-built pods and budgets (no API, no clock)."""

from __future__ import annotations

from typing import Any

from test_plan import budget, plan, pod

from drainer.engine.filters import FilterOptions
from drainer.engine.options import DrainOptions
from drainer.engine.schedule import Schedule

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


class StoredBudgets:
    """The budget watch of the engine, as the API server moves it: a version that moves
    only when the budget object is written. The eviction API writes a budget when it
    charges it (checkAndDecrement); a pod it lets go without using the budget (not
    Ready, under a healthy budget, eviction.go) is deleted with no write, and the
    disruption controller writes nothing while the budget's figures stay the same (a
    Deployment's expected pods come from its scale, not from its pods)."""

    def __init__(self, **allowed: int) -> None:
        self._allowed = {name.replace("__", "/"): n for name, n in allowed.items()}

    def allowed(self, namespace: str, name: str) -> int | None:
        return self._allowed.get(f"{namespace}/{name}")

    def seen(self, namespace: str, name: str) -> int:
        return 1


def test_unready_pod_spared_by_its_budget__engine_holds_the_ready_pod_plan_sends_at_once() -> None:
    """web: 5 replicas, maxUnavailable 2 (desiredHealthy 3); one of them, web-0, on the
    node, crash-looping (not Ready): 4 healthy, 1 disruption allowed. The node also
    runs web-1, Ready. The eviction API lets web-0 go without using the budget (not
    Ready, the budget healthy), so the budget still allows 1 and web-1's eviction would
    be accepted at once: the plan forecasts both gone in their grace period (10 s).
    The engine counts web-0's acceptance against the budget's room until the budget
    changes, and it does not change (nothing was charged or written) until web-0's
    replacement is Ready: never, for a crash-looping workload. web-1 is never sent;
    the drain waits for its timeout, which the plan said would take 10 s."""
    sick, healthy = pod("web-0", ready_after=None), pod("web-1", ready_after=5)
    web = budget("web", "web", expected=5, allowed=1, max_unavailable=2)
    web["status"]["currentHealthy"], web["status"]["desiredHealthy"] = 4, 3

    planned = plan([sick, healthy], [web])
    assert (planned.eta_seconds, planned.blockers) == (10, []), "the plan: both go at once"

    # The engine's schedule, in its order (web-0 listed first), against that budget.
    schedule = Schedule(StoredBudgets(default__web=1), deadline=3600.0, reserve=120.0)
    first = schedule.add(sick, budgets=["default/web"], terminating=False, now=0.0)
    second = schedule.add(healthy, budgets=["default/web"], terminating=False, now=0.0)
    assert schedule.pick(now=0.0, slots=32) == [first]
    schedule.accepted(first, now=0.1)  # spared: the budget is neither charged nor written

    assert schedule.pick(now=1.0, slots=32) == [second], (
        "the budget still allows 1 disruption: web-1's eviction would be accepted, "
        f"but the drain holds it: {schedule.left()}"
    )


def annotated(p: dict[str, Any]) -> dict[str, Any]:
    p["metadata"].setdefault("annotations", {})[DO_NOT_DISRUPT] = "true"
    return p


def test_ignore_do_not_disrupt__a_deadlocked_budget_is_the_blocker_not_the_annotation() -> None:
    """`plan --ignore-do-not-disrupt`: the drain evicts a pod annotated do-not-disrupt
    like any other. web-0 is annotated, and its budget (minAvailable 1, one replica)
    allows no disruption and never will: a deadlock. The plan names the annotation as
    what holds it, tells the operator to remove it (which the flag already makes moot),
    and says nothing of the budget: `deadlocked` is false and the verdict is not
    "deadlocked"."""
    solo = budget("web", "web", expected=1, allowed=0, min_available=1)
    options = DrainOptions(filters=FilterOptions(), honor_do_not_disrupt=False)

    result = plan([annotated(pod("web-0"))], [solo], options=options)

    [blocker] = result.blockers
    assert "annotated" not in blocker.reason, blocker.reason
    assert blocker.budget == "default/web" and "deadlock" in blocker.reason, blocker.reason
    assert result.deadlocked
