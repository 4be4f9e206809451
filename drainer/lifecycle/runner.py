"""Running a drain job, whatever its trigger: find the node, wait for a drain under
way or drain it with the engine, start again while the API server fails, then take
the instance out of its target groups."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from drainer import aws, logs
from drainer.backoff import Backoff
from drainer.engine.context import Pace
from drainer.engine.drain import Drain, RealWaits
from drainer.engine.options import DrainOptions
from drainer.engine.pace import Accuracy, Eta, Listed, forecast_within
from drainer.engine.pods import is_finished, parse_time
from drainer.engine.report import DrainEvent, DrainReport, Kind
from drainer.errors import KubeError, KubeServerError, KubeTooManyRequests, RecordChanged
from drainer.k8s import observed
from drainer.k8s.cordon import Delivery, ProgressRecord, progress_of, record_text, release
from drainer.k8s.events import EventPoster, Regarding
from drainer.k8s.kube import Kube, Obj
from drainer.k8s.nodes import find_node_object, other_manager
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER
from drainer.lifecycle.job import Approach, DrainJob, Run, Tools
from drainer.lifecycle.live import wait_for_live_drain
from drainer.lifecycle.outcomes import Result, lambda_outcome, lifecycle_result
from drainer.lifecycle.redelivered import begun_already, recent, redelivered
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.stopped import record_stopped
from drainer.lifecycle.targets import leave_target_groups
from drainer.lifecycle.told import DrainStory, say_opt_out_ignored
from drainer.lifecycle.window import Deadline
from drainer.outcome import DRAINING, Outcome

log = logging.getLogger(__name__)

API_RETRY = Backoff(first=4.0, cap=30.0)
"""Pauses before the whole drain starts again while the API server fails beyond the
client's own retries: 2-4 s, doubling to 30 s, never before a Retry-After."""

RECORD_TRIES = 3
"""Looks at the node whose drain record changes before each cordon; the next drains
without that check."""
FORECAST_SECONDS = 5.0
"""The longest the drain waits for its forecast (its ETA) before it starts without one."""


def run_job(tools: Tools, job: DrainJob) -> Run:
    """Drain the job's node (or wait for the drain under way), then take the instance
    out of its target groups: every trigger's path once the cluster is known."""
    run = _with_retries(tools, job)
    run = _leave_target_groups(tools, run, job)
    return replace(run, cluster=job.cluster.name)


def deadline_policy(options: DrainOptions, settings: Settings) -> str:
    """What applies at a drain's deadline, in the words of its timeout message: the
    one that deleted pods names itself, and no other claims a deletion."""
    if options.force_on_timeout and options.fit_grace_to_deadline:
        return "EC2 acts then: pods still held were deleted, each with the grace left"
    if options.force_on_timeout:
        return "TIMEOUT_POLICY=force"
    if options.trigger in ("", TERMINATE_HOOK_TRIGGER):
        return f"TIMEOUT_POLICY={settings.timeout_policy}"
    return "no lifecycle action: nothing deleted past its budget"


def result_for(report: DrainReport, deadline: Deadline, policy: str) -> tuple[Result, str]:
    """The outcome of the engine's report here, and the message that explains it;
    `policy`: what applied at the deadline (deadline_policy)."""
    result = lambda_outcome(report.outcome)
    if report.outcome in (Outcome.FAILED, Outcome.INTERRUPTED, Outcome.NO_NODE, Outcome.RELEASED):
        return result, report.stopped_by or "; ".join(report.errors)
    if report.outcome == Outcome.TIMED_OUT:
        forced = f"; force-deleted {report.forced} pods" if report.forced else ""
        return result, (
            f"drain timed out at its deadline, {deadline.source} "
            f"({policy}): {report.timeout_message()}{forced}"
        )
    # Pods the API refuses to evict whatever the wait (more than one budget).
    return result, "; ".join(report.errors)


def not_ours(node: str, manager: str) -> str:
    return f"node {node} is managed by {manager}, which drains it itself: left alone"


def _with_retries(tools: Tools, job: DrainJob) -> Run:
    """Drain, starting again while the API server fails beyond the client's own
    retries (the whole drain is safe to repeat), until time runs out."""
    window = job.window
    failures = changed = 0
    written: list[ProgressRecord] = []  # the records this invocation's drains wrote
    while True:
        try:
            return _drain_once(tools, job, written, judge=changed < RECORD_TRIES)
        except RecordChanged as e:  # another drain's cordon came first: decide again
            changed += 1
            if changed < RECORD_TRIES:
                log.info("%s; looking again", e)
            else:
                log.warning("%s; the record changed before each of %d cordons (another "
                            "writer keeps writing it): draining without that check, beside "
                            "it (a pod both drains evict goes once)", e, changed)  # fmt: skip
        except (KubeServerError, KubeTooManyRequests) as e:
            retry_after = e.retry_after if isinstance(e, KubeTooManyRequests) else None
            delay = API_RETRY.delay(failures, tools.rng, retry_after)
            failures += 1
            if tools.clock() + delay < window.limit:
                log.warning(
                    "the API server is failing (%s); starting the drain again in %.0f s",
                    e,
                    delay,
                )
                tools.sleep(delay)
                continue
            if window.hands_over:
                return Run(Result.HANDED_OVER, f"the API server kept failing: {e}")
            return Run(
                Result.TIMED_OUT,
                "the API server kept failing until the drain's deadline, "
                f"{window.deadline.source}: {e}",
            )
        except KubeError as e:  # RBAC, TLS, a refused token, ...: retrying will not help
            return Run(Result.FAILED, str(e))


def node_for(kube: Kube, identity: aws.NodeIdentity) -> dict[str, Any] | Run:
    """The instance's Kubernetes node, its name bound to the log lines; or the run that
    ends there: no node (never joined, or gone already), or a node another manager
    (Karpenter, EKS Auto Mode) drains itself."""
    found = find_node_object(
        kube,
        identity.private_dns_name,
        identity.hostname_candidates,
        identity.provider_id_suffix,
    )
    if found is None:
        return Run(
            Result.NO_NODE,
            f"no Kubernetes node for instance {identity.instance_id} (PrivateDnsName "
            f"{identity.private_dns_name or 'none'}): never joined or already gone",
        )
    node = str(found["metadata"]["name"])
    logs.bind(node_name=node)
    manager = other_manager(found)
    if manager:
        return Run(Result.NOT_OURS, not_ours(node, manager), node=node)
    return found


def _drain_once(
    tools: Tools, job: DrainJob, written: list[ProgressRecord], *, judge: bool = True
) -> Run:
    """Find the instance's node and drain it, with a fresh client; or wait for the
    drain another invocation began on it for a spot event, not for the one an earlier
    try of this invocation began (`written`). `judge`: the cordon begins only on the
    node's record as this decision read it (RecordChanged otherwise)."""
    window = job.window
    kube = tools.kube_factory(job.cluster, job.cluster.name, tools.settings)
    poster: EventPoster | None = None
    try:
        found = node_for(kube, job.identity)
        if isinstance(found, Run):
            return found
        node = str(found["metadata"]["name"])
        waited = _decided(tools, kube, job, found, written)
        if isinstance(waited, Run):
            return waited
        if not job.approach.options.dry_run:
            poster = EventPoster(kube, clock=tools.clock)
        judged = waited if judge else None  # the node as last read: the record decided on
        report, accuracy = _engine_drain(
            tools, kube, job, found, poster, judged=judged, written=written
        )
        if not job.approach.options.dry_run:  # for the plan: never fails the drain
            observed.keep(kube, report.stopped, tools.clock())
            if report.outcome is Outcome.HANDED_OVER and tools.action_gone:
                record_stopped(kube, node, written[-1], report, tools)
    finally:
        if poster is not None:
            poster.close(then=kube.close)  # the client stays open for Events still queued
        else:
            kube.close()
    policy = deadline_policy(job.approach.options, tools.settings)
    result, message = result_for(report, window.deadline, policy)
    before = job.handed_over.forced if job.handed_over else 0
    if result == Result.TIMED_OUT and before:
        message += f"; {before} pods force-deleted before a hand-over"
    return Run(result, message, node=node, report=report, accuracy=accuracy)


def _decided(
    tools: Tools, kube: Kube, job: DrainJob, found: Obj, written: list[ProgressRecord]
) -> Run | Obj:
    """What the node's record leaves this try to do: the Run that ends it (the node
    released since, or its change over; another delivery's drain; the drain followed
    to its end), or the node as last read, to drain on. A record that any earlier try
    of this invocation wrote (`written`: the runner's retries after API errors; a try
    may fail before its own cordon took) is this drain's own, not one to wait for."""
    node, window = str(found["metadata"]["name"]), job.window
    since = job.approach.continued  # a chain's: released since, or registered since?
    if since and not progress_of(found) and since > registered(found):
        return released_since(kube, found, job.approach.options.trigger, tools.clock)
    if job.approach.over:
        now, dry_run = tools.clock(), tools.settings.dry_run
        return released_over(kube, found, job.approach, now=now, dry_run=dry_run)
    if job.approach.delivery and (again := redelivered(found, job.approach, tools.clock())):
        return again
    mine = bool(written) and record_text(found) in {r.begun for r in written if r.begun}
    return wait_for_live_drain(
        tools,
        kube,
        node,
        frozenset() if mine else job.approach.waits_for,
        limit=window.limit,
        deadline=window.deadline.at,
        known=found,
        fixed_by_ec2=job.approach.fixed_by_ec2,
        ends_at_deadline=job.approach.ends_at_deadline,
        own=job.approach.options.trigger,
    )


def registered(node: Obj) -> float:
    """When the node object was created (epoch seconds; 0 when it does not say): one
    registered after a drain began is another object than the one it recorded on."""
    try:
        return parse_time(str(node["metadata"]["creationTimestamp"]))
    except (KeyError, TypeError, ValueError):
        return 0.0


def released_since(kube: Kube, found: Obj, trigger: str, clock: Callable[[], float]) -> Run:
    """A drain handed over to this invocation finds its node without the record an
    invocation before left: it was released since (a scheduled change's close, or a
    person's `release`). It is left released: cordoning it again would undo that. The
    node's Events tell the drain's end (DrainReleased). A terminate hook's lifecycle
    action is left to the hook's timeout, as for a release while an invocation drains."""
    node = str(found["metadata"]["name"])
    then = (
        "the lifecycle action is left to the hook's timeout and its DefaultResult"
        if trigger == TERMINATE_HOOK_TRIGGER
        else "should the event's change still be on, drain it again with "
        f"`eks-node-drainer drain --node {node}`"
    )
    message = (
        f"node {node} was released since the drain's last invocation (the drain record "
        "an invocation before left is gone: a scheduled change's close, or someone's "
        "`eks-node-drainer release`, removed it): left as it is, and the drain is handed "
        f"over no further; {then}"
    )
    log.warning("%s", message)
    poster = EventPoster(kube, clock=clock)
    uid = str(found["metadata"].get("uid") or "")
    poster.post(Regarding("Node", node, uid=uid), "DrainReleased", "Drain", message)
    poster.close()  # the Event's moment to go: the caller closes the client then
    return Run(Result.RELEASED, message, node=node)


def released_over(kube: Kube, found: Obj, approach: Approach, *, now: float, dry_run: bool) -> Run:
    """A continued drain whose change EC2 lists as over (`approach.over`): the change
    closed while an invocation of it ran, and the close left the node under that live
    drain. Its record is of this change: released now, as the close would have; any
    other (or one drained now: begun within REDELIVERY_GAP) is left as it is. A dry run
    says what it would release."""
    node = str(found["metadata"]["name"])
    record = progress_of(found) or {}
    why = ""
    if record.get("change") != approach.change:
        why = "is of another drain"
    elif record.get("phase") == DRAINING and recent(record, "since", now) is not None:
        why = "is of a drain under way"  # begun within REDELIVERY_GAP: it may still run
    if why:
        message = f"{approach.over}; node {node}'s record {why}: left as it is"
        log.warning("%s", message)
        return Run(Result.STALE, message, node=node)
    done = release(kube, found, dry_run=dry_run)
    undone = ", ".join(done.changed) or "nothing to undo"
    if dry_run:
        message = f"{approach.over}: the node would be released ({undone}; dry run)"
        return Run(Result.DRY_RUN, message, node=node)
    message = (
        f"{approach.over}: the change is over, and the node its drain left cordoned is "
        f"released ({undone}); the drain is handed over no further"
    )
    log.warning("%s", message)
    return Run(Result.RELEASED, message, node=node)


def _engine_drain(
    tools: Tools,
    kube: Kube,
    job: DrainJob,
    found: dict[str, Any],
    poster: EventPoster | None,
    *,
    judged: Obj | None,
    written: list[ProgressRecord],
) -> tuple[DrainReport, Accuracy | None]:
    """The engine's drain of the node, told as Kubernetes Events on it when there is a
    poster (none in a dry run), with its ETA when it could be forecast; and the
    forecast against the drain."""
    node = str(found["metadata"]["name"])
    node_uid = str(found["metadata"].get("uid") or "")
    options, window = job.options(), job.window
    before = job.handed_over.evicted if job.handed_over else 0
    story = None if poster is None else DrainStory(poster, node, node_uid, options.trigger, before)
    etas: list[Eta] = []

    def pace_from(listed_pods: list[dict[str, Any]], budgets: list[dict[str, Any]]) -> Pace | None:
        eta = _eta(tools, kube, node, job, listed=(listed_pods, budgets))
        etas.extend([eta] if eta is not None else [])
        return None if eta is None else eta.fields

    record = ProgressRecord(
        options.trigger,
        options.destination,
        job.approach.change,
        delivery=job.approach.delivery,
        own_deadline=job.approach.own_deadline,
        judged=judged,
    )
    written.append(record)
    drain = Drain(
        kube,
        node,
        options,
        record=record,
        waits=RealWaits(tools.clock),
        on_event=_told_to(story, tools, found, options.trigger, job.approach.delivery),
        node_uid=node_uid,
        pace_from=None if tools.forecaster is None else pace_from,
    )
    report = drain.run(window.deadline.at, window.stop_at, deadline_source=window.deadline.source)
    accuracy = etas[0].accuracy() if etas else None
    if story is not None:
        story.ended(report, lambda outcome: _told(outcome, options.trigger, tools.settings))
    return report, accuracy


def _eta(
    tools: Tools, kube: Kube, node: str, job: DrainJob, *, listed: Listed | None = None
) -> Eta | None:
    """The drain's ETA, from its forecast made now (from what the drain `listed` as
    it began), within FORECAST_SECONDS. A forecast that cannot be made (a read denied
    or failing, a fault of the model, too slow) is one warning line, never a failed or
    stalled drain."""
    if tools.forecaster is None:
        return None
    now = tools.clock()
    timeout = max(0.0, job.window.deadline.at - now)
    options = job.approach.options
    eta = forecast_within(
        tools.forecaster,
        kube,
        node,
        options,
        timeout=timeout,
        now=now,
        within=FORECAST_SECONDS,
        listed=listed,
    )
    if isinstance(eta, str):
        log.warning("no ETA for the drain of node %s: %s; the drain goes on without one", node, eta)
        return None
    return eta


def _told_to(
    story: DrainStory | None,
    tools: Tools,
    found: Obj,
    trigger: str,
    delivery: Delivery | None = None,
) -> Callable[[DrainEvent], None]:
    """One on_event callback: the node's Events (`story`), the caller's own, then,
    once the drain has cordoned the node (its record written: this invocation drains
    it, not another delivery of the event), the do-not-disrupt annotation it does not
    honour (`found`: the node as read before) and the start notice (`tools.on_started`);
    neither when the record shows the drain begun by the same event (begun_already: a
    hand-over's step, Lambda's retry), which said them."""
    opt_out = partial(say_opt_out_ignored, found, trigger, story)
    begun = begun_already(found, trigger, delivery, tools.clock())
    once = [] if begun else [f for f in (opt_out, tools.on_started) if f is not None]
    parts = [part for part in (story, tools.on_event) if part is not None]

    def each(event: DrainEvent) -> None:
        for part in parts:
            part(event)
        if event.kind is Kind.CORDONED:
            for then in once:
                then()

    return each


def _told(outcome: Outcome, trigger: str, settings: Settings) -> str | None:
    """What the Auto Scaling group is told of a drain that ended so, if anything (a
    drain EC2 began has no lifecycle action)."""
    if trigger != TERMINATE_HOOK_TRIGGER:
        return None
    return lifecycle_result(lambda_outcome(outcome), settings)


def _leave_target_groups(tools: Tools, run: Run, job: DrainJob) -> Run:
    """Once the pods are gone, the instance leaves the load balancers' target groups
    before CONTINUE (drainer/lifecycle/targets.py), within TARGET_GROUP_WAIT_SECONDS
    of the wait's start (in an invocation before, when it handed the wait over), the
    deadline and this invocation's time (past which the next one waits on)."""
    wait = tools.settings.target_group_wait_seconds
    if run.result not in (Result.DRAINED, Result.NO_NODE) or wait <= 0:
        return run
    window = job.window
    began = job.target_wait_began(tools.clock())
    holder = _IpHolder(tools, job, run.node)
    try:
        found = leave_target_groups(
            tools.clients.elbv2,
            job.identity.instance_id,
            job.cluster.name,
            sorted(tools.settings.target_group_arns),
            until=min(began + wait, window.limit),
            clock=tools.clock,
            sleep=tools.sleep,
            pods=run.report.addresses if run.report is not None else None,
            holder=holder if run.node else None,
        )
    finally:
        holder.close()
    found = replace(found, began_at=began)
    log.info(
        "%s",
        found.describe(),
        extra={
            "target_groups": found.groups,
            "pod_target_groups": found.pod_groups,
            "target_wait_seconds": round(found.seconds, 1),
            "targets_pending": found.pending,
        },
    )
    if found.pending and window.hands_over and tools.clock() >= window.limit:
        return replace(run, result=Result.HANDED_OVER, message=found.describe(), targets=found)
    return replace(run, targets=found)


class _IpHolder:
    """Which pod on another node (not hostNetwork, not finished) holds an evicted pod's
    IP now ("" for none), asked of the cluster with a client made at the first
    question (most drains have no IP target group to ask for)."""

    def __init__(self, tools: Tools, job: DrainJob, node: str) -> None:
        self.tools, self.job, self.node = tools, job, node
        self.kube: Kube | None = None

    def __call__(self, ip: str) -> str:
        if self.kube is None:
            self.kube = self.tools.kube_factory(
                self.job.cluster, self.job.cluster.name, self.tools.settings
            )
        for pod in self.kube.pods_with_ip(ip, self.node):
            # A hostNetwork pod has its node's IP (a freed pod IP may come back as a new
            # instance's own): no load balancer targets it for the evicted pod's Service.
            if (pod.get("spec") or {}).get("hostNetwork") or is_finished(pod):
                continue
            meta = pod["metadata"]
            return f"{meta.get('namespace', '')}/{meta['name']}"
        return ""

    def close(self) -> None:
        if self.kube is not None:
            self.kube.close()
