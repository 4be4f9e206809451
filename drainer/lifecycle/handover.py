"""The hand-over: a drain's progress carried from one Lambda invocation to the next.

A drain can outlast one Lambda invocation. The handler then re-invokes the function
with the original event plus a top-level "drainer" key (`with_handover`), which
parse_event reads back into `LifecycleEvent.handover` (`parse_handover`). Anyone
allowed to invoke the function can write that key, so it is only a claim: its
numbers are bounded here, and the drain's deadline never comes from it
(window.effective_deadline counts from the event's own time).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drainer.aws import LIFECYCLE_ACTION_MAX_SECONDS
from drainer.lifecycle.events_fields import Malformed, shown

HANDOVER_KEY = "drainer"
CLOCK_SKEW_SECONDS = 300.0
"""How far two clocks (EventBridge's event time, the invocation that wrote a
hand-over, this one) may disagree before a time is taken as wrong: the 5 minutes AWS
itself tolerates in a signed request."""
MAX_COUNT = 1_000_000
"""The bound on a hand-over's counters: far above what 48 hours allow (a hand-over
every few seconds, a heartbeat every 15 s at the most)."""


@dataclass(frozen=True)
class Handover:
    """Progress carried from one invocation of a drain to the next."""

    started_at: float
    """Epoch seconds when the drain began, so the overall timeout spans invocations."""
    handovers: int
    """How many times the drain has been handed on so far."""
    heartbeats: int
    """Lifecycle heartbeats recorded by all previous invocations."""

    def handed_on(self, heartbeats: int) -> Handover:
        """The hand-over for the next invocation, after `heartbeats` more beats."""
        return Handover(self.started_at, self.handovers + 1, self.heartbeats + heartbeats)

    def as_dict(self) -> dict[str, object]:
        return {
            "started_at": self.started_at,
            "handovers": self.handovers,
            "heartbeats": self.heartbeats,
        }


def with_handover(event: Mapping[str, Any], handover: Handover) -> dict[str, Any]:
    """The payload that hands a drain on: the original event plus its progress."""
    payload = copy.deepcopy(dict(event))
    payload[HANDOVER_KEY] = handover.as_dict()
    return payload


def parse_handover(raw: object, event_time: float | None, now: float) -> Handover | None:
    """The hand-over claim, its numbers bounded: a start no earlier than the event
    (less the clock skew), not in the future, not older than a lifecycle action can
    live; counters that fit in 48 hours. Raises Malformed for a claim out of bounds."""
    if raw is None:
        return None
    where = f"field '{HANDOVER_KEY}'"
    if not isinstance(raw, dict):
        raise Malformed(f"{where} is a {type(raw).__name__}, not an object")
    started_at = _seconds(raw.get("started_at"))
    if started_at is None:
        raise Malformed(
            f"{where}.started_at must be positive epoch seconds, got {_number(raw, 'started_at')}"
        )
    earliest = now - LIFECYCLE_ACTION_MAX_SECONDS - CLOCK_SKEW_SECONDS
    if event_time is not None:
        earliest = max(earliest, event_time - CLOCK_SKEW_SECONDS)
    if not earliest <= started_at <= now + CLOCK_SKEW_SECONDS:
        raise Malformed(
            f"{where}.started_at {started_at:.0f} is {_broken_bound(started_at, event_time, now)}: "
            "not the start of this lifecycle action's drain"
        )
    counts = []
    for key in ("handovers", "heartbeats"):
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
            raise Malformed(
                f"{where}.{key} must be an integer from 0 to {MAX_COUNT}, got {_number(raw, key)}"
            )
        counts.append(value)
    return Handover(started_at=started_at, handovers=counts[0], heartbeats=counts[1])


def _seconds(value: object) -> float | None:
    """Positive, finite epoch seconds as a float; None for anything else (a huge int
    does not fit a float: OverflowError, caught here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def _number(raw: Mapping[str, Any], key: str) -> str:
    """A claimed number for the log line, never thousands of digits long."""
    value = raw.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**15:
        return f"an integer of {len(str(abs(value)))} digits"
    return shown(value) if isinstance(value, str) else repr(value)[:40]


def _broken_bound(started_at: float, event_time: float | None, now: float) -> str:
    """Which bound a hand-over's start broke, in words."""
    if started_at > now + CLOCK_SKEW_SECONDS:
        return f"{started_at - now:.0f} s in the future"
    if event_time is not None and started_at < event_time - CLOCK_SKEW_SECONDS:
        return f"{event_time - started_at:.0f} s before the event's own time"
    return f"{now - started_at:.0f} s ago, longer than a lifecycle action lives"
