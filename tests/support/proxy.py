"""Proxies for the tests, on 127.0.0.1: an HTTP CONNECT proxy (`ConnectProxy`) and a
SOCKS5 one (`Socks5Proxy`), each the only one that resolves the names in its `hosts`
(so a connection that does not go through it fails), each recording what it was
asked. tests/test_proxy.py drives the drainer's transport through them;
tests/e2e/test_kubectl_table.py drives kubectl and the CLI."""

from __future__ import annotations

import base64
import http.client
import http.server
import select
import socket
import socketserver
import ssl
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class ConnectProxy:
    """An HTTP proxy on 127.0.0.1 (CONNECT, and absolute-form requests for http
    servers) that alone resolves the names in `hosts`, and records what it was asked."""

    hosts: Mapping[str, str]
    credentials: str = ""
    """user:password it demands (407 without them)."""
    refuse: int = 0
    """A status it answers every CONNECT with (403: not on its allow-list)."""
    tls: ssl.SSLContext | None = None
    """Spoken to over TLS (an https:// proxy URL) with this server context."""
    asked: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    url: str = ""

    def __enter__(self) -> ConnectProxy:
        proxy = self

        class Handler(_Handler):
            owner = proxy

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if self.tls is not None:
            self._server.socket = self.tls.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        scheme = "https" if self.tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self._server.server_address[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def connects(self) -> list[str]:
        """The host:port of every CONNECT it was asked, in order."""
        return [target for method, target, _ in self.asked if method == "CONNECT"]


def _pipe(one: socket.socket, other: socket.socket) -> None:
    """Copy bytes both ways until either end closes, resets or breaks the connection
    (a client ending its tunnel: not the test's failure, nor a traceback in its
    output), or 30 s of silence."""
    ends = [one, other]
    while True:
        readable, _, _ = select.select(ends, [], [], 30)
        for end in readable:
            try:
                data = end.recv(65536)
                if not data:
                    return
                (other if end is one else one).sendall(data)
            except ConnectionError:
                return
        if not readable:
            return


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: ConnectProxy

    def _admitted(self) -> bool:
        owner = self.owner
        owner.asked.append((self.command, self.path, dict(self.headers)))
        wanted = "Basic " + base64.b64encode(owner.credentials.encode()).decode()
        if owner.refuse or (
            owner.credentials and self.headers.get("Proxy-Authorization") != wanted
        ):
            self.send_response(owner.refuse or 407)
            self.send_header("Proxy-Authenticate", 'Basic realm="test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return False
        return True

    def do_CONNECT(self) -> None:
        if not self._admitted():
            return
        host, _, port = self.path.rpartition(":")
        upstream = socket.create_connection((self.owner.hosts[host], int(port)), timeout=10)
        self.send_response(200)
        self.end_headers()
        self.close_connection = True
        try:
            _pipe(self.connection, upstream)
        finally:
            upstream.close()

    def do_GET(self) -> None:  # absolute form: http://host:port/path
        if not self._admitted():
            return
        host, _, rest = self.path.removeprefix("http://").partition("/")
        name, _, port = host.rpartition(":")
        upstream = http.client.HTTPConnection(self.owner.hosts[name], int(port), timeout=10)
        upstream.request("GET", "/" + rest)
        answer = upstream.getresponse()
        body = answer.read()
        self.send_response(answer.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@dataclass
class Socks5Proxy:
    """A SOCKS5 proxy on 127.0.0.1 (no authentication, CONNECT only, RFC 1928) that
    alone resolves the names in `hosts`; `asked`: the host:port of every CONNECT."""

    hosts: Mapping[str, str]
    asked: list[str] = field(default_factory=list)
    url: str = ""

    def __enter__(self) -> Socks5Proxy:
        proxy = self

        class Handler(_SocksHandler):
            owner = proxy

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"socks5://127.0.0.1:{self._server.server_address[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class _SocksHandler(socketserver.BaseRequestHandler):
    owner: Socks5Proxy

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            more = self.request.recv(n - len(data))
            if not more:
                raise ConnectionError("the client closed the connection")
            data += more
        return data

    def handle(self) -> None:
        _, methods = self._read(2)
        self._read(methods)
        self.request.sendall(b"\x05\x00")  # no authentication
        _, command, _, kind = self._read(4)
        if kind == 1:
            host = socket.inet_ntoa(self._read(4))
        elif kind == 3:
            host = self._read(self._read(1)[0]).decode()
        else:
            host = socket.inet_ntop(socket.AF_INET6, self._read(16))
        (port,) = struct.unpack("!H", self._read(2))
        self.owner.asked.append(f"{host}:{port}")
        address = self.owner.hosts.get(host)
        if command != 1 or address is None:  # CONNECT only; a name it does not know
            self.request.sendall(b"\x05\x04\x00\x01" + bytes(6))  # host unreachable
            return
        upstream = socket.create_connection((address, port), timeout=10)
        self.request.sendall(b"\x05\x00\x00\x01" + bytes(6))
        try:
            _pipe(self.request, upstream)
        finally:
            upstream.close()
