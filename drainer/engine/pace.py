"""The drain's current ETA, while it runs: a forecast of when each pod goes (made
once at the drain's start by whoever runs it: drainer/plan/eta.py, from the plan's
own model) moved on by what has happened since.

The arithmetic: the drain is as late as the latest of its pods so far (each pod's
eviction and end against their forecast times, never counted early); the ETA is the
latest forecast end of the pods still there, shifted by that lateness, less the time
gone by; never negative, 0 once they are all gone. What paces it is the budget the
last of the pods left waits for, else that pod's own stop.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from drainer.engine.options import DrainOptions
from drainer.engine.pods import Pod
from drainer.engine.report import DrainEvent, Kind
from drainer.errors import KubeError
from drainer.k8s.kube import Kube, Obj

Listed = tuple[list[Pod], list[Obj]]
"""What a drain listed as it began (the node's pods, the PodDisruptionBudgets): its
forecast, made then, reads them there instead of listing them again."""


@dataclass(frozen=True)
class NodeForecast:
    """One node's drain as forecast at its start (seconds from the start)."""

    eta_seconds: float
    paced_by: str
    """What the drain's length comes from, in the plan's words."""
    evicted: Mapping[str, float] = field(default_factory=dict)
    """namespace/name -> when its eviction is accepted."""
    gone: Mapping[str, float] = field(default_factory=dict)
    """namespace/name -> when it is gone."""
    budgets: Mapping[str, str] = field(default_factory=dict)
    """namespace/name -> the PodDisruptionBudget its eviction waits for or goes through."""


class Forecaster(Protocol):
    """Forecasts one node's drain from a live client (from what the drain listed, when
    given); raises what its reads raise."""

    def __call__(
        self,
        kube: Kube,
        node: str,
        options: DrainOptions,
        *,
        timeout: float,
        now: float,
        listed: Listed | None = None,
    ) -> NodeForecast: ...


@dataclass(frozen=True)
class Accuracy:
    """The forecast against the drain: `actual_seconds` from the drain's start to its
    last pod gone (None: not every pod went, nothing to compare)."""

    forecast_seconds: float
    actual_seconds: float | None

    @property
    def error_seconds(self) -> float | None:
        """actual - forecast: positive when the drain took longer than forecast."""
        if self.actual_seconds is None:
            return None
        return self.actual_seconds - self.forecast_seconds


_LIVE = frozenset({Kind.STARTED, Kind.EVICTED, Kind.GONE})
"""The lines that carry the current ETA."""
_ENDED = frozenset({Kind.GONE, Kind.STUCK, Kind.FORCED, Kind.WITH_NAMESPACE})
"""What ends a pod's wait: gone, no longer waited for, deleted, or going with its namespace."""
_UNFINISHED = frozenset({Kind.STUCK, Kind.FORCED, Kind.WITH_NAMESPACE})
"""What ends a pod's wait without its going as the forecast has it: the drain then has
no actual span to hold against the forecast."""


class Eta:
    """The current ETA of one drain, from its forecast and its events. Thread-safe:
    events come from the drain's loop and its eviction pool."""

    def __init__(self, forecast: NodeForecast) -> None:
        self.forecast = forecast
        self._left = dict(forecast.gone)
        # The pods by forecast end, latest first, read from the front as pods go: the
        # last pod left in O(1) per line, not a scan of every pod left (which made a
        # drain's lines cost its pods squared).
        self._latest = sorted(self._left, key=lambda pod: (self._left[pod], pod), reverse=True)
        self._front = 0
        self._last_forecast = max(forecast.gone.values(), default=None)
        self._late = 0.0
        self._start: float | None = None
        self._last_gone: float | None = None
        self._unfinished = False
        self._lock = threading.Lock()

    def started(self, now: float) -> None:
        with self._lock:
            if self._start is None:
                self._start = now

    def evicted(self, pod: str, now: float) -> None:
        with self._lock:
            self._late_by(self.forecast.evicted.get(pod), now)

    def ended(self, pod: str, now: float) -> None:
        with self._lock:
            self._late_by(self._left.pop(pod, None), now)
            if self._start is not None and pod in self.forecast.gone:
                self._last_gone = now

    def _late_by(self, forecast_at: float | None, now: float) -> None:
        if forecast_at is not None and self._start is not None:
            self._late = max(self._late, now - self._start - forecast_at)

    def _last_left(self) -> str | None:
        """The pod left whose forecast end is latest (hold the lock)."""
        while self._front < len(self._latest) and self._latest[self._front] not in self._left:
            self._front += 1
        return self._latest[self._front] if self._front < len(self._latest) else None

    def remaining(self, now: float) -> float:
        """Seconds until the last pod left is gone, as things go now."""
        with self._lock:
            last = self._last_left()
            if last is None:
                return 0.0
            elapsed = 0.0 if self._start is None else now - self._start
            return max(0.0, self._left[last] + self._late - elapsed)

    def paced_by(self) -> str:
        """What paces the pods left: the plan's words while the forecast's last pod is
        among them; else the budget of the last pod left, or its stop."""
        with self._lock:
            last = self._last_left()
            if last is None:
                return "nothing left"
        if self._last_forecast is not None and self.forecast.gone[last] >= self._last_forecast:
            return self.forecast.paced_by
        budget = self.forecast.budgets.get(last)
        return f"PodDisruptionBudget {budget}" if budget else f"the stop of {last}"

    def fields(self, event: DrainEvent, now: float) -> dict[str, Any]:
        """Take in the event; for the lines that carry it, the current ETA and what
        paces it: DrainEvent's eta_seconds and paced_by (drainer/engine/context.py sets
        them)."""
        if event.kind is Kind.STARTED:
            self.started(now)
        elif event.kind is Kind.EVICTED:
            self.evicted(event.pod, now)
        elif event.kind in _ENDED:
            self.ended(event.pod, now)
            if event.kind in _UNFINISHED:
                with self._lock:
                    self._unfinished = True
        if event.kind not in _LIVE:
            return {}
        return {"eta_seconds": self.remaining(now), "paced_by": self.paced_by()}

    def accuracy(self) -> Accuracy:
        """The forecast against the drain's own span, start to last pod gone: none when
        a pod did not go (stuck, force-deleted, left to its namespace, still there)."""
        with self._lock:
            actual = None
            if not self._left and self._start is not None and not self._unfinished:
                actual = (self._last_gone or self._start) - self._start
        return Accuracy(self.forecast.eta_seconds, actual)


def forecast_within(
    forecaster: Forecaster,
    kube: Kube,
    node: str,
    options: DrainOptions,
    *,
    timeout: float,
    now: float,
    within: float,
    listed: Listed | None = None,
) -> Eta | str:
    """The drain's ETA from a forecast made now, given `within` seconds (in a thread
    left behind when it takes longer); else why there is none, in words. Whatever the
    forecast raises (a read denied or failing, a fault of the model) is a reason,
    never the drain's failure."""
    made: list[NodeForecast | Exception] = []

    def forecast() -> None:
        try:
            made.append(forecaster(kube, node, options, timeout=timeout, now=now, listed=listed))
        except Exception as e:
            made.append(e)

    thread = threading.Thread(target=forecast, name=f"forecast-{node}", daemon=True)
    thread.start()
    thread.join(within)
    if not made:
        return f"its forecast took longer than {within:g} s"
    found = made[0]
    if isinstance(found, NodeForecast):
        return Eta(found)
    if isinstance(found, KubeError):
        return f"its forecast could not read the cluster: {found}"
    return f"its forecast failed: {type(found).__name__}: {found}"
