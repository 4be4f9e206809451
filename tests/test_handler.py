"""The handler's edge: the outcome table, skipped events, invalid settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from drainer import handler
from drainer.errors import SettingsError
from drainer.settings import Settings, TimeoutPolicy
from drainer.workflow import Result


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
    ],
)
def test_outcome_table(
    result: Result, policy: TimeoutPolicy, failure: str, expected: str | None
) -> None:
    settings = Settings(timeout_policy=policy, failure_result=failure)  # type: ignore[arg-type]

    assert handler.lifecycle_result(result, settings) == expected


def test_outcome_table__covers_every_result() -> None:
    for result in Result:
        handler.lifecycle_result(result, Settings())


@pytest.fixture
def clean_handler(monkeypatch: pytest.MonkeyPatch) -> Callable[..., dict[str, Any]]:
    def run(event: Any, **env: str) -> dict[str, Any]:
        for key in ("DRAIN_TIMEOUT_SECONDS", "TIMEOUT_POLICY"):
            monkeypatch.delenv(key, raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        handler.reset()
        return handler.lambda_handler(event, None)

    return run


@pytest.mark.parametrize(
    "event",
    ["test-notification", "launch", "ec2-state-change", "malformed-missing-instance"],
)
def test_event_not_for_us__skipped_without_any_aws_call(
    event: str,
    load_event: Callable[[str], dict[str, Any]],
    clean_handler: Callable[..., dict[str, Any]],
) -> None:
    # No AWS credentials or endpoint exist here: any AWS call would fail the test.
    result = clean_handler(load_event(event))

    assert result["result"] == "skipped"
    assert result["reason"]


@pytest.mark.parametrize("garbage", [None, "text", 42, [], {"detail": "not a dict"}])
def test_garbage_event__skipped(garbage: Any, clean_handler: Callable[..., dict[str, Any]]) -> None:
    assert clean_handler(garbage)["result"] == "skipped"


def test_invalid_setting__fails_naming_the_variable(
    load_event: Callable[[str], dict[str, Any]], clean_handler: Callable[..., dict[str, Any]]
) -> None:
    with pytest.raises(SettingsError, match="DRAIN_TIMEOUT_SECONDS"):
        clean_handler(load_event("terminate"), DRAIN_TIMEOUT_SECONDS="soon")


@pytest.mark.parametrize(
    ("remaining", "margin", "expected"),
    [
        (900.0, 60.0, 840.0),  # the usual case: hand over a minute before the deadline
        (64.0, 60.0, 5.0),  # a short function still drains a few seconds each time
        (60.0, 60.0, 5.0),  # never hand over at once, forever
        (6.0, 600.0, 3.0),  # and never past half of what is left
    ],
)
def test_work_time__never_hands_over_without_progress(
    remaining: float, margin: float, expected: float
) -> None:
    from drainer.workflow import work_time

    assert work_time(remaining, margin) == expected
