"""EventBridge events, parsed once at the edge into typed, frozen objects: Auto
Scaling's terminate lifecycle actions, EC2's own events about an instance (spot
interruption warnings, rebalance recommendations, AWS Health scheduled changes,
state changes to stopping or shutting-down, capacity reservation interruption
warnings: drainer/lifecycle/ec2_events.py), the hook-sync triggers
(drainer/lifecycle/hooks.py) and make deploy's self-check.

EventBridge delivers every event matched by the rule, at least once, and retries a
function that raises. So `parse_event` never raises: anything that is not a
lifecycle action (a TEST_NOTIFICATION, a stray event, a malformed one) becomes a
`Skip` with a reason the handler logs. A crash here would
only make EventBridge redeliver the same bad event.

Every value that reaches an AWS call or a deadline is checked here, once: an
instance id has EC2's shape, a group, hook or token name holds no control
character, and every number lies in a window a real event can have. Whatever fails
is a malformed event (`Skip.malformed`): an error in the log, never a crash, never
retried.

A drain can outlast one Lambda invocation. The handler then re-invokes the function
with the original event plus a top-level "drainer" key (`with_handover`), which
`parse_event` reads back into `LifecycleEvent.handover`. Anyone allowed to invoke
the function can write that key, so it is only a claim: its numbers are bounded
here, and the drain's deadline never comes from it (window.effective_deadline
counts from the event's own time).
"""

from __future__ import annotations

import copy
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any

from drainer.aws import LIFECYCLE_ACTION_MAX_SECONDS

SOURCE = "aws.autoscaling"
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
TERMINATE_DETAIL_TYPE = "EC2 Instance-terminate Lifecycle Action"
LAUNCH_DETAIL_TYPE = "EC2 Instance-launch Lifecycle Action"
TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"
LAUNCHING = "autoscaling:EC2_INSTANCE_LAUNCHING"
WARM_POOL = "WarmPool"
"""An Origin or Destination of a lifecycle event: the Auto Scaling group's warm pool."""
WARM_POOL_NAME = "warm-pool"
"""The warm pool as the node's record and the end lines name it (destination, origin)."""
TEST_NOTIFICATION = "autoscaling:TEST_NOTIFICATION"
HANDOVER_KEY = "drainer"
SCHEDULED_KEY = "drainer_schedule"
"""Top-level key of a scheduled change's event as its schedule delivers it: the
schedule's name. Such an event is drained at once, never scheduled again."""
CLOCK_SKEW_SECONDS = 300.0
"""How far two clocks (EventBridge's event time, the invocation that wrote a
hand-over, this one) may disagree before a time is taken as wrong: the 5 minutes AWS
itself tolerates in a signed request."""
MAX_COUNT = 1_000_000
"""The bound on a hand-over's counters: far above what 48 hours allow (a hand-over
every few seconds, a heartbeat every 15 s at the most)."""
INSTANCE_ID = re.compile(r"i-(?:[0-9a-f]{8}|[0-9a-f]{17})")
"""An EC2 instance id: i- and 8 (older instances) or 17 hex digits."""
AWS_NAME_MAX = 255
"""The longest Auto Scaling group, lifecycle hook or action token name AWS accepts."""


@dataclass(frozen=True)
class Handover:
    """Progress carried from one invocation of a drain to the next."""

    started_at: float
    """Epoch seconds when the drain began, so the overall timeout spans invocations."""
    handovers: int
    """How many times the drain has been handed on so far."""
    heartbeats: int
    """Lifecycle heartbeats recorded by all previous invocations."""

    def handed_on(self, heartbeats: int) -> Handover:
        """The hand-over for the next invocation, after `heartbeats` more beats."""
        return Handover(self.started_at, self.handovers + 1, self.heartbeats + heartbeats)

    def as_dict(self) -> dict[str, object]:
        return {
            "started_at": self.started_at,
            "handovers": self.handovers,
            "heartbeats": self.heartbeats,
        }


@dataclass(frozen=True)
class LifecycleEvent:
    """An `EC2 Instance-terminate Lifecycle Action`: an instance waits in
    Terminating:Wait; or an `EC2 Instance-launch Lifecycle Action` (transition
    LAUNCHING): a new instance waits in Pending:Wait (drainer/lifecycle/launch.py)."""

    instance_id: str
    asg_name: str
    hook_name: str
    action_token: str
    """Identifies this lifecycle action; not a secret (it only works with IAM rights)."""
    transition: str
    notification_metadata: str
    """The hook's NotificationMetadata, raw; empty when the hook has none."""
    event_id: str
    event_time: str
    """ISO 8601, as EventBridge wrote it."""
    region: str
    account: str
    handover: Handover | None = None
    """Set when this invocation continues a drain an earlier invocation began."""
    origin: str = ""
    """Where the instance comes from: "EC2" (a new instance), "AutoScalingGroup" or
    "WarmPool"; empty in older events."""
    destination: str = ""
    """Where it goes: "AutoScalingGroup", "EC2" (terminated) or "WarmPool" (stopped,
    or hibernated, for reuse)."""

    @property
    def launching(self) -> bool:
        return self.transition == LAUNCHING

    @property
    def into_warm_pool(self) -> bool:
        """The instance goes to the group's warm pool: a scale-in that keeps it
        (drained like any other, then stopped), or a new instance being warmed."""
        return self.destination == WARM_POOL

    @property
    def out_of_warm_pool(self) -> bool:
        """The instance leaves the warm pool: back into service (launching), or to be
        terminated from the pool."""
        return self.origin == WARM_POOL

    @property
    def waiting_since(self) -> float | None:
        """When the instance entered Terminating:Wait (epoch seconds): the event's time,
        the same in every invocation of a drain. The hook's GlobalTimeout runs from
        then. None when the time does not parse (RFC 3339 is expected)."""
        return _epoch(self.event_time)

    def log_keys(self) -> dict[str, str]:
        """The fixed structured-log keys this event provides."""
        return {
            "instance_id": self.instance_id,
            "asg_name": self.asg_name,
            "lifecycle_hook_name": self.hook_name,
            "event_id": self.event_id,
        }


@dataclass(frozen=True)
class Skip:
    """An event the drainer does not act on, and why (for the log)."""

    reason: str
    malformed: bool = False
    """The event claims to be one the drainer acts on but a field is missing, of the
    wrong type or out of bounds: logged as an error, never retried."""


TERMINATE_HOOK_TRIGGER = "terminate-hook"
"""What began a drain of the terminate hook's event (the end line's `trigger`; a spot
event's is its Ec2Kind)."""


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
    its window starts), a state change (the OS is shutting down) or a capacity
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
    schedule: str = ""
    """The EventBridge Scheduler schedule that delivered this event (a scheduled
    change drained before its window); empty when EventBridge's rule did."""
    change_id: str = ""
    """A scheduled change's eventArn: the same in every update AWS Health sends of it."""

    @property
    def issued_at(self) -> float | None:
        """The event's time in epoch seconds; None when it does not parse."""
        return _epoch(self.event_time)

    def log_keys(self) -> dict[str, str]:
        return {
            "instance_id": self.instance_id,
            "trigger": str(self.kind),
            "event_id": self.event_id,
        }


@dataclass(frozen=True)
class SelfCheckEvent:
    """`make deploy` asks the function whether it can drain (drainer/k8s/selfcheck.py):
    {"self_check": {"cluster_name": "prod"}}, the cluster optional (CLUSTER_NAME)."""

    cluster_name: str = ""


def _epoch(text: str) -> float | None:
    """An event's RFC 3339 time in epoch seconds; None when it does not parse."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # EventBridge writes UTC
    return moment.timestamp()


@dataclass(frozen=True)
class HookSyncEvent:
    """Time to check the node groups' lifecycle hooks (drainer/lifecycle/hooks.py): the
    schedule's event, an Auto Scaling API call seen by CloudTrail, or make deploy's
    {"sync_hooks": {}}."""

    trigger: str
    """"schedule", "deploy" or "api:<eventName>", for the log."""
    asg_name: str = ""
    """The group the API call named, when it named one (for the log)."""


@dataclass(frozen=True)
class StackRequest:
    """A request of CloudFormation to the stack's custom resource Custom::LifecycleHooks
    (drainer/lifecycle/stack_hooks.py): Create, Update or Delete, and where to answer."""

    kind: str
    response_url: str
    stack_id: str
    request_id: str
    logical_id: str
    physical_id: str = ""
    properties: Mapping[str, Any] = field(default_factory=dict)
    old_properties: Mapping[str, Any] = field(default_factory=dict)

    @property
    def stack_name(self) -> str:
        """arn:aws:cloudformation:region:account:stack/NAME/id -> NAME."""
        parts = self.stack_id.split("/")
        return parts[1] if len(parts) > 2 else self.stack_id


STACK_REQUEST_KINDS = ("Create", "Update", "Delete")


def _stack_request(event: Mapping[str, Any]) -> StackRequest | None:
    """The event as a custom resource request, or None when it is not one."""
    if event.get("RequestType") not in STACK_REQUEST_KINDS:
        return None
    if not isinstance(event.get("ResponseURL"), str) or not isinstance(event.get("StackId"), str):
        return None
    properties = event.get("ResourceProperties")
    old = event.get("OldResourceProperties")
    return StackRequest(
        kind=str(event["RequestType"]),
        response_url=str(event["ResponseURL"]),
        stack_id=str(event["StackId"]),
        request_id=str(event.get("RequestId", "")),
        logical_id=str(event.get("LogicalResourceId", "")),
        physical_id=str(event.get("PhysicalResourceId", "")),
        properties=properties if isinstance(properties, dict) else {},
        old_properties=old if isinstance(old, dict) else {},
    )


SCHEDULED_SOURCE = "aws.events"
SCHEDULED_DETAIL_TYPE = "Scheduled Event"
CLOUDTRAIL_DETAIL_TYPE = "AWS API Call via CloudTrail"
HOOK_SYNC_API_CALLS = frozenset(
    {"CreateAutoScalingGroup", "CreateOrUpdateTags", "DeleteLifecycleHook"}
)
"""Auto Scaling API calls after which a group may lack its hook."""


def _hook_sync(event: Mapping[str, Any]) -> HookSyncEvent | None:
    """The event as a hook sync, or None when it is not one."""
    if "sync_hooks" in event:
        return HookSyncEvent("deploy")
    detail = event.get("detail")
    if (
        event.get("source") == SCHEDULED_SOURCE
        and event.get("detail-type") == SCHEDULED_DETAIL_TYPE
    ):
        return HookSyncEvent("schedule")
    if (
        event.get("source") == SOURCE
        and event.get("detail-type") == CLOUDTRAIL_DETAIL_TYPE
        and isinstance(detail, dict)
        and detail.get("eventSource") == "autoscaling.amazonaws.com"
        and detail.get("eventName") in HOOK_SYNC_API_CALLS
    ):
        request = detail.get("requestParameters")
        asg_name = request.get("autoScalingGroupName") if isinstance(request, dict) else None
        return HookSyncEvent(
            f"api:{detail['eventName']}", asg_name if isinstance(asg_name, str) else ""
        )
    return None


class _Malformed(Exception):
    """Internal: a required field is missing or has the wrong type."""


def parse_event(
    event: object, *, now: float | None = None
) -> (
    LifecycleEvent
    | Ec2Event
    | ScheduledChanges
    | SelfCheckEvent
    | HookSyncEvent
    | StackRequest
    | Skip
):
    """Turn an invocation event into a LifecycleEvent (or a spot event, a self-check,
    a hook sync or the stack's custom resource request), or a Skip saying why not.
    `now` (epoch seconds, the clock's when None) bounds a hand-over's times."""
    if not isinstance(event, dict):
        return Skip(f"event is a {type(event).__name__}, not a JSON object")
    if "self_check" in event:
        return _self_check(event["self_check"])
    stack_request = _stack_request(event)
    if stack_request is not None:
        return stack_request
    sync = _hook_sync(event)
    if sync is not None:
        return sync
    detail = event.get("detail")
    if isinstance(detail, dict) and TEST_NOTIFICATION in (
        detail.get("Event"),
        detail.get("LifecycleTransition"),
    ):
        return Skip(f"{TEST_NOTIFICATION}: Auto Scaling checking the target, nothing to drain")
    source = event.get("source")
    if source == EC2_SOURCE and event.get("detail-type") in _EC2_KINDS:
        return _ec2_event(event, _EC2_KINDS[str(event["detail-type"])])
    if source == HEALTH_SOURCE and event.get("detail-type") == HEALTH_DETAIL_TYPE:
        return _scheduled_change(event)
    if source != SOURCE:
        return Skip(f"source is {source!r}, not {SOURCE!r}")
    detail_type = event.get("detail-type")
    if detail_type not in (TERMINATE_DETAIL_TYPE, LAUNCH_DETAIL_TYPE):
        return Skip(f"detail-type is {detail_type!r}, not {TERMINATE_DETAIL_TYPE!r}")
    if not isinstance(detail, dict):
        return Skip("field 'detail' is missing or not an object")
    transition = detail.get("LifecycleTransition")
    expected = TERMINATING if detail_type == TERMINATE_DETAIL_TYPE else LAUNCHING
    if transition != expected:
        return Skip(f"detail.LifecycleTransition is {transition!r}, not {expected!r}")
    return _lifecycle_event(event, detail, transition, now)


def _self_check(check: object) -> SelfCheckEvent | Skip:
    if not isinstance(check, dict) or not isinstance(check.get("cluster_name", ""), str):
        return Skip('malformed self-check: expected {"self_check": {"cluster_name": ...}}')
    return SelfCheckEvent(check.get("cluster_name", ""))


def _lifecycle_event(
    event: dict[str, Any], detail: dict[str, Any], transition: str, now: float | None
) -> LifecycleEvent | Skip:
    """A terminate (or launch) lifecycle action's fields, each checked; a Skip naming
    the first that cannot be used."""
    try:
        event_time = _required(event, "time")
        return LifecycleEvent(
            instance_id=_instance_id(detail, "EC2InstanceId"),
            asg_name=_aws_name(detail, "AutoScalingGroupName"),
            hook_name=_aws_name(detail, "LifecycleHookName"),
            action_token=_aws_name(detail, "LifecycleActionToken"),
            transition=transition,
            notification_metadata=_optional(detail, "NotificationMetadata", "detail."),
            event_id=_required(event, "id"),
            event_time=event_time,
            region=_required(event, "region"),
            account=_required(event, "account"),
            handover=_handover(
                event.get(HANDOVER_KEY), _epoch(event_time), time.time() if now is None else now
            ),
            origin=_optional(detail, "Origin", "detail."),
            destination=_optional(detail, "Destination", "detail."),
        )
    except _Malformed as malformed:
        return Skip(f"malformed lifecycle event: {malformed}", malformed=True)


_EC2_KINDS = {
    SPOT_INTERRUPTION_DETAIL_TYPE: Ec2Kind.INTERRUPTION,
    REBALANCE_DETAIL_TYPE: Ec2Kind.REBALANCE,
    STATE_CHANGE_DETAIL_TYPE: Ec2Kind.STATE_CHANGE,
    CAPACITY_INTERRUPTION_DETAIL_TYPE: Ec2Kind.CAPACITY_RESERVATION,
}


def _ec2_event(event: dict[str, Any], kind: Ec2Kind) -> Ec2Event | Skip:
    detail = event.get("detail")
    if not isinstance(detail, dict):
        return Skip("field 'detail' is missing or not an object", malformed=True)
    try:
        parsed = Ec2Event(
            kind=kind,
            instance_id=_instance_id(detail, "instance-id"),
            event_id=_required(event, "id"),
            event_time=_required(event, "time"),
            region=_required(event, "region"),
            account=_required(event, "account"),
            instance_action=_optional(detail, "instance-action", "detail."),
            detail_code=_optional(detail, "state", "detail."),
        )
        if kind is Ec2Kind.CAPACITY_RESERVATION:
            parsed = replace(parsed, acts_at=_time_field(detail, "instance-termination-time"))
    except _Malformed as malformed:
        return Skip(f"malformed {kind} event: {malformed}", malformed=True)
    if parsed.issued_at is None:
        return Skip(f"malformed {kind} event: field 'time' is not an RFC 3339 time", malformed=True)
    if kind is Ec2Kind.STATE_CHANGE and parsed.detail_code not in DRAIN_STATES:
        return Skip(
            f"instance {parsed.instance_id} is {parsed.detail_code or 'in no state'}: "
            f"only {' and '.join(DRAIN_STATES)} begin a drain"
        )
    return parsed


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
        narrowed = copy.deepcopy(dict(self.raw))
        narrowed.pop(SCHEDULED_KEY, None)
        narrowed["resources"] = [instance_id]
        narrowed["detail"]["affectedEntities"] = [
            entity
            for entity in narrowed["detail"]["affectedEntities"]
            if isinstance(entity, dict) and entity.get("entityValue") == instance_id
        ]
        return narrowed


def _scheduled_change(event: dict[str, Any]) -> Ec2Event | ScheduledChanges | Skip:
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
        return Skip(f"{kind} {detail.get('eventTypeCode')}: closed, the change is over")
    try:
        entities = detail.get("affectedEntities")
        if not isinstance(entities, list):
            raise _Malformed("field 'detail.affectedEntities' is missing or not a list")
        instances = sorted(
            {
                str(entity["entityValue"])
                for entity in entities
                if isinstance(entity, dict)
                and isinstance(entity.get("entityValue"), str)
                and INSTANCE_ID.fullmatch(entity["entityValue"])
            }
        )
        template = Ec2Event(
            kind=kind,
            instance_id="",
            event_id=_required(event, "id"),
            event_time=_required(event, "time"),
            region=_required(event, "region"),
            account=_required(event, "account"),
            acts_at=_time_field(detail, "startTime"),
            detail_code=_required(detail, "eventTypeCode", "detail."),
            schedule=_optional(event, SCHEDULED_KEY),
            change_id=_optional(detail, "eventArn", "detail."),
        )
    except _Malformed as malformed:
        return Skip(f"malformed {kind} event: {malformed}", malformed=True)
    if template.issued_at is None:
        return Skip(f"malformed {kind} event: field 'time' is not an RFC 3339 time", malformed=True)
    if not instances:
        return Skip(f"{kind} {template.detail_code}: it names no EC2 instance")
    events = tuple(replace(template, instance_id=i) for i in instances)
    return events[0] if len(events) == 1 else ScheduledChanges(events, event)


def _time_field(detail: Mapping[str, Any], key: str) -> float:
    """A time in an event's detail: RFC 3339 (EC2's) or RFC 1123 (AWS Health's
    "Sat, 05 Jun 2026 15:10:09 GMT"), in epoch seconds."""
    text = _required(detail, key, "detail.")
    seconds = _epoch(text)
    if seconds is None:
        try:
            seconds = parsedate_to_datetime(text).timestamp()
        except (TypeError, ValueError, IndexError):
            seconds = None
    if seconds is None or not math.isfinite(seconds):
        raise _Malformed(f"field 'detail.{key}' is {_shown(text)}, not a time")
    return seconds


def with_handover(event: Mapping[str, Any], handover: Handover) -> dict[str, Any]:
    """The payload that hands a drain on: the original event plus its progress."""
    payload = copy.deepcopy(dict(event))
    payload[HANDOVER_KEY] = handover.as_dict()
    return payload


def _required(source: Mapping[str, Any], key: str, prefix: str = "") -> str:
    value = source.get(key)
    if value is None:
        raise _Malformed(f"field '{prefix}{key}' is missing")
    if not isinstance(value, str):
        raise _Malformed(f"field '{prefix}{key}' is a {type(value).__name__}, not a string")
    if not value.strip():
        raise _Malformed(f"field '{prefix}{key}' is empty")
    return value


def _optional(source: Mapping[str, Any], key: str, prefix: str = "") -> str:
    value = source.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Malformed(f"field '{prefix}{key}' is a {type(value).__name__}, not a string")
    return value


def _instance_id(detail: Mapping[str, Any], key: str) -> str:
    """An EC2 instance id, checked before any AWS call sees it (a NUL byte in one once
    crashed botocore's parser of EC2's answer)."""
    value = _required(detail, key, "detail.")
    if not INSTANCE_ID.fullmatch(value):
        raise _Malformed(
            f"field 'detail.{key}' is {_shown(value)}, not an EC2 instance id "
            "(i- followed by 8 or 17 hex digits)"
        )
    return value


def _aws_name(detail: Mapping[str, Any], key: str) -> str:
    """A name the drainer passes to Auto Scaling as it is: at most AWS_NAME_MAX
    characters, none of them a control character (AWS's own pattern for them)."""
    value = _required(detail, key, "detail.")
    if len(value) > AWS_NAME_MAX or any(_not_xml(c) for c in value):
        raise _Malformed(
            f"field 'detail.{key}' is {_shown(value)}: control characters or more than "
            f"{AWS_NAME_MAX} characters, which AWS does not accept"
        )
    return value


def _not_xml(c: str) -> bool:
    """A character outside AWS's pattern for these names (XML's): a C0 control but tab
    and line ends, a lone surrogate (it would not even encode), U+FFFE or U+FFFF."""
    return (c < " " and c not in "\t\n\r") or "\ud800" <= c <= "\udfff" or c in "\ufffe\uffff"


def _shown(value: str) -> str:
    """A field's value for a log line: escaped and cut short."""
    return repr(value[:40] + ("..." if len(value) > 40 else ""))


def _handover(raw: object, event_time: float | None, now: float) -> Handover | None:
    """The hand-over claim, its numbers bounded: a start no earlier than the event
    (less the clock skew), not in the future, not older than a lifecycle action can
    live; counters that fit in 48 hours."""
    if raw is None:
        return None
    where = f"field '{HANDOVER_KEY}'"
    if not isinstance(raw, dict):
        raise _Malformed(f"{where} is a {type(raw).__name__}, not an object")
    started_at = _seconds(raw.get("started_at"))
    if started_at is None:
        raise _Malformed(
            f"{where}.started_at must be positive epoch seconds, got {_number(raw, 'started_at')}"
        )
    earliest = now - LIFECYCLE_ACTION_MAX_SECONDS - CLOCK_SKEW_SECONDS
    if event_time is not None:
        earliest = max(earliest, event_time - CLOCK_SKEW_SECONDS)
    if not earliest <= started_at <= now + CLOCK_SKEW_SECONDS:
        raise _Malformed(
            f"{where}.started_at {started_at:.0f} is {_window(started_at, event_time, now)}: "
            "not the start of this lifecycle action's drain"
        )
    counts = []
    for key in ("handovers", "heartbeats"):
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
            raise _Malformed(
                f"{where}.{key} must be an integer from 0 to {MAX_COUNT}, got {_number(raw, key)}"
            )
        counts.append(value)
    return Handover(started_at=started_at, handovers=counts[0], heartbeats=counts[1])


def _seconds(value: object) -> float | None:
    """Positive, finite epoch seconds as a float; None for anything else (a huge int
    does not fit a float: OverflowError, caught here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def _number(raw: Mapping[str, Any], key: str) -> str:
    """A claimed number for the log line, never thousands of digits long."""
    value = raw.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**15:
        return f"an integer of {len(str(abs(value)))} digits"
    return _shown(value) if isinstance(value, str) else repr(value)[:40]


def _window(started_at: float, event_time: float | None, now: float) -> str:
    """Which bound a hand-over's start broke, in words."""
    if started_at > now + CLOCK_SKEW_SECONDS:
        return f"{started_at - now:.0f} s in the future"
    if event_time is not None and started_at < event_time - CLOCK_SKEW_SECONDS:
        return f"{event_time - started_at:.0f} s before the event's own time"
    return f"{now - started_at:.0f} s ago, longer than a lifecycle action lives"
