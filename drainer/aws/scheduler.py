"""EventBridge Scheduler: a drain asked for later (an AWS Health scheduled change
drained a set time before its maintenance window) is a one-time schedule that invokes the
function with the same event then, and deletes itself once it has."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

from drainer.aws.errors import AWS_FAILURES, error_code, is_permanent, translate
from drainer.aws.session import Client
from drainer.errors import PermanentAwsError

log = logging.getLogger(__name__)

SCHEDULE_PREFIX = "eks-node-drainer-"
"""Every schedule the function creates is named so (the role may create no other)."""
DESCRIPTION = "A drain eks-node-drainer asked for before an EC2 scheduled change"
"""A schedule's description, unless it says otherwise."""
INPUT_MAX_CHARS = 8192
"""The longest Input a schedule's target takes."""


CREATED, KEPT, MOVED = "created", "kept", "moved"
ABSENT, SETTLED, REFUSED = "absent", "settled", "refused"


class Scheduled(NamedTuple):
    """What `schedule_invocation` did, and the time the schedule is set for."""

    done: str
    at: float


def schedule_invocation(
    scheduler: Client,
    name: str,
    at: float,
    *,
    function_arn: str,
    role_arn: str,
    payload: Mapping[str, Any],
    supersedes: Callable[[Mapping[str, Any]], bool] | None = None,
    description: str = DESCRIPTION,
) -> Scheduled:
    """Have EventBridge Scheduler invoke `function_arn` with `payload` at `at` (epoch
    seconds, to the second), once: CREATED. When the schedule exists already: KEPT
    (the same event delivered again), or MOVED to `at` and `payload` when
    `supersedes(the payload it holds)` says this one replaces it (a change AWS
    Health moved: a newer update of it). `description`: what the schedule is, as
    the console shows it."""
    what = f"CreateSchedule {name} at {_at(at)}"
    text = json.dumps(payload, separators=(",", ":"))
    if len(text) > INPUT_MAX_CHARS:
        raise PermanentAwsError(
            f"{what}: the event is {len(text)} characters, more than a schedule's "
            f"input takes ({INPUT_MAX_CHARS})"
        )
    definition = {
        "Name": name,
        "GroupName": "default",
        "ScheduleExpression": f"at({_at(at)})",
        "ScheduleExpressionTimezone": "UTC",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "Target": {"Arn": function_arn, "RoleArn": role_arn, "Input": text},
        "ActionAfterCompletion": "DELETE",
        "Description": description,
    }
    try:
        scheduler.create_schedule(**definition)
    except AWS_FAILURES as e:
        if error_code(e) != "ConflictException":
            raise translate(e, "scheduler:CreateSchedule", what) from e
        return _moved(scheduler, definition, supersedes)
    return Scheduled(CREATED, at)


def _moved(
    scheduler: Client,
    definition: Mapping[str, Any],
    supersedes: Callable[[Mapping[str, Any]], bool] | None,
) -> Scheduled:
    """The existing schedule given `definition`'s time and input when `supersedes`
    its payload (MOVED); else KEPT. One gone meanwhile (it fired) is KEPT too. The
    time answered is the one the schedule is set for (the one asked, when it could
    not be read)."""
    asked = held_at(definition["ScheduleExpression"]) or 0.0
    if supersedes is None:
        return Scheduled(KEPT, asked)
    name, held = definition["Name"], None
    try:
        held, payload = _held(scheduler.get_schedule(Name=name, GroupName="default"))
        if not supersedes(payload):
            return Scheduled(KEPT, held or asked)
        scheduler.update_schedule(**definition)
    except AWS_FAILURES as e:
        if error_code(e) == "ResourceNotFoundException":
            return Scheduled(KEPT, asked)  # it fired meanwhile
        error = translate(e, "scheduler:GetSchedule and UpdateSchedule", f"moving {name}")
        if not is_permanent(e):
            raise error from e  # EventBridge delivers the event again
        # Refused for good (a role without the permissions yet): the schedule stays
        # where it was, as it did before schedules moved; never a drain days early.
        log.error("the schedule %s stays at its time: %s", name, error)
        return Scheduled(KEPT, held or asked)
    return Scheduled(MOVED, asked)


def drain_time(
    scheduler: Client, name: str, holds: Callable[[Mapping[str, Any]], bool]
) -> float | None:
    """The time the schedule `name` is set for, when it exists and `holds` its
    payload; None otherwise (absent, another expression, or it holds another)."""
    try:
        at, payload = _held(scheduler.get_schedule(Name=name, GroupName="default"))
    except AWS_FAILURES as e:
        if error_code(e) == "ResourceNotFoundException":
            return None
        raise translate(e, "scheduler:GetSchedule", f"reading {name}") from e
    return at if holds(payload) else None


def _held(schedule: Mapping[str, Any]) -> tuple[float | None, Mapping[str, Any]]:
    """A schedule's time (None: not a one-time at()) and the payload it holds."""
    return held_at(str(schedule.get("ScheduleExpression") or "")), _input_of(schedule)


def settle_schedule(
    scheduler: Client,
    name: str,
    *,
    payload: Mapping[str, Any],
    supersedes: Callable[[Mapping[str, Any]], bool],
) -> str:
    """Give the schedule `name` `payload` to deliver instead, at its own time, when
    `supersedes(the payload it holds)`: SETTLED (its invocation then finds nothing to
    do: the change closed, or drained already on a later update). ABSENT when there is
    no such schedule (never made, or it fired); KEPT when it holds a newer update,
    which stands. Raised when AWS fails for now; REFUSED (logged) when AWS refuses
    for good: the schedule is as it was."""
    text = json.dumps(payload, separators=(",", ":"))
    if len(text) > INPUT_MAX_CHARS:
        log.error(
            "the schedule %s is left as it is: the event is %d characters, more than a "
            "schedule's input takes (%d)",
            name,
            len(text),
            INPUT_MAX_CHARS,
        )
        return REFUSED
    try:
        found = scheduler.get_schedule(Name=name, GroupName="default")
        if not supersedes(_input_of(found)):
            return KEPT
        target = {**found["Target"], "Input": text}
        scheduler.update_schedule(
            Name=name,
            GroupName="default",
            ScheduleExpression=found["ScheduleExpression"],
            ScheduleExpressionTimezone=found.get("ScheduleExpressionTimezone") or "UTC",
            FlexibleTimeWindow=found.get("FlexibleTimeWindow") or {"Mode": "OFF"},
            Target=target,
            ActionAfterCompletion=found.get("ActionAfterCompletion") or "DELETE",
            Description=found.get("Description") or "",
        )
    except AWS_FAILURES as e:
        if error_code(e) == "ResourceNotFoundException":
            return ABSENT
        error = translate(e, "scheduler:GetSchedule and UpdateSchedule", f"settling {name}")
        if not is_permanent(e):
            raise error from e
        log.error("the schedule %s is left as it is: %s", name, error)
        return REFUSED
    return SETTLED


def _input_of(schedule: Mapping[str, Any]) -> Mapping[str, Any]:
    """The payload a schedule holds; empty when it is not a JSON object."""
    try:
        held = json.loads((schedule.get("Target") or {}).get("Input") or "{}")
    except ValueError:
        return {}
    return held if isinstance(held, dict) else {}


def held_at(expression: str) -> float | None:
    """The time of a one-time schedule's at() expression (UTC, as `_at` writes it);
    None for any other expression."""
    if not (expression.startswith("at(") and expression.endswith(")")):
        return None
    try:
        at = datetime.strptime(expression[3:-1], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None
    return at.replace(tzinfo=UTC).timestamp()


def _at(seconds: float) -> str:
    """EventBridge Scheduler's at() time: yyyy-mm-ddThh:mm:ss, here in UTC."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
