"""A trigger's result and what it tells the Auto Scaling group.

`Result` is what a trigger reports (its end line's `result`, the notice, the node's
record phase): every engine Outcome (drainer/outcome.py), of the same value, plus the
endings only a trigger reaches. `result_of` is the one table between them;
`lifecycle_result` the one from a result to its lifecycle action, with the settings'
policies as its only other input."""

from __future__ import annotations

from enum import StrEnum

from drainer.lifecycle.settings import Settings
from drainer.lifecycle.settings_drain import TimeoutPolicy
from drainer.outcome import Outcome


class Result(StrEnum):
    DRAINED = "drained"
    NO_NODE = "no_node"
    TIMED_OUT = "timed_out"
    HANDED_OVER = "handed_over"
    DRY_RUN = "dry_run"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    """The engine's outcomes, above (drainer/outcome.py says what each means); below,
    the trigger's own."""
    NOT_ALLOWED = "not_allowed"
    """The instance's Auto Scaling group is not one this function may act on."""
    NOT_OURS = "not_ours"
    """The node belongs to another node manager that drains it itself (Karpenter, EKS
    Auto Mode): left alone."""
    CORDONED = "cordoned"
    """A spot rebalance recommendation: the node cordoned, not drained."""
    STALE = "stale"
    """A terminate event that came after its lifecycle action ended, its instance in
    service again (back from the warm pool): its node left alone."""
    RELEASED = "released"
    """The node was released (its record gone: the change's close, or a person's
    `release`) while the drain ran, or before an EC2 event's drain handed over to this
    invocation: left as the release left it."""
    REDELIVERED = "redelivered"
    """A scheduled change's or a terminate hook's event delivered again (EventBridge
    delivers at least once), or an update of the change that keeps its window, while
    the drain the event began is under way, or just handed over or ended: left to that
    drain, which answers the lifecycle action (this delivery answers nothing)."""


_RESULTS: dict[Outcome, Result] = {
    Outcome.DRAINED: Result.DRAINED,
    Outcome.NO_NODE: Result.NO_NODE,
    Outcome.TIMED_OUT: Result.TIMED_OUT,
    Outcome.HANDED_OVER: Result.HANDED_OVER,
    Outcome.DRY_RUN: Result.DRY_RUN,
    Outcome.FAILED: Result.FAILED,
    Outcome.INTERRUPTED: Result.INTERRUPTED,
    Outcome.RELEASED: Result.RELEASED,
}


def result_of(outcome: Outcome) -> Result:
    """The one table from the engine's outcome to the trigger's result."""
    return _RESULTS[outcome]


def lambda_outcome(outcome: Outcome) -> Result:
    """The Lambda never interrupts its own drain: one interrupted elsewhere (a person's
    Ctrl-C in the CLI) is, to the Auto Scaling group, a failed one."""
    return Result.FAILED if outcome == Outcome.INTERRUPTED else result_of(outcome)


def lifecycle_result(result: Result, settings: Settings) -> str | None:
    """The outcome table: the lifecycle result each trigger result sends to the Auto
    Scaling group. None means the action is not completed by this invocation."""
    timeout = {
        TimeoutPolicy.CONTINUE: "CONTINUE",
        TimeoutPolicy.FORCE: "CONTINUE",  # after the remaining pods were force-deleted
        TimeoutPolicy.ABANDON: None,  # left to the hook's HeartbeatTimeout and DefaultResult
    }[settings.timeout_policy]
    table: dict[Result, str | None] = {
        Result.DRAINED: "CONTINUE",
        Result.NO_NODE: "CONTINUE",  # never joined or already gone: nothing to wait for
        Result.DRY_RUN: "CONTINUE",  # dry run touches Kubernetes only; the ASG goes on
        Result.TIMED_OUT: timeout,
        Result.FAILED: settings.failure_result,
        Result.INTERRUPTED: settings.failure_result,  # the CLI's; see lambda_outcome
        Result.HANDED_OVER: None,  # the next invocation completes it
        Result.NOT_ALLOWED: None,  # not our Auto Scaling group
        Result.NOT_OURS: "CONTINUE",  # its own manager drains it: nothing to wait for
        Result.CORDONED: None,  # a spot event's: there is no lifecycle action
        Result.STALE: None,  # the action is gone: nothing to answer
        Result.RELEASED: None,  # the release stopped the drain: left to the hook's timeout
        Result.REDELIVERED: None,  # the drain this delivery is left to answers
    }
    return table[result]
