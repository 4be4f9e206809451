"""--plan: the plan of the node the demo will drain, before the drain, and afterwards
the forecast against what the demo's own watch measured.

The plan is the command line's, run as an operator would run it before a refresh:
`python -m drainer plan NODE` in a process of its own, as the drainer identity (the
`drainer` context of kubesim's kubeconfig: k8s-rbac/'s ClusterRole), with the flags
that ask for the drain the function's settings make (template.yaml's). Twice: the
table for people, then `-o json` for the numbers the summary compares.

What the plan forecasts is the pods' part of the drain: from its start to the last
evicted pod gone. The demo measures the same span from its watch: from the node
cordoned to the last of its pods gone. The waits that come after (the volumes'
detach, the target groups' deregistration delay) are not in the plan.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drainer.lifecycle.settings import Settings
from drainer.plan.function_drain import plan_flags

if TYPE_CHECKING:
    from demo.observe import Observer

ROOT = Path(__file__).resolve().parent.parent
CONTEXT = "drainer"
"""kubesim's kubeconfig context whose user is in the drainer's Kubernetes group."""
SLACK_RATIO, SLACK_SECONDS = 0.25, 2.0
"""The issue's accuracy: the forecast within 25 % of the measured drain, plus 2 s."""


class PlanError(Exception):
    """The plan could not be made (a usage or access error: exit 2 or 3)."""


@dataclass(frozen=True)
class Plan:
    """The plan of one node, as the command line gave it."""

    command: list[str]
    table: str
    """The table and its verdict line, as printed."""
    exit_code: int
    node: dict[str, Any]
    """The node's entry of the JSON document: eta_seconds, eta_max_seconds,
    paced_by, blockers..."""
    notes: list[str]
    """What the plan said on stderr beside its table (what it could not check)."""

    @property
    def shown(self) -> str:
        """The command as an operator types it (without the kubeconfig)."""
        return " ".join(["python", *self.command[1:]])


def flags(environment: Mapping[str, str], time_left: float) -> list[str]:
    """The plan's flags for the drain the function's settings run (its drain options,
    Settings.drain_options, as drainer/plan/function_drain.py writes them) and the
    time it has."""
    return plan_flags(Settings.from_env(dict(environment)).drain_options(), time_left)


def make(
    kubeconfig: Path, node: str, chosen: list[str], env: Mapping[str, str], timeout: float = 60
) -> Plan:
    """`python -m drainer plan NODE ...`: its table, then its JSON document."""
    command = [sys.executable, "-m", "drainer", "plan", node, *chosen]
    where = ["--kubeconfig", str(kubeconfig), "--context", CONTEXT]
    table = _run([*command, *where], env, timeout)
    document = _run([*command, *where, "-o", "json"], env, timeout)
    try:
        parsed = json.loads(document.stdout)
        [entry] = parsed["nodes"]
    except (ValueError, KeyError, TypeError) as e:
        raise PlanError(
            f"plan -o json gave no document of one node ({e}): {document.stdout!r}"
        ) from None
    notes = [line for line in table.stderr.splitlines() if line.strip()]
    return Plan(command, table.stdout.rstrip("\n"), document.returncode, dict(entry), notes)


def _run(
    argv: list[str], env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(  # noqa: S603 - argv is built by the demo
            argv,
            cwd=ROOT,
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise PlanError(f"plan took more than {timeout:g} s: {' '.join(argv[2:])}") from None
    if done.returncode not in (0, 1):  # 0 nothing blocks, 1 something does
        said = (done.stderr.strip() or done.stdout.strip())[-2000:]
        raise PlanError(f"plan exited {done.returncode}: {said}")
    return done


def budgets_counted(observer: Observer) -> bool:
    """Every budget's status counts the pods it selects, all healthy (call under the
    observer's lock): what the plan reads is the disruption controller's word."""
    from demo.observe import is_healthy, selects

    for budget in observer.budgets.values():
        namespace = budget["metadata"].get("namespace")
        selector = (budget.get("spec") or {}).get("selector")
        chosen = [
            p
            for p in observer.pods.values()
            if p["metadata"].get("namespace") == namespace
            and selects(selector, p["metadata"].get("labels"))
        ]
        healthy = sum(1 for p in chosen if is_healthy(p))
        status = budget.get("status") or {}
        if (status.get("expectedPods"), status.get("currentHealthy")) != (len(chosen), healthy):
            return False
    return True


def measured(observer: Observer) -> float | None:
    """Seconds from the node cordoned to the last of its evicted pods gone, as the
    demo watched it (None: never cordoned, or a pod never went)."""
    with observer.lock:
        start = observer.cordoned_at
        ends = [f.gone_at for f in observer.fates.values() if not f.daemon and not f.with_node]
    if start is None or not ends or any(end is None for end in ends):
        return None
    return max(float(end) for end in ends if end is not None) - start


def comparison(plan: Plan | None, observer: Observer) -> dict[str, Any] | None:
    """The summary's `forecast`: the plan's numbers against the measured span."""
    if plan is None:
        return None
    node = plan.node
    actual = measured(observer)
    eta = float(node["eta_seconds"])
    within = None
    if actual is not None and not node["blockers"]:
        within = abs(eta - actual) <= SLACK_RATIO * actual + SLACK_SECONDS
    return {
        "command": plan.shown,
        "exit_code": plan.exit_code,
        "node": node["node"],
        "pods": node["pods"],
        "eta_seconds": eta,
        "eta_max_seconds": float(node["eta_max_seconds"]),
        "paced_by": node["paced_by"],
        "blockers": node["blockers"],
        "measured_seconds": None if actual is None else round(actual, 2),
        "ratio": None if actual is None or not actual else round(eta / actual, 2),
        "within_slack": within,
    }


def row(forecast: dict[str, Any]) -> tuple[str, str, str]:
    """The summary's line: forecast, measured, their ratio."""
    eta, most = forecast["eta_seconds"], forecast["eta_max_seconds"]
    said = f"ETA {eta:.1f} s (up to {most:.1f} s)"
    if forecast["blockers"]:
        said += f", {len(forecast['blockers'])} blocker(s)"
    actual = forecast["measured_seconds"]
    if actual is None:
        return "forecast", f"{said}; not measured: a pod never left the node", "warn"
    said += f"; measured {actual:.1f} s from the cordon to the last pod gone"
    if forecast["ratio"] is not None:
        said += f" (forecast/measured {forecast['ratio']:.2f})"
    ok = forecast["within_slack"]
    style = "ok" if ok else "warn"
    if ok is False:
        said += f"; off by more than {SLACK_RATIO:.0%} + {SLACK_SECONDS:g} s"
    return "forecast", said, style
