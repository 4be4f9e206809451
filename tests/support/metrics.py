"""The metrics an invocation writes, read from the line it prints (CloudWatch's
embedded metric format): a drain's (drainer/lifecycle/ending.py) and a launch's
(drainer/lifecycle/launch.py), run through the code that writes them."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any


def emf_lines(text: str) -> list[dict[str, Any]]:
    """The embedded-metric-format lines (the `_aws` key) in printed output."""
    lines = (json.loads(line) for line in text.splitlines() if line.startswith("{"))
    return [line for line in lines if "_aws" in line]


def metric_names(*, launch: bool = False) -> list[str]:
    """The names, in order, of the metrics a drain's (or a launch's) invocation writes."""
    from drainer.engine.pace import Accuracy
    from drainer.lifecycle import ending
    from drainer.lifecycle import launch as launches
    from drainer.lifecycle.job import Run
    from drainer.lifecycle.outcomes import Result
    from drainer.lifecycle.settings import Settings

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        if launch:
            launches._metrics(launches.Joining("joined", ""), {"seconds": 1.0}, "prod")
        else:
            # A drain with a forecast writes every metric of a drain's invocation.
            run = Run(Result.DRAINED, "", accuracy=Accuracy(1.0, 1.0))
            ending._metrics(run, {"seconds": 1.0}, Settings())
    (line,) = emf_lines(out.getvalue())
    (directive,) = line["_aws"]["CloudWatchMetrics"]
    return [metric["Name"] for metric in directive["Metrics"]]
