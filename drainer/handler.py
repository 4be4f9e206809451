"""The Lambda entry point: parse, build settings and clients, run the workflow, and
map its result to a lifecycle action in one table.

Nothing here runs at import time but imports: settings are read and clients built
on the first invocation of a container and reused after that.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from drainer import aws, logs
from drainer.engine.report import EVENT_LEVELS, Kind
from drainer.errors import AwsError, SettingsError
from drainer.lifecycle import hooks, notices, spot
from drainer.lifecycle.clients import KubeFactory, eks_kube
from drainer.lifecycle.events import (
    TERMINATE_HOOK_TRIGGER,
    HookSyncEvent,
    LifecycleEvent,
    SelfCheckEvent,
    Skip,
    SpotEvent,
    parse_event,
    with_handover,
)
from drainer.lifecycle.job import Run
from drainer.lifecycle.outcomes import lifecycle_result
from drainer.lifecycle.scale_in import drain_instance
from drainer.lifecycle.settings import Settings, TimeoutPolicy
from drainer.lifecycle.window import Invocation
from drainer.outcome import Outcome

log = logging.getLogger(__name__)

METRICS_NAMESPACE = "EksNodeDrainer"


class _Container:
    """What a Lambda container keeps between invocations: settings read once, clients
    built once (connections and the botocore session are reused)."""

    settings: Settings | None = None
    clients: tuple[aws.AwsClients, KubeFactory] | None = None
    lock = threading.Lock()  # one builder, even when a test runs handlers in threads
    # Powertools keeps one metric set per process: two invocations in one process
    # (tests run handlers in threads) take turns to fill and flush it.
    metrics_lock = threading.Lock()


_CONTAINER = _Container()


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings of this container, read once. A bad value raises SettingsError
    naming the variable: the invocation fails loudly rather than drain wrongly."""
    if _CONTAINER.settings is None or environ is not None:
        settings = Settings.from_env(os.environ if environ is None else environ)
        logs.configure(settings.log_level)
        log.info("settings", extra={"settings": settings.describe()})
        _CONTAINER.settings = settings
    return _CONTAINER.settings


def _aws(settings: Settings, region: str) -> tuple[aws.AwsClients, KubeFactory]:
    with _CONTAINER.lock:
        if _CONTAINER.clients is None:
            session = aws.Session(region_name=region or None)
            region = session.region_name or region
            _CONTAINER.clients = (aws.make_clients(session, region), eks_kube(session, region))
        return _CONTAINER.clients


def reset() -> None:
    """Forget cached settings and clients (tests, and the CLI between runs)."""
    _CONTAINER.settings = None
    _CONTAINER.clients = None


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    try:
        settings = load_settings()
    except SettingsError as e:
        logs.configure("INFO")
        log.error("invalid settings, nothing done: %s", e)
        raise
    logs.reset()
    parsed = parse_event(event, now=time.time())
    if isinstance(parsed, Skip):
        return _skipped(parsed)
    if isinstance(parsed, SelfCheckEvent):
        clients, kube_factory = _aws(settings, os.environ.get("AWS_REGION", ""))
        return self_check(parsed, settings, clients, kube_factory)
    if isinstance(parsed, HookSyncEvent):
        clients, _ = _aws(settings, os.environ.get("AWS_REGION", ""))
        return hooks.sync_hooks(clients.autoscaling, settings, parsed.trigger).result()
    logs.bind(**parsed.log_keys())
    clients, kube_factory = _aws(settings, os.environ.get("AWS_REGION", "") or parsed.region)
    invocation = None
    if context is not None and hasattr(context, "get_remaining_time_in_millis"):
        invocation = Invocation(
            remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000.0,
            function_arn=str(getattr(context, "invoked_function_arn", "")),
        )
    if isinstance(parsed, SpotEvent):
        return handle_spot(
            parsed,
            settings=settings,
            clients=clients,
            kube_factory=kube_factory,
            invocation=invocation,
        )
    return handle(
        parsed,
        raw_event=event,
        settings=settings,
        clients=clients,
        kube_factory=kube_factory,
        invocation=invocation,
    )


def _skipped(skip: Skip) -> dict[str, Any]:
    """An event not acted on. A malformed one is an error in the log, but returned,
    not raised: Lambda would only run the same bad event again."""
    if skip.malformed:
        log.error("malformed event, nothing done (not retried): %s", skip.reason)
        return {"result": "skipped", "reason": skip.reason, "malformed": True}
    log.info("event skipped: %s", skip.reason)
    return {"result": "skipped", "reason": skip.reason}


def _permanent(error: AwsError) -> Run:
    """A drain that an AWS error no retry can fix stopped (aws.is_permanent): a failed
    run naming it, which the handler ends like any other (its error line, end line,
    metrics), instead of raising for Lambda to run the same event into the same
    error."""
    return Run(Outcome.FAILED, f"{error} (permanent: the event is not retried)")


def self_check(
    event: SelfCheckEvent, settings: Settings, clients: aws.AwsClients, kube_factory: KubeFactory
) -> dict[str, Any]:
    """Whether this function, as its own identity, may drain (drainer/k8s/selfcheck.py)."""
    from drainer.errors import DrainerError
    from drainer.k8s import selfcheck

    name = event.cluster_name or settings.cluster_name
    if not name:
        return {"result": "check_failed", "message": "no cluster: set CLUSTER_NAME"}
    logs.bind(cluster=name)
    try:
        cluster = aws.describe_cluster(clients.eks, name)
        kube = kube_factory(cluster, name, settings)
    except DrainerError as e:
        result = selfcheck.SelfCheck(name, error=str(e))
    else:
        try:
            force = settings.timeout_policy == TimeoutPolicy.FORCE
            result = selfcheck.check(kube, name, force=force)
        finally:
            kube.close()
    (log.info if result.passed else log.error)("self-check: %s", result.message())
    return result.result()


def handle(
    event: LifecycleEvent,
    *,
    raw_event: Mapping[str, Any],
    settings: Settings,
    clients: aws.AwsClients,
    kube_factory: KubeFactory,
    invocation: Invocation | None,
) -> dict[str, Any]:
    started = time.monotonic()
    if event.handover:
        log.info(
            "continuing a drain handed over %d time(s), begun %.0f s ago",
            event.handover.handovers,
            time.time() - event.handover.started_at,
        )
    on_start = None
    if settings.notify_on_start and event.handover is None:

        def on_start() -> None:
            _notify(settings, clients, notices.start_notice(event, settings.cluster_name))

    try:
        run = drain_instance(event, settings, clients, kube_factory, invocation, on_start=on_start)
    except AwsError as e:
        if not aws.is_permanent(e):
            # AWS failed beyond botocore's retries: raise so Lambda retries the event
            # (the drain is safe to repeat); the hook's heartbeat timeout is the backstop.
            log.error("AWS call failed; the invocation will be retried: %s", e)
            raise
        run = _permanent(e)
    if run.result == Outcome.HANDED_OVER:
        run = _hand_over(run, raw_event, clients, invocation)
    result = lifecycle_result(run.result, settings)
    completed = None
    if result is not None and not run.action_gone:
        completed = _complete(clients, event, result)
    elif result is not None:
        completed = False
    _log_outcome(run, result, completed)
    summary = _summary(run, result, completed, time.monotonic() - started)
    if event.handover is not None:
        # The drain as a whole, across invocations: state carried by the hand-over.
        summary["handovers_so_far"] = event.handover.handovers
        summary["heartbeats_total"] = event.handover.heartbeats + run.heartbeats
        summary["drain_seconds_total"] = round(time.time() - event.handover.started_at, 3)
    return _finish(run, summary, event, settings, clients)


def _complete(clients: aws.AwsClients, event: LifecycleEvent, result: str) -> bool:
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


def handle_spot(
    event: SpotEvent,
    *,
    settings: Settings,
    clients: aws.AwsClients,
    kube_factory: KubeFactory,
    invocation: Invocation | None,
) -> dict[str, Any]:
    """A spot interruption warning or rebalance recommendation (drainer/lifecycle/spot.py): no
    lifecycle action to complete; EC2 decides the instance's end."""
    started = time.monotonic()
    try:
        found = spot.target(event, settings, clients)
    except AwsError as e:
        if not aws.is_permanent(e):
            raise
        # Not even known to be one of ours: no drain, so no end line or notice.
        message = _permanent(e).message
        log.error("spot event not acted on: %s", message)
        return {"result": str(Outcome.FAILED), "message": message}
    if isinstance(found, Skip):
        return _skipped(found)
    if settings.notify_on_start:
        _notify(settings, clients, notices.spot_start_notice(found, found.cluster))
    try:
        run = spot.drain(found, settings, clients, kube_factory, invocation)
    except AwsError as e:
        if not aws.is_permanent(e):
            raise
        run = replace(_permanent(e), cluster=found.cluster)
    _log_outcome(run, None, None)
    summary = _summary(run, None, None, time.monotonic() - started, trigger=str(event.kind))
    return _finish(run, summary, found, settings, clients)


def _finish(
    run: Run,
    summary: dict[str, Any],
    subject: notices.Subject,
    settings: Settings,
    clients: aws.AwsClients,
) -> dict[str, Any]:
    """Every drain's end: the end line, the metrics and, for an end worth one, the
    notice."""
    _log_end_line(summary)
    _metrics(run, summary, settings)
    if run.result in _NOTIFIED:
        _notify(settings, clients, notices.end_notice(subject, summary))
    return summary


def _notify(settings: Settings, clients: aws.AwsClients, notice: notices.Notice) -> None:
    """Publish a notice to NOTIFICATION_TOPIC_ARN; nothing when there is none."""
    if settings.notification_topic_arn:
        notices.publish(clients.sns, settings.notification_topic_arn, notice)


# The ends of a drain worth a notice (a hand-over is not an end; another group's
# event is none of ours).
_NOTIFIED = frozenset(
    {Outcome.DRAINED, Outcome.NO_NODE, Outcome.DRY_RUN, Outcome.TIMED_OUT, Outcome.FAILED}
)


def _hand_over(
    run: Run, raw_event: Mapping[str, Any], clients: aws.AwsClients, invocation: Invocation | None
) -> Run:
    """Re-invoke the function with the event and the drain's state; a hand-over that
    cannot happen is a failure, like any other that stops the drain."""
    try:
        if invocation is None or not invocation.function_arn or run.handover is None:
            raise AwsError("no function to hand over to")
        aws.invoke_self_async(
            clients.lambda_, invocation.function_arn, with_handover(raw_event, run.handover)
        )
    except AwsError as e:
        return replace(
            run, result=Outcome.FAILED, message=f"could not hand over to a new invocation: {e}"
        )
    log.info("handed over to a new invocation (hand-over %d)", run.handover.handovers)
    return run


def _log_end_line(summary: Mapping[str, Any]) -> None:
    """The end line of the log contract: the human "drain finished: k=v, ..." text and
    the same keys as top-level JSON fields (drain_finished in drainer/engine/report.py).
    `message` is the one key renamed (to `reason`, as in drain_stopped): the logging
    module keeps `message` for the line's own text."""
    text = "drain finished: " + ", ".join(f"{k}={v}" for k, v in summary.items())
    fields = {"reason" if k == "message" else k: v for k, v in summary.items()}
    logs.drain_event(
        log, text, {"event": str(Kind.FINISHED), **fields}, EVENT_LEVELS[Kind.FINISHED]
    )


def _log_outcome(run: Run, result: str | None, completed: bool | None) -> None:
    if run.result == Outcome.FAILED:
        log.error("drain failed: %s (lifecycle result %s)", run.message, result)
    elif run.result == Outcome.TIMED_OUT:
        log.warning("%s", run.message)
    elif run.message:
        log.info("%s", run.message)


def _summary(
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
    if run.deadline is not None:
        summary["deadline_source"] = run.deadline.source
    if run.handover is not None:
        summary["handovers"] = run.handover.handovers
    if run.report is not None:
        summary.update(
            {k: v for k, v in run.report.summary().items() if k not in ("node", "seconds")}
        )
    if run.targets is not None:
        summary["target_groups"] = len(run.targets.groups)
        summary["target_wait_seconds"] = round(run.targets.seconds, 1)
        summary["targets_pending"] = run.targets.pending
    if run.message:
        summary["message"] = run.message
    return summary


def _metrics(run: Run, summary: Mapping[str, Any], settings: Settings) -> None:
    """CloudWatch metrics in embedded metric format: one JSON line, no API call."""
    with _CONTAINER.metrics_lock:
        _write_metrics(run, summary, settings)


def _write_metrics(run: Run, summary: Mapping[str, Any], settings: Settings) -> None:
    from aws_lambda_powertools import Metrics
    from aws_lambda_powertools.metrics import MetricUnit

    metrics = Metrics(namespace=METRICS_NAMESPACE, service=logs.SERVICE)
    # A drain that failed before its cluster was known still counts against the
    # configured one, which the stack's alarm watches.
    metrics.add_dimension(name="Cluster", value=run.cluster or settings.cluster_name or "unknown")
    failed = run.result in (Outcome.FAILED, Outcome.TIMED_OUT)
    metrics.add_metric(name="DrainFailed", unit=MetricUnit.Count, value=1 if failed else 0)
    metrics.add_metric(
        name="DrainSucceeded",
        unit=MetricUnit.Count,
        value=1 if run.result == Outcome.DRAINED else 0,
    )
    metrics.add_metric(
        name="DrainTimedOut",
        unit=MetricUnit.Count,
        value=1 if run.result == Outcome.TIMED_OUT else 0,
    )
    metrics.add_metric(
        name="Handovers", unit=MetricUnit.Count, value=1 if run.result == Outcome.HANDED_OVER else 0
    )
    metrics.add_metric(
        name="PodsEvicted", unit=MetricUnit.Count, value=int(summary.get("evicted", 0))
    )
    metrics.add_metric(
        name="PdbRefusals", unit=MetricUnit.Count, value=int(summary.get("pdb_refusals", 0))
    )
    metrics.add_metric(
        name="InvocationSeconds", unit=MetricUnit.Seconds, value=float(summary["seconds"])
    )
    metrics.flush_metrics()
