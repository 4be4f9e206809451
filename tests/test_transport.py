"""drainer/k8s/transport.py: the pool of kept connections under the client. A
connection goes back to the pool only when its answer was read to the end, and a
stream another thread ends is ended even when its answer took the socket
(`Connection: close`)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from drainer.k8s.transport import ERRORS, Endpoint, Transport
from kubesim import KubeSim

NODES = "/api/v1/nodes"


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim() as running:
        running.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        yield running


def _transport(sim: KubeSim) -> Transport:
    return Transport(Endpoint(sim.url, ca_pem=sim.ca_pem.decode()))


def test_a_stream_closed_unread__its_connection_not_reused__the_next_answer_is_whole(
    sim: KubeSim,
) -> None:
    transport = _transport(sim)
    watch = transport.send(
        "GET", NODES, query=[("watch", "true")], bearer=sim.admin_token, timeout=(5.0, 30.0)
    )
    sim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}})
    first = next(watch.stream(64))  # the rest of the event waits unread on the socket
    assert first

    watch.close()
    answer = transport.send("GET", f"{NODES}/n1", bearer=sim.admin_token, timeout=5.0)

    assert answer.status == 200
    assert b'"name":"n1"' in answer.read().replace(b" ", b"")


class _EndlessStream(http.server.BaseHTTPRequestHandler):
    """A watch whose answer says `Connection: close` and never ends."""

    protocol_version = "HTTP/1.1"

    done = threading.Event()

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        line = b'{"type":"BOOKMARK","object":{}}\n'
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.flush()
        self.done.wait(30)  # nothing more until the test ends: the reader blocks

    def log_message(self, *args: object) -> None:
        pass


def test_shutdown__ends_a_blocked_stream_whose_answer_took_the_socket() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EndlessStream)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        transport = Transport(Endpoint(f"http://127.0.0.1:{server.server_address[1]}"))
        stream = transport.send("GET", "/watch", timeout=(5.0, 60.0))
        chunks = stream.stream()
        assert next(chunks).startswith(b'{"type":"BOOKMARK"')
        ended = threading.Event()

        def read_on() -> None:
            try:
                for _ in chunks:
                    pass
            except ERRORS:
                pass
            ended.set()

        threading.Thread(target=read_on, daemon=True).start()
        assert not ended.wait(0.3), "the stream is still open"

        stream.shutdown()

        assert ended.wait(5), "shutdown() did not end the blocked read"
        stream.release_conn()
        assert transport._idle.empty(), "a shut stream's connection went back to the pool"
    finally:
        _EndlessStream.done.set()
        server.shutdown()
        server.server_close()
