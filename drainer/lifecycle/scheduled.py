"""A scheduled change drained SCHEDULED_CHANGE_LEAD_SECONDS before its maintenance
window: a one-time EventBridge Scheduler schedule per instance and change invokes the
function with the change's event then (drainer/aws/scheduler.py).

AWS Health sends a change more than once (each update with a later lastUpdatedTime),
and EventBridge may deliver any of them late, twice, or out of order. The schedule is
named after the change, so it holds one update, the latest seen:

- an update that moves the window moves the schedule; an older one changes nothing;
  one whose time EC2 does not list (or cannot be asked about) never brings the drain
  later than one a schedule holds (`_unconfirmed`: the earlier time is kept);
- an update that brings the drain due now drains now, and settles the schedule of
  an earlier update: it delivers an event then that does nothing. Without that, the
  old schedule drained the node again, days later, maybe after it was released;
- an older update that comes due now, while the schedule holds a newer one, drains
  nothing: the schedule says when;
- the change closed (carried out or cancelled) settles its schedules too: a
  cancelled change drains no node;
- the change closed where it has no schedule (none made yet, or it fired) leaves one
  that marks it closed, holding the close, for CLOSED_MARK_SECONDS: an update of the
  change delivered after the close (EventBridge's and Lambda's retries come up to a
  day late), not newer than it, drains nothing and says the change is closed already.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from drainer import aws
from drainer.errors import AwsError
from drainer.lifecycle import ending, notices
from drainer.lifecycle.events_ec2 import (
    AGAIN_SUFFIX,
    SCHEDULED_KEY,
    SETTLED_KEY,
    ChangeClosed,
    Ec2Event,
    Ec2Kind,
    updated_at,
)
from drainer.lifecycle.events_fields import iso
from drainer.lifecycle.job import Tools
from drainer.lifecycle.late import ec2_code
from drainer.lifecycle.window import Invocation

log = logging.getLogger(__name__)

SCHEDULE_SLACK_SECONDS = 60.0
"""A scheduled change's drain due within this is run now, not scheduled (a schedule
for less than a minute ahead may fire late)."""
CLOSED_MARK_SECONDS = 48 * 3600.0
"""How long a closed change with no schedule keeps one marking it closed: twice the
day an update of it may come late (EventBridge retries a delivery for up to 24 hours,
Lambda an asynchronous invocation for up to 6). The mark then delivers the close,
which drains nothing, and deletes itself."""
CLOSED_MARK_DESCRIPTION = (
    "eks-node-drainer: an EC2 scheduled change AWS Health closed; "
    "a late update of it drains nothing"
)
"""The description of a schedule that marks a change closed."""

_SCHEDULE_DONE = {
    aws.SCHEDULE_CREATED: "",
    aws.SCHEDULE_KEPT: "; the schedule existed already",
    aws.SCHEDULE_MOVED: "; the schedule existed for an earlier update of the change: moved",
}
_KEPT_EARLIER = (
    "; a schedule of the change was set for an earlier time, which is kept, as EC2 does "
    "not list the change at this update's (or cannot be asked); its invocation reads "
    "EC2 again"
)


def schedule_name(function_arn: str, change: str, instance_id: str) -> str:
    """The schedule of one change's drain of one instance: the change is its eventArn,
    the same in each update AWS Health sends, so a change announced twice is
    scheduled once."""
    digest = hashlib.sha256(f"{function_arn} {change}".encode()).hexdigest()[:10]
    return f"{aws.SCHEDULE_PREFIX}{instance_id}-{digest}"


def other_name(name: str) -> str:
    """The other name of a change's schedule: one that fires before EC2's time for the
    change is made again under it (`_fired`). EventBridge Scheduler deletes a one-time
    schedule once it has invoked the function, and a schedule remade under that name
    from that invocation could go with it."""
    return name.removesuffix(AGAIN_SUFFIX) if name.endswith(AGAIN_SUFFIX) else name + AGAIN_SUFFIX


def later(
    event: Ec2Event,
    tools: Tools,
    invocation: Invocation | None,
    raw_event: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """A scheduled change's drain, while its moment (the window's start, or, where EC2
    moved it, the earlier of EC2's and the event's, less the lead) is ahead: a
    schedule invokes the function with the same event then. None when the drain is
    due now: the schedule's own, or one that cannot be scheduled."""
    settings = tools.settings
    lead = settings.scheduled_change_lead_seconds
    if event.kind is not Ec2Kind.SCHEDULED_CHANGE or not lead or event.acts_at is None:
        return None
    function_arn = invocation.function_arn if invocation is not None else ""
    if event.schedule:
        return _fired(event, tools, function_arn, raw_event)
    drain_at = min(event.acts_at, event.announced_at or event.acts_at) - lead
    if not settings.scheduler_role_arn or not function_arn or raw_event is None:
        if drain_at > tools.clock() + SCHEDULE_SLACK_SECONDS:
            log.warning(
                "SCHEDULED_CHANGE_LEAD_SECONDS asks to drain at %s, but %s: draining now",
                iso(drain_at),
                "SCHEDULER_ROLE_ARN is empty" if function_arn else "there is no function to invoke",
            )
        return None
    name = schedule_name(function_arn, event.change_id or event.event_id, event.instance_id)
    asked = drain_at
    drain_at = _unconfirmed(event, tools, name, drain_at, raw_event)
    if drain_at <= tools.clock() + SCHEDULE_SLACK_SECONDS:
        return _due_now(event, tools, name, raw_event)
    against = _Against(raw_event, name)
    done = _schedule(tools, name, function_arn, raw_event, drain_at, against=against)
    if done is None:
        return None
    if against.closed_at is not None:
        return _closed_already(event, name, against)
    _settle_other(tools, name, raw_event, "an update of the change scheduled its drain")
    return _scheduled(event, name, done, lead, kept_earlier=drain_at < asked)


def _unconfirmed(
    event: Ec2Event, tools: Tools, name: str, drain_at: float, raw_event: Mapping[str, Any]
) -> float:
    """`drain_at`, for an update of a kind EC2 lists at a time EC2 does not list (or
    cannot be asked about): never later than a drain the change's schedules hold,
    under its name or its other one (EC2's time, listed before; or the drain this
    very update did, delivered again). Its invocation reads EC2 then. A drain due
    now is never kept waiting on Scheduler; one that is not is retried when
    Scheduler fails for now (raised: EventBridge delivers the event again)."""
    if event.listed_at is not None or not ec2_code(event.detail_code):
        return drain_at
    if drain_at <= tools.clock() + SCHEDULE_SLACK_SECONDS:
        return drain_at
    held = [_drain_held(tools, schedule, raw_event) for schedule in (name, other_name(name))]
    return min([drain_at, *(at for at in held if at is not None)])


def _drain_held(tools: Tools, schedule: str, raw_event: Mapping[str, Any]) -> float | None:
    """When the schedule drains the change: a drain to come, or the one this very
    update did (settled by it, delivered again); None for any other, or none. A
    failure for now is raised; one for good is a warning (None)."""

    def holds(held: Mapping[str, Any]) -> bool:
        this = not _holds_close(held, schedule) and updated_at(held) == updated_at(raw_event)
        return _a_drain(held) or this

    try:
        return aws.drain_time(tools.clients.scheduler, schedule, holds)
    except AwsError as e:
        if not aws.is_permanent(e):
            raise
        log.warning("the schedule %s could not be read (%s)", schedule, e)
        return None


def _scheduled(
    event: Ec2Event, name: str, done: aws.Scheduled, lead: int, *, kept_earlier: bool
) -> dict[str, Any]:
    """The drain scheduled: said, and answered."""
    log.info(
        "scheduled change %s of instance %s starts %s: its drain is scheduled for %s "
        "(SCHEDULED_CHANGE_LEAD_SECONDS=%d)%s",
        event.detail_code,
        event.instance_id,
        iso(event.acts_at or 0.0),
        iso(done.at),
        lead,
        _SCHEDULE_DONE[done.done] + (_KEPT_EARLIER if kept_earlier else ""),
        extra={"schedule": name, "drain_at": iso(done.at)},
    )
    return {"result": "scheduled", "drain_at": iso(done.at), "schedule": name}


def _fired(
    event: Ec2Event, tools: Tools, function_arn: str, raw_event: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """A schedule's own invocation: None (drain now), unless EC2 lists the change at a
    time whose drain, less the lead, is still ahead (the owner moved it since, or an
    update moved it before EC2 listed it, the schedule set for the earlier): then the
    drain is scheduled again for that time, under the schedule's other name."""
    lead = tools.settings.scheduled_change_lead_seconds
    drain_at = (event.listed_at or 0.0) - lead
    behind = drain_at <= tools.clock() + SCHEDULE_SLACK_SECONDS
    cannot = not (tools.settings.scheduler_role_arn and function_arn)
    if event.listed_at is None or behind or cannot or raw_event is None:
        log.info("schedule %s delivered the scheduled change: draining now", event.schedule)
        return None
    name = other_name(event.schedule)
    against = _Against(raw_event, name, again=True)
    done = _schedule(tools, name, function_arn, raw_event, drain_at, against=against)
    if done is None:
        return None
    if against.closed_at is not None:
        return _closed_already(event, name, against)
    log.warning(
        "schedule %s fired before EC2's time for scheduled change %s of instance %s (%s): "
        "its drain is scheduled again for %s, as %s",
        event.schedule,
        event.detail_code,
        event.instance_id,
        iso(event.listed_at),
        iso(drain_at),
        name,
        extra={"schedule": name, "drain_at": iso(drain_at)},
    )
    return {"result": "scheduled", "drain_at": iso(drain_at), "schedule": name}


def _settle_other(tools: Tools, name: str, raw_event: Mapping[str, Any], why: str) -> None:
    """The schedule's other name (`other_name`), when it holds an older update of the
    change than `raw_event` (made again from an invocation before): settled, so that it
    drains nothing. A failure is a log line: it fires, and its invocation reads EC2."""
    other = other_name(name)
    try:
        aws.settle_schedule(
            tools.clients.scheduler,
            other,
            payload=settled_payload(raw_event, other, why),
            supersedes=lambda held: (
                updated_at(raw_event) > updated_at(held) and not _holds_close(held, other)
            ),
        )
    except AwsError as e:
        log.warning("the schedule %s is left as it is (%s)", other, e)


def _due_now(
    event: Ec2Event, tools: Tools, name: str, raw_event: Mapping[str, Any]
) -> dict[str, Any] | None:
    """An update whose drain is due now: None (drain now), with the schedule of an
    earlier update, or of this one, settled; the schedule's answer when it holds a
    strictly newer update (this one came late: the newer says when). The drain never
    waits on Scheduler: when it fails, the drain goes on and the schedule is as it was."""
    why = (
        f"drained at {iso(tools.clock())} on an update of the change "
        f"(event {event.event_id}), which brought its drain due then"
    )
    try:
        done = aws.settle_schedule(
            tools.clients.scheduler,
            name,
            payload=settled_payload(raw_event, name, why),
            # The same update again (a retry of a drain that failed) drains again.
            supersedes=(against := _Against(raw_event, name, again=True)),
        )
    except AwsError as e:
        log.error("the schedule %s is left as it is (%s): draining now", name, e)
        return None
    if against.closed_at is not None:
        return _closed_already(event, name, against)
    _settle_other(tools, name, raw_event, why)
    moved_earlier = (event.acts_at or 0.0) < (event.announced_at or 0.0)  # by EC2
    if done != aws.SCHEDULE_KEPT or moved_earlier:  # due by EC2's time: whatever it holds
        if done == aws.SCHEDULE_SETTLED:
            log.info("the schedule %s of the change is settled: draining now", name)
        return None
    log.warning(
        "scheduled change %s of instance %s: this update (event %s) is older than "
        "the one its schedule %s holds; the schedule says when to drain",
        event.detail_code,
        event.instance_id,
        event.event_id,
        name,
        extra={"schedule": name},
    )
    return {"result": "scheduled", "schedule": name, "superseded": True}


class _Against:
    """Whether an update of a change replaces what its schedule holds: when it is
    newer (`again`: or the same update again). A close the schedule holds, as new as
    the update or newer, is never replaced: `closed_at` says when it was updated."""

    def __init__(self, raw_event: Mapping[str, Any], name: str, *, again: bool = False):
        self.raw_event, self.name, self.again = raw_event, name, again
        self.closed_at: float | None = None

    def __call__(self, held: Mapping[str, Any]) -> bool:
        mine, theirs = updated_at(self.raw_event), updated_at(held)
        if _holds_close(held, self.name) and mine <= theirs:
            self.closed_at = theirs
            return False
        return mine > theirs or (self.again and mine == theirs)


def _a_drain(held: Mapping[str, Any]) -> bool:
    """Whether a schedule's payload is a drain to come: not settled, not a close."""
    return SETTLED_KEY not in held


def _holds_close(held: Mapping[str, Any], name: str) -> bool:
    """Whether a schedule's payload is the change's close, settled by this function
    under this name (settle_closed): a schedule settled or marked on the close."""
    detail = held.get("detail")
    return (
        held.get(SCHEDULED_KEY) == name
        and isinstance(held.get(SETTLED_KEY), str)
        and isinstance(detail, Mapping)
        and detail.get("statusCode") == "closed"
    )


def _closed_already(event: Ec2Event, name: str, against: _Against) -> dict[str, Any]:
    """An update delivered after the change's close, and not newer: nothing to drain."""
    reason = (
        f"scheduled change {event.detail_code} of instance {event.instance_id} is already "
        f"closed: AWS Health closed the change (updated {iso(against.closed_at or 0.0)}), and "
        f"this update (event {event.event_id}, updated {iso(updated_at(against.raw_event))}) "
        "is not newer; nothing to drain"
    )
    log.warning("%s (schedule %s)", reason, name, extra={"schedule": name})
    return {"result": "skipped", "reason": reason, "schedule": name}


def settled_payload(raw_event: Mapping[str, Any], name: str, why: str) -> dict[str, Any]:
    """What a settled schedule delivers: enough of the change's event for the parser
    to skip it (drainer/lifecycle/events_ec2.py) and to order a later update against
    it (its lastUpdatedTime), well within a schedule's input size."""
    detail = raw_event.get("detail")
    detail = detail if isinstance(detail, Mapping) else {}
    kept = ("service", "eventTypeCategory", "eventTypeCode", "eventArn", "statusCode")
    return {
        **{k: raw_event[k] for k in ("id", "source", "detail-type", "time") if k in raw_event},
        "detail": {k: detail[k] for k in (*kept, "lastUpdatedTime") if k in detail},
        SCHEDULED_KEY: name,
        SETTLED_KEY: why,
    }


def _schedule(
    tools: Tools,
    name: str,
    function_arn: str,
    raw_event: Mapping[str, Any],
    drain_at: float,
    *,
    against: _Against,
) -> aws.Scheduled | None:
    """The one-time schedule that invokes the function with the event at `drain_at`:
    what was done (created; kept: it existed already; moved: it held an older update
    of the change, whose window AWS Health may have moved) and the time it is set
    for; None when AWS refuses it for good (the drain runs now then, saying why)."""
    try:
        return aws.schedule_invocation(
            tools.clients.scheduler,
            name,
            drain_at,
            function_arn=function_arn,
            role_arn=tools.settings.scheduler_role_arn,
            payload={**raw_event, SCHEDULED_KEY: name},
            supersedes=against,
        )
    except AwsError as e:
        if not aws.is_permanent(e):
            raise  # EventBridge delivers the event again
        log.error("the drain cannot be scheduled (%s): draining now", e)
        return None


def settle_closed(
    change: ChangeClosed,
    tools: Tools,
    invocation: Invocation | None,
    admitted: Callable[[Ec2Event], bool] = lambda event: True,
) -> list[str]:
    """A change AWS Health closed: each of its instances' schedules, where one holds an
    earlier update, delivers the closed event instead, which drains nothing; where
    there is none, one is made to mark the change closed (`_mark_closed`), for an
    instance `admitted` (the function's: an update of another's schedules nothing). The
    instances whose schedule was settled. Only the function's own schedules are read
    and made (their names come from its ARN), and none where nothing is ever
    scheduled."""
    function_arn = invocation.function_arn if invocation is not None else ""
    settings = tools.settings
    if not (settings.scheduled_change_lead_seconds and settings.scheduler_role_arn):
        return []
    if not function_arn:
        return []
    settled: list[str] = []
    marked: list[str] = []
    for event in change.events:
        name = schedule_name(function_arn, event.change_id, event.instance_id)
        payload = settled_payload(change.raw, name, "the change is closed")
        done = aws.settle_schedule(
            tools.clients.scheduler,
            name,
            payload=payload,
            supersedes=lambda held: updated_at(change.raw) > updated_at(held),
        )
        _settle_other(tools, name, change.raw, "the change is closed")
        if done == aws.SCHEDULE_SETTLED:
            settled.append(event.instance_id)
        elif (
            done == aws.SCHEDULE_ABSENT
            and admitted(event)
            and _mark_closed(change, tools, name, function_arn, payload)
        ):
            marked.append(event.instance_id)
    _say_settled(change, tools, settled, marked)
    return settled


def _say_settled(change: ChangeClosed, tools: Tools, settled: list[str], marked: list[str]) -> None:
    """The close's log lines: the schedules settled, the instances marked closed."""
    if settled:
        log.info(
            "%s closed: the drains scheduled for %s will do nothing",
            change.first.detail_code,
            ", ".join(settled),
            extra={"settled": settled},
        )
    if marked:
        log.info(
            "%s closed with no drain scheduled for %s: marked closed until %s, so that an "
            "update of the change delivered late drains nothing",
            change.first.detail_code,
            ", ".join(marked),
            iso(tools.clock() + CLOSED_MARK_SECONDS),
            extra={"marked": marked},
        )


def _mark_closed(
    change: ChangeClosed, tools: Tools, name: str, function_arn: str, payload: Mapping[str, Any]
) -> bool:
    """A schedule under the change's name, CLOSED_MARK_SECONDS from now, that holds
    its close (`payload`, with its lastUpdatedTime): an update delivered later and not
    newer finds it and drains nothing (`_Against`). It then delivers the close, which
    drains nothing, and deletes itself. False when it is there already (the close
    delivered again), or Scheduler refuses it for good: said in the log, the close
    goes on. Raised when Scheduler fails for now: the close is delivered again, and
    each of its steps is safe to repeat."""
    try:
        done = aws.schedule_invocation(
            tools.clients.scheduler,
            name,
            tools.clock() + CLOSED_MARK_SECONDS,
            function_arn=function_arn,
            role_arn=tools.settings.scheduler_role_arn,
            payload=payload,
            supersedes=lambda held: updated_at(change.raw) > updated_at(held),
            description=CLOSED_MARK_DESCRIPTION,
        )
    except AwsError as e:
        if not aws.is_permanent(e):
            raise
        log.error(
            "the change is not marked closed for its schedule %s (%s): an update of it "
            "delivered late may still drain the node",
            name,
            e,
        )
        return False
    return done.done != aws.SCHEDULE_KEPT


def mid_chain(scheduled: dict[str, Any], found: notices.Ec2Subject, tools: Tools) -> dict[str, Any]:
    """A step of a change's chain of invocations (its node cordoned, some pods gone)
    found EC2 moving the window later, and scheduled the drain again for the new
    time: said in a warning line, the end line's message and a notice, so that the
    node cordoned until then is not left unsaid. Any other answer (the change closed,
    an update superseded) is the step's as it is."""
    if scheduled.get("result") != "scheduled" or not scheduled.get("drain_at"):
        return scheduled
    message = (
        f"EC2 moved the window of instance {found.instance_id}'s change later: the drain "
        f"under way stops here and goes on at {scheduled.get('drain_at')} (schedule "
        f"{scheduled.get('schedule')}); its node stays cordoned and out of the load "
        "balancers until then"
    )
    log.warning("%s", message)
    notice = notices.moved_later_notice(found, message, str(scheduled.get("drain_at")))
    ending.notify(tools.settings, tools.clients, notice)
    return {**scheduled, "message": message}
