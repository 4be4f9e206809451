"""The plan's forecast of the refresh, beside what the soak measured (issue 40, item 6).

Right before the refresh begins, `plan --asg GROUP --batch N --instance-warmup 0` runs
through the command line's own entry point (drainer.cli.main, in this process: the
group lives in moto here), as the kubeconfig's `drainer` user, with the function's
filters and the drains' timeout. Its per-node ETA goes beside each node's measured
drain (the handler's invocation, start to end) and its total beside the drains' own
time (each batch from its first drain's start to its last drain's end: what the
plan forecasts, the launches and settling between batches being the refresh's
turnover) and beside the pacing limit (soak/pacing.py), the check of one against the
other. The issue's bound: the total within 20 % of the measured refresh.

The plan counts seconds as a user's cluster does (timestamps, grace periods), and
the emulators divide the pods' times by their speed, grace periods included: at a
speed above 1 the plan's stop times (each pod's grace period, its upper bound) are
the speed times too long. The forecast is comparable at --speed 1.
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from soak.run import Config, Outcome
    from testbed.world import World

BOUND_SHARE = 0.20
PLAN_FLAGS = ("--ignore-daemonsets", "--delete-emptydir-data", "--force")
"""The function's filters (the Lambda's defaults the soak drains with), as plan's flags."""


@dataclass(frozen=True)
class NodeForecast:
    node: str
    eta_seconds: float
    eta_max_seconds: float
    paced_by: str


@dataclass(frozen=True)
class RefreshForecast:
    """What `plan --asg -o json` said of the refresh (or why it said nothing)."""

    command: str
    exit_code: int
    total_eta_seconds: float | None = None
    nodes: list[NodeForecast] = field(default_factory=list)
    batches: list[list[str]] = field(default_factory=list)
    batch_eta_seconds: list[float] = field(default_factory=list)
    deadlocked: bool = False
    notes: str = ""
    """What the plan wrote on stderr (its notes; its error when it failed)."""

    def of(self, node: str) -> NodeForecast | None:
        return next((n for n in self.nodes if n.node == node), None)


def plan_refresh(world: World, config: Config) -> RefreshForecast:
    """The plan of the group's whole refresh, as the command line makes it."""
    from drainer.cli.main import main

    words = [
        "plan",
        "--asg",
        world.group.asg_name,
        "--batch",
        str(config.batch),
        "--instance-warmup",
        "0",
        "--timeout",
        str(config.drain_timeout),
        *PLAN_FLAGS,
        "--context",
        "drainer",
        "-o",
        "json",
    ]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main([*words, "--kubeconfig", str(world.cluster.kubeconfig)], stdout=out)
    command = "python -m drainer " + " ".join(words)
    try:
        document = json.loads(out.getvalue())
        refresh = document["refresh"]
        nodes = [
            NodeForecast(
                n["node"], float(n["eta_seconds"]), float(n["eta_max_seconds"]), n["paced_by"]
            )
            for n in document["nodes"]
        ]
        return RefreshForecast(
            command,
            code,
            float(document["total_eta_seconds"]),
            nodes,
            refresh["batches"],
            [float(t) for t in refresh["batch_eta_seconds"]],
            bool(document["deadlocked"]),
            err.getvalue().strip(),
        )
    except (ValueError, KeyError, TypeError):
        said = err.getvalue().strip() or out.getvalue().strip() or "no output"
        return RefreshForecast(command, code, notes=said[-500:])


def measured_nodes(outcome: Outcome) -> dict[str, float]:
    """Each node's measured drain: its handler invocation, start to end (seconds)."""
    return {d.node: d.ended - d.started for d in outcome.drains}


def measured_batches(outcome: Outcome) -> list[dict[str, Any]]:
    """Each of the plan's batches beside the soak's batch of the same nodes: from its
    first drain's start to its last drain's end (None when its nodes were not
    replaced together: the soak follows the plan's order when it has one)."""
    found = outcome.forecast
    if found is None:
        return []
    drains = {d.node: d for d in outcome.drains}
    rows = []
    for number, (nodes, eta) in enumerate(
        zip(found.batches, found.batch_eta_seconds, strict=False), 1
    ):
        ours = [drains[n] for n in nodes if n in drains]
        together = len(ours) == len(nodes) and len({d.batch for d in ours}) == 1
        took = max(d.ended for d in ours) - min(d.started for d in ours) if together else None
        rows.append(
            {
                "batch": number,
                "nodes": nodes,
                "eta_seconds": eta,
                "measured_seconds": None if took is None else round(took, 3),
                "ratio": round(took / eta, 3) if took and eta else None,
                "within_20_percent": None if took is None else within(took, eta),
            }
        )
    return rows


def within(measured: float, forecast: float) -> bool:
    return abs(measured - forecast) <= BOUND_SHARE * measured


def figures(outcome: Outcome, drain_seconds: float, limit: float) -> dict[str, Any] | None:
    """The forecast in report.json: per node and for the refresh, against measured."""
    found = outcome.forecast
    if found is None:
        return None
    total = found.total_eta_seconds
    measured = measured_nodes(outcome)
    batch_of = {d.node: d.batch + 1 for d in outcome.drains}
    nodes = []
    for node in found.nodes:
        took = measured.get(node.node)
        nodes.append(
            {
                "node": node.node,
                "batch": batch_of.get(node.node),
                "eta_seconds": node.eta_seconds,
                "eta_max_seconds": node.eta_max_seconds,
                "measured_seconds": None if took is None else round(took, 3),
                "ratio": round(took / node.eta_seconds, 3) if took and node.eta_seconds else None,
                "paced_by": node.paced_by,
            }
        )
    return {
        "command": found.command,
        "exit_code": found.exit_code,
        "notes": found.notes,
        "total_eta_seconds": total,
        "measured_drain_seconds": round(drain_seconds, 2),
        "measured_total_seconds": round(outcome.seconds, 2),
        "ratio": round(drain_seconds / total, 3) if total else None,
        "within_20_percent": None if total is None else within(drain_seconds, total),
        "pacing_limit_seconds": round(limit, 2),
        "plan_over_pacing_limit": round(total / limit, 3) if total and limit else None,
        "drains_over_pacing_limit": round(drain_seconds / limit, 3) if limit else None,
        "deadlocked": found.deadlocked,
        "batches": found.batches,
        "batch_eta_seconds": found.batch_eta_seconds,
        "per_batch": measured_batches(outcome),
        "nodes": nodes,
    }


def text(forecast: dict[str, Any] | None, speed: float) -> list[str]:
    """The summary's lines: the refresh, then node by node."""
    if forecast is None:
        return []
    if forecast["total_eta_seconds"] is None:
        return [f"  forecast          none: plan exit {forecast['exit_code']}: {forecast['notes']}"]
    verdict = "within 20 %" if forecast["within_20_percent"] else "OUTSIDE 20 % (flagged)"
    lines = [
        f"  forecast          {forecast['total_eta_seconds']:.1f} s, the plan's total "
        f"({forecast['command']})",
        f"    measured        {forecast['measured_drain_seconds']:.1f} s of drains "
        f"(measured/forecast {forecast['ratio']}: {verdict}); "
        f"{forecast['measured_total_seconds']:.1f} s the whole refresh",
        f"    pacing limit    {forecast['pacing_limit_seconds']:.1f} s (to each batch's last "
        f"replacement Ready): the plan's total {forecast['plan_over_pacing_limit']}x it, the "
        f"measured drains {forecast['drains_over_pacing_limit']}x it",
    ]
    if speed != 1:
        lines.append(
            f"    (speed {speed:g}: the emulators divide the pods' grace periods by it, the plan "
            "cannot: its stops are bounds the speed times too long; compare at --speed 1)"
        )
    lines.append("    batch  nodes  forecast s  measured s  ratio")
    for batch in forecast.get("per_batch") or []:
        measured = batch["measured_seconds"]
        lines.append(
            f"    {batch['batch']:>5}  {len(batch['nodes']):>5}  {batch['eta_seconds']:>10.1f}  "
            + ("-" if measured is None else f"{measured:>10.1f}  {batch['ratio']:>5}")
        )
    lines.append(
        "    node                                 batch     alone s  up to s  measured s"
        "  (alone: the node's plan by itself; in a batch its drain shares the budgets)"
    )
    for node in forecast["nodes"]:
        measured = node["measured_seconds"]
        lines.append(
            f"    {node['node']:<36} {node['batch'] or '-':>5}  {node['eta_seconds']:>10.1f}"
            f"  {node['eta_max_seconds']:>7.1f}  "
            + ("-" if measured is None else f"{measured:>10.1f}")
        )
    return lines
