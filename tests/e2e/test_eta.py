"""The drain's live ETA and its forecast against the actual, through the real
handler (issue 40, item 4): a node paced by its budget says its ETA and the budget
from its first line to its last, the end line has the forecast and the measured
span within 25 % (plus 2 s) of each other, the metrics line the error; a drain
whose forecast cannot read the cluster still drains, with one warning. And the
CLI's drain: its progress lines and its JSON document."""

from __future__ import annotations

import io
import json
import re

import pytest
from support.metrics import emf_lines

from drainer.cli.main import main
from drainer.engine.report import Kind
from kubesim import KubeSim
from kubesim.faults import Fault
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, wait_until

from . import test_notices
from .conftest import Invoke, LogCapture
from .test_kube_events import _events
from .test_notices import Inbox

inbox = test_notices.inbox  # the SNS topic the notices go to, read back

STARTUP = 100.0
"""Emulated seconds from binding to Ready (5 s at the tests' speed of 20): each wave
of the budget waits for a replacement, long enough that the API server's
whole-second timestamps (creation, Ready: up to a second more per wave as the
forecast reads them) stay within the 25 % the forecast is held to."""


def _budget_counted(world: World, name: str, pods: int) -> None:
    """Until the disruption controller has written the budget's status for its pods."""

    def counted() -> bool:
        status = world.cluster.get("PodDisruptionBudget", name, "default").get("status") or {}
        return status.get("expectedPods") == pods and status.get("currentHealthy") == pods

    wait_until(counted, 20)


def _paced_node(world: World, startup: float = STARTUP) -> str:
    """Four replicas under maxUnavailable 1, each Ready `startup` after it is created,
    each stopping within its 1 s grace period."""
    node = world.nodes[world.instance_ids[0]]
    web = w.deployment("web", 4, startup=startup, shutdown=20.0, grace=1)
    place_on(world, node, [web, w.budget("web", {"app": "web"}, max_unavailable=1)], timeout=30)
    _budget_counted(world, "web", 4)
    return node


def test_budget_paced_drain__eta_live__forecast_against_actual_at_the_end(
    world: World,
    invoke: Invoke,
    drainer_logs: LogCapture,
    inbox: Inbox,
    capsys: pytest.CaptureFixture[str],
) -> None:
    node = _paced_node(world)

    summary = invoke(world.terminate(world.instance_ids[0]), NOTIFICATION_TOPIC_ARN=inbox.topic)

    assert (summary["result"], summary["evicted"]) == ("drained", 4), summary
    assert not [m for m in drainer_logs.messages() if "no ETA" in m]
    (started,) = drainer_logs.events(Kind.STARTED)
    assert started["eta_seconds"] > 0, started
    assert "PodDisruptionBudget default/web" in started["paced_by"], started
    gone = drainer_logs.events(Kind.GONE)
    assert all("eta_seconds" in line and "paced_by" in line for line in gone), gone
    assert gone[-1]["eta_seconds"] == 0 and gone[-1]["paced_by"] == "nothing left"
    assert all("eta_seconds" in line for line in drainer_logs.events(Kind.EVICTED))
    printed = capsys.readouterr().out
    (finished,) = drainer_logs.events(Kind.FINISHED)
    forecast, actual = finished["forecast_seconds"], finished["actual_seconds"]
    with capsys.disabled():
        print(
            f"\nforecast {forecast} s, actual {actual} s, "
            f"ETA at the start {started['eta_seconds']} s"
        )
    assert forecast == pytest.approx(started["eta_seconds"], abs=0.1)
    assert abs(forecast - actual) <= 0.25 * actual + 2, finished
    (metrics,) = emf_lines(printed)
    assert metrics["ForecastErrorSeconds"] in (
        round(actual - forecast, 1),
        [round(actual - forecast, 1)],
    ), metrics
    (notice,) = inbox.notices()
    assert f"Forecast: {forecast:.0f} s; took {actual:.0f} s" in notice["Message"], notice
    wait_until(lambda: _started_event(world, node) is not None, 10)
    said = str(_started_event(world, node))
    assert f"; ETA ~{started['eta_seconds']:.0f} s, paced by PodDisruptionBudget default/web" in (
        said
    ), said


def _started_event(world: World, node: str) -> str | None:
    found = [e for e in _events(world, "Node", node) if e["reason"] == "DrainStarted"]
    return str(found[0]["message"]) if found else None


@pytest.mark.kubesim_only("denies one read only the forecast makes: its namespace's pods")
def test_forecast_cannot_read__drained_all_the_same__one_warning(
    world: World,
    sim: KubeSim,
    invoke: Invoke,
    drainer_logs: LogCapture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _paced_node(world, startup=4.0)  # what it asserts needs no long waves
    sim.faults.add(
        Fault(kind="status", method="GET", path="^/api/v1/namespaces/[^/]+/pods$", status=403)
    )

    summary = invoke(world.terminate(world.instance_ids[0]))

    assert (summary["result"], summary["evicted"]) == ("drained", 4), summary
    said = [r for r in drainer_logs.records() if "no ETA" in str(r.get("message"))]
    assert len(said) == 1, said
    assert said[0]["level"] == "WARNING"
    assert "its forecast could not read the cluster" in said[0]["message"], said
    assert "the drain goes on without one" in said[0]["message"]
    (started,) = drainer_logs.events(Kind.STARTED)
    assert "eta_seconds" not in started
    assert "forecast_seconds" not in summary and "actual_seconds" not in summary
    (metrics,) = emf_lines(capsys.readouterr().out)
    assert "ForecastErrorSeconds" not in metrics
    assert metrics["DrainSucceeded"] in (1, [1])


def test_cli_drain__eta_on_its_lines__forecast_against_actual_in_its_document(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    node = _paced_node(world)
    out = io.StringIO()
    where = ["--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"]

    code = main(
        ["drain", node, "--ignore-daemonsets", "--timeout", "120s", "-o", "json", *where],
        stdout=out,
    )

    progress = capsys.readouterr().err
    document = json.loads(out.getvalue())
    assert (code, document["result"], document["evicted"]) == (0, "drained", 4), progress
    assert "no ETA" not in progress, progress
    [started] = [line for line in progress.splitlines() if "started  " in line]
    assert "; ETA ~" in started and "paced by PodDisruptionBudget default/web" in started
    gone = [line for line in progress.splitlines() if " gone  " in line]
    assert len(gone) == 4 and all("; ETA ~" in line for line in gone), gone
    assert gone[-1].endswith("; ETA ~0 s"), gone
    forecast, actual = document["forecast_seconds"], document["actual_seconds"]
    with capsys.disabled():
        print(f"\nCLI: forecast {forecast} s, actual {actual} s")
    assert abs(forecast - actual) <= 0.25 * actual + 2, document
    said = re.search(r"^forecast (\d+) s; took (\d+) s from the drain's start", progress, re.M)
    assert said is not None, progress
    assert abs(int(said[1]) - forecast) <= 1 and abs(int(said[2]) - actual) <= 1, said[0]
