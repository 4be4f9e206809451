"""The terminate lifecycle hook's trigger: a scale-in (or an instance refresh, a
health replacement) drains the instance's node while the hook holds it.

Admission (is the group the function's?), the deadline (DRAIN_TIMEOUT_SECONDS from
the event's time, never past the hook's GlobalTimeout), the cluster (the hook's
metadata, the group's tags, CLUSTER_NAME) and the plan make one drain job, run with
a heartbeat that keeps the lifecycle action alive. The deadline counts from the
lifecycle event's own time, never from a hand-over's claim of when the drain began:
a forged or corrupted hand-over never brings it, and with it the timeout policy,
forward. What the Auto Scaling group is then told is the outcome table's
(drainer/lifecycle/outcomes.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from drainer import aws
from drainer.errors import AwsError, LifecycleActionGone
from drainer.k8s.cordon import Delivery
from drainer.lifecycle import ending, frame, notices
from drainer.lifecycle.events_ec2 import EC2_TRIGGERS
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER, WARM_POOL_NAME, LifecycleEvent
from drainer.lifecycle.handover import Handover
from drainer.lifecycle.job import Approach, DrainJob, Run, Tools
from drainer.lifecycle.launch_release import release_command
from drainer.lifecycle.outcomes import Result, lifecycle_result
from drainer.lifecycle.runner import run_job
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.window import (
    Deadline,
    Invocation,
    Window,
    effective_deadline,
    hand_over_at,
    log_deadline,
)

log = logging.getLogger(__name__)


def approach(
    settings: Settings, event: LifecycleEvent, invocation: Invocation | None = None
) -> Approach:
    """The terminate hook's drain: it waits for a drain a spot event began (one that
    acts by the hook's deadline, when the instance goes: `ends_at_deadline`), and
    records its trigger and deadline on the node (so a rebalance recommendation
    that comes meanwhile leaves its record alone), and which delivery of the event
    runs it: a delivery of the same event again, in another request, is left to
    that drain (drainer/lifecycle/redelivered.py). A scale-in into the warm pool is
    the same drain, its record saying where the instance goes."""
    options = replace(
        settings.drain_options(),
        trigger=TERMINATE_HOOK_TRIGGER,
        destination=WARM_POOL_NAME if event.into_warm_pool else "",
    )
    handover = event.handover
    since = handover.started_at if handover is not None and handover.recorded else 0.0
    delivery = None
    if invocation is not None and invocation.request_id:
        step = handover.handovers if handover is not None else 0
        delivery = Delivery(event.event_id, invocation.request_id, step)
    return Approach(
        options, EC2_TRIGGERS, continued=since, delivery=delivery, ends_at_deadline=True
    )


def drain_instance(
    event: LifecycleEvent,
    tools: Tools,
    invocation: Invocation | None,
) -> Run:
    """Drain the event's instance, heartbeating its lifecycle action meanwhile."""
    settings, clients, clock = tools.settings, tools.clients, tools.clock
    now = clock()
    started_at = event.handover.started_at if event.handover else now
    admitted = frame.admit_hook(event, tools)
    if isinstance(admitted, str):
        return Run(Result.NOT_ALLOWED, admitted, started_at=started_at)
    if event.out_of_warm_pool:
        return Run(
            Result.NO_NODE,
            f"instance {event.instance_id} leaves the warm pool to be terminated: a warm "
            "instance runs no pods of the cluster's, nothing to drain",
            started_at=started_at,
        )
    deadline = effective_deadline(now, event, admitted.hook, settings)
    stale = _stale(event, clients.autoscaling, deadline, now, admitted.hook.heartbeat_timeout)
    if stale:
        return Run(Result.STALE, stale, started_at=started_at)
    log_deadline(deadline, clock())
    with frame.heartbeating(clients.autoscaling, event, admitted.hook) as heartbeat:
        window = Window(deadline, hand_over_at(invocation, settings, clock))
        beaten: list[bool] = []

        def gone_now() -> bool:  # asked by the runner as the drain hands over
            heartbeat.beat()
            beaten.append(True)
            return heartbeat.gone

        tools = replace(tools, action_gone=gone_now)
        run = replace(_drain(tools, event, admitted, window, invocation), deadline=deadline)
        if run.result == Result.HANDED_OVER and not heartbeat.gone and not beaten:
            # The next invocation beats after Lambda's queue, its start and its
            # admission: the last beat here must not be half a timeout old by then.
            heartbeat.beat()
    if heartbeat.gone:
        log.info("the lifecycle action is gone (completed elsewhere or timed out)")
        if run.result == Result.HANDED_OVER:  # nobody waits on the drain any more
            said = "the lifecycle action is gone (completed elsewhere or timed out): no "
            said += "invocation goes on with the drain; the instance goes as it is"
            run = replace(run, result=Result.TIMED_OUT, message=said)
    return _with_heartbeat(run, heartbeat, event, started_at, untold=frame.start_untold(tools))


SERVING = ("InService", "Pending", "Standby")
"""Auto Scaling lifecycle states (and their prefixes: Pending:Wait, ...) of an
instance that serves, or is about to: not one being terminated."""


def _stale(
    event: LifecycleEvent,
    autoscaling: aws.Client,
    deadline: Deadline,
    now: float,
    heartbeat_timeout: float,
) -> str:
    """Why the event is stale, "" when it is not. Its lifecycle action is gone, and
    either its instance serves again (a scale-in into the warm pool whose event came
    after the action timed out, the instance since back in service: draining it would
    cordon and empty a node in service, with no launch to release it), or the event
    came after its own deadline: hours late (Lambda's queue keeps an event up to 6 h),
    the instance maybe in a new action since (back from the warm pool, scaled in
    again) whose own event drains it to its own deadline; a drain to the old, past
    one would apply TIMEOUT_POLICY at once (force: every pod deleted, budgets
    bypassed), or the event is older than its hook's HeartbeatTimeout and the instance
    waits in another action of the same hook (a new one, whose deadline is later: the
    event's would come first, TIMEOUT_POLICY with it; held by another tool's hook
    only, it goes, and is drained what can be). Its node is left
    alone. Both signals must agree, the state (or the deadline) first: a heartbeat is
    tried only then (an old event waiting: a hand-over's own action, most often), and
    any other answer (the action alive, a retry just past the deadline, a failed
    call) drains as before; an action gone with its instance terminating
    (Terminating:Proceed) drains what it can."""
    late = deadline.at <= now
    since = event.waiting_since
    # older than its hook's timeout: unless heartbeated (a hand-over), timed out
    old = since is not None and now - since > heartbeat_timeout
    try:
        state = aws.instance_lifecycle_state(autoscaling, event.instance_id)
        if not (state.startswith(SERVING) or (old and state.endswith(":Wait")) or late):
            return ""
        aws.record_heartbeat(autoscaling, event)
        return ""  # the action is alive: an instance in Standby, say, is still drained
    except LifecycleActionGone:
        pass
    except AwsError:
        return ""  # the heartbeat ticker tries again; the drain goes on
    if not (state.startswith(SERVING) or late) and not _in_new_action(autoscaling, event):
        return ""  # another tool's hook holds it: it goes, drained what can be
    return _why_stale(event.instance_id, state, deadline, late=late)


def _in_new_action(autoscaling: aws.Client, event: LifecycleEvent) -> bool:
    """Whether the instance waits in another action of the event's own hook (a new
    scale-in of it, whose own event drains it); False when it cannot be told."""
    try:
        return aws.waits_on_hook(autoscaling, event.asg_name, event.hook_name, event.instance_id)
    except AwsError:
        return False


def _why_stale(instance: str, state: str, deadline: Deadline, *, late: bool) -> str:
    """The end's message of a stale event, its action gone: by the instance's state."""
    gone = f"the lifecycle action of instance {instance} is gone and "
    if state.startswith(SERVING):
        return (
            f"{gone}the instance is {state} again: the event is stale (it came after the "
            "action ended), so its node is left alone"
        )
    if state.endswith(":Wait") and not late:
        return (
            f"{gone}the instance waits in a new action of its hook ({state}): the event is "
            "stale, so its node is left to that action's own event and deadline"
        )
    return (
        f"{gone}the event came after its deadline ({deadline.source}): the event is "
        "stale, so its node is left alone (a new lifecycle action of the instance "
        "drains it by its own event)"
    )


def _with_heartbeat(
    run: Run,
    heartbeat: aws.Heartbeat,
    event: LifecycleEvent,
    started_at: float,
    *,
    untold: bool = False,
) -> Run:
    """The run with what its heartbeat saw, and the next hand-over's state when it
    hands over (the drain's start and its counts carried across invocations; `untold`:
    the start notice armed and not told yet)."""
    handover = None
    if run.result == Result.HANDED_OVER:
        handover = (event.handover or Handover(started_at, 0, 0)).handed_on(
            heartbeat.beats,
            evicted=run.report.evicted if run.report is not None else 0,
            target_wait_began=None if run.targets is None else run.targets.began_at,
            forced=run.report.forced if run.report is not None else 0,
            volume_wait_began=run.report.volume_wait_began if run.report is not None else None,
            recorded=run.report is not None and run.report.cordoned,
            start_untold=untold,
        )
    return replace(
        run,
        started_at=started_at,
        heartbeats=heartbeat.beats,
        action_gone=heartbeat.gone,
        handover=handover,
    )


def _drain(
    tools: Tools,
    event: LifecycleEvent,
    admitted: frame.Admitted,
    window: Window,
    invocation: Invocation | None,
) -> Run:
    """From the hook to a drain job: the cluster, the instance, then the job's run."""
    where = frame.locate(event, admitted, tools)
    if isinstance(where, frame.NotLocated):
        result = Result.NO_NODE if where.no_instance else Result.FAILED
        return Run(result, where.message, cluster=where.cluster_name)
    job = DrainJob(
        where.identity,
        where.cluster,
        window,
        approach(tools.settings, event, invocation),
        event.handover,
    )
    return run_job(tools, job)


def handle(
    event: LifecycleEvent,
    tools: Tools,
    invocation: Invocation | None,
    *,
    raw_event: Mapping[str, Any],
) -> dict[str, Any]:
    """A terminate lifecycle action, from the event to what the Auto Scaling group is
    told: the summary that is the end line."""
    settings, clients = tools.settings, tools.clients
    started = time.monotonic()
    _announce(event)
    if settings.notify_on_start and (event.handover is None or event.handover.start_untold):
        # not again down a chain, unless no invocation before cordoned
        tools = frame.start_notice(tools, notices.start_notice(event, settings.cluster_name))
    run = frame.aws_guarded(lambda: drain_instance(event, tools, invocation))
    if run.result == Result.HANDED_OVER:
        run = ending.hand_over(run, raw_event, clients, invocation)
    result, completed = _answer(clients, event, run, settings)
    summary = frame.end_summary(run, result, completed, started)
    if event.into_warm_pool:
        summary = _into_warm_pool(summary, run, settings)
    if (before := event.handover) is not None:
        summary = ending.across_invocations(summary, run, before)
    return ending.finish(run, summary, event, settings, clients)


def _announce(event: LifecycleEvent) -> None:
    """Say what kind of drain this is before it starts: one handed over, one into the
    warm pool."""
    if event.handover:
        log.info(
            "continuing a drain handed over %d time(s), begun %.0f s ago",
            event.handover.handovers,
            time.time() - event.handover.started_at,
        )
    if event.into_warm_pool and event.handover is None:
        log.info(
            "instance %s goes to the warm pool: Auto Scaling stops it and keeps it for reuse; "
            "its node is drained and stays, cordoned, until the instance comes back",
            event.instance_id,
        )


def _answer(
    clients: aws.AwsClients, event: LifecycleEvent, run: Run, settings: Settings
) -> tuple[str | None, bool | None]:
    """What the Auto Scaling group is told (the outcome table, None: nothing) and
    whether the action was completed with it."""
    result = lifecycle_result(run.result, settings)
    return result, frame.answer(clients, event, result, action_gone=run.action_gone)


_NOTHING_CORDONED = frozenset(
    {
        Result.NO_NODE,
        Result.RELEASED,  # released: uncordoned
        Result.REDELIVERED,  # another delivery's drain says its own end
        Result.DRY_RUN,
        Result.NOT_ALLOWED,
        Result.NOT_OURS,
        Result.STALE,
    }
)
"""The results of a scale-in into the warm pool that leave no cordon of ours."""


def _into_warm_pool(summary: dict[str, Any], run: Run, settings: Settings) -> dict[str, Any]:
    """The end line of a scale-in into the warm pool: where the instance goes and, when
    nothing of ours will see it come back (LAUNCH_HOOK off), what to run then: said
    in a warning line and added to the end line's message (after the run's own, a
    timeout's say), which the notice carries too."""
    summary = {**summary, "destination": WARM_POOL_NAME}
    if not settings.launch_hook and run.node and run.result not in _NOTHING_CORDONED:
        # a failure may come before its cordon, or after an earlier step's
        stays = (
            "if it was cordoned, it stays so" if run.result is Result.FAILED else "stays cordoned"
        )
        advice = (
            f"LAUNCH_HOOK is off: when the instance comes back from the warm pool, run "
            f"`{release_command(run.node)}` (its node {stays} until then)"
        )
        said = summary.get("message")
        summary["message"] = f"{said}; {advice}" if said else advice
        log.warning("%s", advice)
    return summary
