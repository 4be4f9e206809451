"""When a drain must be over, and when this invocation stops: the deadline
arithmetic of every trigger.

The deadline is the drain's own (its timeout, counted from the event's time, which
spans invocations, but never past what the lifecycle hook allows); the stop is this
invocation's hand-over moment. A drain works until the earlier of the two, its
window's `limit`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from drainer import aws
from drainer.lifecycle.events_hook import LifecycleEvent
from drainer.lifecycle.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Invocation:
    """What the Lambda runtime tells an invocation about itself."""

    remaining_seconds: Callable[[], float]
    function_arn: str
    request_id: str = ""
    """The invocation's aws_request_id: Lambda's retries of an asynchronous invocation
    keep it, a new delivery of the same event has its own."""


@dataclass(frozen=True)
class Deadline:
    """When the drain must be over, and what set that moment (for the log lines)."""

    at: float
    """Epoch seconds."""
    source: str
    """E.g. "DRAIN_TIMEOUT_SECONDS (3600 s)" or the lifecycle hook's GlobalTimeout."""


@dataclass(frozen=True)
class Window:
    """A drain's time: its deadline, and this invocation's stop (None outside Lambda,
    which has no time limit of its own)."""

    deadline: Deadline
    stop_at: float | None = None

    @property
    def limit(self) -> float:
        """Until when this invocation works on the drain."""
        return self.deadline.at if self.stop_at is None else min(self.deadline.at, self.stop_at)

    @property
    def hands_over(self) -> bool:
        """Whether this invocation stops before the deadline (the next one carries on)."""
        return self.stop_at is not None and self.stop_at < self.deadline.at


MIN_WORK_SECONDS = 5.0


def work_time(remaining: float, margin: float) -> float:
    """How long this invocation may drain before handing over: its remaining time less
    the margin, but at least a few seconds (or half of what remains, if less), so a
    function whose timeout is not longer than the margin still makes progress instead
    of handing over at once, forever."""
    return max(remaining - margin, min(remaining / 2, MIN_WORK_SECONDS))


def effective_deadline(
    started_at: float, event: LifecycleEvent, hook: aws.HookInfo, settings: Settings
) -> Deadline:
    """The drain's deadline: DRAIN_TIMEOUT_SECONDS after the instance began to wait,
    but never later than the hook's GlobalTimeout (counted from the same moment)
    less GLOBAL_TIMEOUT_MARGIN_SECONDS, so the timeout policy always runs before
    Auto Scaling applies the hook's DefaultResult on its own. Both count from the
    event's time, so every delivery of one lifecycle action (a hand-over, Lambda's
    retry after a crash, a duplicate) works to the same deadline.

    `started_at` is this invocation's own start, never a hand-over's claim: whoever
    may invoke the function can write that claim, and an earlier one would bring the
    deadline (and TIMEOUT_POLICY=force) forward."""
    # A later or unreadable event time (clock skew, a hand-made event) counts from
    # this invocation's start instead: later than the truth, never earlier.
    waiting_since = event.waiting_since
    if waiting_since is None or waiting_since > started_at:
        waiting_since = started_at
    timeout = settings.drain_timeout_seconds
    own = Deadline(waiting_since + timeout, f"DRAIN_TIMEOUT_SECONDS ({timeout} s)")
    limit = hook.global_timeout_seconds
    margin = settings.global_timeout_margin_seconds
    rule = "" if hook.global_timeout is not None else ", 100 x HeartbeatTimeout"
    hooks = Deadline(
        waiting_since + limit - margin,
        f"lifecycle hook GlobalTimeout ({limit} s{rule}) minus {margin} s margin",
    )
    return hooks if hooks.at < own.at else own


def hand_over_at(
    invocation: Invocation | None, settings: Settings, clock: Callable[[], float]
) -> float | None:
    """When this invocation hands over; None outside Lambda (no time limit of its own)."""
    if invocation is None:
        return None
    return clock() + work_time(invocation.remaining_seconds(), settings.handover_margin_seconds)


def log_deadline(deadline: Deadline, now: float) -> None:
    """The drain's deadline and what set it, in one line with fixed keys."""
    log.info(
        "drain deadline in %.0f s: %s",
        deadline.at - now,
        deadline.source,
        extra={
            "deadline": datetime.fromtimestamp(deadline.at, UTC).isoformat(timespec="seconds"),
            "deadline_source": deadline.source,
        },
    )
