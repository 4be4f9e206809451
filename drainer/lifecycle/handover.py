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
    evicted: int = 0
    """Pods evicted by all previous invocations (0 in a hand-over of a version before)."""
    target_wait_began: float | None = None
    """Epoch seconds when the wait for the target groups began, in an invocation before
    (None: it has not), so TARGET_GROUP_WAIT_SECONDS bounds it across invocations."""
    forced: int = 0
    """Pods force-deleted past their budgets (TIMEOUT_POLICY=force) by all previous
    invocations, so the chain's end says timed_out as one invocation's would."""
    volume_wait_began: float | None = None
    """Epoch seconds when the wait for the volumes to detach began, in an invocation
    before (None: it has not), so VOLUME_DETACH_TIMEOUT_SECONDS bounds it across them."""
    recorded: bool = False
    """An invocation before cordoned the node and left its drain's record there: one
    that finds no record now knows the node was released since (runner.released_since).
    False in a hand-over of a version before, or of a chain that never reached the node."""
    start_untold: bool = False
    """NOTIFY_ON_START's notice is still to be told: the invocations before armed it
    and none cordoned the node (an API outage throughout). False in a hand-over of a
    version before, which carried no such flag (a chain begun before an upgrade whose
    first step never cordoned stays untold)."""

    def handed_on(
        self,
        heartbeats: int,
        evicted: int = 0,
        target_wait_began: float | None = None,
        *,
        forced: int = 0,
        volume_wait_began: float | None = None,
        recorded: bool = False,
        start_untold: bool = False,
    ) -> Handover:
        """The hand-over for the next invocation, after `heartbeats` more beats,
        `evicted` more pods and `forced` more force-deleted; the target and volume
        waits' starts, once one began them; `recorded` once a drain recorded itself;
        `start_untold` when this invocation, too, left the start notice untold."""
        return Handover(
            self.started_at,
            self.handovers + 1,
            self.heartbeats + heartbeats,
            self.evicted + evicted,
            self.target_wait_began if target_wait_began is None else target_wait_began,
            self.forced + forced,
            self.volume_wait_began if volume_wait_began is None else volume_wait_began,
            self.recorded or recorded,
            start_untold,
        )

    def as_dict(self) -> dict[str, object]:
        """The "drainer" key; the fields a version before knew nothing of only when set."""
        said: dict[str, object] = {
            "started_at": self.started_at,
            "handovers": self.handovers,
            "heartbeats": self.heartbeats,
        }
        if self.evicted:
            said["evicted"] = self.evicted
        if self.target_wait_began is not None:
            said["target_wait_began"] = self.target_wait_began
        if self.forced:
            said["forced"] = self.forced
        if self.volume_wait_began is not None:
            said["volume_wait_began"] = self.volume_wait_began
        if self.recorded:
            said["recorded"] = True
        if self.start_untold:
            said["start_untold"] = True
        return said


def with_handover(event: Mapping[str, Any], handover: Handover) -> dict[str, Any]:
    """The payload that hands a drain on: the original event plus its progress."""
    payload = copy.deepcopy(dict(event))
    payload[HANDOVER_KEY] = handover.as_dict()
    return payload


def parse_handover(raw: object, event_time: float | None, now: float) -> Handover | None:
    """The hand-over claim, its numbers bounded: a start no earlier than the event
    (less the clock skew), not in the future, not older than a lifecycle action can
    live; counters that fit in 48 hours; a target or volume wait begun no earlier
    than the drain (less the clock skew) and not in the future. Raises Malformed for
    a claim out of bounds. A hand-over of a version before has no `evicted` or
    `forced` (0) and no `target_wait_began` or `volume_wait_began` (None)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise Malformed(f"{_WHERE} is a {type(raw).__name__}, not an object")
    started_at = epoch_seconds(raw.get("started_at"))
    if started_at is None:
        raise Malformed(
            f"{_WHERE}.started_at must be positive epoch seconds, got {_number(raw, 'started_at')}"
        )
    earliest = now - LIFECYCLE_ACTION_MAX_SECONDS - CLOCK_SKEW_SECONDS
    if event_time is not None:
        earliest = max(earliest, event_time - CLOCK_SKEW_SECONDS)
    if not earliest <= started_at <= now + CLOCK_SKEW_SECONDS:
        raise Malformed(
            f"{_WHERE}.started_at {started_at:.0f} is "
            f"{_broken_bound(started_at, event_time, now)}: "
            "not the start of this lifecycle action's drain"
        )
    handovers, heartbeats, evicted, forced = (
        _count(raw, key, required) for key, required in _COUNTS
    )
    started_at = min(started_at, now)  # a start within the skew ahead: now, never a negative span
    return Handover(
        started_at,
        handovers,
        heartbeats,
        evicted,
        _wait_began(raw, "target_wait_began", started_at, now),
        forced,
        _wait_began(raw, "volume_wait_began", started_at, now),
        _flag(raw, "recorded"),
        _flag(raw, "start_untold"),
    )


def _flag(raw: Mapping[str, Any], key: str) -> bool:
    """A flag of the claim (`recorded`: a drain before recorded itself on the node;
    `start_untold`): False when it says nothing (a version before)."""
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise Malformed(f"{_WHERE}.{key} must be true or false, got {repr(value)[:40]}")
    return value


_WHERE = f"field '{HANDOVER_KEY}'"
_COUNTS = (("handovers", True), ("heartbeats", True), ("evicted", False), ("forced", False))
"""The hand-over's counters, and whether a hand-over of a version before has each."""


def _count(raw: Mapping[str, Any], key: str, required: bool) -> int:
    """A counter of the claim, from 0 to MAX_COUNT (0 when it is not required and absent)."""
    value = raw.get(key)
    if value is None and not required:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise Malformed(
            f"{_WHERE}.{key} must be an integer from 0 to {MAX_COUNT}, got {_number(raw, key)}"
        )
    return value


def _wait_began(raw: Mapping[str, Any], key: str, started_at: float, now: float) -> float | None:
    """When the claim says a wait (the target groups', the volumes') began; None when
    it says nothing. Bounded like the start: after the drain's start (less the clock
    skew) and not in the future (plus the skew; the runner and the volumes' wait count
    a start past their own clock as now, so a claim can only shorten the wait, never
    lengthen it past one begun now)."""
    if raw.get(key) is None:
        return None
    began = epoch_seconds(raw.get(key))
    if began is None or not started_at - CLOCK_SKEW_SECONDS <= began <= now + CLOCK_SKEW_SECONDS:
        raise Malformed(
            f"{_WHERE}.{key} must be epoch seconds between the drain's start "
            f"and now, got {_number(raw, key)}"
        )
    return began


def epoch_seconds(value: object) -> float | None:
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
