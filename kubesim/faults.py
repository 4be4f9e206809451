"""Fault injection and request accounting.

A fault rule matches requests by method and path pattern (a regular expression,
searched in the path without the query) and, for the next `count` matching
requests or until `until` (monotonic seconds; or `seconds` from now), does one of:

- status: answer with this HTTP status and a Status body (Retry-After optional);
- latency: sleep this many seconds before serving normally;
- drop: close the connection without answering;
- break_watch: end a watch stream after `after_events` events (410 with
  `expire: true`, so the client must re-list).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "count": (int,),
    "until": (float, int),
    "status": (int,),
    "retry_after": (float, int),
    "latency": (float, int),
    "after_events": (int,),
}


@dataclass
class Fault:
    kind: str  # status | latency | drop | break_watch
    method: str = "*"
    path: str = ".*"
    count: int | None = None  # None = unlimited (until the window ends)
    until: float | None = None
    status: int = 500
    retry_after: float | None = None
    reason: str = ""
    message: str = ""
    latency: float = 0.0
    after_events: int = 0
    expire: bool = False
    user: str = ""  # only requests from this user ("" = anyone)
    hits: int = 0
    _pattern: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in ("status", "latency", "drop", "break_watch"):
            raise ValueError(f"unknown fault kind {self.kind!r}")
        try:
            self._pattern = re.compile(self.path)
        except re.error as e:
            raise ValueError(f"path is not a regular expression: {e}") from e
        for name, kinds in _FIELD_TYPES.items():
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
                raise ValueError(f"{name} must be a {kinds[0].__name__}, not {value!r}")
        if not 100 <= self.status <= 599:
            raise ValueError(f"status must be an HTTP status code, not {self.status}")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fault:
        allowed = {
            "kind",
            "method",
            "path",
            "count",
            "status",
            "retry_after",
            "reason",
            "message",
            "latency",
            "after_events",
            "expire",
            "user",
        }
        unknown = set(data) - allowed - {"seconds"}
        if unknown:
            raise ValueError(f"unknown fault fields {sorted(unknown)}")
        fields = {k: v for k, v in data.items() if k in allowed}
        fault = cls(**fields)
        if "seconds" in data:
            seconds = data["seconds"]
            if isinstance(seconds, bool) or not isinstance(seconds, int | float):
                raise ValueError(f"seconds must be a number, not {seconds!r}")
            fault.until = time.monotonic() + float(seconds)
        return fault

    def active(self, now: float) -> bool:
        if self.until is not None and now >= self.until:
            return False
        return self.count is None or self.hits < self.count

    def matches(self, method: str, path: str, user: str, watch: bool) -> bool:
        if self.kind == "break_watch" and not watch:
            return False
        if self.method not in ("*", method):
            return False
        if self.user and self.user != user:
            return False
        return bool(self._pattern.search(path))

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "method": self.method,
            "path": self.path,
            "count": self.count,
            "hits": self.hits,
            "status": self.status,
            "active": self.active(time.monotonic()),
        }


@dataclass(frozen=True)
class RequestRecord:
    at: float  # wall-clock epoch seconds when the request arrived
    done: float  # when the response finished (or the watch ended)
    method: str
    path: str
    verb: str
    resource: str
    user: str
    status: int


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Fault] = []
        self.counters: Counter[tuple[str, str, str]] = Counter()  # (user, verb, resource)
        self.records: list[RequestRecord] = []

    def add(self, fault: Fault) -> None:
        with self._lock:
            self._rules.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def remove(self, which: Callable[[Fault], bool]) -> None:
        """Drop the rules `which` selects (a fault lifted while others go on)."""
        with self._lock:
            self._rules = [f for f in self._rules if not which(f)]

    def reset(self) -> None:
        with self._lock:
            self._rules.clear()
            self.counters.clear()
            self.records.clear()

    def take(self, method: str, path: str, user: str, watch: bool) -> list[Fault]:
        """The faults that apply to this request; each consumes one of its counts."""
        now = time.monotonic()
        taken = []
        with self._lock:
            for fault in self._rules:
                if fault.active(now) and fault.matches(method, path, user, watch):
                    fault.hits += 1
                    taken.append(fault)
        return taken

    def describe(self) -> list[dict[str, Any]]:
        with self._lock:
            return [f.describe() for f in self._rules]

    def record(self, record: RequestRecord) -> None:
        with self._lock:
            self.records.append(record)
            self.counters[(record.user, record.verb, record.resource)] += 1

    def counts(self, user: str | None = None) -> dict[str, int]:
        """Request counts by "verb resource", for one user or everyone."""
        result: Counter[str] = Counter()
        with self._lock:
            for (who, verb, resource), n in self.counters.items():
                if user is None or who == user:
                    result[f"{verb} {resource}"] += n
        return dict(result)

    def requests(self, user: str | None = None) -> list[RequestRecord]:
        with self._lock:
            return [r for r in self.records if user is None or r.user == user]
