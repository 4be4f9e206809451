"""The benchmark: its figures from kubesim's records and from the clients' own
request logs (the real backend), and `python -m bench --quick` end to end on both
backends as a smoke test (no timing assertions: `make bench` reports timings)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bench import measure
from bench.__main__ import main
from bench.clients import find_kubectl
from bench.report import Summary, head_of_line_text, targets
from bench.run import PodsGone
from bench.scenarios import head_of_line
from kubesim.faults import RequestRecord
from testbed import workloads as w


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


@pytest.mark.parametrize(
    ("method", "url", "verb", "resource"),
    [
        ("PATCH", "https://h:1/api/v1/nodes/ip-10-0-0-4.ec2.internal", "patch", "nodes"),
        ("GET", "https://h:1/api/v1/pods?fieldSelector=spec.nodeName%3Dn", "list", "pods"),
        ("GET", "https://h:1/api/v1/namespaces/default/pods/web-1", "get", "pods"),
        ("GET", "https://h:1/api/v1/pods?watch=true&resourceVersion=5", "watch", "pods"),
        (
            "POST",
            "https://h:1/api/v1/namespaces/default/pods/web-1/eviction",
            "create",
            "pods/eviction",
        ),
        ("GET", "https://h:1/apis/policy/v1/poddisruptionbudgets", "list", "poddisruptionbudgets"),
        ("GET", "https://h:1/api?timeout=32s", "get", "/api"),
        ("GET", "https://h:1/apis/policy/v1", "get", "/apis/policy/v1"),
    ],
)
def test_classify__a_url_as_kubesim_records_it(
    method: str, url: str, verb: str, resource: str
) -> None:
    assert measure.classify(method, url) == (verb, resource)


def test_kubectl_records__both_log_formats__sent_is_answered_minus_round_trip() -> None:
    log = "\n".join(
        [
            "node/ip-10-0-0-4.ec2.internal cordoned",
            "I1123 15:12:26.602759   28025 round_trippers.go:560] GET https://h:1/api?timeout=32s"
            " 200 OK in 3 milliseconds",
            'I1123 15:12:27.500000   28065 round_trippers.go:632] "Response" verb="POST" '
            'url="https://h:1/api/v1/namespaces/default/pods/web-1/eviction" '
            'status="429 Too Many Requests" milliseconds=20',
            "I1123 15:12:27.600000   28065 loader.go:402] Config loaded from file",
        ]
    )
    now = datetime(2025, 11, 23, 16, 0).timestamp()

    first, second = measure.kubectl_records(log, now)

    assert (first.verb, first.resource, first.status) == ("get", "/api", 200)
    assert first.done - first.at == pytest.approx(0.003, abs=1e-6)
    assert (second.verb, second.resource, second.status) == ("create", "pods/eviction", 429)
    assert second.done - first.done == pytest.approx(27.5 - 26.602759, abs=1e-6)
    assert measure.verb_bucket(second.verb, second.resource) == "evict"


def test_latency__watches_excluded() -> None:
    records = [
        _record(0.0, 0.002, "GET", "get", "pods"),
        _record(0.0, 0.004, "GET", "get", "pods"),
        _record(0.0, 30.0, "GET", "watch", "pods"),
    ]

    figures = measure.latency(records)

    assert figures.count == 2
    assert figures.max_ms == pytest.approx(4.0)


def _pod(uid: str, node: str, app: str) -> dict[str, Any]:
    return w.pod(uid, uid=uid, node_name=node, labels={"app": app})


def test_pods_gone__when_the_last_counted_pod_on_the_node_went() -> None:
    gone = PodsGone("n1", lambda pod: pod["metadata"]["labels"]["app"] == "free")
    gone.begin([_pod("a", "n1", "free"), _pod("b", "n1", "free"), _pod("c", "n1", "blocked")])

    assert gone.see("DELETED", _pod("a", "n1", "free")) is False
    assert gone.see("DELETED", _pod("x", "n2", "free")) is False, "another node's pod"
    assert gone.see("MODIFIED", _pod("c", "n1", "blocked")) is False, "not counted"
    assert gone.see("DELETED", _pod("b", "n1", "free")) is True
    assert gone.emptied is not None


def _summary(client: str, gone: float | None) -> Summary:
    return Summary("6", client, 1, 0, 0.1, window=5.0, tracked=True, gone=gone, gone_runs=1)


@pytest.mark.parametrize(
    ("ours", "kubectl", "met", "shown"),
    [
        (0.2, 1.5, True, "kubectl drain / ours: 7.5x"),
        (None, 1.5, False, "held behind the budget-blocked pods"),
        (2.0, 1.0, False, "kubectl drain / ours: 0.5x"),
    ],
)
def test_head_of_line__ratio_and_target(
    ours: float | None, kubectl: float, met: bool, shown: str
) -> None:
    summaries = [_summary("ours", ours), _summary("kubectl", kubectl)]
    scenario = head_of_line(16, 8, 10.0, 5.0)

    (target,) = [t for t in targets(summaries, [scenario], None) if t.name.startswith("6:")]

    assert target.met is met
    assert shown in head_of_line_text(summaries, [scenario])


def test_head_of_line__says_where_the_time_went() -> None:
    """Scenario 6's bound, from the bench's own timeline: the evictions' pace at the
    server, then the last pod's shutdown (issue 28)."""
    ours = Summary(
        "6", "ours", 3, 0, 1.0, window=20.0, tracked=True, gone=1.33, gone_runs=3,
        accepted_last=0.31, accepted_ms=101.0,
    )  # fmt: skip
    floor = Summary("6", "floor", 3, 0, 1.0, window=20.0, tracked=True, gone=1.9, gone_runs=3)

    text = head_of_line_text([ours, floor], [head_of_line(40, 20, 1.0, 20.0)])

    assert (
        "ours     1.33 s (ideal 1.00 s): its last accepted eviction answered at 0.31 s "
        "(each 101 ms, median), then 1.02 s to that pod's end"
    ) in text
    assert "floor    1.90 s (ideal 1.00 s)\n" in text + "\n"


def test_quick_mode__every_scenario_drained_by_both_clients(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ours and the floor on every scenario. kubectl's drains, a third of this run's
    time, are driven and tabled on the real control plane below (scenarios 1 and 3),
    and by `make bench` on every scenario."""
    out = tmp_path / "results.json"

    status = main(["--quick", "--no-kubectl", "--out", str(out)])

    printed = capsys.readouterr().out
    results = json.loads(out.read_text())
    assert status == 0, [r for r in results["runs_detail"] if not r["ok"]]
    clients = {(s["scenario"], s["client"]) for s in results["summary"]}
    expected = {(key, client) for key in "123467" for client in ("ours", "floor")}
    expected |= {("5", "ours (PrivateDnsName)"), ("5", "ours (providerID)")}
    assert clients == expected
    for summary in results["summary"]:
        assert summary["requests"] > 0
        assert summary["window"] is not None
        assert summary["peak_mb"] > 0
        if summary["client"] in ("ours", "floor"):  # the drain's own CPU, within the process's
            assert 0 < summary["work_cpu"] <= summary["cpu"], summary
    # Scenario 6: the budget-free pods went, past the budget-blocked ones.
    (ours,) = [s for s in results["summary"] if s["scenario"] == "6" and s["client"] == "ours"]
    assert ours["gone"] is not None, "budget-free pods held behind budget-blocked ones"
    assert "Head of line (scenario 6" in printed
    assert "its last accepted eviction answered at" in printed
    assert "Targets (quick mode" in printed
    # Each client against the floor, measured in the same run (issue 28).
    against = printed[printed.index("Against the floor") :].split("\n\n")[0]
    for key in "123467":
        assert f"\n  {key} " in against, against
    assert "ours/floor" in against
    assert "1: ours / floor, 12 pods" in printed and "7: ours / floor, 24 pods" in printed
    # The CLI's start-up, beside the floor's, each its first request at the server.
    startup = results["cli_startup"]
    assert len(startup["runs"]) == len(startup["floor_runs"]) == 3
    assert all(0 < s < 10 for s in startup["runs"] + startup["floor_runs"])
    assert "the floor's (python -S bench/floor.py" in printed
    for scenario in results["scenarios"]:
        assert scenario["title"] in printed
    _forecast_beside_each_drain(results, printed, expected_clients={c for _, c in expected})


BUDGET_PACED = ("3", "6")
"""The scenarios paced by a budget: 3 by its waves, 6 deadlocked by one (its forecast:
the timeout)."""


def _forecast_beside_each_drain(
    results: dict[str, Any], printed: str, *, expected_clients: set[str], within: bool = True
) -> None:
    """The plan ran before each drain of a budget-paced scenario: its ETA, upper bound
    and measured/forecast beside each client's drain, printed and in results.json;
    `within`: our engine's drains within the issue's bound (25 % + 2 s)."""
    assert "Forecast against measured" in printed
    ran = {s["scenario"] for s in results["summary"]}
    by_key = {s["key"]: s for s in results["scenarios"] if s["key"] in ran}
    for key, scenario in by_key.items():
        if key not in BUDGET_PACED:
            assert scenario["forecast"] is None, key
            continue
        forecast = scenario["forecast"]
        assert forecast["bound"] == "within 25 % of the measured drain, plus 2 s"
        clients = {r["client"] for r in forecast["runs"]}
        assert clients == expected_clients & {"ours", "floor", "kubectl"}, (key, clients)
        for run in forecast["runs"]:
            assert run["problem"] == "", run
            assert run["eta_seconds"] > 0 and run["eta_max_seconds"] >= run["eta_seconds"]
            assert run["ratio"] == pytest.approx(run["measured_seconds"] / run["eta_seconds"], 0.01)
            assert f"  {key:<5} {run['client']:<9}" in printed
        (ours,) = [r for r in forecast["runs"] if r["client"] == "ours"]
        if within:
            assert ours["within_bound"] is True, ours
    # Scenario 3's forecast is its budget's waves; scenario 6's, a deadlock to the timeout.
    if "3" in by_key:
        assert (
            "PodDisruptionBudget default/api: 2 waves"
            in by_key["3"]["forecast"]["runs"][0]["paced_by"]
        )
    if "6" in by_key:
        assert all(r["deadlocked"] for r in by_key["6"]["forecast"]["runs"])


@pytest.mark.kubectl
@pytest.mark.real_backend
@pytest.mark.timeout(420)
def test_quick_mode_on_the_real_control_plane__both_clients_drain_and_are_tabled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from testbed.controlplane import ControlPlaneBuildError, binaries

    try:
        binaries()  # `make test` built it already; a plain pytest run builds it here
    except ControlPlaneBuildError as e:
        pytest.fail(str(e))
    if find_kubectl() is None:
        pytest.fail(
            "no kubectl on PATH, where the bench looks for it: install kubectl v1.32, or "
            "put the one `make kubectl` builds (its path: bash testbed/kubectl/build.sh) "
            "on PATH"
        )
    out = tmp_path / "results.json"

    # One scenario, paced by a budget (its forecast, its waves, kubectl beside ours and
    # the floor): every scenario's logic runs in the kubesim test above, and `make bench
    # BACKEND=real` runs them all here; the cold start does not depend on the backend.
    # Each drain here starts a control plane of its own (about 5 s with its stop), so a
    # second scenario doubled this test's time for no path the first does not take.
    status = main(["--quick", "--backend", "real", "--only", "3", "--out", str(out)])

    printed = capsys.readouterr().out
    results = json.loads(out.read_text())
    assert status == 0, [r for r in results["runs_detail"] if not r["ok"]]
    assert results["backend"] == "real"
    assert all(r["backend"] == "real" and r["ok"] for r in results["runs_detail"])
    drains = [s for s in results["summary"] if s["scenario"] == "3"]
    assert {(s["scenario"], s["client"]) for s in drains} == {
        ("3", client) for client in ("ours", "floor", "kubectl")
    }
    for summary in drains:
        assert summary["window"] is not None
        assert summary["emptied"] is not None  # the watch saw the node empty
        assert summary["verbs"].get("evict", 0) >= 1
    # The table: each scenario's rows name both clients, on the real backend.
    rows: dict[str, set[str]] = {}
    current = ""
    for line in printed.splitlines():
        titled = next(
            (s for s in results["scenarios"] if line == f"{s['key']}  {s['title']}"), None
        )
        if titled is not None:
            current = titled["key"]
            rows[current] = set()
        elif current and line.startswith("   ") and " real " in line:
            rows[current].add(line.split()[0])
        elif not line.strip():
            current = ""
    assert rows == {"3": {"ours", "floor", "kubectl"}}
    assert "ours/floor" in printed[printed.index("Against the floor") :]
    assert "Figures from the real control plane" in printed
    # The forecast beside each drain here too (the bound is checked on kubesim above:
    # two cores shared by the control plane and both clients make these figures noisy).
    clients = {"ours", "floor", "kubectl"}
    _forecast_beside_each_drain(results, printed, expected_clients=clients, within=False)


def test_floor__standard_library_only__drains_past_a_budget_retrying_its_429s() -> None:
    """bench/floor.py under `python -S` (no site-packages): cordons, sends every
    eviction at once, sends a refused one again until its budget allows, and ends
    when the node is empty; kubesim's records of it are the run's figures."""
    from bench.run import drain_once
    from bench.scenarios import budgeted

    result = drain_once(budgeted(3, 1.0, 10.0), "floor", 1, 10.0, None)

    assert result.ok, result.problem
    assert result.verbs.get("patch") == 1 and result.verbs.get("list") == 1, result.verbs
    # All three at once under maxUnavailable 1: two refused, then sent again.
    assert result.verbs.get("evict", 0) >= 5, result.verbs
    assert result.wall > 0 and result.window is not None
