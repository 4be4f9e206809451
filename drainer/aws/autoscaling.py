"""Auto Scaling: lifecycle hooks, a group's tags, and the lifecycle action itself
(its heartbeat and its completion)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import ClientError

from drainer.aws.errors import (
    ANSWERED_OR_UNREACHED,
    AWS_FAILURES,
    error_code,
    error_message,
    translate,
)
from drainer.aws.session import Client
from drainer.aws.tags import tag_map
from drainer.errors import LifecycleActionGone, PermanentAwsError

log = logging.getLogger(__name__)

LIFECYCLE_ACTION_MAX_SECONDS = 172800
"""48 hours: the longest a lifecycle action may last, heartbeats or not (the hook's
GlobalTimeout is at most this)."""
LIFECYCLE_RESULTS = ("CONTINUE", "ABANDON")
_ACTION_GONE = "No active Lifecycle Action"


class LifecycleAction(Protocol):
    """The lifecycle action a heartbeat or a completion is for (a LifecycleEvent is one)."""

    @property
    def asg_name(self) -> str: ...

    @property
    def hook_name(self) -> str: ...

    @property
    def action_token(self) -> str: ...

    @property
    def instance_id(self) -> str: ...


@dataclass(frozen=True)
class HookInfo:
    """A lifecycle hook's timing and defaults, from DescribeLifecycleHooks."""

    name: str
    asg_name: str
    heartbeat_timeout: int
    """Seconds the instance waits without a heartbeat before DefaultResult applies."""
    default_result: str
    notification_metadata: str
    global_timeout: int | None
    """Seconds the action may last in all, heartbeats or not (min(100 x heartbeat, 48 h));
    None when DescribeLifecycleHooks does not say."""

    @property
    def global_timeout_seconds(self) -> int:
        """The GlobalTimeout, or AWS's rule for it when the answer has none."""
        if self.global_timeout is not None:
            return self.global_timeout
        return min(100 * self.heartbeat_timeout, LIFECYCLE_ACTION_MAX_SECONDS)

    @property
    def heartbeat_interval(self) -> float:
        """How often to heartbeat: half the timeout, so one lost beat is survivable."""
        return self.heartbeat_timeout / 2


def describe_hook(autoscaling: Client, asg_name: str, hook_name: str) -> dict[str, Any] | None:
    """One lifecycle hook of an Auto Scaling group as Auto Scaling describes it;
    None when the group has no hook of that name."""
    what = f"DescribeLifecycleHooks {asg_name}/{hook_name}"
    found = _described_hooks(autoscaling, asg_name, [hook_name], what)
    return found[0] if found else None


def describe_hooks(
    autoscaling: Client, asg_name: str, hook_names: list[str]
) -> list[dict[str, Any]]:
    """The group's lifecycle hooks of these names (at most 50), in one call; empty
    when it has none of them."""
    what = f"DescribeLifecycleHooks {asg_name} {hook_names}"
    return _described_hooks(autoscaling, asg_name, hook_names, what)


def _described_hooks(
    autoscaling: Client, asg_name: str, hook_names: list[str], what: str
) -> list[dict[str, Any]]:
    try:
        response = autoscaling.describe_lifecycle_hooks(
            AutoScalingGroupName=asg_name, LifecycleHookNames=hook_names
        )
    except AWS_FAILURES as e:
        raise translate(e, "autoscaling:DescribeLifecycleHooks", what) from e
    return [
        dict(hook)
        for hook in response.get("LifecycleHooks", [])
        if hook.get("LifecycleHookName") in hook_names
    ]


def lifecycle_hook(autoscaling: Client, asg_name: str, hook_name: str) -> HookInfo:
    """Describe one lifecycle hook of an Auto Scaling group."""
    hook = describe_hook(autoscaling, asg_name, hook_name)
    if hook is None:
        raise PermanentAwsError(
            f"DescribeLifecycleHooks {asg_name}/{hook_name}: Auto Scaling group {asg_name!r} "
            f"has no lifecycle hook {hook_name!r} (deleted while the instance waited?)"
        )
    global_timeout = hook.get("GlobalTimeout")
    return HookInfo(
        name=hook_name,
        asg_name=asg_name,
        heartbeat_timeout=int(hook.get("HeartbeatTimeout", 3600)),
        default_result=str(hook.get("DefaultResult", "ABANDON")),
        notification_metadata=str(hook.get("NotificationMetadata", "") or ""),
        global_timeout=int(global_timeout) if global_timeout is not None else None,
    )


def asg_tags(autoscaling: Client, asg_name: str) -> dict[str, str]:
    """The Auto Scaling group's tags; empty when the group does not exist (any more)."""
    try:
        response = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])
    except AWS_FAILURES as e:
        raise translate(
            e, "autoscaling:DescribeAutoScalingGroups", f"DescribeAutoScalingGroups {asg_name}"
        ) from e
    for group in response.get("AutoScalingGroups", []):
        if group.get("AutoScalingGroupName") == asg_name:
            return tag_map(group.get("Tags", []))
    return {}


def instance_lifecycle_state(autoscaling: Client, instance_id: str) -> str:
    """The instance's Auto Scaling lifecycle state ("InService", "Warmed:Stopped",
    ...); empty when it is in no group (any more)."""
    try:
        response = autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])
    except AWS_FAILURES as e:
        raise translate(
            e,
            "autoscaling:DescribeAutoScalingInstances",
            f"DescribeAutoScalingInstances {instance_id}",
        ) from e
    for instance in response.get("AutoScalingInstances", []):
        if instance.get("InstanceId") == instance_id:
            return str(instance.get("LifecycleState", ""))
    return ""


def groups_with_tag(autoscaling: Client, key: str, value: str) -> dict[str, dict[str, str]]:
    """Every Auto Scaling group tagged `key`=`value`, all pages: name -> its tags."""
    return _listed_groups(
        autoscaling, f"tagged {key}={value}", Filters=[{"Name": f"tag:{key}", "Values": [value]}]
    )


def every_group(autoscaling: Client) -> dict[str, dict[str, str]]:
    """Every Auto Scaling group of the region, all pages of 100: name -> its tags."""
    return _listed_groups(autoscaling, "(every group)", PaginationConfig={"PageSize": 100})


def _listed_groups(autoscaling: Client, what: str, **params: Any) -> dict[str, dict[str, str]]:
    groups: dict[str, dict[str, str]] = {}
    try:
        pages = autoscaling.get_paginator("describe_auto_scaling_groups").paginate(**params)
        for page in pages:
            for group in page.get("AutoScalingGroups", []):
                groups[str(group["AutoScalingGroupName"])] = tag_map(group.get("Tags", []))
    except ANSWERED_OR_UNREACHED as e:
        raise translate(
            e, "autoscaling:DescribeAutoScalingGroups", f"DescribeAutoScalingGroups {what}"
        ) from e
    return groups


def put_lifecycle_hook(
    autoscaling: Client,
    asg_name: str,
    hook_name: str,
    *,
    transition: str,
    heartbeat_timeout: int,
    default_result: str,
    notification_metadata: str,
) -> None:
    """Create the group's lifecycle hook, or replace the one of that name."""
    params: dict[str, Any] = {
        "AutoScalingGroupName": asg_name,
        "LifecycleHookName": hook_name,
        "LifecycleTransition": transition,
        "HeartbeatTimeout": heartbeat_timeout,
        "DefaultResult": default_result,
    }
    if notification_metadata:
        params["NotificationMetadata"] = notification_metadata
    try:
        autoscaling.put_lifecycle_hook(**params)
    except ANSWERED_OR_UNREACHED as e:
        raise translate(
            e, "autoscaling:PutLifecycleHook", f"PutLifecycleHook {asg_name}/{hook_name}"
        ) from e


def _lifecycle_params(action: LifecycleAction) -> dict[str, str]:
    return {
        "AutoScalingGroupName": action.asg_name,
        "LifecycleHookName": action.hook_name,
        "LifecycleActionToken": action.action_token,
        "InstanceId": action.instance_id,
    }


def record_heartbeat(autoscaling: Client, action: LifecycleAction) -> None:
    """Extend the lifecycle action by the hook's HeartbeatTimeout.

    LifecycleActionGone when Auto Scaling no longer has the action (completed by
    someone else, or timed out): there is nothing left to keep alive.
    """
    what = f"RecordLifecycleActionHeartbeat {action.asg_name}/{action.instance_id}"
    try:
        autoscaling.record_lifecycle_action_heartbeat(**_lifecycle_params(action))
    except ClientError as e:
        if error_code(e) == "ValidationError" and _ACTION_GONE in error_message(e):
            raise LifecycleActionGone(
                f"lifecycle action {action.action_token} of {action.instance_id} is no "
                f"longer active: {error_message(e)}"
            ) from e
        raise translate(e, "autoscaling:RecordLifecycleActionHeartbeat", what) from e
    except AWS_FAILURES as e:
        raise translate(e, "autoscaling:RecordLifecycleActionHeartbeat", what) from e


def waits_on_hook(autoscaling: Client, asg_name: str, hook_name: str, instance_id: str) -> bool:
    """Whether the instance waits in a lifecycle action of the hook: a heartbeat named
    by the instance, not by a token (Auto Scaling finds the action, if any, and
    extends it by its HeartbeatTimeout; no other call says which hook an instance
    waits on). False when there is no such action; AwsError when it cannot be told."""
    what = f"RecordLifecycleActionHeartbeat {asg_name}/{hook_name}/{instance_id}"
    try:
        autoscaling.record_lifecycle_action_heartbeat(
            AutoScalingGroupName=asg_name, LifecycleHookName=hook_name, InstanceId=instance_id
        )
    except ClientError as e:
        if error_code(e) == "ValidationError" and _ACTION_GONE in error_message(e):
            return False
        raise translate(e, "autoscaling:RecordLifecycleActionHeartbeat", what) from e
    except AWS_FAILURES as e:
        raise translate(e, "autoscaling:RecordLifecycleActionHeartbeat", what) from e
    return True


def complete_lifecycle_action(autoscaling: Client, action: LifecycleAction, result: str) -> bool:
    """Tell Auto Scaling to go on with CONTINUE or ABANDON.

    True when completed now; False when the action was already gone (a
    ValidationError: someone completed it, or it timed out), which is worth a log
    line but is not an error: the instance is going either way.
    """
    if result not in LIFECYCLE_RESULTS:
        raise ValueError(f"lifecycle action result must be CONTINUE or ABANDON, not {result!r}")
    what = f"CompleteLifecycleAction {action.asg_name}/{action.instance_id}"
    try:
        autoscaling.complete_lifecycle_action(
            **_lifecycle_params(action), LifecycleActionResult=result
        )
    except ClientError as e:
        if error_code(e) == "ValidationError":
            log.warning(
                "lifecycle action of %s was already gone when completing with %s: %s",
                action.instance_id,
                result,
                error_message(e),
            )
            return False
        raise translate(e, "autoscaling:CompleteLifecycleAction", what) from e
    except AWS_FAILURES as e:
        raise translate(e, "autoscaling:CompleteLifecycleAction", what) from e
    return True


def existing_groups(autoscaling: Client, names: list[str]) -> set[str]:
    """Which of the named Auto Scaling groups exist (a deleted one is not an error)."""
    return set(groups_tags(autoscaling, names))


def groups_tags(autoscaling: Client, names: list[str]) -> dict[str, dict[str, str]]:
    """The named Auto Scaling groups that exist, each with its tags."""
    found: dict[str, dict[str, str]] = {}
    for start in range(0, len(names), 50):  # DescribeAutoScalingGroups takes 50 names
        chunk = names[start : start + 50]
        try:
            pages = autoscaling.get_paginator("describe_auto_scaling_groups").paginate(
                AutoScalingGroupNames=chunk
            )
            for page in pages:
                for group in page.get("AutoScalingGroups", []):
                    found[str(group["AutoScalingGroupName"])] = tag_map(group.get("Tags", []))
        except ANSWERED_OR_UNREACHED as e:
            raise translate(
                e, "autoscaling:DescribeAutoScalingGroups", f"DescribeAutoScalingGroups {chunk}"
            ) from e
    return found


def delete_lifecycle_hook(autoscaling: Client, asg_name: str, hook_name: str) -> bool:
    """Delete the group's hook; False when the hook or its group is already gone."""
    try:
        autoscaling.delete_lifecycle_hook(
            AutoScalingGroupName=asg_name, LifecycleHookName=hook_name
        )
    except ClientError as e:
        if error_code(e) == "ValidationError" and "not found" in error_message(e).lower():
            return False
        raise translate(
            e, "autoscaling:DeleteLifecycleHook", f"DeleteLifecycleHook {asg_name}/{hook_name}"
        ) from e
    except ANSWERED_OR_UNREACHED as e:
        raise translate(
            e, "autoscaling:DeleteLifecycleHook", f"DeleteLifecycleHook {asg_name}/{hook_name}"
        ) from e
    return True


@dataclass(frozen=True)
class GroupInstance:
    """One instance of a group, as DescribeAutoScalingGroups lists it."""

    instance_id: str
    lifecycle_state: str
    healthy: bool


@dataclass(frozen=True)
class GroupShape:
    """What an instance refresh's plan needs of a group: its size, its instances,
    and what a refresh given no preferences takes from it: the warm-up (its
    DefaultInstanceWarmup, else its health check grace period) and the minimum
    healthy percentage (its instance maintenance policy's; None: AWS's 90)."""

    name: str
    desired: int
    grace_period: int
    instances: tuple[GroupInstance, ...]
    default_warmup: int | None = None
    min_healthy_percentage: int | None = None

    @property
    def warmup(self) -> int:
        return self.grace_period if self.default_warmup is None else self.default_warmup


def describe_group(autoscaling: Client, asg_name: str) -> GroupShape | None:
    """The group's size and instances; None when there is no such group."""
    what = f"DescribeAutoScalingGroups {asg_name}"
    try:
        response = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])
    except ANSWERED_OR_UNREACHED as e:
        raise translate(e, "autoscaling:DescribeAutoScalingGroups", what) from e
    groups = response.get("AutoScalingGroups", [])
    if not groups:
        return None
    group = groups[0]
    return GroupShape(
        name=asg_name,
        desired=int(group.get("DesiredCapacity") or 0),
        grace_period=int(group.get("HealthCheckGracePeriod") or 0),
        default_warmup=_int_or_none(group.get("DefaultInstanceWarmup")),
        min_healthy_percentage=_int_or_none(
            (group.get("InstanceMaintenancePolicy") or {}).get("MinHealthyPercentage")
        ),
        instances=tuple(
            GroupInstance(
                instance_id=str(i["InstanceId"]),
                lifecycle_state=str(i.get("LifecycleState", "")),
                healthy=str(i.get("HealthStatus", "Healthy")) == "Healthy",
            )
            for i in group.get("Instances", [])
        ),
    )


def _int_or_none(value: object) -> int | None:
    """An integer of an answer, None when absent (or AWS's -1: "not set")."""
    if isinstance(value, int) and value >= 0:
        return value
    return None


@dataclass(frozen=True)
class Launch:
    """One successful launch of a group's instance, as DescribeScalingActivities
    records it: begun at `start`, the instance InService at `end` (epoch seconds)."""

    instance_id: str
    start: float
    end: float


_LAUNCH = re.compile(r"^Launching a new EC2 instance: (i-[0-9a-f]+)$")


def recent_launches(autoscaling: Client, asg_name: str) -> list[Launch]:
    """The group's successful launches among its last 100 scaling activities, the most
    recent first (launches into a warm pool and failed ones left out)."""
    what = f"DescribeScalingActivities {asg_name}"
    try:
        response = autoscaling.describe_scaling_activities(
            AutoScalingGroupName=asg_name, MaxRecords=100
        )
    except ANSWERED_OR_UNREACHED as e:
        raise translate(e, "autoscaling:DescribeScalingActivities", what) from e
    found = []
    for activity in response.get("Activities", []):
        launched = _LAUNCH.match(str(activity.get("Description", "")))
        start, end = activity.get("StartTime"), activity.get("EndTime")
        if launched and activity.get("StatusCode") == "Successful" and start and end:
            found.append(Launch(launched.group(1), start.timestamp(), end.timestamp()))
    return sorted(found, key=lambda x: x.start, reverse=True)
