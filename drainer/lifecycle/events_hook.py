"""Auto Scaling's lifecycle hook events, parsed into a frozen `LifecycleEvent`: an
`EC2 Instance-terminate Lifecycle Action` (an instance waits in Terminating:Wait,
drainer/lifecycle/scale_in.py) or an `EC2 Instance-launch Lifecycle Action` (a new
instance waits in Pending:Wait, drainer/lifecycle/launch.py), with the hand-over of
an earlier invocation of the same drain when there is one
(drainer/lifecycle/handover.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from drainer.lifecycle.events_fields import (
    Malformed,
    Skip,
    aws_name,
    epoch,
    instance_id,
    optional,
    required,
)
from drainer.lifecycle.handover import HANDOVER_KEY, Handover, parse_handover

SOURCE = "aws.autoscaling"
TERMINATE_DETAIL_TYPE = "EC2 Instance-terminate Lifecycle Action"
LAUNCH_DETAIL_TYPE = "EC2 Instance-launch Lifecycle Action"
TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"
LAUNCHING = "autoscaling:EC2_INSTANCE_LAUNCHING"
WARM_POOL = "WarmPool"
"""An Origin or Destination of a lifecycle event: the Auto Scaling group's warm pool."""
WARM_POOL_NAME = "warm-pool"
"""The warm pool as the node's record and the end lines name it (destination, origin)."""
TEST_NOTIFICATION = "autoscaling:TEST_NOTIFICATION"
TERMINATE_HOOK_TRIGGER = "terminate-hook"
"""What began a drain of the terminate hook's event (the end line's `trigger`; a spot
event's is its Ec2Kind)."""


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
        return epoch(self.event_time)

    def log_keys(self) -> dict[str, str]:
        """The fixed structured-log keys this event provides."""
        return {
            "instance_id": self.instance_id,
            "asg_name": self.asg_name,
            "lifecycle_hook_name": self.hook_name,
            "event_id": self.event_id,
        }


def parse_lifecycle(event: dict[str, Any], now: float | None) -> LifecycleEvent | Skip:
    """The event as a terminate or launch lifecycle action, or a Skip saying why it is
    not one (another source or detail-type, another transition, a malformed field)."""
    source = event.get("source")
    if source != SOURCE:
        return Skip(f"source is {source!r}, not {SOURCE!r}")
    detail_type = event.get("detail-type")
    if detail_type not in (TERMINATE_DETAIL_TYPE, LAUNCH_DETAIL_TYPE):
        return Skip(f"detail-type is {detail_type!r}, not {TERMINATE_DETAIL_TYPE!r}")
    detail = event.get("detail")
    if not isinstance(detail, dict):
        return Skip("field 'detail' is missing or not an object")
    transition = detail.get("LifecycleTransition")
    expected = TERMINATING if detail_type == TERMINATE_DETAIL_TYPE else LAUNCHING
    if transition != expected:
        return Skip(f"detail.LifecycleTransition is {transition!r}, not {expected!r}")
    return _lifecycle_event(event, detail, transition, now)


def _lifecycle_event(
    event: dict[str, Any], detail: dict[str, Any], transition: str, now: float | None
) -> LifecycleEvent | Skip:
    """A terminate (or launch) lifecycle action's fields, each checked; a Skip naming
    the first that cannot be used."""
    try:
        event_time = required(event, "time")
        return LifecycleEvent(
            instance_id=instance_id(detail, "EC2InstanceId"),
            asg_name=aws_name(detail, "AutoScalingGroupName"),
            hook_name=aws_name(detail, "LifecycleHookName"),
            action_token=aws_name(detail, "LifecycleActionToken"),
            transition=transition,
            notification_metadata=optional(detail, "NotificationMetadata", "detail."),
            event_id=required(event, "id"),
            event_time=event_time,
            region=required(event, "region"),
            account=required(event, "account"),
            handover=parse_handover(
                event.get(HANDOVER_KEY), epoch(event_time), time.time() if now is None else now
            ),
            origin=optional(detail, "Origin", "detail."),
            destination=optional(detail, "Destination", "detail."),
        )
    except Malformed as malformed:
        return Skip(f"malformed lifecycle event: {malformed}", malformed=True)
