"""Figures from kubesim's own records: the drain window on the server's clock, the
requests by verb, the server-side handling time of each request, and how long the
simulated controllers held the store lock (while they do, no request is served).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kubesim import KubeSim

VERB_NAMES = {"create pods/eviction": "evict"}


def verb_bucket(verb: str, resource: str) -> str:
    """Group a request for the table: evict, get, list, watch, patch, delete,
    discovery (/api, /apis, /openapi: kubectl's start-up), other."""
    if verb == "create" and resource == "pods/eviction":
        return "evict"
    if resource.startswith("/"):
        return "discovery"
    if verb in ("get", "list", "watch", "patch", "delete"):
        return verb
    return "other"


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    requests: int

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


def drain_window(records: Sequence[Any]) -> Window | None:
    """From the client's first cordon (PATCH of a node) to the end of its last
    request. A watch counts by its start: it ends when the client hangs up, which
    the server notices a little later."""
    patches = [r for r in records if r.method == "PATCH" and r.resource == "nodes"]
    if not patches:
        return None
    start = min(r.at for r in patches)
    inside = [r for r in records if r.at >= start]
    end = max(r.at if r.verb == "watch" else r.done for r in inside)
    return Window(start, end, len(inside))


def lookup_window(records: Sequence[Any]) -> Window | None:
    """From the first request to the end of the last (scenario 5: no cordon)."""
    if not records:
        return None
    return Window(min(r.at for r in records), max(r.done for r in records), len(records))


def by_verb(records: Iterable[Any]) -> dict[str, int]:
    counts: Counter[str] = Counter(verb_bucket(r.verb, r.resource) for r in records)
    return dict(sorted(counts.items()))


@dataclass(frozen=True)
class Latency:
    """Server-side handling time (request read to response written), watches excluded."""

    count: int
    median_ms: float
    p99_ms: float
    max_ms: float


def latency(records: Iterable[Any]) -> Latency:
    times = sorted((r.done - r.at) * 1000 for r in records if r.verb != "watch")
    if not times:
        return Latency(0, 0.0, 0.0, 0.0)
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    return Latency(len(times), statistics.median(times), p99, times[-1])


class ControllerClock:
    """Times each pass of kubesim's simulated controllers (one thread that holds the
    store lock for the whole pass), by wrapping the simulator's reconcile method."""

    def __init__(self, sim: KubeSim) -> None:
        self._lock = threading.Lock()
        self.passes: list[tuple[float, float]] = []
        simulator = sim.simulator
        reconcile = simulator.reconcile

        def timed() -> None:
            started = time.time()
            try:
                reconcile()
            finally:
                with self._lock:
                    self.passes.append((started, time.time()))

        simulator.reconcile = timed  # type: ignore[method-assign]

    def busy(self, start: float, end: float) -> tuple[int, float]:
        """Passes and seconds of lock holding that overlap [start, end]."""
        with self._lock:
            overlaps = [
                min(b, end) - max(a, start) for a, b in self.passes if b > start and a < end
            ]
        return len(overlaps), sum(overlaps)
