"""soak/dashboard.py: the stack's dashboard drawn from a run's own logs, with the
template's widgets and the widgets' queries computed as Logs Insights would."""

from __future__ import annotations

import json
from pathlib import Path

from soak import dashboard


def _end(asg: str, result: str, seconds: float, refusals: int, remaining: int) -> str:
    return json.dumps(
        {
            "event": "drain_finished",
            "asg_name": asg,
            "result": result,
            "trigger": "terminate-hook",
            "seconds": seconds,
            "pdb_refusals": refusals,
            "remaining": remaining,
            "node": f"node-{seconds}",
            "lifecycle_result": "CONTINUE",
            "timestamp": "2026-11-26 10:44:49,931+0000",
        }
    )


ENDS = [
    json.loads(_end("a", "drained", 10.0, 2, 0)),
    json.loads(_end("a", "timed_out", 30.0, 5, 3)),
    json.loads(_end("b", "drained", 4.0, 0, 0)),
]


def test_the_widgets_are_the_templates() -> None:
    titles = [w["properties"]["title"] for w in dashboard.widgets()]
    assert titles[0] == "Drains by result" and "By node group" in titles
    assert {w["type"] for w in dashboard.widgets()} == {"metric", "alarm", "log"}


def test_by_node_group__counts_averages_maxima_and_sums_per_group() -> None:
    (query,) = [
        w["properties"]["query"]
        for w in dashboard.widgets()
        if w["properties"]["title"] == "By node group"
    ]
    columns, rows = dashboard.table(query, ENDS)
    assert columns == ["asg_name", "drains", "avg_s", "max_s", "refusals", "pods_left"]
    assert rows == [["a", "2", "20.0", "30.0", "7", "3"], ["b", "1", "4.0", "4.0", "0", "0"]]


def test_pods_left__only_the_drains_that_left_some() -> None:
    (query,) = [
        w["properties"]["query"]
        for w in dashboard.widgets()
        if "left pods" in w["properties"]["title"]
    ]
    _, rows = dashboard.table(query, ENDS)
    assert [row[1] for row in rows] == ["node-30.0"]


def test_draws_a_png_from_a_runs_logs(tmp_path: Path) -> None:
    metric = {
        "_aws": {
            "Timestamp": 1795689889932,
            "CloudWatchMetrics": [
                {"Namespace": "EksNodeDrainer", "Metrics": [{"Name": "DrainSucceeded"}]}
            ],
        },
        "DrainSucceeded": [1.0],
    }
    (tmp_path / "metrics.log").write_text(json.dumps(metric) + "\n")
    (tmp_path / "drainer.log").write_text("\n".join(json.dumps(e) for e in ENDS) + "\n")

    out = dashboard.draw(tmp_path, tmp_path / "dashboard.png")

    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
