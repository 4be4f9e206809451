"""The log contract: docs/reference.md's table of drain events against the kinds of
drainer/engine/report.py, the levels of drainer/logs.py and the keys DrainEvent.fields()
can produce; a drain event line that never breaks on a reserved key; and the lines
a real drain writes, through the Lambda handler on kubesim and moto."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import re
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from e2e import conftest as e2e

from drainer import logs
from drainer.engine.report import EVENT_LEVELS, DrainEvent, Kind
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on, wait_until

# The end-to-end fixtures (a world of kubesim and moto, the real handler, its
# captured JSON lines), reused rather than written again.
cluster = e2e.cluster
world = e2e.world
drainer_logs = e2e.drainer_logs
invoke = e2e.invoke
LogCapture = e2e.LogCapture

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"
DETAILS_OF = (str(Kind.STARTED), str(Kind.FINISHED))
"""The kinds whose rows may name keys of their own (DrainEvent.details)."""


@dataclasses.dataclass(frozen=True)
class Row:
    event: str
    level: str
    keys: tuple[str, ...]


def _section() -> str:
    """docs/reference.md's "## Log contract", up to the next heading."""
    text = REFERENCE.read_text()
    start = text.index("\n## Log contract\n")
    end = text.find("\n#", start + 1)
    return text[start : end if end > 0 else len(text)]


def _rows() -> list[Row]:
    rows = []
    for line in _section().splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append(Row(cells[0].strip("`"), cells[1], tuple(re.findall(r"`([^`]+)`", cells[2]))))
    return rows


def _stable_keys_documented() -> set[str]:
    """The keys of the log contract's list ("- `pod`: ...")."""
    return set(re.findall(r"^- `([a-z_]+)`:", _section(), re.MULTILINE))


def _every_field_set() -> DrainEvent:
    return DrainEvent(
        Kind.LEFT,
        pod="a/b",
        budget="a/c",
        reason="r",
        seconds=1.0,
        refusals=1,
        tier="critical",
        eta_seconds=2.0,
        paced_by="p",
    )


def test_readme_table__one_row_per_kind() -> None:
    events = [row.event for row in _rows()]

    assert len(events) == len(set(events)), "a kind documented twice"
    assert set(events) == {str(kind) for kind in Kind}


def test_readme_levels__the_levels_logs_gives_each_kind() -> None:
    assert set(EVENT_LEVELS) == {str(kind) for kind in Kind}
    for row in _rows():
        assert row.level == logging.getLevelName(EVENT_LEVELS[row.event]), row.event


def test_readme_keys__the_keys_drain_event_fields_can_produce() -> None:
    produced = set(_every_field_set().fields())
    stable = produced - {"event"}

    assert set(DrainEvent(Kind.CORDONED).fields()) == {"event"}, "unset fields stay out"
    assert _stable_keys_documented() == stable
    # Every field of DrainEvent but kind, details and the pod's uid (for its
    # Kubernetes Event, not the log) is one stable key.
    names = {f.name for f in dataclasses.fields(DrainEvent)} - {"kind", "details", "uid"}
    assert names == stable
    for row in _rows():
        if row.event in DETAILS_OF:
            assert row.keys, row.event
            continue
        assert set(row.keys) <= stable, f"{row.event}: {set(row.keys) - stable} not a field"


def test_contract_keys__never_a_reserved_log_key() -> None:
    keys = {"event"} | {k for row in _rows() for k in row.keys} | _stable_keys_documented()

    assert not keys & logs.RESERVED_KEYS
    assert not keys & set(logs.FIXED_KEYS) - {"cluster"}, "cluster: the same value, on purpose"


def _capture(level: str = "DEBUG") -> io.StringIO:
    stream = io.StringIO()
    logs.configure(level, stream=stream)
    return stream


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_drain_event__reserved_keys_renamed__the_line_still_written() -> None:
    stream = _capture()
    fields = {
        "event": "pod_evicted",
        "pod": "shop/web-1",
        "name": "n",
        "message": "m",
        "args": "a",
        "level": "l",
        "msg": "x",
    }

    logs.drain_event(logging.getLogger("drainer.test"), "evicted shop/web-1", fields)

    (line,) = _lines(stream)
    assert line["message"] == "evicted shop/web-1"
    assert line["level"] == "INFO"
    assert line["event"] == "pod_evicted"
    assert line["pod"] == "shop/web-1"
    assert (line["name_"], line["message_"], line["args_"], line["level_"], line["msg_"]) == (
        "n",
        "m",
        "a",
        "l",
        "x",
    )


@pytest.mark.parametrize(
    ("kind", "level"),
    [
        (Kind.EVICTING, "DEBUG"),
        (Kind.EVICTED, "INFO"),
        (Kind.LEFT, "WARNING"),
        (Kind.STOPPED, "ERROR"),
        (Kind.DRAIN_RELEASED, "WARNING"),
    ],
)
def test_drain_event__written_at_its_kinds_level(kind: Kind, level: str) -> None:
    stream = _capture()

    event = DrainEvent(kind, pod="a/b")
    logs.drain_event(logging.getLogger("drainer.test"), "x", event.fields(), event.level)

    assert _lines(stream)[0]["level"] == level


def test_drain_event__debug_kind_not_written_at_info() -> None:
    stream = _capture("INFO")

    event = DrainEvent(Kind.EVICTING)
    logs.drain_event(logging.getLogger("drainer.test"), "x", event.fields(), event.level)

    assert _lines(stream) == []


# -- the lines a real drain writes ------------------------------------------------------


@pytest.fixture
def backend() -> str:
    """The e2e `cluster` fixture's backend: kubesim (it can hold a replacement back)."""
    return "kubesim"


INVOCATION_KEYS = {*logs.FIXED_KEYS, "event_id"}
"""Bound for the invocation (drainer.logs.bind), on every line."""


def test_handler_drain__one_json_line_per_event__keys_as_documented(
    world: World,
    invoke: Any,
    drainer_logs: LogCapture,
) -> None:
    """A node with a DaemonSet pod, three replicas under a budget that allows no
    disruption until the drain met its refusal (then one at a time) and a pod
    without a budget."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    world.cluster.apply([w.daemonset("agent")])
    place_on(
        world,
        node,
        [
            w.deployment("web", 3, startup=1.0, shutdown=0.2),
            w.budget("web", {"app": "web"}, max_unavailable=0),
            w.deployment("cache", 1, shutdown=0.2),
        ],
        timeout=20,
    )
    on_node = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in pods_on(world.cluster, node)
    }
    daemon = {p for p in on_node if p.startswith("kube-system/agent-")}
    drained = on_node - daemon
    assert len(daemon) == 1 and len(drained) == 4

    def open_budget_once_refused() -> None:
        wait_until(lambda: bool(drainer_logs.events(Kind.REFUSED)), timeout=30)
        world.cluster.patch("PodDisruptionBudget", "web", {"spec": {"maxUnavailable": 1}})

    opener = threading.Thread(target=open_budget_once_refused, daemon=True)
    opener.start()
    summary = invoke(world.terminate(instance))
    opener.join(5)

    assert summary["result"] == "drained"
    lines = [r for r in drainer_logs.records() if "event" in r]
    documented = {row.event: set(row.keys) for row in _rows()}
    stable = set(_every_field_set().fields())
    for line in lines:
        assert line["event"] in documented, line
        extra = set(line) - {"event"} - documented[line["event"]] - stable - INVOCATION_KEYS
        extra -= logs.POWERTOOLS_KEYS
        assert not extra, f"{line['event']}: keys not in docs/reference.md's table: {extra}"
        assert line["instance_id"] == instance and line["node_name"] == node, line

    (started,) = drainer_logs.events(Kind.STARTED)
    assert set(documented[str(Kind.STARTED)]) <= set(started)
    assert started["node"] == node
    assert datetime.fromisoformat(started["deadline"]).utcoffset().total_seconds() == 0
    assert (started["ordinary"], started["critical"], started["skipped"]) == (4, 0, 1)
    assert len(drainer_logs.events(Kind.CORDONED)) == 1
    (skipped,) = drainer_logs.events(Kind.SKIPPED)
    assert skipped["pod"] in daemon
    assert "DaemonSet" in skipped["reason"]
    evicted = [line["pod"] for line in drainer_logs.events(Kind.EVICTED)]
    gone = [line["pod"] for line in drainer_logs.events(Kind.GONE)]
    assert sorted(evicted) == sorted(drained), "one pod_evicted per pod"
    assert sorted(gone) == sorted(drained), "one pod_gone per pod"
    refused = [line["pod"] for line in drainer_logs.events(Kind.REFUSED)]
    assert refused, "a budget that allows no disruption refuses the first eviction"
    assert len(refused) == len(set(refused)), "one pod_refused per pod, not one per retry"
    for line in drainer_logs.events(Kind.REFUSED):
        assert line["budget"] == "default/web"
        assert line["pod"].startswith("default/web-")
    refusals = {line["pod"]: line.get("refusals", 0) for line in drainer_logs.events(Kind.EVICTED)}
    for pod in refused:
        assert refusals[pod] >= 1, f"{pod} was refused, then evicted: refusals counted"
    (finished,) = drainer_logs.events(Kind.FINISHED)
    assert {
        "result",
        "lifecycle_result",
        "completed",
        "cluster",
        "node",
        "seconds",
        "evicted",
        "pdb_refusals",
        "budgets_holding",
        "remaining",
        "left",
    } <= set(finished)
    assert (finished["result"], finished["lifecycle_result"]) == ("drained", "CONTINUE")
    assert finished["evicted"] == 4
    assert finished["budgets_holding"] == ["default/web"]
    assert finished["pdb_refusals"] >= len(refused)
    assert finished["remaining"] == 0 and finished["left"] == {}
    assert lines[-1] == finished, "the end line is the last event"


def test_reset__a_warm_containers_next_event_keeps_no_key_of_the_last() -> None:
    """A spot event binds its trigger; the scale-in that the same container handles
    next must not log under it."""
    stream = io.StringIO()
    logs.configure("INFO", stream=stream)
    try:
        logs.bind(instance_id="i-1", trigger="spot-interruption", event_id="e-1")
        logs.reset()
        logs.bind(instance_id="i-2")
        logging.getLogger("drainer.test").info("next invocation")
    finally:
        logs.configure("INFO")
    (line,) = [json.loads(text) for text in stream.getvalue().splitlines()]
    assert line["instance_id"] == "i-2"
    assert "trigger" not in line and "event_id" not in line


def _json_lines(
    emit: Any, monkeypatch: pytest.MonkeyPatch, trace: str = ""
) -> list[dict[str, Any]]:
    stream = io.StringIO()
    handler = logs.configure("DEBUG", stream=stream)
    before = handler.stream
    if trace:
        monkeypatch.setenv("_X_AMZN_TRACE_ID", trace)
    else:
        monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)
    logs.reset()  # keys an earlier test in this worker bound are not this test's
    try:
        emit(logging.getLogger("drainer.test"))
    finally:
        logs.reset()
        handler.setStream(before)
    return [json.loads(text) for text in stream.getvalue().splitlines()]


def test_line__keys_in_order__invocation_keys_then_the_records__none_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def emit(log: logging.Logger) -> None:
        logs.bind(instance_id="i-1", asg_name="", cluster="prod")
        log.info("evicted %s", "a/b", extra={"event": "pod_evicted", "seconds": None, "n": 3})
        log.info("42")

    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    first, second = _json_lines(emit, monkeypatch, trace)
    assert list(first) == [
        "level", "location", "message", "timestamp", "service",
        "instance_id", "cluster", "event", "n", "xray_trace_id",
    ]  # fmt: skip
    assert first["level"] == "INFO" and first["location"].startswith("emit:")
    assert first["message"] == "evicted a/b" and first["service"] == "eks-node-drainer"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}[+-]\d{4}", first["timestamp"])
    assert first["xray_trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"
    assert second["message"] == "42", "a message stays the string it is"


def test_line__an_exception__its_text_name_and_frames__a_token_in_it_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def emit(log: logging.Logger) -> None:
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed with k8s-aws-v1.abcdef")

    (line,) = _json_lines(emit, monkeypatch)
    assert line["level"] == "ERROR"
    assert line["message"] == "failed with k8s-aws-v1.[redacted]"
    assert line["exception_name"] == "ValueError"
    assert line["exception"].startswith("Traceback") and "ValueError: boom" in line["exception"]
    stack = line["stack_trace"]
    assert (stack["type"], stack["value"], stack["module"]) == ("ValueError", "boom", "builtins")
    assert stack["frames"][-1]["statement"] == 'raise ValueError("boom")'
    assert "xray_trace_id" not in line


def test_line__a_token_or_signature_outside_the_message__redacted_and_the_line_still_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The filter redacts the message; a token or a presigned URL's signature in an
    exception's text or in an extra key is redacted in the line as well, and a quote
    right after the signature keeps its escape (the line stays one JSON object)."""
    url = "https://s3.amazonaws.com/b/k?X-Amz-Credential=AKIA%2Fx&X-Amz-Signature=abc123"

    def emit(log: logging.Logger) -> None:
        try:
            raise RuntimeError(f'exec plugin said "k8s-aws-v1.secretpart" for "{url}"')
        except RuntimeError:
            log.exception(
                "failed",
                extra={
                    "where": f'"{url}"',
                    "token": "k8s-aws-v1.xyz_9-",
                    "escaped": [f"{url}\nnext", f"{url}\\x"],
                },
            )

    (line,) = _json_lines(emit, monkeypatch)
    text = json.dumps(line)
    for secret in ("secretpart", "abc123", "AKIA", "xyz_9"):
        assert secret not in text, secret
    redacted = url.replace("AKIA%2Fx", "[redacted]").replace("abc123", "[redacted]")
    assert line["escaped"] == [f"{redacted}\nnext", f"{redacted}\\x"]
    assert line["where"] == (
        '"https://s3.amazonaws.com/b/k?X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted]"'
    )
    assert line["token"] == "k8s-aws-v1.[redacted]"
    assert line["stack_trace"]["value"].startswith('exec plugin said "k8s-aws-v1.[redacted]"')
