"""The handler's edge: the outcome table, skipped events, invalid settings."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from drainer import handler
from drainer.errors import SettingsError
from drainer.report import DrainReport, Outcome
from drainer.settings import Settings, TimeoutPolicy
from drainer.workflow import Result, Run


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


# --- the end line: one drain_finished line, the summary as its keys --------------------


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def handler_lines() -> Iterator[_Lines]:
    lines = _Lines()
    logger = logging.getLogger("drainer.handler")
    logger.addHandler(lines)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    yield lines
    logger.removeHandler(lines)
    logger.setLevel(level)


def test_end_line__drain_finished_event__summary_keys_and_human_text(
    handler_lines: _Lines,
) -> None:
    report = DrainReport(
        "ip-10-0-0-1.ec2.internal",
        Outcome.TIMED_OUT,
        evicted=3,
        refusals=4,
        blocked_by={"shop/web": ["shop/web-1"]},
        remaining=["shop/web-1"],
        left={"shop/web-1": "PodDisruptionBudget shop/web allows no disruption"},
    )
    run = Run(
        Result.TIMED_OUT,
        "drain timed out at its deadline, DRAIN_TIMEOUT_SECONDS (3600 s) "
        "(TIMEOUT_POLICY=continue): " + report.timeout_message(),
        cluster="prod",
        node="ip-10-0-0-1.ec2.internal",
        report=report,
    )
    summary = handler._summary(run, "CONTINUE", True, 12.5)

    handler._log_end_line(summary)

    (line,) = handler_lines.records
    fields = line.__dict__
    assert fields["event"] == "drain_finished"
    assert (fields["result"], fields["lifecycle_result"], fields["completed"]) == (
        "timed_out",
        "CONTINUE",
        True,
    )
    assert (fields["cluster"], fields["node"], fields["seconds"]) == (
        "prod",
        "ip-10-0-0-1.ec2.internal",
        12.5,
    )
    assert (fields["evicted"], fields["pdb_refusals"], fields["remaining"]) == (3, 4, 1)
    assert fields["budgets_holding"] == ["shop/web"]
    assert fields["left"] == {"shop/web-1": "PodDisruptionBudget shop/web allows no disruption"}
    # The message, under `reason` (logging keeps `message` for the text), names the pod.
    assert "shop/web-1" in fields["reason"]
    text = line.getMessage()
    assert text.startswith("drain finished: result=timed_out, lifecycle_result=CONTINUE, ")
    assert "message=drain timed out at its deadline" in text
    assert "PodDisruptionBudget shop/web allows no disruption: shop/web-1" in text


def test_end_line__no_drain_ran__counts_still_there(handler_lines: _Lines) -> None:
    run = Run(Result.NO_NODE, "no Kubernetes node for instance i-0abc", cluster="prod")

    handler._log_end_line(handler._summary(run, "CONTINUE", True, 0.5))

    (line,) = handler_lines.records
    fields = line.__dict__
    assert fields["event"] == "drain_finished"
    assert fields["result"] == "no_node"
    assert (fields["evicted"], fields["pdb_refusals"], fields["remaining"]) == (0, 0, 0)
    assert (fields["budgets_holding"], fields["left"]) == ([], {})
