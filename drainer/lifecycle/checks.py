"""The self-check event: whether this function, as its own identity, may drain
(drainer/k8s/selfcheck.py), asked by `make deploy` before it turns the hooks on; and,
once it may, what would block the drains of the groups it drains (the plan's
blockers, drainer/plan/groups.py, handed in by the handler: warnings, never a
failed check)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from drainer import aws, logs
from drainer.engine.options import DrainOptions
from drainer.errors import DrainerError
from drainer.k8s import selfcheck
from drainer.k8s.kube import Kube
from drainer.lifecycle.events import SelfCheckEvent
from drainer.lifecycle.hooks import covered_groups
from drainer.lifecycle.job import Tools
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.settings_drain import TimeoutPolicy

log = logging.getLogger(__name__)


class GroupsForecast(Protocol):
    """The answer's `plan` part (drainer/plan/groups.py:GroupsPlan)."""

    def doc(self) -> dict[str, Any]: ...

    def lines(self) -> list[tuple[str, bool]]:
        """A line per group, each with whether it warns."""
        ...


class GroupsForecaster(Protocol):
    """Plans the named groups' nodes as the function drains them (forecast_groups)."""

    def __call__(
        self,
        kube: Kube,
        clients: aws.AwsClients,
        groups: Callable[[], Sequence[str]],
        options: DrainOptions,
        *,
        timeout: float,
        clock: Callable[[], float],
    ) -> GroupsForecast: ...


def handle(
    event: SelfCheckEvent, tools: Tools, forecast: GroupsForecaster | None = None
) -> dict[str, Any]:
    """The check's answer for the event's cluster (CLUSTER_NAME when it names none);
    with `forecast`, once the check passes, the answer's `plan` part."""
    settings = tools.settings
    name = event.cluster_name or settings.cluster_name
    if not name:
        return {"result": "check_failed", "message": "no cluster: set CLUSTER_NAME"}
    logs.bind(cluster=name)
    part = None
    try:
        cluster = aws.describe_cluster(tools.clients.eks, name)
        kube = tools.kube_factory(cluster, name, settings)
    except DrainerError as e:
        result = selfcheck.SelfCheck(name, error=str(e))
    else:
        try:
            force = settings.timeout_policy == TimeoutPolicy.FORCE
            result = selfcheck.check(kube, name, force=force, deadlines=_deadlines(settings))
            if forecast is not None and result.passed:
                part = _guarded(forecast, kube, tools)
        finally:
            kube.close()
    (log.info if result.passed else log.error)("self-check: %s", result.message())
    answer = result.result()
    if part is not None:
        for line, warns in part.lines():
            (log.warning if warns else log.info)("self-check: %s", line)
        answer["plan"] = part.doc()
        answer["message"] = "\n".join([str(answer["message"]), *(s for s, _ in part.lines())])
    return answer


def _deadlines(settings: Settings) -> tuple[str, ...]:
    """The settings on whose drains delete pods at EC2's deadline (ec2_events.approach)."""
    on = {
        "SPOT_INTERRUPTION_DRAIN": settings.spot_interruption_drain,
        "SCHEDULED_CHANGE_DRAIN": settings.scheduled_change_drain,
        "STATE_CHANGE_DRAIN": settings.state_change_drain,
        "CAPACITY_RESERVATION_DRAIN": settings.capacity_reservation_drain,
    }
    return tuple(name for name, enabled in on.items() if enabled)


class _Failed:
    """The plan part when planning the groups failed unexpectedly: said, never the
    check's failure (a GroupsForecast)."""

    def __init__(self, why: str) -> None:
        self.why = f"not planned: {why}"

    def doc(self) -> dict[str, Any]:
        return {"groups": [], "not_planned": self.why, "notes": []}

    def lines(self) -> list[tuple[str, bool]]:
        return [(f"plan: {self.why}", True)]


def _guarded(forecast: GroupsForecaster, kube: Kube, tools: Tools) -> GroupsForecast:
    """The groups' plan; a fault of its own (not a read refused: the planner says
    those) is one error line with its traceback and a part saying so, never the
    check's failure: the check answers whether the function may drain."""
    try:
        return _forecast(forecast, kube, tools)
    except Exception as e:
        log.exception("self-check: planning the groups failed")
        return _Failed(f"planning the groups failed ({type(e).__name__}: {e})")


def _forecast(forecast: GroupsForecaster, kube: Kube, tools: Tools) -> GroupsForecast:
    """The groups the function drains (those its hooks cover: ALLOWED_ASGS, and
    ASG_TAG's), planned with its own drain options and timeout."""
    settings = tools.settings
    return forecast(
        kube,
        tools.clients,
        lambda: covered_groups(tools.clients.autoscaling, settings)[0],
        settings.drain_options(),
        timeout=float(settings.drain_timeout_seconds),
        clock=tools.clock,
    )
