"""EC2's own events about an instance: drain its node before EC2 takes it away.

- A spot interruption warning comes two minutes before EC2 stops or terminates the
  instance, too late for a terminate lifecycle hook to help. The node is drained at
  once with a deadline of the warning's time plus 2 minutes less
  SPOT_DEADLINE_MARGIN_SECONDS: the ordinary pods evicted at the same time, grace
  periods cut to fit, the critical tier last when the ordinary pods are gone (or
  when little time is left), and the instance then leaves its target groups. A pod
  still held by its budget when only its grace period is left is deleted then, so
  that it gets SIGTERM and that grace instead of dying with the instance.
- A capacity reservation's interruption warning is the same, with the
  instance-termination-time the warning names.
- An AWS Health scheduled change (instance retirement, maintenance) names a maintenance
  window that may be days away: the drain's deadline is its start less the margin,
  or DRAIN_TIMEOUT_SECONDS when that is sooner (budgets respected all along, no pod
  deleted: the maintenance window is not here yet). An event naming several instances is
  drained one invocation each.
- A state change to stopping or shutting-down: the OS is going down already, so
  every pod is evicted at once in the minute that is left.
- A rebalance recommendation says a spot instance is at higher risk of
  interruption: REBALANCE_ACTION cordons the node (no new pods) or drains it within
  this invocation.

EC2 sends these for every instance of the account and region, so `target` first
decides whether the instance is one of ours: in an Auto Scaling group the function
covers (and not in its warm pool: a warm instance being stopped is left alone), and
of its cluster. The drain records what began it and its deadline on the
node (drainer/k8s/cordon.py); the terminate hook's event that follows for the same
instance waits for that drain instead of starting another
(drainer/lifecycle/live.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from drainer import aws, logs
from drainer.errors import AwsError, ClusterNotFound, InstanceNotFound, KubeError
from drainer.k8s.cordon import Delivery, cordon_patch, live_drain, progress_of
from drainer.lifecycle import ending, frame, late, notices
from drainer.lifecycle.admission import group_refused, group_tags
from drainer.lifecycle.ec2_handover import HANDED_OVER, SoFar, hand_over_event
from drainer.lifecycle.events_ec2 import (
    EC2_EVENT_NAMES,
    EC2_TRIGGERS,
    RUNS_THROUGH,
    SPOT_NOTICE_SECONDS,
    STATE_CHANGE_NOTICE_SECONDS,
    Ec2Event,
    Ec2Kind,
    ScheduledChanges,
)
from drainer.lifecycle.events_fields import Skip, iso
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER
from drainer.lifecycle.job import Approach, DrainJob, Run, Tools
from drainer.lifecycle.live import DRAIN_ENDINGS, ENDS_WITH_THE_INSTANCE
from drainer.lifecycle.outcomes import Result
from drainer.lifecycle.runner import node_for, run_job
from drainer.lifecycle.scheduled import later, mid_chain
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.window import Deadline, Invocation, Window, hand_over_at, log_deadline

log = logging.getLogger(__name__)

WARMED = "Warmed:"
"""The prefix of a warm pool instance's Auto Scaling lifecycle state."""


@dataclass(frozen=True)
class Ec2Target:
    """An EC2 event's instance, found to be one of the function's nodes."""

    event: Ec2Event
    identity: aws.NodeIdentity
    cluster: str
    asg_name: str
    lifecycle_state: str = ""
    """Its Auto Scaling lifecycle state as admission read it ("" outside a group, or
    when it could not be read)."""

    @property
    def instance_id(self) -> str:
        return self.identity.instance_id


_SWITCHES: dict[Ec2Kind, tuple[str, Callable[[Settings], bool]]] = {
    Ec2Kind.INTERRUPTION: ("SPOT_INTERRUPTION_DRAIN", lambda s: s.spot_interruption_drain),
    Ec2Kind.REBALANCE: ("REBALANCE_ACTION", lambda s: s.rebalance_action != "off"),
    Ec2Kind.SCHEDULED_CHANGE: ("SCHEDULED_CHANGE_DRAIN", lambda s: s.scheduled_change_drain),
    Ec2Kind.STATE_CHANGE: ("STATE_CHANGE_DRAIN", lambda s: s.state_change_drain),
    Ec2Kind.CAPACITY_RESERVATION: (
        "CAPACITY_RESERVATION_DRAIN",
        lambda s: s.capacity_reservation_drain,
    ),
}
"""The setting that turns each event's drain on, and how to read it."""


def target(event: Ec2Event, settings: Settings, clients: aws.AwsClients) -> Ec2Target | Skip:
    """The event's instance if the function acts on it; else a Skip saying why."""
    variable, turned_on = _SWITCHES[event.kind]
    if not turned_on(settings):
        return Skip(f"{EC2_EVENT_NAMES[event.kind]}: {variable} is off")
    if event.kind is Ec2Kind.INTERRUPTION and event.instance_action not in ("", "terminate"):
        log.info(
            "the warning says EC2 will %s the instance, not terminate it; draining all the same "
            "(its pods go when it stops)",
            event.instance_action,
        )
    try:
        identity = aws.describe_instance(clients.ec2, event.instance_id)
    except InstanceNotFound as e:
        return Skip(f"{event.kind}: {e}")
    group, state = identity.asg_name, ""
    tags = group_tags(clients.autoscaling, group)
    if group:
        refused = group_refused(settings, clients.autoscaling, group, tags=tags)
        if refused:
            return Skip(f"{event.kind}: instance {event.instance_id}: {refused}")
        state = _lifecycle_state(clients, event.instance_id)
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
    if state.startswith(WARMED):  # after the cluster's check: another's is not `ours`
        return _in_warm_pool(event, group, state)
    return Ec2Target(event, identity, cluster, group, state)


def _in_warm_pool(event: Ec2Event, group: str, state: str) -> Skip:
    """Stopped once warmed (or on its way into the pool after a drain): a node it
    registered while warming serves nothing; the launch hook releases a drained one
    when it comes back. Ours all the same (a change's close marks it closed)."""
    return Skip(
        f"{event.kind}: instance {event.instance_id} is in the warm pool of {group} "
        f"({state}): left alone",
        ours=True,
    )


def _lifecycle_state(clients: aws.AwsClients, instance_id: str) -> str:
    """The instance's Auto Scaling lifecycle state; "" when it cannot be read for good
    (a role without autoscaling:DescribeAutoScalingInstances): the event is acted on
    all the same, a warm pool being the exception."""
    try:
        return aws.instance_lifecycle_state(clients.autoscaling, instance_id)
    except AwsError as e:
        if not aws.is_permanent(e):
            raise
        log.warning("cannot tell whether %s is in a warm pool: %s", instance_id, e)
        return ""


def fixed_by_ec2(found: Ec2Target, settings: Settings, now: float) -> bool:
    """Whether EC2 takes the instance at a time its event fixes, whatever the pods'
    budgets say: not a rebalance, nor a scheduled change the instance runs through (a
    reboot, a network or power maintenance), nor one whose maintenance window starts
    later than DRAIN_TIMEOUT_SECONDS from now."""
    event = found.event
    if event.kind is Ec2Kind.REBALANCE or late.is_late(found.event, found.identity, now):
        return False
    if event.kind is Ec2Kind.SCHEDULED_CHANGE:
        if event.fate[0] in RUNS_THROUGH:  # a reboot, a maintenance: the instance stays,
            return False  # its pods with it (a reboot restarts them in place)
        # A maintenance window already begun (Health's update of an open change): the change is
        # under way; the drain respects budgets rather than delete pods at once.
        margin, timeout = settings.spot_deadline_margin_seconds, settings.drain_timeout_seconds
        return event.acts_at is not None and now < event.acts_at - margin <= now + timeout
    return True


def deadline_of(found: Ec2Target, settings: Settings, now: float) -> Deadline:
    """When the drain must be over: the margin before EC2 acts, where the event fixes
    that time; DRAIN_TIMEOUT_SECONDS from now for a rebalance, and for a scheduled
    change whose maintenance window is further away than that."""
    event = found.event
    margin = settings.spot_deadline_margin_seconds
    # issued by the time it came at the latest: a later time (a skewed clock, a
    # hand-made event) would lend the drain EC2's notice from then
    issued = min(event.issued_at, now) if event.issued_at is not None else now
    less = f"- SPOT_DEADLINE_MARGIN_SECONDS ({margin} s)"
    if late.is_late(found.event, found.identity, now):
        return Deadline(
            now + late.LATE_EVENT_DRAIN_SECONDS,
            f"{EC2_EVENT_NAMES[event.kind]} of {event.event_time} {late.CAME_LATE}, "
            f"and instance {found.instance_id} is still {found.identity.state}: "
            f"{late.LATE_EVENT_DRAIN_SECONDS:.0f} s to drain, budgets respected",
        )
    if not fixed_by_ec2(found, settings, now):
        timeout = settings.drain_timeout_seconds
        return Deadline(now + timeout, f"DRAIN_TIMEOUT_SECONDS ({timeout} s)")
    if event.kind is Ec2Kind.INTERRUPTION:
        return Deadline(
            issued + SPOT_NOTICE_SECONDS - margin,
            f"spot interruption warning at {event.event_time} + {SPOT_NOTICE_SECONDS} s {less}",
        )
    if event.kind is Ec2Kind.STATE_CHANGE:
        # The margin takes half the minute at most: a drain with no time at all
        # would delete every pod at once.
        cut = min(margin, STATE_CHANGE_NOTICE_SECONDS // 2)
        return Deadline(
            issued + STATE_CHANGE_NOTICE_SECONDS - cut,
            f"instance {event.detail_code} at {event.event_time} + "
            f"{STATE_CHANGE_NOTICE_SECONDS} s - SPOT_DEADLINE_MARGIN_SECONDS ({cut} s)",
        )
    if event.kind is Ec2Kind.SCHEDULED_CHANGE:
        starts = event.acts_at if event.acts_at is not None else now
        return Deadline(
            starts - margin, f"scheduled change {event.detail_code} starting {iso(starts)} {less}"
        )
    acts = event.acts_at if event.acts_at is not None else issued + SPOT_NOTICE_SECONDS
    return Deadline(acts - margin, f"capacity reservation's termination at {iso(acts)} {less}")


def approach_for(
    found: Ec2Target,
    settings: Settings,
    deadline: Deadline,
    now: float,
    *,
    fixed: bool | None = None,
) -> Approach:
    """How the drain goes (its approach): the engine's options, and the live drains
    it waits for. When EC2 fixes the deadline, the ordinary pods are evicted
    at once (as many as EVICTION_CONCURRENCY and their budgets allow), grace periods
    are cut to the deadline, the critical tier keeps the last third of the time left at
    most, and a pod still held when only its grace is left is deleted then. Each
    records its trigger so that a later event waits for it; a rebalance drain waits
    for any of EC2's drains under way, the others only for one of the same event
    (EventBridge delivers at least once: a slower drain under way would not end in
    time); one whose deadline EC2 fixes only for such a drain that acts by that
    deadline (Approach.fixed_by_ec2: not one to its own deadline, nor a later one).
    `fixed`: whether EC2 acts at the deadline (fixed_by_ec2 when None; False when
    this invocation's end cut it short)."""
    base = settings.drain_options()
    kind = found.event.kind
    by_ec2 = fixed_by_ec2(found, settings, now)
    if not (by_ec2 if fixed is None else fixed):
        waits_for = EC2_TRIGGERS if kind is Ec2Kind.REBALANCE else frozenset({str(kind)})
        # Cut to this invocation's end before EC2's moment (a window within
        # DRAIN_TIMEOUT_SECONDS, further than this invocation's time): TIMEOUT_POLICY
        # applies at that end, the last this drain has before EC2 acts. Where EC2 does
        # not take the instance at all by this deadline (a rebalance, a window further
        # away, a late event's instance that still runs), no pod is deleted past its
        # budget, whatever TIMEOUT_POLICY says.
        options = replace(
            base, trigger=str(kind), force_on_timeout=base.force_on_timeout and by_ec2
        )
        return Approach(options, waits_for, found.event.change_id, own_deadline=True)
    time_left = max(0.0, deadline.at - now)
    options = replace(
        base,
        trigger=str(kind),
        critical_reserve_seconds=min(base.critical_reserve_seconds, time_left / 3),
        fit_grace_to_deadline=True,
        force_on_timeout=True,
    )
    return Approach(options, frozenset({str(kind)}), found.event.change_id, fixed_by_ec2=True)


def drain(
    found: Ec2Target,
    tools: Tools,
    invocation: Invocation | None,
    raw_event: Mapping[str, Any] | None = None,
    so_far: SoFar | None = None,
) -> Run:
    """Drain (or, for a rebalance with REBALANCE_ACTION=cordon, cordon) the node. A
    drain EC2's fixed moment lies beyond this invocation's time is cut to it, then
    handed over (drainer/lifecycle/ec2_handover.py) when pods are left. `so_far`: the
    drain before this invocation, as the event's hand-over mark carries it."""
    settings, clients, clock = tools.settings, tools.clients, tools.clock
    logs.bind(cluster=found.cluster, asg_name=found.asg_name)
    started = clock()
    deadline = ec2_deadline = deadline_of(found, settings, started)
    fixed = fixed_by_ec2(found, settings, started)
    stop = hand_over_at(invocation, settings, clock)
    cut = stop if stop is not None and stop < deadline.at else None  # it ends in this invocation
    handing_over = cut is not None and fixed and raw_event is not None
    if cut is not None:
        deadline = Deadline(cut, f"{deadline.source}, cut to this invocation's time")
        fixed = False  # EC2 does not act then: its grace-fitting and forcing do not apply
    log_deadline(deadline, started)
    try:
        cluster = aws.describe_cluster(clients.eks, found.cluster)
    except ClusterNotFound as e:
        return Run(Result.FAILED, str(e), cluster=found.cluster, deadline=deadline)
    if found.event.kind is Ec2Kind.REBALANCE and settings.rebalance_action == "cordon":
        run = _cordon(tools, found, cluster)
    else:
        approach = approach_for(found, settings, deadline, started, fixed=fixed)
        if so_far is not None and so_far.recorded:  # a node released since: let be
            approach = replace(approach, continued=so_far.started_at, over=so_far.over)
        if (delivery := _delivery(found, invocation, raw_event, so_far)) is not None:
            approach = replace(approach, delivery=delivery)
        if handing_over:  # not this drain's last chance: no pod deleted past its budget
            approach = replace(approach, options=replace(approach.options, force_on_timeout=False))
        run = run_job(tools, DrainJob(found.identity, cluster, Window(deadline), approach))
        if handing_over and run.result == Result.TIMED_OUT and raw_event is not None:
            run = replace(run, started_at=started)
            untold = frame.start_untold(tools)
            mark = replace(so_far or SoFar(), ec2_at=found.event.acts_at, start_untold=untold)
            run = hand_over_event(
                run, raw_event, clients.lambda_, invocation, ec2_deadline, so_far=mark
            )
    return replace(run, cluster=found.cluster, started_at=started, deadline=deadline)


def _delivery(
    found: Ec2Target,
    invocation: Invocation | None,
    raw_event: Mapping[str, Any] | None,
    so_far: SoFar | None,
) -> Delivery | None:
    """Which delivery of a change's event runs its drain, for the record a delivery of
    it again finds (redelivered.py); None for an event of no change, with no request,
    or whose hand-over mark does not read."""
    unread = so_far is None and raw_event is not None and HANDED_OVER in raw_event
    if not found.event.change_id or not invocation or not invocation.request_id or unread:
        return None
    step = so_far.handovers if so_far is not None else 0
    starts = found.event.acts_at
    window = int(starts) if starts is not None else None
    return Delivery(found.event.event_id, invocation.request_id, step, window)


def _cordon(tools: Tools, found: Ec2Target, cluster: aws.ClusterInfo) -> Run:
    """A rebalance recommendation with REBALANCE_ACTION=cordon: no new pods on the
    node; its pods stay until the interruption warning or the terminate hook. A node
    being drained, or drained already by a drain that ends with the instance, is left
    as it is (`_drained_already`)."""
    kube = tools.kube_factory(cluster, cluster.name, tools.settings)
    try:
        current = node_for(kube, found.identity)
        if isinstance(current, Run):
            return current
        node = str(current["metadata"]["name"])
        # Any drain under way, the terminate hook's too: its record stays as it is.
        draining = EC2_TRIGGERS | {TERMINATE_HOOK_TRIGGER}
        live = live_drain(current, tools.clock(), draining)
        if live is not None:
            if live.trigger not in _ENDED:
                _may_come_back(found, node)
            return Run(Result.CORDONED, f"node {node} is being drained already", node=node)
        drained = _drained_already(current, found)
        if drained:
            return Run(Result.CORDONED, drained, node=node)
        trigger = str(found.event.kind)
        patch, _ = cordon_patch(current, tools.clock(), trigger=trigger, phase=Result.CORDONED)
        kube.patch_node(node, patch, dry_run=tools.settings.dry_run)
    except KubeError as e:
        return Run(Result.FAILED, f"could not cordon the node: {e}")
    finally:
        kube.close()
    _may_come_back(found, node)
    return Run(
        Result.CORDONED,
        f"cordoned node {node} on the rebalance recommendation; its pods stay until the "
        "interruption warning or the terminate hook drains it",
        node=node,
    )


_ENDED = ENDS_WITH_THE_INSTANCE | {TERMINATE_HOOK_TRIGGER}
"""The drains whose end is the instance's: EC2's taking of it, or the Auto Scaling
group's termination (the terminate hook; not its scale-in into the warm pool, whose
record names that destination)."""


def _drained_already(current: dict[str, Any], found: Ec2Target) -> str:
    """Why the recommendation leaves the node as it is: its record shows the end of a
    drain that ends with the instance (a spot warning's, a capacity reservation's, a
    state change's, the terminate hook's), in this life of it: EC2 or the group has said
    more than a recommendation does, and the drain did what it asked. Its record stays
    (rewound to a rebalance cordon, it would say the pods stay until a warning or a
    drain that came and went), and there is no `release` advice. The same for a late
    warning's drain (its own 120 s; its ended record does not say so): EC2 may still
    act a little late, and should it not, the node is cordoned by that drain, not by
    this recommendation. "" otherwise."""
    record = progress_of(current) or {}
    trigger, phase, at = record.get("trigger"), record.get("phase"), record.get("at")
    if trigger not in _ENDED or phase not in DRAIN_ENDINGS or record.get("destination"):
        return ""  # a drain into the warm pool: the instance comes back
    launched = found.identity.launched_at
    if launched is not None and isinstance(at, int | float) and at < launched:
        return ""  # ended in an earlier life of the instance (stopped, started again)
    return (
        f"node {current['metadata']['name']} was drained already by the {trigger} drain "
        f"(it ended: {phase}), which the instance's end ends: the node and its record are "
        "left as they are"
    )


def _may_come_back(found: Ec2Target, node: str) -> None:
    """The warning line for a node the recommendation leaves cordoned: EC2 may never
    act on it."""
    fate, _ = found.event.fate
    log.warning("%s: %s", fate, notices.comes_back(node, str(found.event.kind), fate))


def handle(
    event: Ec2Event,
    tools: Tools,
    invocation: Invocation | None,
    raw_event: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One of EC2's events about one instance: no lifecycle action to complete; EC2
    decides the instance's end. `raw_event`: the event as it came, for a drain
    scheduled for later."""
    settings, clients = tools.settings, tools.clients
    started = time.monotonic()
    try:
        found = target(event, settings, clients)
    except AwsError as e:
        if not aws.is_permanent(e):
            raise
        # Not even known to be one of ours: no drain, so no end line or notice.
        message = ending.permanent(e).message
        log.error("%s not acted on: %s", EC2_EVENT_NAMES[event.kind], message)
        return {"result": str(Result.FAILED), "message": message}
    if isinstance(found, Skip):
        return ending.skipped(found)
    # handed over: the drain began in an invocation before (nothing read for the others)
    so_far = SoFar.of(raw_event) if raw_event and HANDED_OVER in raw_event else None
    stale = late.restarted(found.event, found.identity)
    if stale is None and event.kind is Ec2Kind.SCHEDULED_CHANGE:
        stale, found, so_far = late.as_ec2_lists(found, clients, so_far)
    if stale is not None:
        ending.notify(settings, clients, notices.stale_event_notice(found, stale.reason))
        return ending.skipped(stale)
    if event.kind is Ec2Kind.SCHEDULED_CHANGE:
        scheduled = later(found.event, tools, invocation, raw_event)
        if scheduled is not None:  # a chain's step: its node stays cordoned until then
            return scheduled if so_far is None else mid_chain(scheduled, found, tools)
    cordon_only = event.kind is Ec2Kind.REBALANCE and settings.rebalance_action == "cordon"
    if settings.notify_on_start and not cordon_only and (so_far is None or so_far.start_untold):
        # once the drain has cordoned the node: not for a delivery left to another
        tools = frame.start_notice(tools, notices.ec2_start_notice(found, found.cluster))
    run = frame.aws_guarded(lambda: drain(found, tools, invocation, raw_event, so_far))
    run = replace(run, cluster=found.cluster)
    summary = frame.end_summary(run, None, None, started, trigger=str(event.kind))
    if so_far is not None:
        summary = ending.across_invocations(summary, run, so_far)
    fate, may_come_back = notices.ec2_fate(event, summary)
    # A rebalance's cordon says so itself (_cordon): not for a node drained already.
    if may_come_back and run.result in (Result.DRAINED, Result.TIMED_OUT):
        log.warning("%s: %s", fate, notices.comes_back(run.node or "NODE", str(event.kind), fate))
    return ending.finish(run, summary, found, settings, clients)


def fan_out(
    changes: ScheduledChanges, tools: Tools, invocation: Invocation | None
) -> dict[str, Any]:
    """A scheduled change naming several instances: each is drained in an invocation
    of its own, all at once (EC2 acts on all of them in the same maintenance window), or one
    after another here when there is no function to invoke (the CLI, a test). Every
    step of a drain is safe to repeat, so an invocation that fails half-way is retried
    whole."""
    instances = [event.instance_id for event in changes.events]
    if invocation is None or not invocation.function_arn:
        results = {}
        for event in changes.events:
            logs.reset()
            logs.bind(**event.log_keys())
            results[event.instance_id] = handle(event, tools, None).get("result")
        return {"result": "each_instance", "instances": results}
    for instance_id in instances:
        aws.invoke_self_async(
            tools.clients.lambda_, invocation.function_arn, changes.for_instance(instance_id)
        )
    log.info(
        "scheduled change %s names %d instances: each drained in an invocation of its own",
        changes.events[0].detail_code,
        len(instances),
        extra={"instances": instances},
    )
    return {"result": "fanned_out", "instances": instances}
