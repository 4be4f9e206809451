"""The stack's CloudWatch dashboard (template.yaml, DrainsDashboard) drawn locally
from a soak's own figures, so docs/operations.md can show what an operator gets.

    python -m soak.dashboard build/soak/real [--out docs/dashboard.png]

The widgets are read from the template (their type, title, place and metrics), not
written twice. The data is what CloudWatch would have from that run: the metric
lines the function wrote (metrics.log, embedded metric format) for the metric
widgets, its end lines (drainer.log, `drain_finished`) for the Logs Insights
tables, computed as the widgets' queries compute them. The soak lasts minutes, not
hours, so metrics are summed per 10 s instead of the dashboard's 5 minutes.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from demo import template as demo_template
from demo.template import TEMPLATE

PERIOD = 10.0  # seconds per point (the template's widgets: 300)


def widgets(template: Path = TEMPLATE) -> list[dict[str, Any]]:
    """DrainsDashboard's widgets, with the template's substitutions made."""
    dashboard = demo_template.read(template)["Resources"]["DrainsDashboard"]["Properties"]
    body = dashboard["DashboardBody"]["Fn::Sub"][0]
    body = body.replace("${D}", '"Cluster", "soak", "service", "eks-node-drainer"')
    body = re.sub(r"\$\{[^}]+\}", "x", body)
    return list(json.loads(body)["widgets"])


def metric_points(metrics_log: Path) -> dict[str, list[tuple[float, float]]]:
    """Metric name -> (seconds since the first line, value), from EMF lines."""
    points: dict[str, list[tuple[float, float]]] = defaultdict(list)
    first: float | None = None
    for line in metrics_log.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        meta = record.get("_aws")
        if not isinstance(meta, dict):
            continue
        at = float(meta["Timestamp"]) / 1000
        first = at if first is None else first
        for directive in meta.get("CloudWatchMetrics", []):
            for metric in directive.get("Metrics", []):
                for value in record.get(metric["Name"], []):
                    points[metric["Name"]].append((at - first, float(value)))
    return points


def end_lines(drainer_log: Path) -> list[dict[str, Any]]:
    ends = []
    for line in drainer_log.read_text().splitlines():
        if '"drain_finished"' not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == "drain_finished":
            ends.append(record)
    return ends


def binned(points: list[tuple[float, float]], stat: str) -> tuple[list[float], list[float]]:
    bins: dict[int, list[float]] = defaultdict(list)
    for at, value in points:
        bins[int(at // PERIOD)].append(value)
    xs = [b * PERIOD for b in sorted(bins)]
    if stat == "p50":
        return xs, [statistics.median(bins[b]) for b in sorted(bins)]
    if stat == "Maximum":
        return xs, [max(bins[b]) for b in sorted(bins)]
    return xs, [sum(bins[b]) for b in sorted(bins)]


def table(query: str, ends: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The widget's Logs Insights query over the end lines: its filter, then its
    `stats ... by` or its `fields`."""
    rows = [e for e in ends if "remaining > 0" not in query or int(e.get("remaining", 0)) > 0]
    if "| fields " in query:
        columns = [
            c.strip() for c in query.split("| fields ", 1)[1].split("|", maxsplit=1)[0].split(",")
        ]
        shown = [[str(e.get(c.lstrip("@"), e.get("timestamp", ""))) for c in columns] for e in rows]
        return columns, shown[:12]
    stats, by = query.split("| stats ", 1)[1].split(" by ")
    keys = [k.strip() for k in by.split(",")]
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for end in rows:
        groups[tuple(str(end.get(k, "")) for k in keys)].append(end)
    columns = list(keys)
    cells: list[list[str]] = [list(k) for k in sorted(groups)]
    for expression in stats.split(", "):
        found = re.fullmatch(r"(\w+)\(([\w*]*)\) as (\w+)", expression.strip())
        if found is None:
            raise ValueError(f"a stats expression this drawing does not know: {expression!r}")
        function, field, name = found.groups()
        columns.append(name)
        for row, key in zip(cells, sorted(groups), strict=True):
            values = [float(e.get(field) or 0) for e in groups[key]]
            row.append(_stat(function, values, len(groups[key])))
    return columns, cells


def _stat(function: str, values: list[float], count: int) -> str:
    if function == "count":
        return str(count)
    if function == "avg":
        return f"{statistics.fmean(values):.1f}"
    if function == "max":
        return f"{max(values):.1f}"
    return f"{sum(values):g}"


def draw(run: Path, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = metric_points(run / "metrics.log")
    ends = end_lines(run / "drainer.log")
    shown = widgets()
    rows = max(w["y"] + w["height"] for w in shown)
    figure = plt.figure(figsize=(16, rows * 0.55))
    grid = figure.add_gridspec(rows, 24, hspace=3.5, wspace=1.2)
    for widget in shown:
        x, y, width, height = widget["x"], widget["y"], widget["width"], widget["height"]
        axes = figure.add_subplot(grid[y : y + height - 1, x : x + width])
        properties = widget["properties"]
        axes.set_title(properties["title"], loc="left", fontsize=10)
        if widget["type"] == "metric":
            last: str = ""
            for metric in properties["metrics"]:
                options = metric[-1] if isinstance(metric[-1], dict) else {}
                name = last if metric[0] == "..." else metric[1]
                last = name
                xs, ys = binned(
                    points.get(name, []), options.get("stat", properties.get("stat", "Sum"))
                )
                axes.plot(xs, ys, marker=".", label=options.get("label", name))
            axes.legend(fontsize=7, loc="upper right")
            axes.set_xlabel(f"seconds into the run (points per {PERIOD:g} s)", fontsize=7)
            axes.tick_params(labelsize=7)
        elif widget["type"] == "alarm":
            failed = sum(v for _, v in points.get("DrainFailed", []))
            axes.axis("off")
            for i, alarm in enumerate(("drain-failed", "failed-events")):
                state = "ALARM" if alarm == "drain-failed" and failed else "OK"
                colour = "#d62728" if state == "ALARM" else "#2ca02c"
                axes.text(
                    0.02, 0.7 - i * 0.35, f"{state}  <stack>-{alarm}", color=colour, fontsize=11
                )
        else:
            axes.axis("off")
            columns, cells = table(properties["query"], ends)
            if cells:
                drawn = axes.table(
                    cellText=cells, colLabels=columns, loc="upper left", cellLoc="left"
                )
                drawn.auto_set_font_size(False)
                drawn.set_fontsize(7)
            else:
                axes.text(0.02, 0.6, "No data (no drain left a pod)", fontsize=9, color="grey")
    figure.suptitle(f"<stack>-drains, drawn from the soak in {run}", fontsize=11)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=80, bbox_inches="tight")
    plt.close(figure)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soak.dashboard", description=__doc__)
    parser.add_argument("run", type=Path, help="a soak's output directory (build/soak/<backend>)")
    parser.add_argument("--out", type=Path, default=Path("docs/dashboard.png"))
    args = parser.parse_args(argv)
    for name in ("metrics.log", "drainer.log"):
        if not (args.run / name).is_file():
            print(f"{args.run / name} is missing: run `make soak` first", file=sys.stderr)
            return 2
    print(draw(args.run, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
