"""The outcome table (drainer/lifecycle/outcomes.py): what each outcome tells the Auto
Scaling group, under each policy."""

from __future__ import annotations

import pytest

from drainer.lifecycle.outcomes import lambda_outcome, lifecycle_result
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.settings_drain import TimeoutPolicy
from drainer.outcome import Outcome


@pytest.mark.parametrize(
    ("result", "policy", "failure", "expected"),
    [
        (Outcome.DRAINED, TimeoutPolicy.CONTINUE, "ABANDON", "CONTINUE"),
        (Outcome.NO_NODE, TimeoutPolicy.CONTINUE, "ABANDON", "CONTINUE"),
        (Outcome.DRY_RUN, TimeoutPolicy.CONTINUE, "ABANDON", "CONTINUE"),
        (Outcome.TIMED_OUT, TimeoutPolicy.CONTINUE, "ABANDON", "CONTINUE"),
        (Outcome.TIMED_OUT, TimeoutPolicy.FORCE, "ABANDON", "CONTINUE"),
        (Outcome.TIMED_OUT, TimeoutPolicy.ABANDON, "ABANDON", None),
        (Outcome.FAILED, TimeoutPolicy.CONTINUE, "ABANDON", "ABANDON"),
        (Outcome.FAILED, TimeoutPolicy.CONTINUE, "CONTINUE", "CONTINUE"),
        (Outcome.HANDED_OVER, TimeoutPolicy.CONTINUE, "ABANDON", None),
        (Outcome.NOT_ALLOWED, TimeoutPolicy.CONTINUE, "ABANDON", None),
        (Outcome.NOT_OURS, TimeoutPolicy.ABANDON, "ABANDON", "CONTINUE"),
    ],
)
def test_outcome_table(
    result: Outcome, policy: TimeoutPolicy, failure: str, expected: str | None
) -> None:
    settings = Settings(timeout_policy=policy, failure_result=failure)  # type: ignore[arg-type]

    assert lifecycle_result(result, settings) == expected


def test_outcome_table__covers_every_outcome() -> None:
    for outcome in Outcome:
        lifecycle_result(outcome, Settings())


@pytest.mark.parametrize(
    ("ended", "expected"),
    [
        (Outcome.INTERRUPTED, Outcome.FAILED),
        (Outcome.DRAINED, Outcome.DRAINED),
        (Outcome.TIMED_OUT, Outcome.TIMED_OUT),
        (Outcome.NO_NODE, Outcome.NO_NODE),
    ],
)
def test_lambda_outcome__an_interrupted_drain_is_a_failed_one(
    ended: Outcome, expected: Outcome
) -> None:
    assert lambda_outcome(ended) == expected
