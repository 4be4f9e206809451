"""How every trigger's run ends: a hand-over to the next invocation, the lifecycle
action completed with the outcome table's result, the end line of the log
contract, the CloudWatch metrics and, for an end worth one, the notice."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from drainer import aws, logs
from drainer.engine.report import EVENT_LEVELS, Kind
from drainer.errors import AwsError
from drainer.lifecycle import notices
from drainer.lifecycle.events_fields import Skip
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER, LifecycleEvent
from drainer.lifecycle.handover import with_handover
from drainer.lifecycle.job import Run
from drainer.lifecycle.outcomes import Result
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.window import Invocation

log = logging.getLogger(__name__)

METRICS_NAMESPACE = "EksNodeDrainer"

# Powertools keeps one metric set per process: two invocations in one process (tests
# run handlers in threads) take turns to fill and flush it.
_METRICS_LOCK = threading.Lock()


def skipped(skip: Skip) -> dict[str, Any]:
    """An event not acted on. A malformed one is an error in the log, but returned,
    not raised: Lambda would only run the same bad event again."""
    if skip.malformed:
        log.error("malformed event, nothing done (not retried): %s", skip.reason)
        return {"result": "skipped", "reason": skip.reason, "malformed": True}
    log.info("event skipped: %s", skip.reason)
    return {"result": "skipped", "reason": skip.reason}


def permanent(error: AwsError) -> Run:
    """A drain that an AWS error no retry can fix stopped (aws.is_permanent): a failed
    run naming it, which the handler ends like any other (its error line, end line,
    metrics), instead of raising for Lambda to run the same event into the same
    error."""
    return Run(Result.FAILED, f"{error} (permanent: the event is not retried)")


def complete(clients: aws.AwsClients, event: LifecycleEvent, result: str) -> bool:
    """Complete the lifecycle action; False when it is gone or AWS refuses for good
    (logged), raised for Lambda to retry when AWS fails for now."""
    try:
        completed = aws.complete_lifecycle_action(clients.autoscaling, event, result)
    except AwsError as e:
        if not aws.is_permanent(e):
            raise
        log.error("could not complete the lifecycle action with %s: %s", result, e)
        return False
    if not completed:
        log.info("the lifecycle action was already completed or timed out; nothing to do")
    return completed


def finish(
    run: Run,
    summary: dict[str, Any],
    subject: notices.Subject,
    settings: Settings,
    clients: aws.AwsClients,
) -> dict[str, Any]:
    """Every drain's end: the end line, the metrics and, for an end worth one, the
    notice."""
    log_end_line(summary)
    _metrics(run, summary, settings)
    if run.result in _NOTIFIED:
        notify(settings, clients, notices.end_notice(subject, summary))
    return summary


def notify(settings: Settings, clients: aws.AwsClients, notice: notices.Notice) -> None:
    """Publish a notice to NOTIFICATION_TOPIC_ARN; nothing when there is none."""
    if settings.notification_topic_arn:
        notices.publish(clients.sns, settings.notification_topic_arn, notice)


# The ends of a drain worth a notice (a hand-over is not an end; another group's
# event is none of ours; a chain of hand-overs that stops at a node released since
# ends the drain its first invocation told of).
_NOTIFIED = frozenset(
    {
        Result.DRAINED,
        Result.NO_NODE,
        Result.DRY_RUN,
        Result.TIMED_OUT,
        Result.FAILED,
        Result.RELEASED,
    }
)


def hand_over(
    run: Run, raw_event: Mapping[str, Any], clients: aws.AwsClients, invocation: Invocation | None
) -> Run:
    """Re-invoke the function with the event and the drain's state. A hand-over Lambda
    refuses for good (or with no function to hand over to) is a failure, like any
    other that stops the drain; one that fails for now (throttled, a 5xx, after
    botocore's retries) is raised (invoke_next), for Lambda to run this event again
    while the hook's heartbeat timeout keeps the instance."""
    if run.handover is None:
        return _not_handed_over(run, "no function to hand over to")
    why = invoke_next(clients.lambda_, invocation, with_handover(raw_event, run.handover))
    if why:
        return _not_handed_over(run, why)
    log.info("handed over to a new invocation (hand-over %d)", run.handover.handovers)
    return run


def invoke_next(
    lambda_client: aws.Client, invocation: Invocation | None, payload: Mapping[str, Any]
) -> str:
    """Queue the next invocation of this function with `payload`, a drain handed over
    (the terminate hook's, an EC2 event's): "" once Lambda has it; why not when
    there is no function to invoke or Lambda refuses for good. A refusal for now is
    raised, as every AWS call's is, for Lambda to run this event again."""
    if invocation is None or not invocation.function_arn:
        return "no function to hand over to"
    try:
        aws.invoke_self_async(lambda_client, invocation.function_arn, payload)
    except AwsError as e:
        if not aws.is_permanent(e):
            log.error("the hand-over failed for now; the invocation will be retried: %s", e)
            raise
        return str(e)
    return ""


class Carried(Protocol):
    """The drain before this invocation, as a hand-over carries it: a terminate
    hook's (drainer/lifecycle/handover.py, with its heartbeats) or an EC2 event's
    (drainer/lifecycle/ec2_handover.py)."""

    @property
    def handovers(self) -> int: ...
    @property
    def evicted(self) -> int: ...
    @property
    def forced(self) -> int: ...
    @property
    def started_at(self) -> float: ...


def across_invocations(summary: Mapping[str, Any], run: Run, before: Carried) -> dict[str, Any]:
    """The end line with the drain as a whole, across invocations (a terminate hook's
    hand-overs, an EC2 event's): what the invocations before carried, this
    one's added (`heartbeats`, `evicted` and `seconds` stay this invocation's). A
    step delivered again and left to the delivery running it (REDELIVERED) ran no part
    of the drain: its line carries no totals, which that delivery's line tells."""
    if run.result == Result.REDELIVERED:
        return dict(summary)
    report = run.report
    totals: dict[str, Any] = {"handovers_so_far": before.handovers}
    heartbeats = getattr(before, "heartbeats", None)  # an EC2 event's drain beats none
    if heartbeats is not None:
        totals["heartbeats_total"] = heartbeats + run.heartbeats
    totals["evicted_total"] = before.evicted + (report.evicted if report else 0)
    totals["forced_total"] = before.forced + (report.forced if report else 0)
    totals["drain_seconds_total"] = round(time.time() - before.started_at, 3)
    return {**summary, **totals}


def _not_handed_over(run: Run, why: str) -> Run:
    return replace(
        run, result=Result.FAILED, message=f"could not hand over to a new invocation: {why}"
    )


def log_end_line(summary: Mapping[str, Any]) -> None:
    """The end line of the log contract: the human "drain finished: k=v, ..." text and
    the same keys as top-level JSON fields (drain_finished in drainer/engine/report.py).
    `message` is the one key renamed (to `reason`, as in drain_stopped): the logging
    module keeps `message` for the line's own text."""
    text = "drain finished: " + ", ".join(f"{k}={v}" for k, v in summary.items())
    fields = {"reason" if k == "message" else k: v for k, v in summary.items()}
    logs.drain_event(
        log, text, {"event": str(Kind.FINISHED), **fields}, EVENT_LEVELS[Kind.FINISHED]
    )


def log_outcome(run: Run, result: str | None, completed: bool | None) -> None:
    if run.result == Result.FAILED:
        log.error("drain failed: %s (lifecycle result %s)", run.message, result)
    elif run.result == Result.TIMED_OUT:
        log.warning("%s", run.message)
    elif run.message:
        log.info("%s", run.message)


def summary_of(
    run: Run,
    result: str | None,
    completed: bool | None,
    seconds: float,
    *,
    trigger: str = TERMINATE_HOOK_TRIGGER,
) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "result": str(run.result),
        "lifecycle_result": result or "none",
        "completed": completed,
        "trigger": trigger,
        "cluster": run.cluster,
        "node": run.node,
        "heartbeats": run.heartbeats,
        "seconds": round(seconds, 3),
        # The end line's counts are there even when no drain ran (no node, no cluster).
        "evicted": 0,
        "pdb_refusals": 0,
        "budgets_holding": [],
        "remaining": 0,
        "left": {},
    }
    if run.action_gone:  # the heartbeat found the action ended: nothing was sent
        summary["action_gone"] = True
    if run.deadline is not None:
        summary["deadline_source"] = run.deadline.source
    if run.handover is not None:
        summary["handovers"] = run.handover.handovers
    if run.report is not None:
        summary.update(
            {k: v for k, v in run.report.summary().items() if k not in ("node", "seconds")}
        )
    if run.accuracy is not None:
        summary["forecast_seconds"] = round(run.accuracy.forecast_seconds, 1)
        if run.accuracy.actual_seconds is not None:
            summary["actual_seconds"] = round(run.accuracy.actual_seconds, 1)
    if run.targets is not None:
        summary["target_groups"] = len(run.targets.groups)
        summary["pod_target_groups"] = len(run.targets.pod_groups)
        summary["target_wait_seconds"] = round(run.targets.seconds, 1)
        summary["targets_pending"] = run.targets.pending
    if run.message:
        summary["message"] = run.message
    return summary


def _metrics(run: Run, summary: Mapping[str, Any], settings: Settings) -> None:
    """CloudWatch metrics in embedded metric format: one JSON line, no API call. A
    drain that failed before its cluster was known still counts against the
    configured one, which the stack's alarm watches."""
    failed = run.result in (Result.FAILED, Result.TIMED_OUT)
    counts = {
        "DrainFailed": 1 if failed else 0,
        "DrainSucceeded": 1 if run.result == Result.DRAINED else 0,
        "DrainTimedOut": 1 if run.result == Result.TIMED_OUT else 0,
        "Handovers": 1 if run.result == Result.HANDED_OVER else 0,
        "PodsEvicted": int(summary.get("evicted", 0)),
        "PdbRefusals": int(summary.get("pdb_refusals", 0)),
    }
    error = None if run.accuracy is None else run.accuracy.error_seconds
    timings = {} if error is None else {"ForecastErrorSeconds": round(error, 1)}
    write_metrics(run.cluster or settings.cluster_name, counts, float(summary["seconds"]), timings)


def write_metrics(
    cluster: str,
    counts: Mapping[str, int],
    seconds: float,
    timings: Mapping[str, float] | None = None,
) -> None:
    """One invocation's metrics line: `counts` as Count metrics, then
    InvocationSeconds and `timings` in seconds, under the Cluster dimension ("unknown"
    when none is known)."""
    from aws_lambda_powertools import Metrics
    from aws_lambda_powertools.metrics import MetricUnit

    with _METRICS_LOCK:
        metrics = Metrics(namespace=METRICS_NAMESPACE, service=logs.SERVICE)
        metrics.add_dimension(name="Cluster", value=cluster or "unknown")
        for name, value in counts.items():
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
        metrics.add_metric(name="InvocationSeconds", unit=MetricUnit.Seconds, value=seconds)
        for timing, took in (timings or {}).items():
            metrics.add_metric(name=timing, unit=MetricUnit.Seconds, value=took)
        metrics.flush_metrics()
