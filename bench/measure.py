"""Figures of a drain. On kubesim, from its own records: the drain window on the
server's clock, the requests by verb, the server-side handling time of each request,
and how long the simulated controllers held the store lock (while they do, no
request is served). On the real control plane, from the clients' side: the same
window and verbs from each client's own request log (ClientRecord: our child's
records, kubectl's -v=6 lines), the round trip as the client saw it.
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

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


# -- the real backend: figures from the clients' own side ---------------------------


@dataclass(frozen=True)
class ClientRecord:
    """One request as its client saw it (the real backend has no records of its own):
    when it was sent and when its answer came, epoch seconds on this host's clock."""

    at: float
    done: float
    method: str
    verb: str
    resource: str
    status: int


def classify(method: str, url: str) -> tuple[str, str]:
    """(verb, resource) of a request, as kubesim records them: resource is the plural
    (with its subresource, e.g. pods/eviction), or the path itself for discovery."""
    parsed = urlsplit(url)
    parts = [p for p in parsed.path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        rest = parts[3:]
    else:
        rest = []
    if rest and rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    if not rest:
        return "get", parsed.path or "/"
    resource = rest[0] + (f"/{rest[2]}" if len(rest) >= 3 else "")
    named = len(rest) >= 2
    if method == "GET":
        watch = "watch=true" in parsed.query or "watch=1" in parsed.query
        return ("watch" if watch else "get" if named else "list"), resource
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    verb = verbs.get(method, method.lower())
    if verb == "delete" and not named:
        verb = "deletecollection"
    return verb, resource


# kubectl -v=6 logs one line per answer, after it came: klog's local time stamp and
# the round trip in milliseconds. v1.32 and before write it as text, v1.33 as a
# structured "Response" record.
_KLOG = re.compile(r"^[IWE](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6})\s+\d+ round_trippers\.go")
_PLAIN = re.compile(r"\] (GET|POST|PUT|PATCH|DELETE) (\S+) (\d{3})\b.* in (\d+) milliseconds")
_STRUCTURED = re.compile(
    r'"Response" verb="([A-Z]+)" url="([^"]+)" status="(\d{3})[^"]*" milliseconds=(\d+)'
)


def _klog_time(match: re.Match[str], now: float) -> float:
    month, day, hour, minute, second, micros = (int(g) for g in match.groups())
    year = time.localtime(now).tm_year
    stamp = datetime(year, month, day, hour, minute, second, micros).timestamp()
    if stamp > now + 86400:  # logged last December, read in January
        stamp = datetime(year - 1, month, day, hour, minute, second, micros).timestamp()
    return stamp


def kubectl_records(log: str, now: float | None = None) -> list[ClientRecord]:
    """The requests in a `kubectl -v=6` log, with their round trips."""
    now = time.time() if now is None else now
    records = []
    for line in log.splitlines():
        stamp = _KLOG.match(line)
        if stamp is None:
            continue
        found = _PLAIN.search(line) or _STRUCTURED.search(line)
        if found is None:
            continue
        method, url, status, millis = found.groups()
        done = _klog_time(stamp, now)
        verb, resource = classify(method, url)
        records.append(
            ClientRecord(done - int(millis) / 1000, done, method, verb, resource, int(status))
        )
    return records


def client_records(rows: Iterable[Sequence[Any]]) -> list[ClientRecord]:
    """Our child's records: [at, done, method, verb, resource, status] rows."""
    return [
        ClientRecord(float(at), float(done), str(method), str(verb), str(resource), int(status))
        for at, done, method, verb, resource, status in rows
    ]
