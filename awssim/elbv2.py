"""Target deregistration as Elastic Load Balancing does it, which moto does not.

moto drops a deregistered target at once. ELB keeps it `draining` for the target
group's deregistration delay (the `deregistration_delay.timeout_seconds` attribute,
300 s by default) while connections finish, and DescribeTargetHealth lists it so.
Here a deregistered target drains for that delay divided by `set_speed`'s factor,
then becomes unregistered; `released()` says when each one let go, so a test can
check that the instance was completed only after every group let it go. And, as
ELB does, DescribeTags of a target group deleted since it was listed fails with
TargetGroupNotFound (moto answers it with no tags).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from moto.elbv2.exceptions import InvalidTargetError, TargetGroupNotFoundError
from moto.elbv2.models import ELBv2Backend, FakeHealthStatus, FakeTargetGroup

_lock = threading.Lock()
_speed = [1.0]
_clock: list[Callable[[], float]] = [time.time]
_released: list[dict[str, Any]] = []
# target group ARN -> target id -> (target, when it stops draining)
_draining: dict[str, dict[str, tuple[dict[str, Any], float]]] = {}


def set_speed(factor: float) -> None:
    """Deregistration delays pass `factor` times faster (tests: a 300 s delay in 3 s)."""
    _speed[0] = factor


def set_clock(clock: Callable[[], float]) -> None:
    """Deregistration delays measured on `clock` (a unit test's fake clock), not time.time."""
    _clock[0] = clock


def released() -> list[dict[str, Any]]:
    """Targets that finished draining: target_group, id and time (epoch seconds)."""
    with _lock:
        return list(_released)


def reset() -> None:
    with _lock:
        _draining.clear()
        _released.clear()
        _speed[0] = 1.0
        _clock[0] = time.time


def _deregister(self: FakeTargetGroup, targets: list[dict[str, Any]]) -> None:
    delay = float(str(self.attributes.get("deregistration_delay.timeout_seconds", 300))) / _speed[0]
    with _lock:
        draining = _draining.setdefault(self.arn, {})
        for target in targets:
            found = self.targets.pop(target["Id"], None)
            if found is None:
                raise InvalidTargetError()
            draining[target["Id"]] = (found, _clock[0]() + delay)


def _settle(group: FakeTargetGroup) -> list[dict[str, Any]]:
    """Move the targets whose delay is over to deregistered; the ones still draining."""
    now = _clock[0]()
    with _lock:
        draining = _draining.get(group.arn, {})
        for target_id, (target, until) in list(draining.items()):
            if until <= now:
                del draining[target_id]
                group.deregistered_targets[target_id] = target
                _released.append({"target_group": group.arn, "id": target_id, "time": until})
        return [target for target, _ in draining.values()]


_original_health = ELBv2Backend.describe_target_health


def _describe_target_health(
    self: ELBv2Backend, target_group_arn: str, targets: list[dict[str, Any]]
) -> list[FakeHealthStatus]:
    group = self.target_groups.get(target_group_arn)
    draining = _settle(group) if group is not None else []
    answer = _original_health(self, target_group_arn, targets)
    if group is None:
        return answer
    ids = {t["Id"] for t in draining}
    wanted = {t["Id"] for t in targets} if targets else ids
    answer = [h for h in answer if h.instance_id not in ids]
    return answer + [
        FakeHealthStatus(
            t["Id"],
            t["Port"],
            group.health_check_port,
            "draining",
            "Target.DeregistrationInProgress",
            "Target deregistration is in progress",
        )
        for t in draining
        if t["Id"] in wanted
    ]


_original_tags = ELBv2Backend.describe_tags


def _describe_tags(self: ELBv2Backend, resource_arns: list[str]) -> dict[str, dict[str, str]]:
    """DescribeTags as ELB answers it: one target group that does not exist (deleted
    since it was listed) fails the whole call with TargetGroupNotFound, where moto
    answers with no tags."""
    for arn in resource_arns:
        if ":targetgroup/" in arn and arn not in self.target_groups:
            raise TargetGroupNotFoundError()
    return _original_tags(self, resource_arns)


def register() -> None:
    """Deregistration with a delay, DescribeTags of a deleted group (idempotent)."""
    FakeTargetGroup.deregister = _deregister  # type: ignore[method-assign]
    ELBv2Backend.describe_tags = _describe_tags  # type: ignore[method-assign]
    ELBv2Backend.describe_target_health = _describe_target_health  # type: ignore[method-assign]
