"""EventBridge Scheduler: a drain asked for later (an AWS Health scheduled change
drained a set time before its maintenance window) is a one-time schedule that invokes the
function with the same event then, and deletes itself once it has."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from drainer.aws.errors import AWS_FAILURES, error_code, translate
from drainer.aws.session import Client
from drainer.errors import PermanentAwsError

SCHEDULE_PREFIX = "eks-node-drainer-"
"""Every schedule the function creates is named so (the role may create no other)."""
INPUT_MAX_CHARS = 8192
"""The longest Input a schedule's target takes."""


def schedule_invocation(
    scheduler: Client,
    name: str,
    at: float,
    *,
    function_arn: str,
    role_arn: str,
    payload: Mapping[str, Any],
) -> bool:
    """Have EventBridge Scheduler invoke `function_arn` with `payload` at `at` (epoch
    seconds, to the second), once. False when the schedule exists already (the same
    event delivered again)."""
    what = f"CreateSchedule {name} at {_at(at)}"
    text = json.dumps(payload, separators=(",", ":"))
    if len(text) > INPUT_MAX_CHARS:
        raise PermanentAwsError(
            f"{what}: the event is {len(text)} characters, more than a schedule's "
            f"input takes ({INPUT_MAX_CHARS})"
        )
    try:
        scheduler.create_schedule(
            Name=name,
            GroupName="default",
            ScheduleExpression=f"at({_at(at)})",
            ScheduleExpressionTimezone="UTC",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={"Arn": function_arn, "RoleArn": role_arn, "Input": text},
            ActionAfterCompletion="DELETE",
            Description="A drain eks-node-drainer asked for before an EC2 scheduled change",
        )
    except AWS_FAILURES as e:
        if error_code(e) == "ConflictException":
            return False
        raise translate(e, "scheduler:CreateSchedule", what) from e
    return True


def _at(seconds: float) -> str:
    """EventBridge Scheduler's at() time: yyyy-mm-ddThh:mm:ss, here in UTC."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
