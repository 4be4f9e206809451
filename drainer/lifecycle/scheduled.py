"""A scheduled change drained SCHEDULED_CHANGE_LEAD_SECONDS before its maintenance
window: a one-time EventBridge Scheduler schedule per instance and change invokes the
function with the change's event then (drainer/aws/scheduler.py).

AWS Health sends a change more than once (each update with a later lastUpdatedTime),
and EventBridge may deliver any of them late, twice, or out of order. The schedule is
named after the change, so it holds one update, the latest seen:

- an update that moves the window moves the schedule; an older one changes nothing;
- an update that brings the drain due now drains now, and settles the schedule of
  an earlier update: it delivers an event then that does nothing. Without that, the
  old schedule drained the node again, days later, maybe after it was released;
- an older update that comes due now, while the schedule holds a newer one, drains
  nothing: the schedule says when;
- the change closed (carried out or cancelled) settles its schedules too: a
  cancelled change drains no node.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any

from drainer import aws
from drainer.errors import AwsError
from drainer.lifecycle import ending
from drainer.lifecycle.events_ec2 import (
    SCHEDULED_KEY,
    SETTLED_KEY,
    ChangeClosed,
    Ec2Event,
    Ec2Kind,
    narrowed,
    updated_at,
)
from drainer.lifecycle.events_fields import Skip, iso
from drainer.lifecycle.job import Tools
from drainer.lifecycle.window import Invocation

log = logging.getLogger(__name__)

SCHEDULE_SLACK_SECONDS = 60.0
"""A scheduled change's drain due within this is run now, not scheduled (a schedule
for less than a minute ahead may fire late)."""

_SCHEDULE_DONE = {
    aws.SCHEDULE_CREATED: "",
    aws.SCHEDULE_KEPT: "; the schedule existed already",
    aws.SCHEDULE_MOVED: "; the schedule existed for an earlier update of the change: moved",
}


def schedule_name(function_arn: str, change: str, instance_id: str) -> str:
    """The schedule of one change's drain of one instance: the change is its eventArn,
    the same in each update AWS Health sends, so a change announced twice is
    scheduled once."""
    digest = hashlib.sha256(f"{function_arn} {change}".encode()).hexdigest()[:10]
    return f"{aws.SCHEDULE_PREFIX}{instance_id}-{digest}"


def later(
    event: Ec2Event,
    tools: Tools,
    invocation: Invocation | None,
    raw_event: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """A scheduled change's drain, while its moment (the window's start less the
    lead) is still ahead: a schedule invokes the function with the same event then,
    marked with the schedule's name. None when the drain is due now: the schedule's
    own invocation, whenever it comes, or a drain that cannot be scheduled (no role,
    no function to invoke; it runs now then, saying why)."""
    settings = tools.settings
    lead = settings.scheduled_change_lead_seconds
    if event.kind is not Ec2Kind.SCHEDULED_CHANGE or not lead or event.acts_at is None:
        return None
    if event.schedule:
        log.info("schedule %s delivered the scheduled change: draining now", event.schedule)
        return None
    drain_at = event.acts_at - lead
    function_arn = invocation.function_arn if invocation is not None else ""
    if not settings.scheduler_role_arn or not function_arn or raw_event is None:
        if drain_at > tools.clock() + SCHEDULE_SLACK_SECONDS:
            log.warning(
                "SCHEDULED_CHANGE_LEAD_SECONDS asks to drain at %s, but %s: draining now",
                iso(drain_at),
                "SCHEDULER_ROLE_ARN is empty" if function_arn else "there is no function to invoke",
            )
        return None
    name = schedule_name(function_arn, event.change_id or event.event_id, event.instance_id)
    if drain_at <= tools.clock() + SCHEDULE_SLACK_SECONDS:
        return _due_now(event, tools, name, raw_event)
    done = _schedule(tools, name, function_arn, raw_event, drain_at)
    if done is None:
        return None
    log.info(
        "scheduled change %s of instance %s starts %s: its drain is scheduled for %s "
        "(SCHEDULED_CHANGE_LEAD_SECONDS=%d)%s",
        event.detail_code,
        event.instance_id,
        iso(event.acts_at),
        iso(drain_at),
        lead,
        _SCHEDULE_DONE[done],
        extra={"schedule": name, "drain_at": iso(drain_at)},
    )
    return {"result": "scheduled", "drain_at": iso(drain_at), "schedule": name}


def _due_now(
    event: Ec2Event, tools: Tools, name: str, raw_event: Mapping[str, Any]
) -> dict[str, Any] | None:
    """An update whose drain is due now: None (drain now), with the schedule of an
    earlier update settled; the schedule's answer when it holds a newer update (this
    one came late: the newer says when)."""
    why = (
        f"drained at {iso(tools.clock())} on a later update of the change "
        f"(event {event.event_id}), which brought its drain due then"
    )
    payload = {**raw_event, SCHEDULED_KEY: name, SETTLED_KEY: why}
    done = aws.settle_schedule(
        tools.clients.scheduler,
        name,
        payload=payload,
        supersedes=lambda held: updated_at(raw_event) > updated_at(held),
    )
    if done != aws.SCHEDULE_KEPT:
        if done == aws.SCHEDULE_SETTLED:
            log.info("the schedule %s of an earlier update of the change is settled", name)
        return None
    log.warning(
        "scheduled change %s of instance %s: this update (event %s) is not newer than "
        "the one its schedule %s holds; the schedule says when to drain",
        event.detail_code,
        event.instance_id,
        event.event_id,
        name,
        extra={"schedule": name},
    )
    return {"result": "scheduled", "schedule": name, "superseded": True}


def _schedule(
    tools: Tools,
    name: str,
    function_arn: str,
    raw_event: Mapping[str, Any],
    drain_at: float,
) -> str | None:
    """The one-time schedule that invokes the function with the event at `drain_at`:
    what was done (created; kept: it existed already; moved: it held an older update
    of the change, whose window AWS Health may have moved); None when AWS refuses it
    for good (the drain runs now then, saying why)."""
    try:
        return aws.schedule_invocation(
            tools.clients.scheduler,
            name,
            drain_at,
            function_arn=function_arn,
            role_arn=tools.settings.scheduler_role_arn,
            payload={**raw_event, SCHEDULED_KEY: name},
            supersedes=lambda held: updated_at(raw_event) > updated_at(held),
        )
    except AwsError as e:
        if not aws.is_permanent(e):
            raise  # EventBridge delivers the event again
        log.error("the drain cannot be scheduled (%s): draining now", e)
        return None


def closed(change: ChangeClosed, tools: Tools, invocation: Invocation | None) -> dict[str, Any]:
    """A change AWS Health closed: no drain; each of its instances' schedules, where
    one holds an earlier update, delivers the closed event instead, which drains
    nothing. Only the function's own schedules are read (their names come from its
    ARN), so an instance that is not one of ours costs one read."""
    over = f"{change.detail_code}: closed, the change is over"
    function_arn = invocation.function_arn if invocation is not None else ""
    settings = tools.settings
    if not (settings.scheduled_change_lead_seconds and settings.scheduler_role_arn):
        return ending.skipped(Skip(over))
    if not function_arn:
        return ending.skipped(Skip(over))
    settled = []
    for instance_id in change.instances:
        name = schedule_name(function_arn, change.change_id, instance_id)
        done = aws.settle_schedule(
            tools.clients.scheduler,
            name,
            payload={**narrowed(change.raw, instance_id), SCHEDULED_KEY: name},
            supersedes=lambda held: updated_at(change.raw) > updated_at(held),
        )
        if done == aws.SCHEDULE_SETTLED:
            settled.append(instance_id)
    if settled:
        log.info(
            "%s: the drains scheduled for %s will do nothing",
            over,
            ", ".join(settled),
            extra={"settled": settled},
        )
    return {"result": "skipped", "reason": over, "settled": settled}
