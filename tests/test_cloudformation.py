"""The answer to CloudFormation's custom resource (drainer/aws/cloudformation.py), PUT
to a local 127.0.0.1 server standing in for the presigned ResponseURL: a PUT that
fails on the way (5xx, the connection reset) is tried again after the shared
back-off's pauses (drainer/backoff.py), an answer that never takes ends after a
bounded number of tries naming the failure, and a refusal no retry changes is not
tried again. The pauses are recorded, never slept."""

from __future__ import annotations

import json
import random
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from drainer.aws.cloudformation import ANSWER_ATTEMPTS, ANSWER_RETRY, answer_custom_resource
from drainer.errors import AwsError

BODY = {"Status": "SUCCESS", "Reason": "hooks in place", "PhysicalResourceId": "hooks"}


@dataclass
class Flaky:
    """Answers each PUT as the script says ("503", "reset", "403", "200"...), its last
    entry for every PUT beyond; keeps the bodies it received."""

    script: list[str]
    url: str = ""
    received: list[dict[str, Any]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    released: threading.Event = field(default_factory=threading.Event)

    def next(self) -> str:
        return self.script[min(len(self.received) - 1, len(self.script) - 1)]


@contextmanager
def flaky_server(*script: str, headers: dict[str, str] | None = None) -> Iterator[Flaky]:
    flaky = Flaky(list(script), headers=headers or {})

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            flaky.received.append(json.loads(self.rfile.read(length)))
            what = flaky.next()
            if what == "silent":  # reads the PUT, never answers (until the test ends)
                flaky.released.wait(10)
                return
            if what == "reset":  # no answer at all: the connection reset (RST)
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()
                self.close_connection = True
                return
            self.send_response(int(what))
            for name, value in flaky.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        flaky.url = (
            f"http://{host!s}:{port}/cloudformation-custom-resource-response/r?X-Amz-Signature=x"
        )
        yield flaky
    finally:
        flaky.released.set()
        server.shutdown()
        server.server_close()


def _answer(flaky: Flaky, pauses: list[float], seed: int = 7) -> None:
    answer_custom_resource(
        flaky.url, BODY, timeout=5.0, sleep=pauses.append, rng=random.Random(seed)
    )


def _expected_pauses(count: int, seed: int = 7, retry_after: float | None = None) -> list[float]:
    rng = random.Random(seed)
    return [ANSWER_RETRY.delay(attempt, rng, retry_after) for attempt in range(count)]


def test_put_failing_then_accepted__answered_after_the_shared_backoffs_pauses() -> None:
    pauses: list[float] = []
    with flaky_server("503", "reset", "500", "200") as flaky:
        _answer(flaky, pauses)

    assert flaky.received == [BODY] * 4  # the same answer each time, the last one taken
    assert pauses == _expected_pauses(3)
    # Growing, within the policy's bounds: [first/2, first], [2 first/2, 2 first]...
    for attempt, pause in enumerate(pauses):
        assert ANSWER_RETRY.base(attempt) / 2 <= pause <= ANSWER_RETRY.base(attempt)


def test_put_never_accepted__ends_after_bounded_tries_naming_the_failure() -> None:
    pauses: list[float] = []
    with flaky_server("503") as flaky, pytest.raises(AwsError) as raised:
        _answer(flaky, pauses)

    assert len(flaky.received) == ANSWER_ATTEMPTS
    assert len(pauses) == ANSWER_ATTEMPTS - 1
    assert sum(pauses) <= sum(ANSWER_RETRY.base(a) for a in range(ANSWER_ATTEMPTS - 1)) <= 30
    message = str(raised.value)
    assert f"could not answer CloudFormation at its ResponseURL ({ANSWER_ATTEMPTS} tries)" in (
        message
    )
    assert "HTTP 503" in message


def test_connection_always_reset__ends_naming_the_reset() -> None:
    pauses: list[float] = []
    with flaky_server("reset") as flaky, pytest.raises(AwsError) as raised:
        _answer(flaky, pauses)

    assert len(flaky.received) == ANSWER_ATTEMPTS
    assert "Connection" in str(raised.value) or "Remote" in str(raised.value)


def test_signature_refused__not_tried_again() -> None:
    pauses: list[float] = []
    with flaky_server("403") as flaky, pytest.raises(AwsError) as raised:
        _answer(flaky, pauses)

    assert len(flaky.received) == 1
    assert pauses == []
    assert "(1 try): HTTP 403" in str(raised.value)


def test_throttled_with_retry_after__waits_at_least_that_long() -> None:
    pauses: list[float] = []
    with flaky_server("503", "200", headers={"Retry-After": "6"}) as flaky:
        _answer(flaky, pauses)

    assert len(flaky.received) == 2
    assert pauses == _expected_pauses(1, retry_after=6.0)
    assert pauses[0] >= 6.0


def test_put_never_answered__each_try_under_its_timeout__ends_naming_it() -> None:
    pauses: list[float] = []
    with flaky_server("silent") as flaky, pytest.raises(AwsError) as raised:
        answer_custom_resource(
            flaky.url, BODY, timeout=0.05, sleep=pauses.append, rng=random.Random(7)
        )

    assert f"({ANSWER_ATTEMPTS} tries)" in str(raised.value)
    assert "timed out" in str(raised.value)
    assert pauses == _expected_pauses(ANSWER_ATTEMPTS - 1)
