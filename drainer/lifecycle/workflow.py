"""One lifecycle event, from the instance to a drain result: the AWS side around
the engine.

Which cluster (hook metadata, ASG tags, setting), which node (EC2 identity ->
Kubernetes node), a heartbeat that keeps the lifecycle action alive while the drain
works, the EKS client with an IAM token, and the deadlines: the drain's own (its
timeout, which spans invocations, but never past what the lifecycle hook allows)
and this invocation's hand-over moment. The deadline counts from the lifecycle
event's own time, never from a hand-over's claim of when the drain began: a forged
or corrupted hand-over never brings it, and with it the timeout policy, forward.

Each step returns its result; `drain_instance` puts them together in one `Run`.

It decides nothing about the lifecycle result: the handler maps the Outcome to one
in a single table.
"""

from __future__ import annotations

import base64
import binascii
import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from math import inf
from typing import Any

from drainer import aws, logs
from drainer.backoff import Backoff
from drainer.engine.drain import Drain, RealWaits
from drainer.engine.options import DrainOptions
from drainer.engine.report import DrainEvent, DrainReport
from drainer.errors import (
    ClusterNotFound,
    InstanceNotFound,
    KubeError,
    KubeServerError,
    KubeTooManyRequests,
    TlsVerificationError,
)
from drainer.k8s.cordon import live_drain, progress_of
from drainer.k8s.kube import Kube
from drainer.k8s.nodes import find_node_object
from drainer.lifecycle.events import (
    TERMINATE_HOOK_TRIGGER,
    Handover,
    LifecycleEvent,
    SpotKind,
)
from drainer.lifecycle.hooks import tag_admits
from drainer.lifecycle.outcomes import lambda_outcome
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.targets import TargetWait, leave_target_groups
from drainer.outcome import DRAINING, Outcome

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Invocation:
    """What the Lambda runtime tells an invocation about itself."""

    remaining_seconds: Callable[[], float]
    function_arn: str


@dataclass(frozen=True)
class Deadline:
    """When the drain must be over, and what set that moment (for the log lines)."""

    at: float
    """Epoch seconds."""
    source: str
    """E.g. "DRAIN_TIMEOUT_SECONDS (3600 s)" or the lifecycle hook's GlobalTimeout."""


@dataclass(frozen=True)
class Run:
    """What became of one lifecycle event in this invocation."""

    result: Outcome
    message: str = ""
    cluster: str = ""
    node: str = ""
    report: DrainReport | None = None
    heartbeats: int = 0
    started_at: float = 0.0
    deadline: Deadline | None = None
    handover: Handover | None = None  # the next invocation's, when HANDED_OVER
    action_gone: bool = False  # the heartbeat found the lifecycle action completed or expired
    targets: TargetWait | None = None  # how the instance left its target groups


KubeFactory = Callable[[aws.ClusterInfo, str, Settings], Kube]

API_RETRY = Backoff(first=4.0, cap=30.0)
"""Pauses before the whole drain starts again while the API server fails beyond the
client's own retries: 2-4 s, doubling to 30 s, never before a Retry-After."""


def eks_kube(session: Any, region: str) -> KubeFactory:
    """Build Kube clients for EKS clusters with IAM tokens from this session."""
    # One token source per cluster for the container's life: its STS client is built
    # once and a token stays in use until it needs refreshing, across invocations.
    sources: dict[str, aws.TokenSource] = {}
    lock = threading.Lock()

    def token_source(cluster_name: str) -> aws.TokenSource:
        with lock:
            if cluster_name not in sources:
                sources[cluster_name] = aws.TokenSource(session, cluster_name, region)
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


def effective_deadline(
    started_at: float, event: LifecycleEvent, hook: aws.HookInfo, settings: Settings
) -> Deadline:
    """The drain's deadline: DRAIN_TIMEOUT_SECONDS after the instance began to wait,
    but never later than the hook's GlobalTimeout (counted from the same moment)
    less GLOBAL_TIMEOUT_MARGIN_SECONDS, so the timeout policy always runs before
    Auto Scaling applies the hook's DefaultResult on its own. Both count from the
    event's time, so every delivery of one lifecycle action (a hand-over, Lambda's
    retry after a crash, a duplicate) works to the same deadline.

    `started_at` is this invocation's own start, never a hand-over's claim: whoever
    may invoke the function can write that claim, and an earlier one would bring the
    deadline (and TIMEOUT_POLICY=force) forward."""
    # A later or unreadable event time (clock skew, a hand-made event) counts from
    # this invocation's start instead: later than the truth, never earlier.
    waiting_since = event.waiting_since
    if waiting_since is None or waiting_since > started_at:
        waiting_since = started_at
    timeout = settings.drain_timeout_seconds
    own = Deadline(waiting_since + timeout, f"DRAIN_TIMEOUT_SECONDS ({timeout} s)")
    limit = hook.global_timeout_seconds
    margin = settings.global_timeout_margin_seconds
    rule = "" if hook.global_timeout is not None else ", 100 x HeartbeatTimeout"
    hooks = Deadline(
        waiting_since + limit - margin,
        f"lifecycle hook GlobalTimeout ({limit} s{rule}) minus {margin} s margin",
    )
    return hooks if hooks.at < own.at else own


def result_for(report: DrainReport, deadline: Deadline, settings: Settings) -> tuple[Outcome, str]:
    """The outcome of the engine's report here, and the message that explains it."""
    result = lambda_outcome(report.outcome)
    if report.outcome in (Outcome.FAILED, Outcome.INTERRUPTED, Outcome.NO_NODE):
        return result, report.stopped_by or "; ".join(report.errors)
    if report.outcome == Outcome.TIMED_OUT:
        forced = f"; force-deleted {report.forced} pods" if report.forced else ""
        return result, (
            f"drain timed out at its deadline, {deadline.source} "
            f"(TIMEOUT_POLICY={settings.timeout_policy}): {report.timeout_message()}{forced}"
        )
    # Pods the API refuses to evict whatever the wait (more than one budget).
    return result, "; ".join(report.errors)


def drain_instance(
    event: LifecycleEvent,
    settings: Settings,
    clients: aws.AwsClients,
    kube_factory: KubeFactory,
    invocation: Invocation | None,
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    on_event: Callable[[DrainEvent], None] | None = None,
    on_start: Callable[[], None] | None = None,
) -> Run:
    """Drain the event's instance, heartbeating its lifecycle action meanwhile.
    `on_start` is called once the group is known to be ours (the start notice)."""
    now = clock()
    started_at = event.handover.started_at if event.handover else now
    tags = group_tags(clients.autoscaling, event.asg_name)
    refused = group_refused(settings, clients.autoscaling, event.asg_name, tags=tags)
    if refused:
        return Run(
            Outcome.NOT_ALLOWED,
            f"{refused}; leaving its lifecycle action alone",
            started_at=started_at,
        )
    if on_start is not None:
        on_start()
    hook = aws.lifecycle_hook(clients.autoscaling, event.asg_name, event.hook_name)
    deadline = effective_deadline(now, event, hook, settings)
    log_deadline(deadline, clock())
    tools = Tools(settings, clients, kube_factory, clock, sleep, rng or jitter(), on_event)
    heartbeat = aws.Heartbeat(clients.autoscaling, event, max(1.0, hook.heartbeat_interval))
    heartbeat.start()
    try:
        stop = hand_over_at(invocation, settings, clock)
        run = _drain(tools, event, hook, deadline, stop, tags=tags)
    finally:
        heartbeat.stop()
    if heartbeat.gone:
        log.info("the lifecycle action is gone (completed elsewhere or timed out)")
    handover = None
    if run.result == Outcome.HANDED_OVER:
        handover = (event.handover or Handover(started_at, 0, 0)).handed_on(heartbeat.beats)
    return replace(
        run,
        started_at=started_at,
        deadline=deadline,
        heartbeats=heartbeat.beats,
        action_gone=heartbeat.gone,
        handover=handover,
    )


def log_deadline(deadline: Deadline, now: float) -> None:
    """The drain's deadline and what set it, in one line with fixed keys."""
    log.info(
        "drain deadline in %.0f s: %s",
        deadline.at - now,
        deadline.source,
        extra={
            "deadline": datetime.fromtimestamp(deadline.at, UTC).isoformat(timespec="seconds"),
            "deadline_source": deadline.source,
        },
    )


Tags = Callable[[], Mapping[str, str]]


def group_tags(autoscaling: aws.Client, asg_name: str) -> Tags:
    """The group's tags, read on first use and at most once (one invocation's view:
    the group check, the cluster and the spot path share the one call)."""
    return functools.cache(lambda: aws.asg_tags(autoscaling, asg_name))


def group_refused(
    settings: Settings, autoscaling: aws.Client, asg_name: str, *, tags: Tags | None = None
) -> str:
    """Why the function may not act on this Auto Scaling group's instances; "" when
    it may: named in ALLOWED_ASGS, or carrying ASG_TAG and not tagged for another
    cluster, or neither setting set (any group)."""
    if settings.allows_group(asg_name):
        return ""
    named = ", ".join(sorted(settings.allowed_asgs)) or "none"
    why = f"Auto Scaling group {asg_name} is not in ALLOWED_ASGS ({named})"
    if settings.asg_tag:
        read = tags or group_tags(autoscaling, asg_name)
        admitted, reason = tag_admits(read(), settings)
        if admitted:
            return ""
        why += f" and ASG_TAG {settings.asg_tag} does not admit it ({reason})"
    return why


@dataclass(frozen=True)
class Tools:
    """What the steps of one drain share: settings, clients, and the clock they wait on."""

    settings: Settings
    clients: aws.AwsClients
    kube_factory: KubeFactory
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    rng: random.Random
    on_event: Callable[[DrainEvent], None] | None


def jitter() -> random.Random:
    return random.Random()  # noqa: S311 - jitter, not cryptography


def hand_over_at(
    invocation: Invocation | None, settings: Settings, clock: Callable[[], float]
) -> float | None:
    """When this invocation hands over; None outside Lambda (no time limit of its own)."""
    if invocation is None:
        return None
    return clock() + work_time(invocation.remaining_seconds(), settings.handover_margin_seconds)


def resolve_cluster(
    event: LifecycleEvent, hook: aws.HookInfo, settings: Settings, tags: Tags
) -> str | None:
    """The instance's EKS cluster: the hook's metadata first, then the group's tags
    (read only when the metadata names none), then CLUSTER_NAME."""
    metadata = hook.notification_metadata or event.notification_metadata
    from_metadata = aws.cluster_name_for(metadata, {}, "")
    if from_metadata:
        return from_metadata
    return aws.cluster_name_for(metadata, tags(), settings.cluster_name)


def _drain(
    tools: Tools,
    event: LifecycleEvent,
    hook: aws.HookInfo,
    deadline: Deadline,
    stop_at: float | None,
    *,
    tags: Tags,
) -> Run:
    """From the hook to a drain result: the cluster, the instance, then the node."""
    cluster_name = resolve_cluster(event, hook, tools.settings, tags)
    if not cluster_name:
        return Run(
            Outcome.FAILED,
            f"no cluster for Auto Scaling group {event.asg_name}: set the hook's "
            'NotificationMetadata ({"cluster_name": ...}), tag the group '
            "eks:cluster-name, or set CLUSTER_NAME",
        )
    logs.bind(cluster=cluster_name)
    try:
        identity = aws.describe_instance(tools.clients.ec2, event.instance_id)
    except InstanceNotFound as e:
        return Run(Outcome.NO_NODE, str(e), cluster=cluster_name)
    try:
        cluster = aws.describe_cluster(tools.clients.eks, cluster_name)
    except ClusterNotFound as e:
        return Run(Outcome.FAILED, str(e), cluster=cluster_name)
    plan = Plan.scale_in(tools)
    return drain_and_leave(tools, identity, cluster, deadline, stop_at, plan=plan)


def drain_and_leave(
    tools: Tools,
    identity: aws.NodeIdentity,
    cluster: aws.ClusterInfo,
    deadline: Deadline,
    stop_at: float | None,
    *,
    plan: Plan,
) -> Run:
    """Drain the node (or wait for the drain under way), then take the instance out
    of its target groups: every drain's path once the cluster is known."""
    run = drain_with_retries(tools, identity, cluster, deadline, stop_at, plan=plan)
    run = _leave_target_groups(
        tools,
        run,
        instance=identity.instance_id,
        cluster=cluster.name,
        deadline=deadline,
        stop_at=stop_at,
    )
    return replace(run, cluster=cluster.name)


def _leave_target_groups(
    tools: Tools,
    run: Run,
    *,
    instance: str,
    cluster: str,
    deadline: Deadline,
    stop_at: float | None,
) -> Run:
    """Once the pods are gone, the instance leaves the load balancers' target groups
    before CONTINUE (drainer/lifecycle/targets.py), within TARGET_GROUP_WAIT_SECONDS, the
    deadline and this invocation's time (past which the next one waits on)."""
    wait = tools.settings.target_group_wait_seconds
    if run.result not in (Outcome.DRAINED, Outcome.NO_NODE) or wait <= 0:
        return run
    until = min(tools.clock() + wait, deadline.at, stop_at if stop_at is not None else inf)
    found = leave_target_groups(
        tools.clients.elbv2,
        instance,
        cluster,
        sorted(tools.settings.target_group_arns),
        until=until,
        clock=tools.clock,
        sleep=tools.sleep,
    )
    log.info(
        "%s",
        found.describe(),
        extra={
            "target_groups": found.groups,
            "target_wait_seconds": round(found.seconds, 1),
            "targets_pending": found.pending,
        },
    )
    if found.pending and stop_at is not None and tools.clock() >= stop_at < deadline.at:
        return replace(run, result=Outcome.HANDED_OVER, message=found.describe(), targets=found)
    return replace(run, targets=found)


@dataclass(frozen=True)
class Plan:
    """How one drain goes: its engine options, and which drains begun by other
    invocations for the same instance it waits for rather than start its own."""

    options: DrainOptions
    follows: frozenset[str]

    @classmethod
    def scale_in(cls, tools: Tools) -> Plan:
        """The terminate hook's drain: it waits for a drain a spot event began, and
        records its trigger and deadline on the node (so a rebalance recommendation
        that comes meanwhile leaves its record alone)."""
        options = replace(tools.settings.drain_options(), trigger=TERMINATE_HOOK_TRIGGER)
        return cls(options, SPOT_TRIGGERS)


SPOT_TRIGGERS = frozenset(str(kind) for kind in SpotKind)

FOLLOW_POLL_SECONDS = 2.0
"""How often an invocation waiting for another's drain reads the node's record."""


def drain_with_retries(
    tools: Tools,
    identity: aws.NodeIdentity,
    cluster: aws.ClusterInfo,
    deadline: Deadline,
    stop_at: float | None,
    *,
    plan: Plan,
) -> Run:
    """Drain, starting again while the API server fails beyond the client's own
    retries (the whole drain is safe to repeat), until time runs out."""
    limit = deadline.at if stop_at is None else min(deadline.at, stop_at)
    failures = 0
    while True:
        try:
            return _drain_once(tools, identity, cluster, deadline, stop_at, plan=plan)
        except (KubeServerError, KubeTooManyRequests) as e:
            retry_after = e.retry_after if isinstance(e, KubeTooManyRequests) else None
            delay = API_RETRY.delay(failures, tools.rng, retry_after)
            failures += 1
            if tools.clock() + delay < limit:
                log.warning(
                    "the API server is failing (%s); starting the drain again in %.0f s",
                    e,
                    delay,
                )
                tools.sleep(delay)
                continue
            if stop_at is not None and stop_at < deadline.at:
                return Run(Outcome.HANDED_OVER, f"the API server kept failing: {e}")
            return Run(
                Outcome.TIMED_OUT,
                f"the API server kept failing until the drain's deadline, {deadline.source}: {e}",
            )
        except KubeError as e:  # RBAC, TLS, a refused token, ...: retrying will not help
            return Run(Outcome.FAILED, str(e))


def _drain_once(
    tools: Tools,
    identity: aws.NodeIdentity,
    cluster: aws.ClusterInfo,
    deadline: Deadline,
    stop_at: float | None,
    *,
    plan: Plan,
) -> Run:
    """Find the instance's node and drain it, with a fresh client; or wait for the
    drain another invocation began on it for a spot event."""
    kube = tools.kube_factory(cluster, cluster.name, tools.settings)
    try:
        found = find_node_object(
            kube,
            identity.private_dns_name,
            identity.hostname_candidates,
            identity.provider_id_suffix,
        )
        if found is None:
            return Run(
                Outcome.NO_NODE,
                f"no Kubernetes node for instance {identity.instance_id} (PrivateDnsName "
                f"{identity.private_dns_name or 'none'}): never joined or already gone",
            )
        node = str(found["metadata"]["name"])
        logs.bind(node_name=node)
        limit = deadline.at if stop_at is None else min(deadline.at, stop_at)
        followed = follow_drain(
            tools, kube, node, plan.follows, limit=limit, deadline=deadline.at, known=found
        )
        if followed is not None:
            return followed
        drain = Drain(
            kube,
            node,
            plan.options,
            waits=RealWaits(tools.clock),
            on_event=tools.on_event,
            node_uid=str(found["metadata"].get("uid") or ""),
        )
        report = drain.run(deadline.at, stop_at, deadline_source=deadline.source)
    finally:
        kube.close()
    result, message = result_for(report, deadline, tools.settings)
    return Run(result, message, node=node, report=report)


# What a drain that another invocation ran means for this one, by the phase it
# recorded on the node at its end.
_DRAIN_ENDINGS = frozenset(
    {Outcome.DRAINED, Outcome.TIMED_OUT, Outcome.FAILED, Outcome.INTERRUPTED}
)
"""The phases a drain's record ends in; any other (the record removed, a rebalance's
cordon) is taken for drained."""
FOLLOW_SLACK_SECONDS = 10.0
"""How long past its deadline a followed drain may take to record its end."""


def follow_drain(
    tools: Tools,
    kube: Kube,
    node: str,
    triggers: frozenset[str],
    *,
    limit: float,
    deadline: float,
    known: dict[str, Any] | None = None,
) -> Run | None:
    """When the node's record shows a live drain begun by one of `triggers` (another
    invocation, for a spot event of the same instance), wait for it to end, reading
    the record, and take its result: the same drain is not started twice. None when
    there is no such drain, or it went stale (its invocation died): drain then.
    `known`: the node as the caller just read it (saves a GET)."""
    current = known if known is not None else kube.get_node(node)
    live = live_drain(current or {}, tools.clock(), triggers)
    if live is None:
        return None
    log.info(
        "a drain begun by the %s event is under way on node %s; waiting for it instead "
        "of starting another",
        live.trigger,
        node,
        extra={"followed_trigger": live.trigger},
    )
    until = min(live.until + FOLLOW_SLACK_SECONDS, limit)
    while True:
        if current is None:
            return Run(Outcome.NO_NODE, f"node {node} went away during the {live.trigger} drain")
        progress = progress_of(current) or {}
        phase = str(progress.get("phase", ""))
        if phase != DRAINING:
            ended = Outcome(phase) if phase in _DRAIN_ENDINGS else Outcome.DRAINED
            result = lambda_outcome(ended)
            return Run(
                result,
                f"the drain begun by the {live.trigger} event ended: {phase or 'record removed'}",
                node=node,
            )
        if tools.clock() >= until:
            break
        tools.sleep(min(FOLLOW_POLL_SECONDS, max(0.0, until - tools.clock())))
        current = kube.get_node(node)
    if until < live.until + FOLLOW_SLACK_SECONDS:  # this drain's own time ran out first
        result = Outcome.HANDED_OVER if limit < deadline else Outcome.TIMED_OUT
        return Run(
            result,
            f"still waiting for the drain begun by the {live.trigger} event on node {node}",
            node=node,
        )
    log.warning(
        "the drain begun by the %s event on node %s is past its deadline without an end "
        "(its invocation stopped); draining it here",
        live.trigger,
        node,
    )
    return None
