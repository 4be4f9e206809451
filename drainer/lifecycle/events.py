"""Invocation events, parsed once at the edge into typed, frozen objects
(`parse_event`): Auto Scaling's lifecycle actions (drainer/lifecycle/events_hook.py),
EC2's own events about an instance (drainer/lifecycle/events_ec2.py), and the
events that ask the function itself for something, kept here: the hook sync's
causes (drainer/lifecycle/hooks.py), the stack's custom resource requests
(drainer/lifecycle/stack_hooks.py) and make deploy's self-check.

EventBridge delivers every event matched by the rule, at least once, and retries a
function that raises. So `parse_event` never raises: anything that is not an event
the drainer acts on (a TEST_NOTIFICATION, a stray event, a malformed one) becomes a
`Skip` with a reason the handler logs. A crash here would only make EventBridge
redeliver the same bad event.

Every value that reaches an AWS call or a deadline is checked once, at parsing
(drainer/lifecycle/events_fields.py), and every number lies in a window a real
event can have (a hand-over's: drainer/lifecycle/handover.py). Whatever fails is a
malformed event (`Skip.malformed`): an error in the log, never a crash, never
retried.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drainer.lifecycle.events_ec2 import ChangeClosed, Ec2Event, ScheduledChanges, parse_ec2
from drainer.lifecycle.events_fields import Skip
from drainer.lifecycle.events_hook import (
    SOURCE,
    TEST_NOTIFICATION,
    LifecycleEvent,
    parse_lifecycle,
)


@dataclass(frozen=True)
class SelfCheckEvent:
    """`make deploy` asks the function whether it can drain (drainer/k8s/selfcheck.py):
    {"self_check": {"cluster_name": "prod"}}, the cluster optional (CLUSTER_NAME)."""

    cluster_name: str = ""


@dataclass(frozen=True)
class HookSyncEvent:
    """Time to check the node groups' lifecycle hooks (drainer/lifecycle/hooks.py): the
    schedule's event, an Auto Scaling API call seen by CloudTrail, or make deploy's
    {"sync_hooks": {}}."""

    cause: str
    """What asked for the sync: "schedule", "deploy" or "api:<eventName>", for the log
    (its key there is `trigger`, an interface kept: a hook sync has a cause, not a
    trigger, which is what begins a drain)."""
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
SCHEDULED_SOURCE = "aws.events"
SCHEDULED_DETAIL_TYPE = "Scheduled Event"
CLOUDTRAIL_DETAIL_TYPE = "AWS API Call via CloudTrail"
HOOK_SYNC_API_CALLS = frozenset(
    {"CreateAutoScalingGroup", "CreateOrUpdateTags", "DeleteLifecycleHook"}
)
"""Auto Scaling API calls after which a group may lack its hook."""


def parse_event(
    event: object, *, now: float | None = None
) -> (
    LifecycleEvent
    | Ec2Event
    | ScheduledChanges
    | ChangeClosed
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
    ec2 = parse_ec2(event)
    if ec2 is not None:
        return ec2
    return parse_lifecycle(event, now)


def _self_check(check: object) -> SelfCheckEvent | Skip:
    if not isinstance(check, dict) or not isinstance(check.get("cluster_name", ""), str):
        return Skip('malformed self-check: expected {"self_check": {"cluster_name": ...}}')
    return SelfCheckEvent(check.get("cluster_name", ""))


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
        and isinstance(detail.get("eventName"), str)  # a list is no call: skipped, no TypeError
        and detail.get("eventName") in HOOK_SYNC_API_CALLS
    ):
        request = detail.get("requestParameters")
        asg_name = request.get("autoScalingGroupName") if isinstance(request, dict) else None
        return HookSyncEvent(
            f"api:{detail['eventName']}", asg_name if isinstance(asg_name, str) else ""
        )
    return None
