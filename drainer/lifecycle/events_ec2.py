"""EC2's own events about an instance, parsed into a frozen `Ec2Event` (acted on by
drainer/lifecycle/ec2_events.py): spot interruption warnings, rebalance
recommendations, AWS Health scheduled changes (`ScheduledChanges` when one names
several instances), state changes to stopping or shutting-down, and capacity
reservation interruption warnings. None has a lifecycle action: EC2, not Auto
Scaling, decides the instance's end.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any

from drainer.lifecycle.events_fields import (
    INSTANCE_ID,
    Malformed,
    Skip,
    epoch,
    in_range,
    instance_id,
    optional,
    required,
    shown,
)

EC2_SOURCE = "aws.ec2"
SPOT_INTERRUPTION_DETAIL_TYPE = "EC2 Spot Instance Interruption Warning"
REBALANCE_DETAIL_TYPE = "EC2 Instance Rebalance Recommendation"
SPOT_NOTICE_SECONDS = 120
"""EC2 reclaims a spot instance two minutes after its interruption warning (and an
interruptible capacity reservation's instance, when its warning names no time)."""
HEALTH_SOURCE = "aws.health"
HEALTH_DETAIL_TYPE = "AWS Health Event"
SCHEDULED_CHANGE_CATEGORY = "scheduledChange"
STATE_CHANGE_DETAIL_TYPE = "EC2 Instance State-change Notification"
DRAIN_STATES = ("stopping", "shutting-down")
"""The instance states whose notification begins a drain: the OS is shutting down."""
STATE_CHANGE_NOTICE_SECONDS = 60
"""EC2 tells no time with a state change: the instance's OS is already shutting
down. The drain takes this long from the event's time as its deadline (every pod
evicted at once, grace periods cut to fit); what is still running then goes with
the OS (the kubelet's graceful node shutdown, where it is configured)."""
CAPACITY_INTERRUPTION_DETAIL_TYPE = "EC2 Capacity Reservation Instance Interruption Warning"
SCHEDULED_KEY = "drainer_schedule"
"""Top-level key of a scheduled change's event as its schedule delivers it: the
schedule's name. Such an event is drained at once, never scheduled again."""
AGAIN_SUFFIX = "-again"
"""The suffix of a change's schedule made again when it fired before EC2's time
(drainer/lifecycle/scheduled.py other_name): only a change EC2 moved has one."""
SETTLED_KEY = "drainer_settled"
"""Top-level key of the event a schedule holds once its drain is no longer needed
(the change was drained already, on an update that moved its window within the
lead): why. Its schedule's invocation then does nothing."""


class Ec2Kind(StrEnum):
    """Which of EC2's events began a drain (the end line's `trigger`)."""

    INTERRUPTION = "spot-interruption"
    REBALANCE = "rebalance-recommendation"
    SCHEDULED_CHANGE = "scheduled-change"
    """An AWS Health scheduled change for the instance (retirement, maintenance)."""
    STATE_CHANGE = "state-change"
    """The instance is stopping or shutting down (stopped or terminated by a hand
    other than Auto Scaling's hook)."""
    CAPACITY_RESERVATION = "capacity-reservation-interruption"
    """An interruptible capacity reservation takes its capacity back."""


EC2_EVENT_NAMES = {
    Ec2Kind.INTERRUPTION: "spot interruption warning",
    Ec2Kind.REBALANCE: "rebalance recommendation",
    Ec2Kind.SCHEDULED_CHANGE: "scheduled change",
    Ec2Kind.STATE_CHANGE: "state change",
    Ec2Kind.CAPACITY_RESERVATION: "capacity reservation interruption warning",
}
"""Each of EC2's events, in words (log lines and notices)."""
EC2_TRIGGERS = frozenset(str(kind) for kind in Ec2Kind)
"""What the node's record says began the drain of one of EC2's events."""


@dataclass(frozen=True)
class Ec2Event:
    """One of EC2's events about one instance: a spot interruption warning (the
    instance is reclaimed two minutes after the event's time), a rebalance
    recommendation (it is at higher risk of one), a scheduled change (EC2 acts when
    its maintenance window starts), a state change (the OS is shutting down) or a capacity
    reservation's interruption warning. None has a lifecycle action: EC2, not Auto
    Scaling, decides the instance's end."""

    kind: Ec2Kind
    instance_id: str
    event_id: str
    event_time: str
    region: str
    account: str
    instance_action: str = ""
    """The warning's "instance-action": terminate, stop or hibernate."""
    acts_at: float | None = None
    """When EC2 acts on the instance, where the event says (epoch seconds): a
    scheduled change's start, a capacity reservation's instance-termination-time."""
    detail_code: str = ""
    """What happens in EC2's words: a scheduled change's eventTypeCode, a state
    change's state."""
    announced_at: float | None = None
    """A scheduled change EC2 moved (late.as_ec2_lists): the window the event named,
    `acts_at` being EC2's time; None otherwise."""
    listed_at: float | None = None
    """A scheduled change's time as EC2 lists it, asked by this invocation (its window,
    or where EC2 moved it); None when EC2 lists nothing pending for it, or was not asked."""
    schedule: str = ""
    """The EventBridge Scheduler schedule that delivered this event (a scheduled
    change drained before its maintenance window); empty when EventBridge's rule did."""
    change_id: str = ""
    """A scheduled change's eventArn: the same in every update AWS Health sends of it."""

    @property
    def issued_at(self) -> float | None:
        """The event's time in epoch seconds; None when it does not parse."""
        return epoch(self.event_time)

    @property
    def fate(self) -> tuple[str, bool]:
        """What EC2 does to the instance, in words, and whether it may come back (a
        reboot, a stop or hibernation it may be started from, a rebalance that may
        come to nothing): its node then stays cordoned until it is released."""
        if self.kind is Ec2Kind.REBALANCE:
            return "EC2 may interrupt the instance", True
        if self.kind is Ec2Kind.SCHEDULED_CHANGE:
            return _scheduled_fate(self.detail_code.upper())
        if self.instance_action == "stop" or (
            self.kind is Ec2Kind.STATE_CHANGE and self.detail_code == "stopping"
        ):
            return "EC2 stops the instance", True
        if self.instance_action == "hibernate":
            return "EC2 hibernates the instance", True
        return "EC2 ends the instance", False

    def log_keys(self) -> dict[str, str]:
        return {
            "instance_id": self.instance_id,
            "trigger": str(self.kind),
            "event_id": self.event_id,
        }


@dataclass(frozen=True)
class ScheduledChanges:
    """An AWS Health scheduled change naming several instances: one Ec2Event each,
    and the event as it came (narrowed to one instance by `for_instance`)."""

    events: tuple[Ec2Event, ...]
    raw: Mapping[str, Any]

    @property
    def region(self) -> str:
        return self.events[0].region

    def for_instance(self, instance_id: str) -> dict[str, Any]:
        """The same event about `instance_id` alone, to drain it in an invocation of
        its own."""
        return narrowed(self.raw, instance_id)


@dataclass(frozen=True)
class ChangeClosed:
    """AWS Health's word that a scheduled change is over: carried out, or cancelled.
    Nothing is drained; a schedule made for an earlier update of it is settled
    (drainer/lifecycle/scheduled.py), so that it drains nothing either, and the node
    its drain left cordoned is released (drainer/lifecycle/closed.py). One Ec2Event
    per instance it names, each with the change's eventArn."""

    events: tuple[Ec2Event, ...]
    raw: Mapping[str, Any]

    @property
    def first(self) -> Ec2Event:
        return self.events[0]

    @property
    def region(self) -> str:
        return self.first.region

    def log_keys(self) -> dict[str, str]:
        return {"trigger": str(Ec2Kind.SCHEDULED_CHANGE), "event_id": self.first.event_id}


def narrowed(raw: Mapping[str, Any], instance_id: str) -> dict[str, Any]:
    """A scheduled change's event about `instance_id` alone."""
    event = copy.deepcopy(dict(raw))
    event.pop(SCHEDULED_KEY, None)
    event["resources"] = [instance_id]
    event["detail"]["affectedEntities"] = [
        entity
        for entity in event["detail"]["affectedEntities"]
        if isinstance(entity, dict) and entity.get("entityValue") == instance_id
    ]
    return event


_EC2_KINDS = {
    SPOT_INTERRUPTION_DETAIL_TYPE: Ec2Kind.INTERRUPTION,
    REBALANCE_DETAIL_TYPE: Ec2Kind.REBALANCE,
    STATE_CHANGE_DETAIL_TYPE: Ec2Kind.STATE_CHANGE,
    CAPACITY_INTERRUPTION_DETAIL_TYPE: Ec2Kind.CAPACITY_RESERVATION,
}


def parse_ec2(
    event: dict[str, Any],
) -> Ec2Event | ScheduledChanges | ChangeClosed | Skip | None:
    """The event as one of EC2's (or AWS Health's) events, a Skip saying why it is not
    one to drain for, or None when it comes from neither."""
    source, detail_type = event.get("source"), event.get("detail-type")
    # A detail-type of another JSON type (a list) is no kind: skipped, never a TypeError.
    if source == EC2_SOURCE and isinstance(detail_type, str) and detail_type in _EC2_KINDS:
        return _ec2_event(event, _EC2_KINDS[str(detail_type)])
    if source == HEALTH_SOURCE and detail_type == HEALTH_DETAIL_TYPE:
        return _scheduled_change(event)
    return None


def _ec2_event(event: dict[str, Any], kind: Ec2Kind) -> Ec2Event | Skip:
    detail = event.get("detail")
    if not isinstance(detail, dict):
        return Skip("field 'detail' is missing or not an object", malformed=True)
    try:
        parsed = Ec2Event(
            kind=kind,
            instance_id=instance_id(detail, "instance-id"),
            event_id=required(event, "id"),
            event_time=required(event, "time"),
            region=required(event, "region"),
            account=required(event, "account"),
            instance_action=optional(detail, "instance-action", "detail."),
            detail_code=optional(detail, "state", "detail."),
        )
        if kind is Ec2Kind.CAPACITY_RESERVATION and "instance-termination-time" in detail:
            # named by every warning AWS shows; without it: the warning's time + 120 s
            parsed = replace(parsed, acts_at=_time_field(detail, "instance-termination-time"))
    except Malformed as malformed:
        return Skip(f"malformed {kind} event: {malformed}", malformed=True)
    if parsed.issued_at is None:
        return Skip(f"malformed {kind} event: field 'time' is not an RFC 3339 time", malformed=True)
    if kind is Ec2Kind.STATE_CHANGE and parsed.detail_code not in DRAIN_STATES:
        return Skip(
            f"instance {parsed.instance_id} is {parsed.detail_code or 'in no state'}: "
            f"only {' and '.join(DRAIN_STATES)} begin a drain"
        )
    return parsed


def _scheduled_change(event: dict[str, Any]) -> Ec2Event | ScheduledChanges | ChangeClosed | Skip:
    """An AWS Health event: a scheduled change for EC2 instances (retirement,
    maintenance) drains every instance it names; any other is skipped."""
    detail = event.get("detail")
    if not isinstance(detail, dict):
        return Skip("field 'detail' is missing or not an object", malformed=True)
    service, category = detail.get("service"), detail.get("eventTypeCategory")
    if service != "EC2" or category != SCHEDULED_CHANGE_CATEGORY:
        return Skip(
            f"AWS Health event of {service!r}, category {category!r}: only EC2's "
            f"{SCHEDULED_CHANGE_CATEGORY} begins a drain"
        )
    kind = Ec2Kind.SCHEDULED_CHANGE
    if detail.get("statusCode") == "closed":
        return _closed(event, detail)
    settled = event.get(SETTLED_KEY)
    if event.get(SCHEDULED_KEY) and isinstance(settled, str):
        return Skip(
            f"{kind} {detail.get('eventTypeCode')}, schedule {event[SCHEDULED_KEY]}: {settled}"
        )
    try:
        instances = _affected_instances(detail)
        template = _change(
            event,
            detail,
            acts_at=_time_field(detail, "startTime"),
            change_id=optional(detail, "eventArn", "detail."),
            schedule=optional(event, SCHEDULED_KEY),
        )
    except Malformed as malformed:
        return Skip(f"malformed {kind} event: {malformed}", malformed=True)
    if template.issued_at is None:
        return Skip(f"malformed {kind} event: field 'time' is not an RFC 3339 time", malformed=True)
    if not instances:
        return Skip(f"{kind} {template.detail_code}: it names no EC2 instance")
    events = tuple(replace(template, instance_id=i) for i in instances)
    return events[0] if len(events) == 1 else ScheduledChanges(events, event)


def _closed(event: dict[str, Any], detail: Mapping[str, Any]) -> ChangeClosed | Skip:
    """A closed change: one event per instance it names, to settle their schedules
    and release their nodes; a Skip when it names none, names no change, or when its
    own schedule delivers it."""
    over = Skip(
        f"{Ec2Kind.SCHEDULED_CHANGE} {detail.get('eventTypeCode')}: closed, the change is over"
    )
    if event.get(SCHEDULED_KEY):
        return over
    try:
        acts_at = _time_field(detail, "startTime") if "startTime" in detail else None
        template = _change(
            event, detail, acts_at=acts_at, change_id=required(detail, "eventArn", "detail.")
        )
        instances = _affected_instances(detail)
    except Malformed:
        return over
    if not instances or template.issued_at is None:
        return over
    return ChangeClosed(tuple(replace(template, instance_id=i) for i in instances), event)


def _change(
    event: Mapping[str, Any],
    detail: Mapping[str, Any],
    *,
    acts_at: float | None,
    change_id: str,
    schedule: str = "",
) -> Ec2Event:
    """A scheduled change's event for no instance yet (Malformed when a field it needs
    is missing): each instance it names gets a copy."""
    return Ec2Event(
        kind=Ec2Kind.SCHEDULED_CHANGE,
        instance_id="",
        event_id=required(event, "id"),
        event_time=required(event, "time"),
        region=required(event, "region"),
        account=required(event, "account"),
        acts_at=acts_at,
        detail_code=required(detail, "eventTypeCode", "detail."),
        schedule=schedule,
        change_id=change_id,
    )


def _affected_instances(detail: Mapping[str, Any]) -> list[str]:
    """The EC2 instances a scheduled change names, sorted, each once; entities that
    are not instance ids are left out."""
    entities = detail.get("affectedEntities")
    if not isinstance(entities, list):
        raise Malformed("field 'detail.affectedEntities' is missing or not a list")
    return sorted(
        {
            str(entity["entityValue"])
            for entity in entities
            if isinstance(entity, dict)
            and isinstance(entity.get("entityValue"), str)
            and INSTANCE_ID.fullmatch(entity["entityValue"])
        }
    )


REBOOTS, MAINTAINS = "EC2 reboots the instance", "EC2 maintains the instance"
RUNS_THROUGH = frozenset({REBOOTS, MAINTAINS})
"""The scheduled changes an instance runs through: it is there, running, after."""


def _scheduled_fate(code: str) -> tuple[str, bool]:
    """A scheduled change's fate by its eventTypeCode: most leave the instance (a
    reboot, a stop it may be started from, network or power maintenance it runs
    through); a retirement stops an EBS-backed instance (an EKS node's) and ends one
    with instance storage; only a termination surely ends it."""
    if "TERMINATION" in code:
        return "EC2 ends the instance", False
    if "RETIREMENT" in code:
        return "EC2 retires the instance (stops it, or ends it)", True
    if "REBOOT" in code:
        return REBOOTS, True
    if "_STOP_" in code:
        return "EC2 stops the instance", True
    return MAINTAINS, True


def updated_at(raw: Mapping[str, Any]) -> float:
    """When AWS Health last updated the change an event tells (its lastUpdatedTime,
    else the event's own time), in epoch seconds: of two updates of one change, the
    later says where its window is. 0 when the event says neither."""
    detail = raw.get("detail")
    if isinstance(detail, Mapping) and isinstance(detail.get("lastUpdatedTime"), str):
        try:
            return _time_field(detail, "lastUpdatedTime")
        except Malformed:
            pass
    sent = raw.get("time")
    return (epoch(sent) if isinstance(sent, str) else None) or 0.0


def _time_field(detail: Mapping[str, Any], key: str) -> float:
    """A time in an event's detail: RFC 3339 (EC2's) or RFC 1123 (AWS Health's
    "Sat, 05 Jun 2026 15:10:09 GMT"), in epoch seconds."""
    text = required(detail, key, "detail.")
    seconds = epoch(text)
    if seconds is None:
        try:
            seconds = in_range(parsedate_to_datetime(text).timestamp())
        except (TypeError, ValueError, IndexError, OverflowError):
            seconds = None
    if seconds is None or not math.isfinite(seconds):
        raise Malformed(f"field 'detail.{key}' is {shown(text)}, not a time")
    return seconds
