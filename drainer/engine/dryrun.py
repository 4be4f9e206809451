"""A drain that changes nothing. On the server (the Lambda's DRY_RUN, the CLI's
--dry-run=server) every eviction is sent with dryRun=All, so the server checks
permissions, admission, budgets and namespaces as it would for real; on the client
(--dry-run=client) nothing is sent but reads, and the budgets listed are the judge.
Either way the report says what a drain would do now, and which pods would wait
their turn behind others through the same budget (turns.py): the server's dry-run
answers never lower a budget's allowance, so they alone would say all go at once."""

from __future__ import annotations

import logging
from collections.abc import Callable

from drainer.engine import filters
from drainer.engine.filters import Action, Decision
from drainer.engine.options import DrainOptions
from drainer.engine.pods import Pod, grace_period, opted_out
from drainer.engine.report import DrainReport, Kind, several_budgets_message
from drainer.engine.turns import turns
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
    accepted: list[Decision] = []
    for decision in decisions:
        if decision.action == Action.SKIP:
            report.skipped[decision.name] = decision.reason
            emit(Kind.SKIPPED, pod=decision.name, reason=decision.reason)
        elif decision.action == Action.EVICT and _held(decision, options):
            annotation = opted_out(decision.pod)
            report.do_not_disrupt[decision.name] = annotation
            why = f"annotated {annotation}=true: would not be evicted while there is time"
            emit(Kind.HELD, pod=decision.name, reason=why)
        elif decision.action == Action.EVICT and _try(
            kube, decision, options=options, report=report, emit=emit, budgets=budgets
        ):
            accepted.append(decision)
    if accepted:
        _would_evict(accepted, _budgets(kube, budgets), options, report, emit)


def _would_evict(
    accepted: list[Decision],
    budgets: BudgetTracker,
    options: DrainOptions,
    report: DrainReport,
    emit: Emit,
) -> None:
    """The pods a drain would evict: at once, or after their turn through a budget."""
    queues: dict[str, list[tuple[str, int]]] = {}
    allowed: dict[str, int] = {}
    for decision in accepted:
        matching = budgets.matching(decision.pod)
        if len(matching) == 1:
            grace = options.grace_period_seconds
            grace = grace_period(decision.pod) if grace is None else grace
            queues.setdefault(matching[0], []).append((decision.name, grace))
            allowed[matching[0]] = budgets.allowed(*matching[0].split("/", 1)) or 0
    waiting = turns(queues, allowed)
    for decision in accepted:
        turn = waiting.get(decision.name)
        if turn is None:
            emit(Kind.WOULD_EVICT, pod=decision.name)
        else:
            report.would_wait[decision.name] = turn.why
            emit(Kind.WOULD_EVICT, pod=decision.name, budget=turn.budget, reason=turn.why)
        report.would_evict.append(decision.name)


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
) -> bool:
    """Whether the eviction would be accepted now (the server's answer, or on the
    client the budgets'); a pod it would not be is reported, with why."""
    name = decision.name
    try:
        if options.dry_run_server:
            kube.evict(
                decision.pod, grace_period_seconds=options.grace_period_seconds, dry_run=True
            )
        else:
            _judge_on_client(decision.pod, _budgets(kube, budgets))
    except EvictionBlocked as e:  # the server's answer now: held, not "would evict"
        budget = f"{decision.pod['metadata'].get('namespace', '')}/{e.budget}"
        report.blocked_by.setdefault(budget, []).append(name)
        why = f"PodDisruptionBudget {budget} allows no disruption now; a drain would wait for it"
        emit(Kind.HELD, pod=name, budget=budget, reason=why)
        return False
    except MultipleBudgets:
        names = _budgets(kube, budgets).matching(decision.pod)
        report.multiple_budgets[name] = names
        message = several_budgets_message(name, names)
        report.errors.append(message)
        emit(Kind.SEVERAL_BUDGETS, pod=name, budget=", ".join(names), reason=message)
        return False
    except NamespaceTerminating:
        report.going_with_namespace.append(name)
        emit(Kind.WITH_NAMESPACE, pod=name, reason="its namespace is being deleted")
        return False
    except AdmissionDenied as e:
        report.denied[name] = e.refusal
        emit(Kind.DENIED, pod=name, reason=e.refusal)
        return False
    except (KubeNotFound, KubeConflict):
        return False
    return True


def _judge_on_client(pod: Pod, budgets: BudgetTracker) -> None:
    """The eviction API's answer on budgets, from the budgets listed: more than one
    selecting the pod is an error; one allowing no disruption now holds it."""
    matching = budgets.matching(pod)
    if len(matching) > 1:
        raise MultipleBudgets("more than one PodDisruptionBudget selects the pod", status=500)
    if matching and not budgets.allowed(*matching[0].split("/", 1)):
        raise EvictionBlocked("the budget allows no disruption now", matching[0].split("/", 1)[1])


def _budgets(kube: Kube, cache: list[BudgetTracker]) -> BudgetTracker:
    """Every budget, listed once (to name those that select a pod)."""
    if not cache:
        tracker = BudgetTracker(kube)
        tracker.start(*kube.list_budgets())
        tracker.stop()
        cache.append(tracker)
    return cache[0]
