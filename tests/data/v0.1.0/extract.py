"""What eks-node-drainer 0.1.0 wrote that outlives it, made by 0.1.0's own code.

Not a test of this tree: run it in a checkout of 0.1.0 (the commit before the
CHANGELOG's first Unreleased section, 91a194a), with this repository's venv:

    git -C /work/main archive 91a194a | tar -x -C /tmp/v010
    cp tests/data/v0.1.0/extract.py /tmp/v010/tests/
    cd /tmp/v010 && OUT=$OLDPWD/tests/data/v0.1.0 \
        $OLDPWD/.venv/bin/python -m pytest -q -p no:cacheprovider -n 0 tests/extract.py

It writes, into $OUT: progress.json (the node's `eks-node-drainer/progress`
records, cordon and end, as 0.1.0's engine patches them), handover.json (the
payload 0.1.0's hand-over invokes the function with) and schedule.json (the Input of
the EventBridge Scheduler schedule 0.1.0 creates for a scheduled change drained
ahead of its window). tests/test_v010_formats.py and tests/e2e/test_v010_formats.py
replay them against today's code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from test_ec2_events import (  # noqa: F401 (clients: the fixture, moto)
    HEALTH_SENT_AT,
    _found,
    _invocation,
    _lead_tools,
    _spot_event,
    clients,
)

import drainer
from drainer import aws
from drainer.k8s.cordon import PROGRESS_ANNOTATION, cordon_patch, progress_value
from drainer.lifecycle.ec2_events import later
from drainer.lifecycle.events import parse_event
from drainer.lifecycle.handover import Handover, with_handover

assert drainer.__version__ == "0.1.0", drainer.__file__

OUT = Path(os.environ["OUT"])
NOW = 1_795_600_000.0  # 2026-11-25T09:46:40Z, the eve of 0.1.0
NODE = "ip-10-0-1-23.eu-west-1.compute.internal"


def _write(name: str, value: Any) -> None:
    (OUT / name).write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")


def _merge(node: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch applied (RFC 7386), as the API server applies the drainer's."""
    merged = dict(node)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict):
            merged[key] = _merge(dict(node.get(key) or {}), value)
        else:
            merged[key] = value
    return merged


def _node(*, cordoned: bool = False, labelled: bool = False) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": NODE}
    if labelled:
        labels["node.kubernetes.io/exclude-from-external-load-balancers"] = "true"
    return {
        "metadata": {"name": NODE, "labels": labels, "annotations": {}},
        "spec": {"unschedulable": True} if cordoned else {},
    }


def _drain(node: dict[str, Any], trigger: str, end: str | None) -> dict[str, Any]:
    """The node after 0.1.0's Drain._cordon (and Drain._record, when it `end`s)."""
    patch, added = cordon_patch(node, NOW, trigger=trigger, until=NOW + 3600)
    node = _merge(node, patch)
    if end is not None:
        record = progress_value(end, added, at=NOW + 95, evicted=4)
        node = _merge(node, {"metadata": {"annotations": {PROGRESS_ANNOTATION: record}}})
    return node


def test_progress_records() -> None:
    _write(
        "progress.json",
        {
            "draining": _drain(_node(), "terminate-hook", None),
            "drained": _drain(_node(), "terminate-hook", "drained"),
            "timed_out_cordoned_before": _drain(
                _node(cordoned=True), "terminate-hook", "timed_out"
            ),
            "spot_draining": _drain(_node(labelled=True), "spot-interruption", None),
        },
    )


def test_handover_payload(load_event: Any) -> None:
    raw = load_event("terminate")
    first = parse_event(raw)
    started = first.waiting_since  # type: ignore[union-attr]
    assert started is not None
    # What ending.hand_over sends after the first invocation's 3 heartbeats.
    handed = Handover(started_at=started, handovers=0, heartbeats=0).handed_on(3)
    _write("handover.json", with_handover(raw, handed))


def test_schedule_input(clients: aws.AwsClients, load_event: Any) -> None:  # noqa: F811
    raw = load_event("health-scheduled-change")
    found = _found(_spot_event(raw))
    scheduled = later(found, _lead_tools(clients, HEALTH_SENT_AT, 3600), _invocation(), raw)
    assert scheduled is not None
    schedule = clients.scheduler.get_schedule(Name=scheduled["schedule"])
    _write(
        "schedule.json",
        {
            "name": scheduled["schedule"],
            "expression": schedule["ScheduleExpression"],
            "input": json.loads(schedule["Target"]["Input"]),
        },
    )
