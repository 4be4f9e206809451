"""How long an answer may take and how large it may be, under drainer.k8s.transport.

A socket's timeout bounds one read, not an answer: a server that sends a byte every
few seconds (a slow loris, a proxy gone wrong) kept a 10 s request alive for minutes.
So each request carries a whole deadline (headers and body), and before every read
the socket's timeout is set to the time left; a watch's body gets an idle deadline
instead, longer than the API server's bookmark interval. And an answer is read with
a cap: past ANSWER_LIMIT_BYTES it is refused, never held (a 400 MiB answer took the
process from 61 MiB to 1.26 GB; the function's default memory is 512 MB).
"""

from __future__ import annotations

import http.client
import io
import math
import socket
import time
from collections.abc import Callable
from typing import Any, cast

ANSWER_LIMIT_BYTES = 64 << 20
"""The largest answer read (64 MiB): far above a page of a list (the drainer reads
lists in pages of 500) or any one object the API server stores (etcd's limit is
1.5 MiB), far below the Lambda's default memory."""

WATCH_IDLE_SECONDS = 120.0
"""How long a watch may be silent before it is taken for dead: twice the API server's
bookmark interval (it sends a BOOKMARK about every minute to a watch that asks for
them, as the drainer's do), so a live watch with nothing to say is never cut."""


TIMEOUT_SLACK = 0.05
"""How far past its deadline a read may wait rather than set the socket's timeout
again (see `bound`)."""


def bound(sock: socket.socket, left: float) -> None:
    """The socket's timeout set to `left`, unless the one it has, set moments ago, ends
    no more than TIMEOUT_SLACK after it. Each settimeout is a system call (FIONBIO)
    that lets go of the GIL; a read of each chunk of an answer made one, and among a
    drain's eviction threads each of those was a hand-over of the GIL and a context
    switch (issue 39, item 10)."""
    current = sock.gettimeout()
    if current is None or not left <= current <= left + TIMEOUT_SLACK:
        sock.settimeout(left)


class DeadlineExceeded(TimeoutError):
    """The answer did not come whole within the request's deadline, or a stream was
    silent longer than its idle deadline."""


class AnswerTooLarge(http.client.HTTPException):
    """The answer is larger than the limit on an answer; it was not read further."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the API server's answer is larger than the {limit / 2**20:g} MiB limit on an "
            "answer (ANSWER_LIMIT_BYTES); it was not read further"
        )


class Timing:
    """The deadline of the request a connection carries: whole (`start`), or idle
    once a stream's body is read (`idle`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.total = math.inf
        self.deadline = math.inf
        self.idle_seconds: float | None = None

    def start(self, total: float) -> None:
        self.total = total
        self.deadline = self._clock() + total
        self.idle_seconds = None

    def idle(self, seconds: float) -> None:
        self.idle_seconds = seconds

    def left(self) -> float | None:
        """The timeout of the next read; DeadlineExceeded once the deadline has passed."""
        if self.idle_seconds is not None:
            return self.idle_seconds
        if self.deadline == math.inf:
            return None  # no request under way (a tunnel's answer): the socket's own
        left = self.deadline - self._clock()
        if left <= 0:
            raise self.exceeded()
        return left

    def exceeded(self) -> DeadlineExceeded:
        if self.idle_seconds is not None:
            return DeadlineExceeded(
                f"nothing from the API server for {self.idle_seconds:g} s "
                "(a stream's idle deadline)"
            )
        return DeadlineExceeded(
            f"no whole answer from the API server within the request's {self.total:g} s deadline"
        )


class _TimedReader(io.RawIOBase):
    """An answer's socket, each read bounded by the time its request has left."""

    def __init__(self, raw: io.RawIOBase, sock: socket.socket, timing: Timing) -> None:
        self._raw = raw  # the socket's own reader: it holds the socket open while read
        self._sock = sock
        self._timing = timing

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._timing.left()
        if left is not None:
            bound(self._sock, left)
        try:
            return self._raw.readinto(buffer)
        except TimeoutError as e:
            raise self._timing.exceeded() from e

    def close(self) -> None:
        self._raw.close()
        super().close()


MAX_LINE = 65536
"""The longest status or header line read (http.client's own bound)."""
MAX_HEADERS = 100


class Head:
    """An answer's header lines, with what http.client's answer reads of them (`get`;
    `get_all` for getheader, `items` for getheaders), without the email package's
    parser and policies: those were about a quarter of the drainer's CPU for each
    request (issue 39, item 10)."""

    __slots__ = ("_first", "_pairs")

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._pairs = pairs
        self._first: dict[str, str] = {}
        """Each name in lower case, to its first value: a lookup is one dict's."""
        for key, value in pairs:
            self._first.setdefault(key.lower(), value)

    def get(self, name: str, default: Any = None) -> Any:
        return self._first.get(name.lower(), default)

    def get_all(self, name: str, default: Any = None) -> Any:
        wanted = name.lower()
        return [v for k, v in self._pairs if k.lower() == wanted] or default

    def items(self) -> list[tuple[str, str]]:
        return list(self._pairs)


class TimedResponse(http.client.HTTPResponse):
    """http.client's answer, its headers and body read against `timing`; its status
    line and headers read by `begin` here (the body by http.client, chunked or not)."""

    def __init__(self, sock: socket.socket, *args: Any, timing: Timing, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        raw = self.fp.detach()  # nothing read yet: no buffered byte is lost
        self.fp = io.BufferedReader(_TimedReader(raw, sock, timing))

    def begin(self) -> None:
        if self.headers is not None:
            return
        version, status, reason = self._status()
        head = self._head()
        while status == http.client.CONTINUE:  # an interim answer: the real one follows
            version, status, reason = self._status()
            head = self._head()
        self.code = self.status = status
        self.reason = reason
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = cast(http.client.HTTPMessage, head)
        self.chunked = str(head.get("transfer-encoding", "")).lower() == "chunked"
        self.chunk_left = None
        self.length = None if self.chunked else _length(head.get("content-length"))
        if status in (204, 304) or status < 200 or self._method == "HEAD":
            self.length = 0
        self.will_close = _closes(self.version, head) or (not self.chunked and self.length is None)

    def _line(self) -> str:
        line = self.fp.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise http.client.LineTooLong("status or header line")
        return line.decode("iso-8859-1")

    def _status(self) -> tuple[str, int, str]:
        line = self._line()
        if not line:
            raise http.client.RemoteDisconnected("the server closed the connection unanswered")
        version, code, reason = [*line.split(None, 2), "", ""][:3]
        if (
            not version.startswith("HTTP/")
            or not (len(code) == 3 and code.isascii() and code.isdigit())
            or int(code) < 100
        ):
            self.close()
            raise http.client.BadStatusLine(line)
        return version, int(code), reason.strip()

    def _head(self) -> Head:
        """The header lines, a folded line joined to the one it continues; every line,
        folded or not, counts against MAX_HEADERS."""
        pairs: list[tuple[str, list[str]]] = []
        for _ in range(MAX_HEADERS + 1):
            line = self._line()
            if line in ("\r\n", "\n", ""):
                return Head([(key, " ".join(pieces)) for key, pieces in pairs])
            if line[0] in " \t" and pairs:  # a folded line continues the last header
                pairs[-1][1].append(line.strip())
                continue
            key, _, value = line.partition(":")
            pairs.append((key.strip(), [value.strip()]))
        raise http.client.HTTPException(f"got more than {MAX_HEADERS} headers")


def _length(value: Any) -> int | None:
    try:
        length = int(value)
    except (TypeError, ValueError):
        return None
    return length if length >= 0 else None


def _closes(version: int, head: Head) -> bool:
    """Whether the server closes the connection after this answer."""
    connection = str(head.get("connection", "")).lower()
    if version == 11:
        return "close" in connection
    return "keep-alive" not in connection and head.get("keep-alive") is None


def read_capped(raw: http.client.HTTPResponse, limit: int) -> bytes:
    """The whole body, or AnswerTooLarge as soon as it passes `limit` bytes: a stated
    length over it is refused unread; any other body is read 1 MiB at a time."""
    if raw.length is not None:
        if raw.length > limit:
            raise AnswerTooLarge(limit)
        return raw.read()
    pieces: list[bytes] = []
    size = 0
    while piece := raw.read(min(1 << 20, limit + 1 - size)):
        size += len(piece)
        if size > limit:
            raise AnswerTooLarge(limit)
        pieces.append(piece)
    return b"".join(pieces)
