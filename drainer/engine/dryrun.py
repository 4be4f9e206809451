"""A drain that changes nothing: every eviction is sent with dryRun=All, so the
server checks permissions, budgets and namespaces as it would for real, and the
report says what a drain would do now."""

from __future__ import annotations

import logging
from collections.abc import Callable

from drainer.engine import filters
from drainer.engine.filters import Action, Decision
from drainer.engine.options import DrainOptions
from drainer.engine.pods import Pod, opted_out
from drainer.engine.report import DrainReport, Kind, several_budgets_message
from drainer.engine.watchers import BudgetTracker
from drainer.errors import (
    AdmissionDenied,
    EvictionBlocked,
    KubeConflict,
    KubeNotFound,
    MultipleBudgets,
    NamespaceTerminating,
)
from drainer.k8s.kube import Kube
from drainer.outcome import Outcome

log = logging.getLogger(__name__)

Emit = Callable[..., None]


def dry_run(
    kube: Kube, pod_list: list[Pod], options: DrainOptions, report: DrainReport, emit: Emit
) -> None:
    """Ask the server what a drain of these pods would meet; fill in `report`."""
    report.outcome = Outcome.DRY_RUN
    decisions = [filters.decide(p, options.filters) for p in pod_list]
    for message, names in filters.warnings_by_message(decisions).items():
        report.warnings.setdefault(message, []).extend(names)
        log.warning("%s: %s", message, ", ".join(names), extra={"in_report": True})
    budgets: list[BudgetTracker] = []
    for decision in decisions:
        if decision.action == Action.SKIP:
            report.skipped[decision.name] = decision.reason
            emit(Kind.SKIPPED, pod=decision.name, reason=decision.reason)
        elif decision.action == Action.EVICT and _held(decision, options):
            annotation = opted_out(decision.pod)
            report.do_not_disrupt[decision.name] = annotation
            why = f"annotated {annotation}=true: would not be evicted while there is time"
            emit(Kind.HELD, pod=decision.name, reason=why)
        elif decision.action == Action.EVICT:
            _try(kube, decision, options=options, report=report, emit=emit, budgets=budgets)


def _held(decision: Decision, options: DrainOptions) -> bool:
    return options.honor_do_not_disrupt and bool(opted_out(decision.pod))


def _try(
    kube: Kube,
    decision: Decision,
    *,
    options: DrainOptions,
    report: DrainReport,
    emit: Emit,
    budgets: list[BudgetTracker],
) -> None:
    name = decision.name
    try:
        kube.evict(decision.pod, grace_period_seconds=options.grace_period_seconds, dry_run=True)
    except EvictionBlocked as e:  # the server's answer now: held, not "would evict"
        budget = f"{decision.pod['metadata'].get('namespace', '')}/{e.budget}"
        report.blocked_by.setdefault(budget, []).append(name)
        why = f"PodDisruptionBudget {budget} allows no disruption now; a drain would wait for it"
        emit(Kind.HELD, pod=name, budget=budget, reason=why)
        return
    except MultipleBudgets:
        names = _budgets(kube, budgets).matching(decision.pod)
        report.multiple_budgets[name] = names
        message = several_budgets_message(name, names)
        report.errors.append(message)
        emit(Kind.SEVERAL_BUDGETS, pod=name, budget=", ".join(names), reason=message)
        return
    except NamespaceTerminating:
        report.going_with_namespace.append(name)
        emit(Kind.WITH_NAMESPACE, pod=name, reason="its namespace is being deleted")
        return
    except AdmissionDenied as e:
        report.denied[name] = e.refusal
        emit(Kind.DENIED, pod=name, reason=e.refusal)
        return
    except (KubeNotFound, KubeConflict):
        return
    else:
        emit(Kind.WOULD_EVICT, pod=name)
    report.would_evict.append(name)


def _budgets(kube: Kube, cache: list[BudgetTracker]) -> BudgetTracker:
    """Every budget, listed once (to name those that select a pod)."""
    if not cache:
        tracker = BudgetTracker(kube)
        tracker.start(*kube.list_budgets())
        tracker.stop()
        cache.append(tracker)
    return cache[0]
