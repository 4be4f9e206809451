"""make chaos's report: faults by kind and drain results summed over the seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import chaos_report


def test_report__sums_faults_and_results_over_the_seeds() -> None:
    lines = [
        json.dumps({"seed": 0, "faults": {"api:drop": 1}, "result": "drained", "seconds": 0.4}),
        json.dumps(
            {"seed": 1, "faults": {"api:drop": 2, "workload:uncordon": 1}, "result": "timed_out"}
        ),
    ]

    text = chaos_report.report(lines)

    assert "2 seed(s) ran to the end; drains: 1 drained, 1 timed_out" in text
    assert "faults injected: 4, by kind:" in text
    assert "api:drop" in text and " 3" in text.split("api:drop")[1].splitlines()[0]
    assert "slowest drain: 0.40 s" in text


def test_report__lambda_scenario_lines__counted_by_scenario_and_fault_kind() -> None:
    lines = [
        json.dumps({"seed": 0, "faults": {"api:drop": 1}, "result": "drained", "seconds": 1}),
        json.dumps(
            {
                "seed": 0,
                "scenario": "lambda",
                "faults": {"lambda:killed": 1, "aws:throttle-ec2": 2},
                "result": "drained",
                "seconds": 3.5,
            }
        ),
    ]

    text = chaos_report.report(lines)

    assert "by scenario: 1 api, 1 lambda" in text
    assert "faults injected: 4, by kind:" in text
    assert "lambda:killed" in text and "aws:throttle-ec2" in text
    assert "slowest drain: 3.50 s" in text


def test_report__api_lines_only__no_scenario_line() -> None:
    line = json.dumps({"seed": 0, "faults": {}, "result": "drained", "seconds": 1})

    assert "by scenario" not in chaos_report.report([line])


def test_report__no_seed_ran__says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert chaos_report.main([str(tmp_path / "missing.jsonl")]) == 0
    assert "no seed ran to its end" in capsys.readouterr().out
