"""The benchmark: its figures from kubesim's records, and `python -m bench --quick`
end to end as a smoke test (no timing assertions: `make bench` reports timings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import measure
from bench.__main__ import main
from bench.clients import find_kubectl
from kubesim.faults import RequestRecord


def _record(at: float, done: float, method: str, verb: str, resource: str) -> RequestRecord:
    return RequestRecord(at, done, method, "/x", verb, resource, "drainer", 200)


@pytest.mark.parametrize(
    ("verb", "resource", "bucket"),
    [
        ("create", "pods/eviction", "evict"),
        ("get", "pods", "get"),
        ("list", "pods", "list"),
        ("watch", "poddisruptionbudgets", "watch"),
        ("patch", "nodes", "patch"),
        ("get", "/apis/policy/v1", "discovery"),
        ("create", "selfsubjectaccessreviews", "other"),
    ],
)
def test_verb_bucket__groups_requests_for_the_table(verb: str, resource: str, bucket: str) -> None:
    assert measure.verb_bucket(verb, resource) == bucket


def test_drain_window__from_cordon_to_last_request__watch_counts_by_its_start() -> None:
    records = [
        _record(9.0, 9.1, "GET", "get", "/api"),  # kubectl's discovery: before the window
        _record(10.0, 10.2, "PATCH", "patch", "nodes"),
        _record(10.3, 10.4, "GET", "list", "pods"),
        _record(10.4, 19.0, "GET", "watch", "pods"),  # ended when the client hung up
        _record(12.0, 12.5, "POST", "create", "pods/eviction"),
    ]

    window = measure.drain_window(records)

    assert window is not None
    assert window.seconds == pytest.approx(2.5)
    assert window.requests == 4


def test_drain_window__no_cordon__none() -> None:
    assert measure.drain_window([_record(1.0, 1.1, "GET", "get", "/api")]) is None


def test_latency__watches_excluded() -> None:
    records = [
        _record(0.0, 0.002, "GET", "get", "pods"),
        _record(0.0, 0.004, "GET", "get", "pods"),
        _record(0.0, 30.0, "GET", "watch", "pods"),
    ]

    figures = measure.latency(records)

    assert figures.count == 2
    assert figures.max_ms == pytest.approx(4.0)


@pytest.mark.kubectl
def test_quick_mode__every_scenario_drained_by_both_clients(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.json"

    status = main(["--quick", "--out", str(out)])

    printed = capsys.readouterr().out
    results = json.loads(out.read_text())
    assert status == 0, [r for r in results["runs_detail"] if not r["ok"]]
    clients = {(s["scenario"], s["client"]) for s in results["summary"]}
    expected = {(key, "ours") for key in "1234"}
    expected |= {("5", "ours (PrivateDnsName)"), ("5", "ours (providerID)")}
    if find_kubectl() is not None:
        expected |= {(key, "kubectl") for key in "1234"}
    assert clients == expected
    for summary in results["summary"]:
        assert summary["requests"] > 0
        assert summary["window"] is not None
        assert summary["peak_mb"] > 0
    assert "Targets (quick mode" in printed
    for scenario in results["scenarios"]:
        assert scenario["title"] in printed
