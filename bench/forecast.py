"""The plan's forecast beside the measured drain (issue 40, item 6).

For each scenario paced by a budget (Scenario.forecast), `python -m drainer plan NODE
-o json` runs right before the drain: the real command, as the identity the bench
drains with (the kubeconfig's `drainer` context, the RBAC of k8s-rbac/), with the
filters the function drains with (bench/child.py: the Lambda's defaults) and the
scenario's timeout. Its ETA and upper bound go beside each client's measured drain
(the window, cordon to last request) with measured/forecast; a forecast outside the
issue's bound (|measured - ETA| <= 25 % of measured + 2 s) is flagged, not failed:
the bench measures, the plan's own tests hold it to the bound.

The plan forecasts our engine's drain. kubectl drain sleeps 5 s after each refusal
and the floor retries at once, so their rows show how far each is from it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.clients import OURS_USER, ROOT, _env
from testbed.world import wait_until

if TYPE_CHECKING:
    from bench.run import RunResult
    from bench.scenarios import Scenario

BOUND_SHARE = 0.25
BOUND_SECONDS = 2.0
BOUND = "within 25 % of the measured drain, plus 2 s"
PLAN_FLAGS = ("--ignore-daemonsets", "--delete-emptydir-data", "--force")
"""The function's filters (bench/child.py drains with the Lambda's defaults: bare pods
and emptyDir pods evicted, DaemonSet pods left), as plan's flags."""
PLAN_SECONDS = 120.0


@dataclass(frozen=True)
class Forecast:
    """One plan of the node to drain, as `plan -o json` said it."""

    eta_seconds: float | None
    eta_max_seconds: float | None
    paced_by: str = ""
    deadlocked: bool = False
    exit_code: int = 0
    problem: str = ""
    """Why there is no forecast (the command failed, or said nothing of the node)."""


def plan_node(kubeconfig: Path, node: str, timeout: float) -> Forecast:
    """`python -m drainer plan NODE -o json` as the bench's `drainer` user."""
    command = [
        sys.executable,
        "-m",
        "drainer",
        "plan",
        node,
        "--kubeconfig",
        str(kubeconfig),
        "--context",
        OURS_USER,
        "--timeout",
        f"{timeout:g}",
        *PLAN_FLAGS,
        "-o",
        "json",
    ]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=_env(PYTHONPATH=str(ROOT)),
            timeout=PLAN_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Forecast(None, None, problem=f"plan took over {PLAN_SECONDS:g} s")
    return _parsed(done.stdout, done.stderr, done.returncode, node)


def _parsed(stdout: str, stderr: str, code: int, node: str) -> Forecast:
    try:
        document = json.loads(stdout)
        [planned] = [n for n in document["nodes"] if n["node"] == node]
    except (ValueError, KeyError, TypeError):
        why = (stderr.strip() or stdout.strip()).splitlines()[-1:] or ["no output"]
        return Forecast(None, None, exit_code=code, problem=f"plan exit {code}: {why[0][:300]}")
    return Forecast(
        float(planned["eta_seconds"]),
        float(planned["eta_max_seconds"]),
        str(planned["paced_by"]),
        bool(document.get("deadlocked")),
        code,
    )


def budgets_counted(budgets: Callable[[], list[dict[str, Any]]], timeout: float = 30.0) -> None:
    """Until the disruption controller has counted every budget's pods (the plan reads
    the budgets' status, as the eviction API does)."""

    def counted() -> bool:
        for budget in budgets():
            status = budget.get("status") or {}
            expected = status.get("expectedPods")
            if expected is None or status.get("currentHealthy") != expected:
                return False
            if status.get("observedGeneration") != budget["metadata"].get("generation"):
                return False
        return True

    wait_until(counted, timeout, interval=0.05)


def within(measured: float, eta: float) -> bool:
    """The issue's bound on a forecast."""
    return abs(measured - eta) <= BOUND_SHARE * measured + BOUND_SECONDS


def ratio(result: RunResult) -> float | None:
    """measured / forecast (None: either missing, or a forecast of 0 s)."""
    if result.window is None or not result.forecast_eta:
        return None
    return result.window / result.forecast_eta


def row(result: RunResult) -> dict[str, Any]:
    """One client's run against its forecast, for results.json."""
    measured = result.window
    eta = result.forecast_eta
    found = ratio(result)
    return {
        "client": result.client,
        "run": result.run,
        "measured_seconds": None if measured is None else round(measured, 3),
        "eta_seconds": eta,
        "eta_max_seconds": result.forecast_max,
        "ratio": None if found is None else round(found, 3),
        "within_bound": None if measured is None or eta is None else within(measured, eta),
        "paced_by": result.forecast_paced_by,
        "deadlocked": result.forecast_deadlocked,
        "problem": result.forecast_problem,
    }


def document(results: Sequence[RunResult], scenario: Scenario) -> dict[str, Any] | None:
    """The scenario's `forecast` in results.json (None: a scenario not paced by a budget)."""
    if not scenario.forecast:
        return None
    rows = [row(r) for r in results if r.scenario == scenario.key and r.forecasted]
    return {"bound": BOUND, "command": plan_command_text(), "runs": rows}


def plan_command_text() -> str:
    return f"python -m drainer plan NODE --context {OURS_USER} {' '.join(PLAN_FLAGS)} -o json"


def flagged(results: Sequence[RunResult]) -> list[RunResult]:
    """Our engine's runs whose forecast is outside the bound (or missing)."""
    return [
        r
        for r in results
        if r.forecasted and r.client == "ours" and not row(r)["within_bound"] and r.ok
    ]


def text(results: Sequence[RunResult], scenarios: Sequence[Scenario]) -> str:
    """The forecast-against-measured table: one row per client's drain."""
    keyed = {s.key: s for s in scenarios if s.forecast}
    runs = [r for r in results if r.forecasted and r.scenario in keyed]
    if not runs:
        return ""
    lines = [
        f"Forecast against measured (the plan, {plan_command_text()}, run before each "
        f"drain; bound: {BOUND}; flagged, not failed)",
        "  scen  client    run  measured s  forecast s  up to s  measured/forecast",
    ]
    for key, scenario in keyed.items():
        mine = sorted(
            (r for r in runs if r.scenario == key),
            key=lambda r: (r.client != "ours", r.client, r.run),
        )
        if not mine:
            continue
        for result in mine:
            lines.append(_line(result))
        paced = next((r.forecast_paced_by for r in mine if r.forecast_paced_by), "")
        lines.append(f"        {key}: {scenario.title}; paced by: {paced or '-'}")
    return "\n".join(lines)


def _line(result: RunResult) -> str:
    found = row(result)
    if result.forecast_eta is None:
        return (
            f"  {result.scenario:<5} {result.client:<9} {result.run:>3}  "
            f"no forecast: {result.forecast_problem}"
        )
    measured = "-" if result.window is None else f"{result.window:.2f}"
    shown = "-" if found["ratio"] is None else f"{found['ratio']:.2f}"
    verdict = "within the bound" if found["within_bound"] else "OUTSIDE the bound"
    if result.forecast_deadlocked:
        verdict += " (deadlocked: the drain waits for its timeout)"
    return (
        f"  {result.scenario:<5} {result.client:<9} {result.run:>3}  {measured:>10}  "
        f"{result.forecast_eta:>10.1f}  {result.forecast_max or 0.0:>7.1f}  {shown:>17}  "
        f"{verdict}"
    )


def record(result: RunResult, found: Forecast) -> None:
    """The run's forecast, beside its figures."""
    result.forecasted = True
    result.forecast_eta = found.eta_seconds
    result.forecast_max = found.eta_max_seconds
    result.forecast_paced_by = found.paced_by
    result.forecast_deadlocked = found.deadlocked
    result.forecast_problem = found.problem


def flag_text(result: RunResult) -> str:
    """Why a run of ours is flagged."""
    where = f"scenario {result.scenario} run {result.run}"
    if result.forecast_eta is None:
        return f"{where}: no forecast: {result.forecast_problem}"
    measured = "no" if result.window is None else f"{result.window:.2f} s"
    return (
        f"{where}: the plan's forecast, {result.forecast_eta:g} s, is outside the bound "
        f"({BOUND}): {measured} measured"
    )
