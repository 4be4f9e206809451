"""An EC2 event's drain handed on from invocation to invocation.

A drain whose deadline EC2 fixes (a scheduled change's window) may lie beyond one
invocation's time: the drain is cut to the invocation's end and, with pods left, the
same event goes to a new invocation (`hand_on`), which drains on, cut again or, in
the last one, to EC2's moment with its deadline policy. The event goes on marked
(HANDED_ON) with the drain so far: how many times it was handed on, the pods
evicted and force-deleted, and when it began. The marked invocation sends no start
notice, and its end line and notice count the drain as a whole (`totals`, the keys
a terminate hook's hand-over adds). A mark that does not read (forged, cut short)
counts as none.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from drainer import aws
from drainer.errors import AwsError
from drainer.lifecycle.job import Run
from drainer.lifecycle.outcomes import Result
from drainer.lifecycle.window import Deadline, Invocation

log = logging.getLogger("drainer.lifecycle.ec2_events")

HANDED_ON = "eks-node-drainer-handed-on"
"""The key a handed-on event carries: the drain so far (SoFar)."""
_MOST = 10**6
"""More hand-ons, pods or seconds than any drain has: a mark beyond is no mark."""


@dataclass(frozen=True)
class SoFar:
    """The drain before this invocation, as the event's mark carries it."""

    handovers: int = 0
    evicted: int = 0
    forced: int = 0
    started_at: float = 0.0

    @classmethod
    def of(cls, raw_event: Mapping[str, Any] | None) -> SoFar | None:
        """The mark's drain so far; None for an event not handed on (or a mark that
        does not read)."""
        mark = (raw_event or {}).get(HANDED_ON)
        if not isinstance(mark, Mapping):
            return None
        counts = [mark.get(k) for k in ("handovers", "evicted", "forced")]
        began = mark.get("started_at")
        whole = [c for c in counts if type(c) is int and 0 <= c < _MOST]
        if len(whole) != len(counts) or not isinstance(began, int | float):
            return None
        if isinstance(began, bool) or not 0 < began < time.time() + 60:
            return None
        return cls(whole[0], whole[1], whole[2], float(began))

    def after(self, run: Run, started_at: float) -> dict[str, Any]:
        """The mark the next invocation gets: this one's run added."""
        report = run.report
        return {
            "handovers": self.handovers + 1,
            "evicted": self.evicted + (report.evicted if report else 0),
            "forced": self.forced + (report.forced if report else 0),
            "started_at": self.started_at or started_at,
        }


def totals(summary: dict[str, Any], so_far: SoFar | None, run: Run) -> dict[str, Any]:
    """The end line with the drain as a whole, across invocations, when handed on."""
    if so_far is None:
        return summary
    report = run.report
    return {
        **summary,
        "handovers_so_far": so_far.handovers,
        "evicted_total": so_far.evicted + (report.evicted if report else 0),
        "forced_total": so_far.forced + (report.forced if report else 0),
        "drain_seconds_total": round(time.time() - so_far.started_at, 3),
    }


def hand_on(
    run: Run,
    raw_event: Mapping[str, Any],
    lambda_client: aws.Client,
    invocation: Invocation | None,
    until: Deadline,
) -> Run:
    """A drain cut to this invocation's time with pods left: the same event, marked,
    goes to a new invocation. Without a function to invoke, or when Lambda refuses
    for good, the drain ends here, timed out, said; a refusal for now is raised, for
    Lambda to run this event again."""
    if invocation is None or not invocation.function_arn:
        return run
    so_far = SoFar.of(raw_event) or SoFar()
    mark = so_far.after(run, run.started_at or time.time())
    try:
        aws.invoke_self_async(
            lambda_client, invocation.function_arn, {**raw_event, HANDED_ON: mark}
        )
    except AwsError as e:
        if not aws.is_permanent(e):  # Lambda runs this event again: the drain goes on
            log.error("the hand-on failed for now; the invocation will be retried: %s", e)
            raise
        log.warning("could not hand the drain on to a new invocation (%s): it ends here", e)
        return run
    log.info("pods left at this invocation's end: handed on to a new invocation")
    return replace(
        run,
        result=Result.HANDED_OVER,
        message=f"{run.message}; handed on to a new invocation, which drains on until "
        f"{until.source}",
    )
