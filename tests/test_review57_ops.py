"""Review 57: what tells an operator whether the drainer works (`make logs`)."""

from __future__ import annotations

import io
import json
import threading
import time
from typing import Any

import pytest

from drainer import logs as drainer_logs
from drainer.errors import KubeError
from drainer.k8s.events import EventPoster, Regarding
from drainer.lifecycle import ending
from tools import logs

A, NODE_A = "i-0aaaaaaaaaaaaaaaa", "ip-10-0-1-1.ec2.internal"
B, NODE_B = "i-0bbbbbbbbbbbbbbbb", "ip-10-0-1-2.ec2.internal"


class _SlowKube:
    """An API server that answers the drain's last Event only after the invocation
    has ended, and then refuses it."""

    def __init__(self) -> None:
        self.gate = threading.Event()

    def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.gate.wait(5)
        raise KubeError(f"timed out creating Event {body['metadata']['name']}")

    def close(self) -> None:
        pass


def test_make_logs_instance__late_event_line_shown_under_the_next_drain() -> None:
    """The Events thread of instance A's drain logs after A's invocation returned
    (close() waits FLUSH_SECONDS, then leaves the rest to the thread); in the warm
    container the next invocation, B's, has bound its keys by then, so the line about
    A's node carries B's instance_id and node_name: `make logs INSTANCE=B` shows A's
    line, `INSTANCE=A` hides it."""
    stream = io.StringIO()
    handler = drainer_logs.configure("INFO")
    before = handler.stream
    drainer_logs.configure("INFO", stream=stream)
    kube = _SlowKube()
    try:
        drainer_logs.reset()
        drainer_logs.bind(instance_id=A, node_name=NODE_A, cluster="prod")
        poster = EventPoster(kube)  # type: ignore[arg-type]
        poster.post(Regarding("Node", NODE_A), "Drained", "Drain", "every pod is gone")
        poster.close(timeout=0.05)  # the drain's end: A's invocation returns
        drainer_logs.reset()  # the container's next invocation: B's drain
        drainer_logs.bind(instance_id=B, node_name=NODE_B, cluster="prod")
        kube.gate.set()
        until = time.monotonic() + 5
        while "was not recorded" not in stream.getvalue() and time.monotonic() < until:
            time.sleep(0.01)
    finally:
        drainer_logs.reset()
        handler.setStream(before)
    (line,) = [x for x in stream.getvalue().splitlines() if "was not recorded" in x]

    assert logs.render(line, logs.Options(instance_id=A)) is not None, json.loads(line)
    assert logs.render(line, logs.Options(instance_id=B)) is None


def test_make_logs__the_metrics_line_is_not_printed_as_an_empty_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every drain's end writes its EMF metrics line to the same log; unfiltered
    `make logs` prints it as a line with no time, level, instance, node or message."""
    ending.write_metrics("prod", {"DrainFailed": 1}, 1.5)
    (emf,) = [x for x in capsys.readouterr().out.splitlines() if '"_aws"' in x]

    assert logs.render(emf, logs.Options()) is None
