"""One lifecycle event, from the instance to a drain result: the AWS side around
the engine.

Which cluster (hook metadata, ASG tags, setting), which node (EC2 identity ->
Kubernetes node), a heartbeat that keeps the lifecycle action alive while the drain
works, the EKS client with an IAM token, and the deadlines: the drain's own timeout
(which spans invocations) and this invocation's hand-over moment.

It decides nothing about the lifecycle result: the handler maps the Result to one
in a single table.
"""

from __future__ import annotations

import base64
import binascii
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from drainer import aws, logs
from drainer.drain import Drain, DrainEvent, DrainOptions, DrainReport, Outcome
from drainer.errors import (
    ClusterNotFound,
    InstanceNotFound,
    KubeError,
    KubeServerError,
    KubeTooManyRequests,
    TlsVerificationError,
)
from drainer.events import Handover, LifecycleEvent
from drainer.filters import FilterOptions
from drainer.kube import Kube
from drainer.nodes import find_node
from drainer.settings import Settings, TimeoutPolicy

log = logging.getLogger(__name__)


class Result(StrEnum):
    DRAINED = "drained"
    NO_NODE = "no_node"  # the instance or its node does not exist: nothing to drain
    TIMED_OUT = "timed_out"  # DRAIN_TIMEOUT_SECONDS passed; TIMEOUT_POLICY applies
    HANDED_OVER = "handed_over"  # a new invocation carries on
    DRY_RUN = "dry_run"
    FAILED = "failed"  # unrecoverable: RBAC, no cluster, TLS, ...
    NOT_ALLOWED = "not_allowed"  # the ASG is not in ALLOWED_ASGS: not ours to touch


@dataclass(frozen=True)
class Invocation:
    """What the Lambda runtime tells an invocation about itself."""

    remaining_seconds: Callable[[], float]
    function_arn: str


@dataclass
class Run:
    result: Result
    message: str = ""
    cluster: str = ""
    node: str = ""
    report: DrainReport | None = None
    heartbeats: int = 0
    started_at: float = 0.0
    handover: Handover | None = None  # the next invocation's, when HANDED_OVER
    action_gone: bool = False  # the heartbeat found the lifecycle action completed or expired


KubeFactory = Callable[[aws.ClusterInfo, str, Settings], Kube]


def eks_kube(session: Any, region: str) -> KubeFactory:
    """Build Kube clients for EKS clusters with IAM tokens from this session."""
    from drainer.auth import TokenSource

    # One token source per cluster for the container's life: its STS client is built
    # once and a token stays in use until it needs refreshing, across invocations.
    sources: dict[str, TokenSource] = {}
    lock = threading.Lock()

    def token_source(cluster_name: str) -> TokenSource:
        with lock:
            if cluster_name not in sources:
                sources[cluster_name] = TokenSource(session, cluster_name, region)
            return sources[cluster_name]

    def factory(cluster: aws.ClusterInfo, cluster_name: str, settings: Settings) -> Kube:
        try:
            ca_pem = base64.b64decode(cluster.certificate_authority_data, validate=True)
        except (binascii.Error, ValueError) as e:
            raise TlsVerificationError(
                f"cluster {cluster_name}'s certificate authority data is not base64; "
                "refusing to connect"
            ) from e
        return Kube.for_cluster(
            cluster.endpoint,
            ca_pem,
            token_source(cluster_name),
            request_timeout=settings.kube_request_timeout_seconds,
            pool_size=settings.eviction_concurrency + 4,
        )

    return factory


MIN_WORK_SECONDS = 5.0


def work_time(remaining: float, margin: float) -> float:
    """How long this invocation may drain before handing over: its remaining time less
    the margin, but at least a few seconds (or half of what remains, if less), so a
    function whose timeout is not longer than the margin still makes progress instead
    of handing over at once, forever."""
    return max(remaining - margin, min(remaining / 2, MIN_WORK_SECONDS))


def drain_options(settings: Settings) -> DrainOptions:
    return DrainOptions(
        filters=FilterOptions(
            evict_unreplicated=settings.evict_unreplicated_pods,
            evict_emptydir=settings.evict_emptydir_pods,
            evict_daemonset=settings.evict_daemonset_pods,
        ),
        concurrency=settings.eviction_concurrency,
        grace_period_seconds=settings.grace_period_seconds
        if settings.grace_period_seconds >= 0
        else None,
        stuck_pod_seconds=settings.stuck_pod_seconds,
        volume_detach_timeout=settings.volume_detach_timeout_seconds,
        dry_run=settings.dry_run,
        force_on_timeout=settings.timeout_policy == TimeoutPolicy.FORCE,
        force_grace_period_seconds=settings.force_grace_period_seconds,
    )


def drain_instance(
    event: LifecycleEvent,
    settings: Settings,
    clients: aws.AwsClients,
    kube_factory: KubeFactory,
    invocation: Invocation | None,
    *,
    clock: Callable[[], float] = time.time,
    on_event: Callable[[DrainEvent], None] | None = None,
) -> Run:
    started_at = event.handover.started_at if event.handover else clock()
    run = Run(Result.FAILED, started_at=started_at)
    if settings.allowed_asgs and event.asg_name not in settings.allowed_asgs:
        run.result = Result.NOT_ALLOWED
        run.message = (
            f"Auto Scaling group {event.asg_name} is not in ALLOWED_ASGS "
            f"({', '.join(sorted(settings.allowed_asgs))}); leaving its lifecycle action alone"
        )
        return run
    hook = aws.lifecycle_hook(clients.autoscaling, event.asg_name, event.hook_name)
    heartbeat = aws.Heartbeat(clients.autoscaling, event, max(1.0, hook.heartbeat_interval))
    heartbeat.start()
    try:
        _drain(
            run,
            event,
            settings=settings,
            clients=clients,
            kube_factory=kube_factory,
            invocation=invocation,
            hook=hook,
            clock=clock,
            on_event=on_event,
        )
    finally:
        heartbeat.stop()
        run.heartbeats = heartbeat.beats
        if heartbeat.gone:
            log.info("the lifecycle action is gone (completed elsewhere or timed out)")
            run.action_gone = True
    if run.result == Result.HANDED_OVER:
        previous = event.handover or Handover(started_at, 0, 0)
        run.handover = previous.handed_on(run.heartbeats)
    return run


def _drain(
    run: Run,
    event: LifecycleEvent,
    *,
    settings: Settings,
    clients: aws.AwsClients,
    kube_factory: KubeFactory,
    invocation: Invocation | None,
    hook: aws.HookInfo,
    clock: Callable[[], float],
    on_event: Callable[[DrainEvent], None] | None,
) -> None:
    metadata = hook.notification_metadata or event.notification_metadata
    # The hook's metadata first; the group's tags (one more call) only when it has none.
    cluster_name = aws.cluster_name_for(metadata, {}, "")
    if not cluster_name:
        tags = aws.asg_tags(clients.autoscaling, event.asg_name)
        cluster_name = aws.cluster_name_for(metadata, tags, settings.cluster_name)
    if not cluster_name:
        run.message = (
            f"no cluster for Auto Scaling group {event.asg_name}: "
            "set the hook's NotificationMetadata "
            '({"cluster_name": ...}), tag the group eks:cluster-name, or set CLUSTER_NAME'
        )
        return
    run.cluster = cluster_name
    logs.bind(cluster=cluster_name)
    try:
        identity = aws.describe_instance(clients.ec2, event.instance_id)
    except InstanceNotFound as e:
        run.result, run.message = Result.NO_NODE, str(e)
        return
    try:
        cluster = aws.describe_cluster(clients.eks, cluster_name)
    except ClusterNotFound as e:
        run.message = str(e)
        return
    deadline = run.started_at + settings.drain_timeout_seconds
    stop_at = None
    if invocation is not None:
        stop_at = clock() + work_time(
            invocation.remaining_seconds(), settings.handover_margin_seconds
        )
    rng = random.Random()  # noqa: S311 - jitter
    attempt = 0
    while True:
        try:
            kube = kube_factory(cluster, cluster_name, settings)
            try:
                report = _drain_node(
                    run,
                    event,
                    identity,
                    kube,
                    settings=settings,
                    deadline=deadline,
                    stop_at=stop_at,
                    clock=clock,
                    on_event=on_event,
                )
            finally:
                kube.close()
        except (KubeServerError, KubeTooManyRequests) as e:
            # The API server is unreachable or failing beyond the client's retries:
            # the whole drain is safe to repeat, so try again until time runs out.
            attempt += 1
            limit = deadline if stop_at is None else min(deadline, stop_at)
            delay = min(30.0, 2.0 * 2**attempt) * rng.uniform(0.5, 1.0)
            if isinstance(e, KubeTooManyRequests) and e.retry_after:
                delay = max(delay, e.retry_after)  # never before the server says
            if clock() + delay >= limit:
                run.result = (
                    Result.HANDED_OVER
                    if stop_at is not None and stop_at < deadline
                    else Result.TIMED_OUT
                )
                run.message = f"the API server kept failing: {e}"
                return
            log.warning(
                "the API server is failing (%s); starting the drain again in %.0f s", e, delay
            )
            time.sleep(delay)
            continue
        except KubeError as e:  # RBAC, TLS, a refused token, ...: retrying will not help
            run.result, run.message = Result.FAILED, str(e)
            return
        break
    if report is None:
        return
    run.report = report
    run.result = {
        Outcome.DRAINED: Result.DRAINED,
        Outcome.NODE_GONE: Result.NO_NODE,
        Outcome.TIMED_OUT: Result.TIMED_OUT,
        Outcome.OUT_OF_TIME: Result.HANDED_OVER,
        Outcome.DRY_RUN: Result.DRY_RUN,
    }[report.outcome]
    if report.outcome != Outcome.TIMED_OUT and report.errors:
        # Pods the API refuses to evict whatever the wait (more than one budget).
        run.message = "; ".join(report.errors)
    if report.outcome == Outcome.TIMED_OUT:
        run.message = (
            f"drain timed out after {settings.drain_timeout_seconds} s "
            f"(TIMEOUT_POLICY={settings.timeout_policy}): {report.held_at_timeout}"
            + (f"; force-deleted {report.forced} pods" if report.forced else "")
        )


def _drain_node(
    run: Run,
    event: LifecycleEvent,
    identity: aws.NodeIdentity,
    kube: Kube,
    *,
    settings: Settings,
    deadline: float,
    stop_at: float | None,
    clock: Callable[[], float],
    on_event: Callable[[DrainEvent], None] | None,
) -> DrainReport | None:
    """Find the instance's node and drain it; None (and NO_NODE) when there is none."""
    node = find_node(
        kube, identity.private_dns_name, identity.hostname_candidates, identity.provider_id_suffix
    )
    if node is None:
        run.result = Result.NO_NODE
        run.message = (
            f"no Kubernetes node for instance {event.instance_id} "
            f"(PrivateDnsName {identity.private_dns_name or 'none'}): never joined or already gone"
        )
        return None
    run.node = node
    logs.bind(node_name=node)
    drain = Drain(kube, node, drain_options(settings), clock=clock, on_event=on_event)
    return drain.run(deadline, stop_at)
