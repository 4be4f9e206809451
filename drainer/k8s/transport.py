"""The wire under drainer.k8s.kube: the standard library's http.client over a pool
of kept connections per API server (its connection and its reading of a body; each
request is written in one piece here, and an answer's status line and headers are
read by drainer/k8s/deadline.py, not by the email package, which cost about a quarter
of the CPU of each request), TLS always verified against the cluster's CA,
no retries of its own (the caller's are the only ones), and no third-party HTTP
library: importing urllib3 alone costs the CLI about 0.09 s before its first
request, and the kubernetes package a quarter of a second more (issue 28). The
drainer sends plain JSON and reads JSON, whole or as a watch's stream of lines.

A kubeconfig's user may still need the kubernetes package to load (an
auth-provider, or an exec plugin that gives a client certificate); its answer is
then turned into an Endpoint like any other (drainer/k8s/kubeconfig.py).

A proxy is chosen as kubectl chooses it (the cluster's proxy-url, else HTTPS_PROXY,
HTTP_PROXY and NO_PROXY): drainer/k8s/proxy.py.
"""

from __future__ import annotations

import contextlib
import http.client
import math
import os
import queue
import re
import select
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

from drainer import jsonio
from drainer.k8s import proxy as proxies
from drainer.k8s.deadline import (
    ANSWER_LIMIT_BYTES,
    DeadlineExceeded,
    TimedResponse,
    Timing,
    bound,
    read_capped,
)
from drainer.k8s.impersonation import Headers

_UNSAFE = re.compile(r"[\x00-\x20\x7f]")
"""What may not be in a request's target (a space would end it; a line break would
start a header)."""
_BREAK = re.compile(r"[\r\n\x00]")

ERRORS = (OSError, http.client.HTTPException)
"""What a request can raise on the wire: no connection, TLS, a timeout, a
connection cut mid-answer."""


class BadHeader(http.client.HTTPException):
    """A header value no HTTP request may carry (a line break or NUL: a kubeconfig
    token ending in a newline): refused before anything is sent, as Go's net/http
    refuses it ("invalid header field value")."""


class Unreachable(ConnectionError):
    """The connection to the API server could not be made; says where."""

    def __init__(self, where: str, error: OSError) -> None:
        if error.errno is None:  # a timeout
            super().__init__(f"{error} ({where})")
        else:
            super().__init__(error.errno, f"{error.strerror or error} ({where})")
        self.where = where
        self.error = error


class CertificateSource(Protocol):
    def current(self) -> tuple[int, str, str]:
        """(version, certificate file, key file): the version changes with each renewal."""
        ...


@dataclass(frozen=True)
class Endpoint:
    """Where an API server is and how to trust and reach it."""

    server: str
    """https://host[:port][/prefix]"""
    ca_pem: str = ""
    """The cluster CA (PEM); or `ca_file`."""
    ca_file: str = ""
    cert_file: str = ""
    """A client certificate (a kubeconfig's client-certificate), with `key_file`."""
    key_file: str = ""
    authorization: str = ""
    """The Authorization header of a kubeconfig's static credentials ("Bearer ..."),
    sent when the request brings no token of its own."""
    tls_server_name: str = ""
    """The name the server's certificate is checked against, when not the host's."""
    impersonate: tuple[tuple[str, str], ...] = ()
    """Impersonate-* headers sent with every request (drainer/k8s/impersonation.py)."""
    proxy_url: str = ""
    """The kubeconfig cluster's proxy-url, used for every request (as kubectl does);
    without it, the environment's proxy (drainer/k8s/proxy.py)."""
    certificate: CertificateSource | None = None
    """A client certificate that is renewed (an exec plugin's): its current files,
    presented on the connections made after each renewal."""

    def __repr__(self) -> str:  # never the credentials
        return f"Endpoint(server={self.server!r})"


class _Connection(http.client.HTTPSConnection):
    """One kept connection; TLS checked against `server_name` when the kubeconfig
    names one (tls-server-name), else against the host. Through a proxy: TCP to the
    proxy, then (https) a CONNECT tunnel to host:port and TLS inside it."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext | None,
                 server_name: str, connect_timeout: float, *,
                 proxy: proxies.Proxy | None = None) -> None:  # fmt: skip
        via = (proxy.host, proxy.port) if proxy is not None else (host, port)
        if context is None:  # http: HTTPSConnection would read the CA bundle for nothing
            http.client.HTTPConnection.__init__(self, *via, timeout=connect_timeout)
        else:
            super().__init__(*via, timeout=connect_timeout, context=context)
        self.tls = context
        self._server_name = server_name or host
        self._proxy = proxy
        self._target = (host, port)
        self.timing = Timing()  # the deadline of the request under way, for every read

    def connect(self) -> None:
        where = f"{self.host}:{self.port}"
        if self._proxy is not None:
            where = f"{self._target[0]}:{self._target[1]} through the {self._proxy.named}"
        try:
            http.client.HTTPConnection.connect(self)  # TCP
            self._bounded()
            if self._proxy is not None and self.tls is not None:
                proxies.tunnel(self.sock, self._proxy, *self._target, timing=self.timing)
        except (proxies.ProxyRefused, DeadlineExceeded):
            self.close()
            raise
        except OSError as e:
            self.close()
            raise Unreachable(where, e) from e
        if self.tls is not None:
            try:
                self._bounded()
                self.sock = self.tls.wrap_socket(self.sock, server_hostname=self._server_name)
            except TimeoutError:
                self.close()
                self.timing.left()  # DeadlineExceeded, when it was the request's deadline
                raise

    def exchange(self, method: str, target: str, host: str,
                 headers: Mapping[str, str], body: bytes | None,
                 ) -> tuple[TimedResponse, socket.socket]:  # fmt: skip
        """Send one request (connecting first when not connected) and read its answer's
        status and headers: the request in one write, as http.client would send it
        (Host, Accept-Encoding: identity, Content-Length with a body or for a method
        that carries one), each value checked for line breaks first."""
        if _UNSAFE.search(target):
            raise http.client.InvalidURL(f"a request target with a control character: {target!r}")
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Accept-Encoding: identity"]
        for name, value in headers.items():
            if _BREAK.search(name) or _BREAK.search(value):
                raise BadHeader(f"the {name!r} header has a line break or NUL in it")
            lines.append(f"{name}: {value}")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        # UTF-8, as Go writes a header's value: `--as josé` is the name RBAC binds
        message = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + (body or b"")
        if self.sock is None:
            self.connect()
        elif (left := self.timing.left()) is not None:
            bound(self.sock, left)
        else:
            self.sock.settimeout(None)
        sock = cast(socket.socket, self.sock)
        sock.sendall(message)
        answer = TimedResponse(sock, method=method, timing=self.timing)
        try:
            answer.begin()
        except BaseException:
            answer.close()
            raise
        if answer.will_close:
            self.close()  # the answer keeps the socket open until it is read
        return answer, sock

    def _bounded(self) -> None:
        """The socket's timeout cut to what the request has left: the tunnel's answer
        and the TLS handshake (one timeout for the whole of it) end by its deadline."""
        left = self.timing.left()  # DeadlineExceeded once it has passed
        if left is not None and self.sock is not None and left < (self.timeout or math.inf):
            self.sock.settimeout(left)

    def dropped(self) -> bool:
        """The server closed this idle connection (or sent what nobody asked for)."""
        sock = self.sock
        if sock is None:
            return False  # reconnects on its next request
        poll = select.poll()
        poll.register(sock, select.POLLIN)
        try:
            return bool(poll.poll(0))
        except OSError:
            return True


class Response:
    """An answer, its body unread: `read()` it whole (the connection goes back to the
    pool), or `stream()` it and `release_conn()` at the end. Only a connection whose
    answer was read to its end, and not shut down, goes back to the pool."""

    def __init__(self, raw: http.client.HTTPResponse, connection: _Connection,
                 sock: socket.socket | None, transport: Transport) -> None:  # fmt: skip
        self._raw = raw
        self._connection: _Connection | None = connection
        # The answer's own socket: an answer that says `Connection: close` takes it
        # from its connection (whose sock is then None), and shutdown() still ends it.
        self._sock = sock
        self._transport = transport
        self._lock = threading.Lock()
        self._complete = False
        self._shut = False
        self.status = raw.status
        self.headers: Mapping[str, str] = {k.title(): v for k, v in raw.getheaders()}
        """Each name in Title-Case ("Retry-After"), whatever case the server wrote."""

    def read(self) -> bytes:
        """The whole body; AnswerTooLarge past the transport's `answer_limit`."""
        try:
            data = read_capped(self._raw, self._transport.answer_limit)
            self._complete = True
        finally:
            self.release_conn()
        return data

    def stream(self, amount: int = 16384) -> Iterator[bytes]:
        """The body as it arrives (chunked or not), until the server ends it."""
        while True:
            chunk = self._raw.read1(amount)
            if not chunk:
                self._complete = True
                return
            yield chunk

    def release_conn(self) -> None:
        """Back to the pool when the answer was read to its end; else closed."""
        with self._lock:
            connection, self._connection = self._connection, None
            reuse = self._complete and not self._shut
        if connection is None:
            return
        if reuse and self._raw.isclosed():
            self._transport.put_back(connection)
        else:
            self._raw.close()
            connection.close()

    def shutdown(self) -> None:
        """End a stream another thread is reading (a watch this client stops). Once
        released, the connection may be another request's: it is left alone."""
        with self._lock:
            if self._connection is None:
                return
            self._shut = True  # never pooled again
            sock = self._sock
        if sock is not None:
            # The plain socket's shutdown, not SSLSocket's (which drops its TLS state
            # under a reader): the reader sees the end of the stream.
            with contextlib.suppress(OSError):  # already closed
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def close(self) -> None:
        self.release_conn()


def _host_header(url: urllib.parse.SplitResult) -> str:
    """The Host header of a server's URL: its name (IDNA, when not ASCII), bracketed
    when an IPv6 address, and its port when it names one. ValueError for a name no
    header may carry (a space or a control character; a name IDNA refuses)."""
    host = url.hostname or ""
    if _UNSAFE.search(host):
        raise ValueError(f"{url.geturl()!r}: a space or control character in the host name")
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError as e:
            raise ValueError(f"{url.geturl()!r}: not a valid host name ({e})") from e
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{url.port}" if url.port else host


def _readable(*files: tuple[str, str]) -> None:
    """Each (kubeconfig field, file) it names readable; else an OSError naming both,
    as kubectl names them (the ssl module's own error names no file)."""
    for field, path in files:
        if not path:
            continue
        try:
            with open(path, "rb"):
                pass
        except OSError as e:
            raise OSError(e.errno, f"unable to read {field} {path}: {e.strerror}") from e


class Transport:
    """Requests to one API server over a pool of up to `pool_size` kept connections
    (more are opened when more requests are in flight, and closed after)."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        pool_size: int = 32,
        user_agent: str = "",
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """`environ`: where HTTPS_PROXY, HTTP_PROXY and NO_PROXY are read (the
        process's environment by default). ProxyError for a proxy not supported."""
        self.endpoint = endpoint
        self.server = endpoint.server.rstrip("/")
        url = urllib.parse.urlsplit(self.server)
        self._host = url.hostname or ""
        self._port = url.port or (443 if url.scheme == "https" else 80)
        self._prefix = url.path.rstrip("/")
        self._netloc = _host_header(url)
        self._context: ssl.SSLContext | None = None
        self._certificate_version = 0
        self._lock = threading.Lock()
        if url.scheme == "https":
            self._context = self._tls_context(endpoint.cert_file, endpoint.key_file)
            if endpoint.certificate is not None:
                self._certificate_version = endpoint.certificate.current()[0]
        elif url.scheme != "http":
            raise ValueError(f"{self.server}: not an http(s) URL")
        self._idle: queue.LifoQueue[_Connection] = queue.LifoQueue(maxsize=pool_size)
        self.user_agent = user_agent
        self.proxy = proxies.choose(
            self.server, endpoint.proxy_url, os.environ if environ is None else environ
        )
        # An http server through a proxy: requests in absolute form, as Go sends them.
        self._absolute = ""
        if self.proxy is not None and self._context is None:
            self._absolute = f"{url.scheme}://{url.netloc}"
        self.answer_limit = ANSWER_LIMIT_BYTES
        """The largest answer `Response.read()` reads (drainer/k8s/deadline.py)."""

    def _tls_context(self, cert_file: str, key_file: str) -> ssl.SSLContext:
        _readable(
            ("certificate-authority", self.endpoint.ca_file),
            ("client-certificate", cert_file),
            ("client-key", key_file),
        )
        context = ssl.create_default_context(
            cafile=self.endpoint.ca_file or None, cadata=self.endpoint.ca_pem or None
        )
        if cert_file:
            context.load_cert_chain(cert_file, key_file or None)
        return context

    def _renewed(self) -> None:
        """A renewed client certificate in use from now on: new connections present
        it, and the kept ones, which present the old, are closed."""
        source = self.endpoint.certificate
        if source is None or self._context is None:
            return
        version, cert_file, key_file = source.current()
        with self._lock:
            if version == self._certificate_version:
                return
            self._context = self._tls_context(cert_file, key_file)
            self._certificate_version = version
        self.close()

    def send(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        bearer: str | None = None,
        timeout: float | tuple[float, float],
        idle: float | None = None,
    ) -> Response:
        """One request; the response unread (stream it, or read it and release the
        connection). Raises one of ERRORS (no connection, TLS, a timeout), or
        ProxyRefused when the proxy refuses the tunnel."""
        self._renewed()
        target = self._absolute + self._prefix + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        headers = self._headers(accept, bearer)
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = jsonio.dumps(body)
        # `timeout`: (connect, whole) or both; the whole request (connect, headers and
        # body) ends by its deadline. A stream's body (`idle`) may last, while it is
        # never silent for longer than `idle`.
        connect, whole = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        connection = self._take(min(connect, whole))
        connection.timing.start(whole)
        try:
            raw, sock = connection.exchange(method, target, self._netloc, headers, data)
            if idle is not None:
                connection.timing.idle(idle)
        except BaseException:
            connection.close()
            raise
        return Response(raw, connection, sock, self)

    def _headers(self, accept: str, bearer: str | None) -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": self.user_agent}
        if self._absolute and self.proxy is not None and self.proxy.authorization:
            headers["Proxy-Authorization"] = self.proxy.authorization
        if bearer:  # "": a credential with no token (a renewed client certificate)
            headers["Authorization"] = f"Bearer {bearer}"
        elif self.endpoint.authorization:
            headers["Authorization"] = self.endpoint.authorization
        if self.endpoint.impersonate:  # Impersonate-Group repeats: more than a dict holds
            return Headers(headers, self.endpoint.impersonate)
        return headers

    def _take(self, connect_timeout: float) -> _Connection:
        """A kept connection that is still open, or a new one."""
        while True:
            try:
                connection = self._idle.get_nowait()
            except queue.Empty:
                break
            if not connection.dropped():
                connection.timeout = connect_timeout
                return connection
            connection.close()
        return _Connection(
            self._host,
            self._port,
            self._context,
            self.endpoint.tls_server_name,
            connect_timeout,
            proxy=self.proxy,
        )

    def put_back(self, connection: _Connection) -> None:
        if connection.tls is not self._context:  # made before a certificate's renewal
            connection.close()
            return
        try:
            self._idle.put_nowait(connection)
        except queue.Full:
            connection.close()

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return
