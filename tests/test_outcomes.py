"""The outcome tables (drainer/lifecycle/outcomes.py): the engine's outcome to the
trigger's result, and what each result tells the Auto Scaling group, under each policy."""

from __future__ import annotations

import pytest

from drainer.lifecycle.outcomes import Result, lambda_outcome, lifecycle_result, result_of
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.settings_drain import TimeoutPolicy
from drainer.outcome import Outcome


@pytest.mark.parametrize(
    ("result", "policy", "failure", "expected"),
    [
        (Result.DRAINED, TimeoutPolicy.CONTINUE, "ABANDON", "CONTINUE"),
        (Result.NO_NODE, TimeoutPolicy.CONTINUE, "ABANDON", "CONTINUE"),
        (Result.DRY_RUN, TimeoutPolicy.CONTINUE, "ABANDON", "CONTINUE"),
        (Result.TIMED_OUT, TimeoutPolicy.CONTINUE, "ABANDON", "CONTINUE"),
        (Result.TIMED_OUT, TimeoutPolicy.FORCE, "ABANDON", "CONTINUE"),
        (Result.TIMED_OUT, TimeoutPolicy.ABANDON, "ABANDON", None),
        (Result.FAILED, TimeoutPolicy.CONTINUE, "ABANDON", "ABANDON"),
        (Result.FAILED, TimeoutPolicy.CONTINUE, "CONTINUE", "CONTINUE"),
        (Result.HANDED_OVER, TimeoutPolicy.CONTINUE, "ABANDON", None),
        (Result.NOT_ALLOWED, TimeoutPolicy.CONTINUE, "ABANDON", None),
        (Result.NOT_OURS, TimeoutPolicy.ABANDON, "ABANDON", "CONTINUE"),
        (Result.STALE, TimeoutPolicy.CONTINUE, "CONTINUE", None),
    ],
)
def test_outcome_table(
    result: Result, policy: TimeoutPolicy, failure: str, expected: str | None
) -> None:
    settings = Settings(timeout_policy=policy, failure_result=failure)  # type: ignore[arg-type]

    assert lifecycle_result(result, settings) == expected


def test_outcome_table__covers_every_outcome() -> None:
    for result in Result:
        lifecycle_result(result, Settings())


@pytest.mark.parametrize(
    ("ended", "expected"),
    [
        (Outcome.INTERRUPTED, Result.FAILED),
        (Outcome.DRAINED, Result.DRAINED),
        (Outcome.TIMED_OUT, Result.TIMED_OUT),
        (Outcome.NO_NODE, Result.NO_NODE),
    ],
)
def test_lambda_outcome__an_interrupted_drain_is_a_failed_one(
    ended: Outcome, expected: Outcome
) -> None:
    assert lambda_outcome(ended) == expected


def test_outcome__the_engine_has_no_trigger_only_ending() -> None:
    trigger_only = {
        Result.NOT_ALLOWED,
        Result.NOT_OURS,
        Result.CORDONED,
        Result.STALE,
        Result.REDELIVERED,
    }

    assert {str(o) for o in Outcome}.isdisjoint(str(r) for r in trigger_only)
    assert {str(o) for o in Outcome} | {str(r) for r in trigger_only} == {str(r) for r in Result}, (
        "a Result is an engine outcome or a trigger's own"
    )


@pytest.mark.parametrize("outcome", list(Outcome))
def test_result_of__every_outcome_is_the_result_of_the_same_value(outcome: Outcome) -> None:
    result = result_of(outcome)

    assert isinstance(result, Result)
    assert result.value == outcome.value
