"""The CLI drain's ETA: forecast once at its start (drainer/plan/eta.py, the model
`plan` runs), shown on the progress lines (drainer/cli/display.py), and the forecast
against the drain's own span at its end, in words and in the JSON document."""

from __future__ import annotations

import time
from typing import Any

from drainer.cli.streams import Stream
from drainer.engine.options import DrainOptions
from drainer.engine.pace import Accuracy, Eta, forecast_within
from drainer.k8s.kube import Kube

FORECAST_SECONDS = 5.0
"""The longest the drain waits for its forecast before it starts without an ETA."""


def eta_for(
    kube: Kube, node: str, options: DrainOptions, timeout: float, err: Stream
) -> Eta | None:
    """The drain's ETA, or a warning on stderr saying why there is none (the drain
    goes on as without it)."""
    from drainer.plan.eta import forecast_node

    eta = forecast_within(
        forecast_node,
        kube,
        node,
        options,
        timeout=timeout,
        now=time.time(),
        within=FORECAST_SECONDS,
    )
    if isinstance(eta, str):
        print(f"warning: no ETA for the drain of node {node}: {eta}", file=err)
        return None
    return eta


def said_against(eta: Eta | None, out: Stream) -> Accuracy | None:
    """The forecast against the drain's own span, said in a line before the verdict
    (nothing without a forecast)."""
    if eta is None:
        return None
    accuracy = eta.accuracy()
    if accuracy.actual_seconds is None:
        said = f"forecast {accuracy.forecast_seconds:.0f} s; not every pod went"
    else:
        said = (
            f"forecast {accuracy.forecast_seconds:.0f} s; took {accuracy.actual_seconds:.0f} s "
            "from the drain's start to its last pod gone"
        )
    print(said, file=out, flush=True)
    return accuracy


def fields(accuracy: Accuracy | None) -> dict[str, Any]:
    """The JSON document's forecast_seconds and actual_seconds, when there are."""
    if accuracy is None:
        return {}
    found: dict[str, Any] = {"forecast_seconds": round(accuracy.forecast_seconds, 1)}
    if accuracy.actual_seconds is not None:
        found["actual_seconds"] = round(accuracy.actual_seconds, 1)
    return found
