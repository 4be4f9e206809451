"""An EC2 event's drain handed over from invocation to invocation.

A drain whose deadline EC2 fixes (a scheduled change's window) may lie beyond one
invocation's time: the drain is cut to the invocation's end and, with pods left, the
same event goes to a new invocation (`hand_over_event`), which drains on, cut again
or, in the last one, to EC2's moment with its deadline policy. The event goes on marked
(HANDED_OVER) with the drain so far: how many times it was handed over, the pods
evicted and force-deleted, and when it began. The marked invocation sends no start
notice (unless the mark says no invocation before could tell it: `start_untold`),
and its end line and notice count the drain as a whole
(ending.across_invocations, as for a terminate hook's hand-over). A mark that does
not read (forged, cut short) counts as none.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from drainer import aws
from drainer.lifecycle.ending import invoke_next
from drainer.lifecycle.handover import epoch_seconds
from drainer.lifecycle.job import Run
from drainer.lifecycle.outcomes import Result
from drainer.lifecycle.window import Deadline, Invocation

log = logging.getLogger("drainer.lifecycle.ec2_events")

HANDED_OVER = "eks-node-drainer-handed-over"
"""The key a handed-over event carries: the drain so far (SoFar)."""
_YEAR = 366 * 86400.0
_MOST = 10**6
"""More hand-overs, pods or seconds than any drain has: a mark beyond is no mark."""


@dataclass(frozen=True)
class SoFar:
    """The drain before this invocation, as the event's mark carries it."""

    handovers: int = 0
    evicted: int = 0
    forced: int = 0
    started_at: float = 0.0
    recorded: bool = False
    """An invocation before cordoned the node and left its drain's record there: one
    that finds no record now knows it was released since (runner.released_since); a
    chain whose invocations never reached the node (an API outage) drains on."""
    ec2_at: float | None = None
    """The change's time (a scheduled change's) as the step before drained toward it:
    EC2's, when EC2 moved it; the next step takes it when EC2 cannot be asked."""
    over: str = ""
    """Not the mark's: why EC2 lists the change's window as over (late.over_in_ec2_mid_chain),
    when the handler finds it so for this step; the step then releases the node its
    drain left cordoned (runner.released_over)."""
    start_untold: bool = False
    """NOTIFY_ON_START's notice is still to be told: armed before, and no invocation
    cordoned the node. False in a mark of a version before, which carried no such
    flag (a chain begun before an upgrade whose first step never cordoned stays
    untold)."""

    @classmethod
    def of(cls, raw_event: Mapping[str, Any] | None) -> SoFar | None:
        """The mark's drain so far; None for an event not handed over (or a mark that
        does not read)."""
        mark = (raw_event or {}).get(HANDED_OVER)
        if not isinstance(mark, Mapping):
            return None
        counts = [mark.get(k) for k in ("handovers", "evicted", "forced")]
        began = mark.get("started_at")
        whole = [c for c in counts if type(c) is int and 0 <= c < _MOST]
        if len(whole) != len(counts) or not isinstance(began, int | float):
            return None
        if isinstance(began, bool) or not 0 < began < time.time() + 60:
            return None
        recorded, untold = (mark.get(key, False) for key in ("recorded", "start_untold"))
        if not isinstance(recorded, bool) or not isinstance(untold, bool):
            return None
        ec2_at = _moment(mark.get("ec2_at"))
        return cls(
            whole[0], whole[1], whole[2], float(began), recorded, ec2_at, start_untold=untold
        )

    def after(self, run: Run, started_at: float) -> dict[str, Any]:
        """The mark the next invocation gets: this one's run added, the change's time
        it drained toward and whether the start notice is untold (`ec2_at` and
        `start_untold`, both set by this invocation)."""
        report = run.report
        mark: dict[str, Any] = {
            "handovers": self.handovers + 1,
            "evicted": self.evicted + (report.evicted if report else 0),
            "forced": self.forced + (report.forced if report else 0),
            "started_at": self.started_at or started_at,
            "recorded": self.recorded or bool(report is not None and report.cordoned),
        }
        if self.ec2_at is not None:
            mark["ec2_at"] = self.ec2_at
        if self.start_untold:
            mark["start_untold"] = True
        return mark


def _moment(value: object) -> float | None:
    """A time the mark names, in epoch seconds: a finite number within a year of now
    (a forged one is no more than a forged event could say); None for anything else."""
    moment = epoch_seconds(value)
    return moment if moment is not None and abs(moment - time.time()) < _YEAR else None


def hand_over_event(
    run: Run,
    raw_event: Mapping[str, Any],
    lambda_client: aws.Client,
    invocation: Invocation | None,
    until: Deadline,
    *,
    so_far: SoFar | None,
) -> Run:
    """A drain cut to this invocation's time with pods left: the same event, marked
    with the drain so far (`so_far`, the invocations' before this one; None for the
    first), goes to a new invocation (ending.invoke_next). Without a function to
    invoke, or when Lambda refuses for good, the drain ends here, timed out, said; a
    refusal for now is raised, for Lambda to run this event again."""
    mark = (so_far or SoFar()).after(run, run.started_at or time.time())
    why = invoke_next(lambda_client, invocation, {**raw_event, HANDED_OVER: mark})
    if why:
        log.warning("could not hand the drain on to a new invocation (%s): it ends here", why)
        return run
    log.info("pods left at this invocation's end: handed over to a new invocation")
    return replace(
        run,
        result=Result.HANDED_OVER,
        message=f"{run.message}; handed over to a new invocation, which drains on until "
        f"{until.source}",
    )
