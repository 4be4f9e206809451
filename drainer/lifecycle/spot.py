"""EC2's spot events: drain a spot node before EC2 reclaims it.

An interruption warning comes two minutes before EC2 stops or terminates the
instance, too late for a terminate lifecycle hook to help. The node is drained at
once with a deadline of the warning's time plus 2 minutes less
SPOT_DEADLINE_MARGIN_SECONDS: the ordinary pods evicted at the same time, grace
periods cut to fit, the critical tier last when the ordinary pods are gone (or when
little time is left), and the instance then leaves its target groups.

A rebalance recommendation says the instance is at higher risk of interruption:
REBALANCE_ACTION cordons the node (no new pods) or drains it within this invocation.

EC2 sends both for every spot instance of the account and region, so `target`
first decides whether the instance is one of ours: in an Auto Scaling group the
function covers, and of its cluster. The drain records what began it and its
deadline on the node (drainer/k8s/cordon.py); the terminate hook's event that follows
for the same instance waits for that drain instead of starting another
(drainer/lifecycle/follow.py).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Any

from drainer import aws, logs
from drainer.errors import AwsError, ClusterNotFound, InstanceNotFound, KubeError
from drainer.k8s.cordon import cordon_patch, live_drain
from drainer.k8s.nodes import find_node_object, other_manager
from drainer.lifecycle import ending, notices
from drainer.lifecycle.admission import group_refused, group_tags
from drainer.lifecycle.events import (
    SPOT_NOTICE_SECONDS,
    SPOT_TRIGGERS,
    TERMINATE_HOOK_TRIGGER,
    Skip,
    SpotEvent,
    SpotKind,
)
from drainer.lifecycle.job import DrainJob, Plan, Run, Tools
from drainer.lifecycle.runner import not_ours, run_job
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.window import Deadline, Invocation, Window, hand_over_at, log_deadline
from drainer.outcome import Outcome

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SpotTarget:
    """A spot event's instance, found to be one of the function's nodes."""

    event: SpotEvent
    identity: aws.NodeIdentity
    cluster: str
    asg_name: str

    @property
    def instance_id(self) -> str:
        return self.identity.instance_id


def target(event: SpotEvent, settings: Settings, clients: aws.AwsClients) -> SpotTarget | Skip:
    """The event's instance if the function acts on it; else a Skip saying why."""
    if event.kind is SpotKind.INTERRUPTION and not settings.spot_interruption_drain:
        return Skip("spot interruption warning: SPOT_INTERRUPTION_DRAIN is off")
    if event.kind is SpotKind.REBALANCE and settings.rebalance_action == "off":
        return Skip("rebalance recommendation: REBALANCE_ACTION is off")
    if event.kind is SpotKind.INTERRUPTION and event.instance_action not in ("", "terminate"):
        log.info(
            "the warning says EC2 will %s the instance, not terminate it; draining all the same "
            "(its pods go when it stops)",
            event.instance_action,
        )
    try:
        identity = aws.describe_instance(clients.ec2, event.instance_id)
    except InstanceNotFound as e:
        return Skip(f"{event.kind}: {e}")
    group = identity.asg_name
    tags = group_tags(clients.autoscaling, group)
    if group:
        refused = group_refused(settings, clients.autoscaling, group, tags=tags)
        if refused:
            return Skip(f"{event.kind}: instance {event.instance_id}: {refused}")
    elif settings.allowed_asgs or settings.asg_tag:
        return Skip(
            f"{event.kind}: instance {event.instance_id} is in no Auto Scaling group "
            "(ALLOWED_ASGS and ASG_TAG choose the groups the function acts on)"
        )
    named = aws.cluster_name_for("", identity.tags, "")
    if not named and group:
        named = aws.cluster_name_for("", tags(), "")
    if named and settings.cluster_name and named != settings.cluster_name:
        return Skip(
            f"{event.kind}: instance {event.instance_id} belongs to cluster {named}, "
            f"not {settings.cluster_name}"
        )
    cluster = named or (settings.cluster_name if group else "")
    if not cluster:
        return Skip(
            f"{event.kind}: instance {event.instance_id} names no EKS cluster in its tags "
            "(eks:cluster-name, kubernetes.io/cluster/<name>) and is in no listed group"
        )
    return SpotTarget(event, identity, cluster, group)


def deadline_of(found: SpotTarget, settings: Settings, now: float) -> Deadline:
    """An interruption's drain ends the margin before EC2 reclaims the instance; a
    rebalance drain has DRAIN_TIMEOUT_SECONDS (and this invocation's time)."""
    event = found.event
    if event.kind is SpotKind.INTERRUPTION:
        issued = event.issued_at if event.issued_at is not None else now
        margin = settings.spot_deadline_margin_seconds
        return Deadline(
            issued + SPOT_NOTICE_SECONDS - margin,
            f"spot interruption warning at {event.event_time} + {SPOT_NOTICE_SECONDS} s "
            f"- SPOT_DEADLINE_MARGIN_SECONDS ({margin} s)",
        )
    timeout = settings.drain_timeout_seconds
    return Deadline(now + timeout, f"DRAIN_TIMEOUT_SECONDS ({timeout} s)")


def plan_for(found: SpotTarget, settings: Settings, deadline: Deadline, now: float) -> Plan:
    """The engine's options: an interruption evicts the ordinary pods at once (as many
    as EVICTION_CONCURRENCY and their budgets allow), cuts
    grace periods to the deadline and keeps the critical tier for the last third of
    the window at most; both record their trigger so that a later event waits for
    them, and wait for a drain under way themselves."""
    base = settings.drain_options()
    kind = found.event.kind
    if kind is SpotKind.REBALANCE:
        return Plan(replace(base, trigger=str(kind)), SPOT_TRIGGERS)
    window = max(0.0, deadline.at - now)
    # EC2 reclaims the instance at the deadline whatever its budgets say: a pod still
    # held when only its grace period is left is deleted then, so that it gets SIGTERM
    # and that grace instead of dying with the instance (TIMEOUT_POLICY=force's way).
    options = replace(
        base,
        trigger=str(kind),
        critical_reserve_seconds=min(base.critical_reserve_seconds, window / 3),
        fit_grace_to_deadline=True,
        force_on_timeout=True,
    )
    # It waits only for a drain of the same warning (EventBridge delivers at least
    # once): a slower rebalance drain under way would not end in time.
    return Plan(options, frozenset({str(kind)}))


def drain(found: SpotTarget, tools: Tools, invocation: Invocation | None) -> Run:
    """Drain (or, for a rebalance with REBALANCE_ACTION=cordon, cordon) the node."""
    settings, clients, clock = tools.settings, tools.clients, tools.clock
    logs.bind(cluster=found.cluster, asg_name=found.asg_name)
    started = clock()
    deadline = deadline_of(found, settings, started)
    stop = hand_over_at(invocation, settings, clock)
    if stop is not None and stop < deadline.at:  # no hand-over: it ends in this invocation
        deadline = Deadline(stop, f"{deadline.source}, cut to this invocation's time")
    log_deadline(deadline, started)
    try:
        cluster = aws.describe_cluster(clients.eks, found.cluster)
    except ClusterNotFound as e:
        return Run(Outcome.FAILED, str(e), cluster=found.cluster, deadline=deadline)
    if found.event.kind is SpotKind.REBALANCE and settings.rebalance_action == "cordon":
        run = _cordon(tools, found, cluster)
    else:
        plan = plan_for(found, settings, deadline, started)
        run = run_job(tools, DrainJob(found.identity, cluster, Window(deadline), plan))
    return replace(run, cluster=found.cluster, started_at=started, deadline=deadline)


def _cordon(tools: Tools, found: SpotTarget, cluster: aws.ClusterInfo) -> Run:
    """A rebalance recommendation with REBALANCE_ACTION=cordon: no new pods on the
    node; its pods stay until the interruption warning or the terminate hook."""
    kube = tools.kube_factory(cluster, cluster.name, tools.settings)
    try:
        identity = found.identity
        current = find_node_object(
            kube,
            identity.private_dns_name,
            identity.hostname_candidates,
            identity.provider_id_suffix,
        )
        if current is None:
            return Run(Outcome.NO_NODE, f"no Kubernetes node for instance {identity.instance_id}")
        node = str(current["metadata"]["name"])
        logs.bind(node_name=node)
        manager = other_manager(current)
        if manager:
            return Run(Outcome.NOT_OURS, not_ours(node, manager), node=node)
        # Any drain under way, the terminate hook's too: its record stays as it is.
        draining = SPOT_TRIGGERS | {TERMINATE_HOOK_TRIGGER}
        if live_drain(current, tools.clock(), draining) is not None:
            return Run(Outcome.CORDONED, f"node {node} is being drained already", node=node)
        trigger = str(found.event.kind)
        patch, _ = cordon_patch(current, tools.clock(), trigger=trigger, phase=Outcome.CORDONED)
        kube.patch_node(node, patch, dry_run=tools.settings.dry_run)
    except KubeError as e:
        return Run(Outcome.FAILED, f"could not cordon the node: {e}")
    finally:
        kube.close()
    return Run(
        Outcome.CORDONED,
        f"cordoned node {node} on the rebalance recommendation; its pods stay until the "
        "interruption warning or the terminate hook drains it",
        node=node,
    )


def handle(event: SpotEvent, tools: Tools, invocation: Invocation | None) -> dict[str, Any]:
    """A spot interruption warning or rebalance recommendation (drainer/lifecycle/spot.py): no
    lifecycle action to complete; EC2 decides the instance's end."""
    settings, clients = tools.settings, tools.clients
    started = time.monotonic()
    try:
        found = target(event, settings, clients)
    except AwsError as e:
        if not aws.is_permanent(e):
            raise
        # Not even known to be one of ours: no drain, so no end line or notice.
        message = ending.permanent(e).message
        log.error("spot event not acted on: %s", message)
        return {"result": str(Outcome.FAILED), "message": message}
    if isinstance(found, Skip):
        return ending.skipped(found)
    if settings.notify_on_start:
        ending.notify(settings, clients, notices.spot_start_notice(found, found.cluster))
    try:
        run = drain(found, tools, invocation)
    except AwsError as e:
        if not aws.is_permanent(e):
            raise
        run = replace(ending.permanent(e), cluster=found.cluster)
    ending.log_outcome(run, None, None)
    summary = ending.summary_of(
        run, None, None, time.monotonic() - started, trigger=str(event.kind)
    )
    return ending.finish(run, summary, found, settings, clients)
