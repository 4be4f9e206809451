"""Review of review 61's commits (a23c069..d4a2bb7): failing tests for the defects
found. Each test says what the commit claims and what happens instead."""

from __future__ import annotations

import json
import linecache
import logging

import pytest
from test_review60_ec2 import _db_pods, _guarded, _invoke, _node, _record, published, world

from drainer import logs
from drainer.backoff import Backoff
from drainer.errors import KubeServerError
from drainer.k8s.kube import Kube
from drainer.lifecycle import runner
from drainer.lifecycle.ec2_handover import HANDED_OVER
from testbed import World

__all__ = ["published", "world"]  # the fixtures, shared with review 60


# -- item 4: a chain handed over before its first invocation recorded anything -----


def test_first_invocation_never_reached_the_node__the_next_one_drains_rather_than_calls_it_released(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """d4a2bb7: a handed-over invocation that finds no drain record on the node takes
    it for released since (the change's close, or a person's `release`) and stops the
    chain. But the first invocation hands over on any TIMED_OUT, and the runner's
    retry loop (runner._with_retries) ends a drain whose API server kept failing
    until the cut in TIMED_OUT without any record ever written (the cordon never
    took). The next invocation, the API server back, then ends `released`: the node
    is never cordoned, its pods are never evicted, and they die at the window, for
    a change that is still on (EC2 still lists it: handle() checked)."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    update = world.scheduled_change([instance], starts_in=600)

    def failing(self: Kube, name: str, patch: dict, *, dry_run: bool = False) -> dict:
        raise KubeServerError("503 Service Unavailable (the API server is down)", 503)

    with monkeypatch.context() as down:
        down.setattr(Kube, "patch_node", failing)
        down.setattr(runner, "API_RETRY", Backoff(first=0.2, cap=0.4))
        first = _invoke(world, monkeypatch, update, lambda_seconds=10.0)
    assert first["result"] == "handed_over", first
    assert not _record(world, node), "the first invocation never wrote a record"
    (queued,) = world.aws.pending_invocations()
    world.aws.pop_invocation()
    payload = queued["payload"]
    mark = (payload if isinstance(payload, dict) else json.loads(payload))[HANDED_OVER]

    later = _invoke(world, monkeypatch, {**update, HANDED_OVER: mark}, lambda_seconds=10.0)

    assert later["result"] != "released", (
        "a chain whose first invocation never reached the node is not 'released since'",
        later,
    )
    assert _node(world, node)["spec"].get("unschedulable"), "the drain went on"
    assert _db_pods(world, node), "its held pod is still there to evict"


# -- item 1: the drain event line's location ----------------------------------------


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_drain_event_location__the_line_logger_log_would_name__not_the_def_line() -> None:
    """a23c069: drain_event builds its record itself, "Its location is this function's,
    as logger.log would find it". logger.log (findCaller) names the line of the call
    in drain_event's body (drain_event:219 before the commit); the record now carries
    drain_event.__code__.co_firstlineno, the `def drain_event(` line, on every drain
    event line and every end line (`"location":"drain_event:225"`)."""
    logger = logging.getLogger("drainer.review61.location")
    keep = _Keep()
    logger.addHandler(keep)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        logs.drain_event(logger, "evicted shop/web-1", {"event": "pod_evicted"})
    finally:
        logger.removeHandler(keep)
    (record,) = keep.records
    assert record.funcName == "drain_event"
    named = linecache.getline(record.pathname, record.lineno).strip()
    assert not named.startswith("def "), (
        f"location drain_event:{record.lineno} names the def line, not a call: {named!r}"
    )
    assert "logger." in named, (record.lineno, named)
