"""The request loop under drainer.k8s.kube.Kube: each call sent through
drainer.k8s.transport with the caller's bearer token, retried where a retry can help
(5xx, dropped connections, API throttling with its Retry-After, one stale token, a
403 from a server still starting), and watch streams read line by line, each event
parsed as it comes. Every failure leaves here translated (drainer.k8s.status).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from drainer import jsonio
from drainer.backoff import Backoff
from drainer.errors import (
    CredentialsFailing,
    KubeError,
    KubeForbidden,
    KubeServerError,
    KubeTimedOut,
    KubeTooManyRequests,
    KubeUnauthorized,
    TlsVerificationError,
)
from drainer.k8s.deadline import WATCH_IDLE_SECONDS, AnswerTooLarge
from drainer.k8s.outage import Outage
from drainer.k8s.status import answer, server_gone, translate, translate_status, transport_error
from drainer.k8s.transport import ERRORS, Response, Transport

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class TokenProvider(Protocol):
    """A bearer token, cached by its provider (EKS tokens: drainer.aws.eks.TokenSource;
    exec plugins: drainer.k8s.auth.ExecToken)."""

    def token(self) -> str: ...

    def invalidate(self) -> None:
        """The API server refused the token (401): the next `token()` is a fresh one."""


CALL_BACKOFF = Backoff(first=0.4, cap=5.0)
"""The pause before each retry of one call: 0.2-0.4 s after the first failure,
doubling to 5 s."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one API call tries before its error reaches the engine.

    The engine has its own, longer loops (evictions are retried until the drain's
    deadline), so this only smooths over short blips.
    """

    attempts: int = 6
    backoff: Backoff = CALL_BACKOFF
    max_retry_after: float = 30.0
    """A longer Retry-After is the caller's to wait for: the error is raised at once."""
    restart_grace: float = 15.0
    """How long after the API server was last unreachable (or said it was not ready)
    a 403 may still be its start-up, not RBAC: kube-apiserver serves before it is
    ready, and until its authorizer has loaded the RBAC objects it refuses what they
    grant."""


class Streams:
    """Open watch responses, so another thread can end them (and any opened later)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[Response] = set()
        self._closed = False

    def add(self, raw: Response) -> bool:
        """False once close_all() ran: the caller releases it unread (closed)."""
        with self._lock:
            if not self._closed:
                self._open.add(raw)
            return not self._closed

    @property
    def closed(self) -> bool:
        """close_all() has ended every stream."""
        return self._closed

    def discard(self, raw: Response) -> None:
        with self._lock:
            self._open.discard(raw)

    def close_all(self) -> None:
        with self._lock:
            self._closed = True
            streams = list(self._open)
        for raw in streams:
            raw.shutdown()  # left alone if it ended on its own and went back to the pool


def _query_value(value: Any) -> str:
    """A query parameter as the API server reads it (booleans in lower case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class Call:
    """One API call, as each of its attempts sends it."""

    method: str
    path: str
    query: Mapping[str, Any] | None
    body: Any
    content_type: str
    verb: str
    resource: str
    what: str
    timeout: float | tuple[float, float] | None
    stream: bool
    idle: float | None = None
    """A stream's idle deadline, which replaces the whole request's once its
    headers have come (drainer/k8s/deadline.py)."""


def _watch_events(raw: Any, resource: str, limit: int) -> Iterator[Obj]:
    """The events of a watch stream, one JSON object per line; an ERROR event (a
    version too old, a server error) raised as the error it reports; a line longer
    than `limit` bytes raised as AnswerTooLarge, never held."""
    buffer = bytearray()
    for chunk in raw.stream(16384):
        start = len(buffer)  # where no newline has been looked for yet
        buffer += chunk
        while (end := buffer.find(b"\n", start)) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            start = 0
            if not line.strip():
                continue
            event: Obj = jsonio.loads(line)
            if event.get("type") == "ERROR":
                status = event.get("object") or {}
                raise translate_status(
                    int(status.get("code") or 500),
                    status,
                    {},
                    verb="watch",
                    resource=resource,
                    what=f"watch {resource}",
                )
            yield event
        if len(buffer) > limit:
            raise AnswerTooLarge(limit)


class Client:
    """A client of one API server: its request loop and its watch streams."""

    def __init__(
        self,
        transport: Transport,
        token: TokenProvider | None = None,
        *,
        request_timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        refused: str = "",
    ) -> None:
        """`token`: sent with every request, renewed once after a 401. Without it, the
        transport's own credentials (a kubeconfig's static token or client
        certificate). `refused`: what a 401 means here and what to check, when it is not
        the Lambda's IAM role that translate() names (a kubeconfig's user)."""
        self._token = token
        self._refused = refused
        self.transport = transport  # retries are ours: it never re-sends behind our back
        self.request_timeout = request_timeout
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._rng = rng or random.Random()  # noqa: S311 - jitter
        self.streams = Streams()
        self.requests = 0
        self.user = ""
        """The kubeconfig user's name (from_kubeconfig): who runs the CLI's drain."""
        self._unreachable_at = -math.inf  # monotonic: the API server last failed to answer
        self.outage = Outage()

    def close(self) -> None:
        self.streams.close_all()
        self.transport.close()

    # -- the request loop -----------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        verb: str,
        resource: str,
        what: str = "",
        timeout: float | tuple[float, float] | None = None,
        stream: bool = False,
        idle: float | None = None,
    ) -> Any:
        """Send one API call with retries; the parsed JSON answer, or the raw
        transport.Response when `stream` (the caller must close it)."""
        call = Call(
            method, path, query, body, content_type, verb, resource,
            what or f"{verb} {resource}", timeout, stream, idle,
        )  # fmt: skip
        unauthorized = 0
        attempt = 0
        while True:
            bearer = None
            try:
                # In the try: a plugin that worked and fails now (CredentialsFailing)
                # is retried as a server error is.
                bearer = self._token.token() if self._token is not None else None
                answer = self._once(call, bearer)
            except KubeUnauthorized as e:
                unauthorized += 1
                self._renew_token(e, bearer, unauthorized, call.what)
            except (TlsVerificationError, KubeTimedOut):
                raise
            except (KubeTooManyRequests, KubeServerError, KubeForbidden) as e:
                attempt += 1
                self._pause_before_retry(e, attempt, bearer)
            else:
                self.outage.answered()
                return answer

    def _renew_token(
        self, error: KubeUnauthorized, bearer: str | None, refusals: int, what: str
    ) -> None:
        """A token can be refused before its time (aged out between minting and use,
        its signing credentials rotated): one fresh token, one retry, as kubectl's
        client does. Raises when a retry cannot help."""
        if self._token is None or refusals > 1:
            if self._refused:
                raise KubeUnauthorized(f"{what}: {self._refused}", 401, error.reason) from error
            raise error
        log.info("token refused; getting a new one and retrying %s", what)
        # Concurrent calls refused the same token renew it once: a call whose
        # token was replaced meanwhile retries with the replacement.
        if self._token.token() == bearer:
            self._token.invalidate()

    def _pause_before_retry(self, error: KubeError, attempt: int, bearer: str | None) -> None:
        """Sleep before the next attempt of a call that met a 429, a 5xx or a 403 that
        may be a starting server's; raises `error` when it is not to be retried."""
        note = ""
        if isinstance(error, KubeForbidden):
            note = self._starting(error, bearer)
        elif server_gone(error.__cause__):
            self._unreachable_at = time.monotonic()
        delay = self._retry_delay(error, attempt)
        if delay is None:
            error.said = isinstance(error, CredentialsFailing) or (
                isinstance(error, KubeServerError) and self.outage.said
            )
            raise error
        log.log(
            self._retry_level(error),
            "%s%s; retrying in %.1f s (attempt %d of %d)",
            error,
            note,
            delay,
            attempt + 1,
            self.retry.attempts,
        )
        self._sleep(delay)

    def _retry_level(self, error: KubeError) -> int:
        """A retry's line is said once per outage mid-drain (outage.py); a failing
        credential plugin says itself (drainer/k8s/auth.py), once."""
        if isinstance(error, CredentialsFailing):
            return logging.DEBUG
        if isinstance(error, KubeServerError):
            return self.outage.retry_level()
        return logging.WARNING

    def _starting(self, error: KubeForbidden, bearer: str | None) -> str:
        """A 403 may be a starting server's (restarted, or new behind the endpoint): it
        serves before its authorizer has loaded the RBAC rules. Right after an outage
        it is taken for that; else the server is asked whether it is ready yet (one
        GET /readyz). Raises `error`, a denial, when the server is ready; else the
        note for the retry's log line."""
        since_outage = time.monotonic() - self._unreachable_at
        if since_outage > self.retry.restart_grace:
            if self._ready(bearer):
                raise error
            self._unreachable_at = time.monotonic()
            since_outage = 0.0
        return (
            f" (the API server was unreachable {since_outage:.1f} s ago, or says "
            "it is not ready: it may still be starting, its authorizer loading "
            "the RBAC rules)"
        )

    def _ready(self, bearer: str | None) -> bool:
        """Whether the API server says it is ready (GET /readyz answers 200, as the
        load balancer in front of EKS's API servers asks): a server that is not, or
        does not answer, is starting."""
        try:
            self.requests += 1
            raw = self.transport.send(
                "GET",
                "/readyz",
                accept="text/plain",
                bearer=bearer,
                timeout=(min(5.0, self.request_timeout), 5.0),
            )
        except ERRORS:
            return False  # no answer: not ready
        try:
            raw.read()
        except ERRORS:
            return False
        finally:
            raw.release_conn()
        return bool(raw.status == 200)

    def _retry_delay(self, error: KubeError, attempt: int) -> float | None:
        """The pause before retrying a failed call; None when it is the caller's to
        handle: out of attempts, or a Retry-After longer than a call should wait
        (never retried before it; the caller knows its deadline)."""
        if attempt >= self.retry.attempts:
            return None
        retry_after = error.retry_after if isinstance(error, KubeTooManyRequests) else None
        if retry_after and retry_after > self.retry.max_retry_after:
            return None
        return self.retry.backoff.delay(attempt - 1, self._rng, retry_after)

    def _once(self, call: Call, bearer: str | None) -> Any:
        query = [(k, _query_value(v)) for k, v in (call.query or {}).items() if v is not None]
        self.requests += 1
        try:
            raw = self.transport.send(
                call.method,
                call.path,
                query=query,
                body=call.body,
                content_type=call.content_type,
                bearer=bearer,  # this request's own; None: the kubeconfig's credentials
                timeout=call.timeout or (min(5.0, self.request_timeout), self.request_timeout),
                idle=call.idle,
            )
        except ERRORS as e:
            raise transport_error(e, call.what) from e
        if not 200 <= raw.status < 300:
            # Any non-2xx is an error, as in client-go: a 3xx (a proxy's or an SSO
            # gateway's redirect, with an empty or HTML body) must not pass for `{}`,
            # an empty list or an accepted eviction. translate() names the redirect, a
            # plain KubeError: not retried here (no outage: the same request meets the
            # same redirect); an eviction or a watch is tried again by the engine, a
            # node's lookup or cordon fails the drain, naming the redirect.
            try:
                data = raw.read()
            except ERRORS:
                data = b""
            finally:
                raw.release_conn()
            raise translate(
                raw.status,
                data,
                raw.headers,
                verb=call.verb,
                resource=call.resource,
                what=call.what,
            )
        if call.stream:
            return raw
        return answer(raw, verb=call.verb, resource=call.resource, what=call.what)

    # -- watch streams --------------------------------------------------------

    def watch(
        self,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        resource_version: str,
        resource: str,
        timeout_seconds: int = 300,
        streams: Streams | None = None,
    ) -> Iterator[Obj]:
        """Watch events after `resource_version`; ends when the server ends the stream
        or `streams` is closed. Raises KubeGone when the version is too old (re-list,
        then watch again)."""
        streams = streams or self.streams
        params = dict(query or {})
        params.update(
            watch="true",
            resourceVersion=resource_version,
            allowWatchBookmarks="true",
            timeoutSeconds=str(timeout_seconds),
        )
        raw = self.request(
            "GET",
            path,
            query=params,
            verb="watch",
            resource=resource,
            stream=True,  # its headers within the request timeout, then never idle
            idle=min(timeout_seconds + 15, WATCH_IDLE_SECONDS),  # longer than a bookmark's
        )
        if not streams.add(raw):  # closed meanwhile: unread, so closed, never pooled
            raw.release_conn()
            return
        try:
            yield from _watch_events(raw, resource, self.transport.answer_limit)
        except (*ERRORS, ValueError) as e:
            if server_gone(e) and not streams.closed:  # cut by the server, not by us
                self._unreachable_at = time.monotonic()
            raise KubeServerError(f"watch {resource}: stream broken: {str(e)[:200]}") from e
        finally:
            streams.discard(raw)
            raw.release_conn()
