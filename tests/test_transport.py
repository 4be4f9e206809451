"""drainer/k8s/transport.py: the pool of kept connections under the client. A
connection goes back to the pool only when its answer was read to the end, and a
stream another thread ends is ended even when its answer took the socket
(`Connection: close`)."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import socket
import socketserver
import ssl
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator

import pytest
from support.sims import sim_with_a_node  # noqa: F401  (the fixture `sim`)

from drainer.errors import KubeServerError, KubeTimedOut
from drainer.k8s.client import RetryPolicy
from drainer.k8s.deadline import AnswerTooLarge, DeadlineExceeded
from drainer.k8s.kube import Kube
from drainer.k8s.transport import ERRORS, BadHeader, Endpoint, Transport
from kubesim import KubeSim

NODES = "/api/v1/nodes"


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


# -- deadlines and bounds: a slow or huge answer ends, with a clear error ---------------


class _Scripted(socketserver.BaseRequestHandler):
    """A server that writes what its test scripts (`self.server.script`), however
    slowly; it reads the request first."""

    def handle(self) -> None:
        self.request.recv(65536)
        with contextlib.suppress(OSError):  # the client gave up: what the test wants
            self.server.script(self.request)  # type: ignore[attr-defined]


@contextlib.contextmanager
def _serving(script: Callable[[socket.socket], None]) -> Iterator[Transport]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Scripted)
    server.daemon_threads = True
    server.script = script  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Transport(Endpoint(f"http://127.0.0.1:{server.server_address[1]}"))
    finally:
        server.shutdown()
        server.server_close()


def _drip(head: bytes, every: float, until: float = 5.0) -> Callable[[socket.socket], None]:
    """A slow loris: `head` at once, then one byte every `every` seconds until
    `until`; then silence, the connection open."""

    def script(sock: socket.socket) -> None:
        sock.sendall(head)
        end = time.monotonic() + until
        while time.monotonic() < end:
            time.sleep(every)
            sock.sendall(b"x")
        sock.recv(1)  # until the client hangs up

    return script


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\n",  # one header line, then a header byte at a time
        b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n",  # then a body byte at a time
    ],
    ids=["headers", "body"],
)
def test_slow_loris__the_request_ends_at_its_whole_deadline__says_so(head: bytes) -> None:
    with _serving(_drip(head, every=0.2)) as transport:
        began = time.monotonic()

        with pytest.raises(DeadlineExceeded) as raised:
            transport.send("GET", "/api/v1/nodes/n1", timeout=0.5).read()

        took = time.monotonic() - began
    assert took < 0.5 + 0.5, f"ended after {took:.2f} s"  # not at the 5 s the drip lasts
    assert "no whole answer from the API server within the request's 0.5 s deadline" in str(
        raised.value
    )


def test_slow_loris__kube_says_the_request_timed_out_at_its_deadline__not_retried() -> None:
    # As kubectl's --request-timeout: the call ends by its deadline, its retries
    # included; the caller, who knows its own deadline, decides what comes next.
    with _serving(_drip(b"HTTP/1.1 200 OK\r\n", every=0.2)) as transport:
        kube = Kube(transport, None, request_timeout=0.5)  # 6 attempts for what is retried
        began = time.monotonic()

        with pytest.raises(KubeTimedOut) as raised:
            kube.get_node("n1")

        took = time.monotonic() - began
    assert took < 0.5 + 0.5, f"ended after {took:.2f} s"
    assert isinstance(raised.value, KubeServerError), "the runner still starts a job again"
    assert str(raised.value) == (
        "get node n1: no whole answer from the API server within the request's 0.5 s deadline"
    )


def test_stream__alive_past_the_request_deadline_while_bytes_come__ends_when_idle() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"
    with _serving(_drip(head, every=0.1, until=1.0)) as transport:
        stream = transport.send("GET", "/watch", timeout=0.3, idle=0.6)
        began = time.monotonic()
        got = b""

        with pytest.raises(DeadlineExceeded, match=r"nothing from the API server for 0\.6 s"):
            for chunk in stream.stream():
                got += chunk

        took = time.monotonic() - began
    assert took > 1.0, "the stream outlived the request's 0.3 s deadline while bytes came"
    assert len(got) >= 5
    assert took < 1.0 + 0.6 + 0.5, f"ended {took:.2f} s after it began"


LIMIT = 8 << 20


def _huge(chunked: bool) -> Callable[[socket.socket], None]:
    """An answer of 1 GiB, made as it is written (never held)."""

    def script(sock: socket.socket) -> None:
        if chunked:
            sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        else:
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (1 << 30))
        piece = b"x" * 65536
        for _ in range((1 << 30) // len(piece)):
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)

    return script


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
def test_huge_answer__cut_at_the_size_limit__memory_stays_bounded(chunked: bool) -> None:
    with _serving(_huge(chunked)) as transport:
        transport.answer_limit = LIMIT
        tracemalloc.start()
        try:
            with pytest.raises(AnswerTooLarge) as raised:
                transport.send("GET", "/api/v1/pods", timeout=10.0).read()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

    assert "larger than the 8 MiB limit on an answer" in str(raised.value)
    assert peak < 2 * LIMIT, f"{peak / 2**20:.0f} MiB held"


def test_watch_line_without_end__cut_at_the_size_limit__memory_stays_bounded() -> None:
    def endless_line(sock: socket.socket) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        piece = b"x" * 65536
        for _ in range((1 << 30) // len(piece)):
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))

    with _serving(endless_line) as transport:
        transport.answer_limit = LIMIT
        kube = Kube(transport, None, retry=RetryPolicy(attempts=1))
        tracemalloc.start()
        try:
            with pytest.raises(KubeServerError) as raised:
                list(kube.watch(NODES, resource_version="1", resource="nodes"))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

    assert "watch nodes: stream broken: " in str(raised.value)
    assert "larger than the 8 MiB limit on an answer" in str(raised.value)
    assert peak < 3 * LIMIT, f"{peak / 2**20:.0f} MiB held"


# A TLS handshake and a proxy's answer to CONNECT come before the request is sent:
# they are under the same whole deadline, so a server or proxy that trickles them
# cannot hold a call past it, nor have it retried as an unreachable server.


def _https(port: int, environ: dict[str, str] | None = None) -> Transport:
    # No TLS is ever finished here: any CA will do, the system's.
    return Transport(Endpoint(f"https://kube.test:{port}"), environ=environ or {})


@contextlib.contextmanager
def _dripping(head: bytes) -> Iterator[int]:
    """A server that reads what the client sends first (a ClientHello, a CONNECT),
    then answers `head` and a byte every 0.2 s: its port."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Scripted)
    server.daemon_threads = True
    server.script = _drip(head, every=0.2)  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


TLS_RECORD_HEAD = b"\x16\x03\x03\x40\x00"  # a handshake record of 16 KiB, never all sent


def test_tls_handshake_trickled__kube_ends_at_the_request_deadline__not_retried() -> None:
    with _dripping(TLS_RECORD_HEAD) as port:
        transport = Transport(Endpoint(f"https://127.0.0.1:{port}"), environ={})
        kube = Kube(transport, None, request_timeout=0.5)
        began = time.monotonic()

        with pytest.raises(KubeTimedOut, match=r"within the request's 0\.5 s deadline"):
            kube.get_node("n1")

        took = time.monotonic() - began
    assert took < 0.5 + 0.5, f"ended after {took:.2f} s"


def test_proxy_trickles_its_connect_answer__the_request_ends_at_its_deadline() -> None:
    with _dripping(b"HTTP/1.1 200 Connection established\r\n") as port:
        transport = _https(443, {"HTTPS_PROXY": f"http://127.0.0.1:{port}"})
        began = time.monotonic()

        with pytest.raises(DeadlineExceeded, match=r"within the request's 0\.5 s deadline"):
            transport.send("GET", "/api/v1/nodes/n1", timeout=0.5)

        took = time.monotonic() - began
    assert took < 0.5 + 0.5, f"ended after {took:.2f} s"


# -- the request and the answer's head, as the transport writes and reads them --------


class _Recording(socketserver.BaseRequestHandler):
    """A server that keeps each request's bytes (`self.server.seen`) and answers
    each with the scripted bytes in turn (`self.server.answers`), on one connection."""

    def handle(self) -> None:
        server = self.server
        for answer in server.answers:  # type: ignore[attr-defined]
            got = b""
            while b"\r\n\r\n" not in got:
                piece = self.request.recv(65536)
                if not piece:
                    return
                got += piece
            head, _, body = got.partition(b"\r\n\r\n")
            length = int(dict(
                line.split(b": ", 1) for line in head.split(b"\r\n")[1:]
            ).get(b"Content-Length", b"0"))  # fmt: skip
            while len(body) < length:
                body += self.request.recv(65536)
            server.seen.append(head + b"\r\n\r\n" + body)  # type: ignore[attr-defined]
            self.request.sendall(answer)


@contextlib.contextmanager
def _recording(
    *answers: bytes, impersonate: tuple[tuple[str, str], ...] = ()
) -> Iterator[tuple[Transport, list[bytes]]]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Recording)
    server.daemon_threads = True
    server.answers = answers  # type: ignore[attr-defined]
    server.seen = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        endpoint = Endpoint(f"http://127.0.0.1:{port}/prefix", impersonate=impersonate)
        yield Transport(endpoint), server.seen  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


OK_BODY = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def test_request__host_length_and_headers_in_one_request__connection_kept() -> None:
    with _recording(OK_BODY, OK_BODY) as (transport, seen):
        first = transport.send("POST", "/api/v1/x", body={"a": 1}, bearer="tok", timeout=5)
        assert (first.status, first.read()) == (200, b"{}")
        second = transport.send("GET", "/api/v1/y", query=[("a", "b c")], timeout=5)
        assert second.read() == b"{}"
        port = transport.server.rsplit(":", 1)[1].split("/")[0]

    head, _, body = seen[0].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /prefix/api/v1/x HTTP/1.1"
    assert f"Host: 127.0.0.1:{port}" in lines
    assert "Authorization: Bearer tok" in lines
    assert "Content-Length: 7" in lines and body == b'{"a":1}'  # compact: drainer/jsonio.py
    assert seen[1].split(b"\r\n")[0] == b"GET /prefix/api/v1/y?a=b+c HTTP/1.1"
    assert len(seen) == 2, "both requests on the one kept connection"


def test_plain_http__each_new_connection_without_a_tls_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An http server (kubectl proxy's, an emulator's): http.client's HTTPS connection
    would make a default TLS context for each connection object the pool makes,
    reading the system's CA bundle (about 10 ms of CPU each) for a socket that never
    speaks TLS."""
    closing = OK_BODY.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
    with _recording(closing, closing, closing) as (transport, seen):

        def refused(*args: object, **kwargs: object) -> ssl.SSLContext:
            raise AssertionError("a TLS context made for a plain http connection")

        monkeypatch.setattr(ssl, "_create_default_https_context", refused)
        monkeypatch.setattr(ssl, "create_default_context", refused)
        answers = [transport.send("GET", f"/api/v1/{n}", timeout=5).read() for n in range(3)]

    assert answers == [b"{}"] * 3
    assert len(seen) == 3


@pytest.mark.parametrize(
    "bearer", ["tok\r\nX-Evil: 1", "tok\nX-Evil: 1", "tok\x00"], ids=["crlf", "lf", "nul"]
)
def test_request__a_credential_with_a_line_break__refused_before_anything_is_sent(
    bearer: str,
) -> None:
    refused = pytest.raises(BadHeader, match="'Authorization' header has a line break")
    with _recording(OK_BODY) as (transport, seen), refused:
        transport.send("GET", "/api/v1/nodes", bearer=bearer, timeout=5)
    assert seen == []


def test_request__a_target_with_a_space_or_line_break__refused() -> None:
    with _recording(OK_BODY) as (transport, seen), pytest.raises(http.client.InvalidURL):
        transport.send("GET", "/api/v1/nodes/a b\r\nX: y", timeout=5)
    assert seen == []


@pytest.mark.parametrize(
    ("answer", "status", "headers", "body"),
    [
        (b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", 200, {"Content-Length": "2"}, b"ok"),
        (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\nok",
            201,
            {"Content-Length": "2"},
            b"ok",
        ),
        (
            b"HTTP/1.1 200 OK\r\nX-Long: a\r\n b\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"2\r\nok\r\n0\r\n\r\n",
            200,
            {"X-Long": "a b", "Transfer-Encoding": "chunked"},
            b"ok",
        ),
        (b"HTTP/1.1  200 OK\r\nContent-Length: 2\r\n\r\nok", 200, {}, b"ok"),
    ],
    ids=["no-reason", "interim-100", "folded-chunked", "two-spaces"],
)
def test_answer_head__status_headers_and_body_read(
    answer: bytes, status: int, headers: dict[str, str], body: bytes
) -> None:
    with _recording(answer) as (transport, _):
        response = transport.send("GET", "/x", timeout=5)
        assert response.status == status
        assert headers.items() <= dict(response.headers).items()
        assert response.read() == body


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\n\r\nok",  # no length: the body ends with the connection
    ],
    ids=["close", "http-1.0", "no-length"],
)
def test_answer_head__a_closing_answer__its_socket_not_reused(answer: bytes) -> None:
    def script(sock: socket.socket) -> None:  # one answer per connection, then closed
        sock.sendall(answer)
        sock.close()

    with _serving(script) as transport:
        assert transport.send("GET", "/x", timeout=5).read() == b"ok"
        assert transport.send("GET", "/x", timeout=5).read() == b"ok", "a new connection"


@pytest.mark.parametrize(
    "answer",
    [
        b"",
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        "HTTP/1.1 2\u00b20 OK\r\n\r\n".encode("latin-1"),
        b"HTTP/1.1 099 Low\r\n\r\n",
    ],
    ids=["nothing", "not-http", "bad-code", "not-ascii-digit", "below-100"],
)
def test_answer_head__no_answer_or_not_http__an_error_the_client_retries(answer: bytes) -> None:
    def script(sock: socket.socket) -> None:
        sock.sendall(answer)
        sock.close()

    with _serving(script) as transport, pytest.raises(ERRORS):
        transport.send("GET", "/x", timeout=5)


def test_answer_head__more_than_100_headers__refused() -> None:
    many = b"".join(b"X-%d: v\r\n" % i for i in range(101))
    refused = pytest.raises(http.client.HTTPException, match="more than 100 headers")
    with (
        _serving(lambda sock: sock.sendall(b"HTTP/1.1 200 OK\r\n" + many + b"\r\n")) as transport,
        refused,
    ):
        transport.send("GET", "/x", timeout=5)


def test_answer_head__folded_lines_count_against_the_header_limit() -> None:
    # A server that folds one header without end must not make a huge header out of it.
    folds = b"".join(b" " + b"b" * 1000 + b"\r\n" for _ in range(200))
    answer = b"HTTP/1.1 200 OK\r\nX-A: a\r\n" + folds + b"\r\n"
    refused = pytest.raises(http.client.HTTPException, match="more than 100 headers")
    with _serving(lambda sock: sock.sendall(answer)) as transport, refused:
        transport.send("GET", "/x", timeout=5)


@pytest.mark.parametrize(
    ("server", "host"),
    [
        ("https://[::1]:6443/prefix", "[::1]:6443"),
        ("https://API.example.com", "api.example.com"),
        ("https://b\u00fccher.example:6443", "xn--bcher-kva.example:6443"),
    ],
    ids=["ipv6", "no-port", "idna"],
)
def test_request__host_header_of_the_server_url(server: str, host: str) -> None:
    assert Transport(Endpoint(server))._netloc == host


@pytest.mark.parametrize(
    "server", ["https://a b:6443", "https://h\x00st:6443", "https://a..b\u00fc.example"]
)
def test_request__a_server_url_no_host_header_may_carry__refused_before_any_request(
    server: str,
) -> None:
    with pytest.raises(ValueError, match="host name"):
        Transport(Endpoint(server))


class _CountingSocket(socket.socket):
    """A real socket that counts its settimeout calls (each a system call that lets go
    of the GIL)."""

    sets = 0

    def settimeout(self, value: float | None) -> None:
        self.sets += 1
        super().settimeout(value)


def test_bound__a_timeout_set_moments_ago_kept__a_longer_or_shorter_one_set() -> None:
    from drainer.k8s.deadline import TIMEOUT_SLACK, bound

    a, b = socket.socketpair()
    sock = _CountingSocket(fileno=a.detach())
    with sock, b:
        bound(sock, 5.0)
        bound(sock, 5.0 - TIMEOUT_SLACK / 2)  # the same deadline, a moment later
        assert (sock.sets, sock.gettimeout()) == (1, 5.0)
        bound(sock, 5.0 - TIMEOUT_SLACK * 2)  # would overrun by more than the slack
        assert (sock.sets, sock.gettimeout()) == (2, 5.0 - TIMEOUT_SLACK * 2)
        bound(sock, 10.0)  # a new request's longer deadline: never cut short
        assert (sock.sets, sock.gettimeout()) == (3, 10.0)
        sock.settimeout(None)
        bound(sock, 1.0)  # a blocking socket gets its bound
        assert sock.gettimeout() == 1.0


def test_answer_read_in_many_chunks__one_timeout_set_per_request() -> None:
    """A 64 KiB answer read chunk by chunk under one deadline: the socket's timeout is
    set when the request goes, not again for each read."""
    body = b"x" * 65536
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)

    def script(sock: socket.socket) -> None:
        for offset in range(0, len(answer + body), 4096):
            sock.sendall((answer + body)[offset : offset + 4096])
        sock.recv(1)

    counted: list[_CountingSocket] = []
    real = socket.create_connection

    def connect(*args: object, **kwargs: object) -> socket.socket:
        plain = real(*args, **kwargs)  # type: ignore[arg-type]
        counting = _CountingSocket(plain.family, plain.type, fileno=plain.detach())
        counted.append(counting)
        return counting

    with _serving(script) as transport, pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket, "create_connection", connect)
        assert transport.send("GET", "/api/v1/nodes/n1", timeout=5.0).read() == body
    assert len(counted) == 1 and counted[0].sets <= 2, counted[0].sets
