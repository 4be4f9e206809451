"""What each outcome tells the Auto Scaling group: the one table from a drain's
ending to its lifecycle action, with the settings' policies as its only other input."""

from __future__ import annotations

from drainer.lifecycle.settings import Settings
from drainer.lifecycle.settings_drain import TimeoutPolicy
from drainer.outcome import Outcome


def lambda_outcome(outcome: Outcome) -> Outcome:
    """The Lambda never interrupts its own drain: one interrupted elsewhere (a person's
    Ctrl-C in the CLI) is, to the Auto Scaling group, a failed one."""
    return Outcome.FAILED if outcome == Outcome.INTERRUPTED else outcome


def lifecycle_result(outcome: Outcome, settings: Settings) -> str | None:
    """The outcome table: the lifecycle result each outcome sends to the Auto Scaling
    group. None means the action is not completed by this invocation."""
    timeout = {
        TimeoutPolicy.CONTINUE: "CONTINUE",
        TimeoutPolicy.FORCE: "CONTINUE",  # after the remaining pods were force-deleted
        TimeoutPolicy.ABANDON: None,  # left to the hook's HeartbeatTimeout and DefaultResult
    }[settings.timeout_policy]
    table: dict[Outcome, str | None] = {
        Outcome.DRAINED: "CONTINUE",
        Outcome.NO_NODE: "CONTINUE",  # never joined or already gone: nothing to wait for
        Outcome.DRY_RUN: "CONTINUE",  # dry run touches Kubernetes only; the ASG goes on
        Outcome.TIMED_OUT: timeout,
        Outcome.FAILED: settings.failure_result,
        Outcome.INTERRUPTED: settings.failure_result,  # the CLI's; see lambda_outcome
        Outcome.HANDED_OVER: None,  # the next invocation completes it
        Outcome.NOT_ALLOWED: None,  # not our Auto Scaling group
        Outcome.NOT_OURS: "CONTINUE",  # its own manager drains it: nothing to wait for
        Outcome.CORDONED: None,  # a spot event's: there is no lifecycle action
    }
    return table[outcome]
