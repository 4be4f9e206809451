"""The one place that talks to the Kubernetes API.

It sends requests through drainer.k8s.transport (http.client, TLS always verified
against the cluster CA, each request with its own bearer token, refreshed before it
ages out; no kubernetes package, whose import would cost every cold start), retries
what is worth retrying (5xx, dropped connections, API throttling with its
Retry-After, one stale token), and translates every failure into the drainer's own
errors, so nothing outside this module sees an error of the wire's.

A failure is judged by the whole answer, as the API server means it: the HTTP
status, the Status reason and details.causes (a 403 whose cause is
NamespaceTerminating is not an RBAC denial), and the body of a 2xx too (a Status
whose status is Failure is not a success, whatever the HTTP status; the eviction
handler returns, rather than raises, the Failure for a pod under two budgets).

Objects are plain dicts parsed from JSON: the drain engine reads a handful of
fields, and building pydantic models for hundreds of pods would cost more than the
drain itself.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import os
import random
import re
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from drainer import __version__
from drainer.backoff import Backoff
from drainer.errors import (
    AdmissionDenied,
    CredentialsFailing,
    EvictionBlocked,
    KubeConflict,
    KubeError,
    KubeForbidden,
    KubeGone,
    KubeNotFound,
    KubeServerError,
    KubeTimedOut,
    KubeTooManyRequests,
    KubeUnauthorized,
    MultipleBudgets,
    NamespaceTerminating,
    TlsVerificationError,
)
from drainer.k8s import kubeconfig
from drainer.k8s.auth import ExecToken
from drainer.k8s.deadline import WATCH_IDLE_SECONDS, AnswerTooLarge, DeadlineExceeded
from drainer.k8s.impersonation import Impersonation
from drainer.k8s.outage import Outage
from drainer.k8s.transport import ERRORS, Endpoint, Response, Transport, Unreachable

log = logging.getLogger(__name__)

Obj = dict[str, Any]
PAGE_SIZE = 500
USER_AGENT = f"eks-node-drainer/{__version__}"
_BUDGET_NAME = re.compile(r"The disruption budget (\S+) ")
_TERMINATING_NAMESPACE = re.compile(r"namespace (\S+) (?:is being|because it is being) terminated")
# Status cause types (k8s.io/api core/v1 NamespaceTerminatingCause, policy/v1
# DisruptionBudgetCause). A cause's type is the JSON key "reason".
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
_MAX_BODY_IN_MESSAGE = 300
# The authorization filter's refusal, whatever the authorizer (RBAC, Node, Webhook):
# responsewriters.forbiddenMessage, 'User "<name>" cannot <verb> resource "<r>" ...'
# (or 'path "<p>"' for a non-resource URL). Anything else in a 403 is admission's.
# The user name is Go-quoted (%q): a quote inside it is escaped.
_AUTHORIZER_DENIAL = re.compile(r'(?:^|: )User "(?:[^"\\]|\\.)*" cannot \S+ (?:resource|path) "')
# Reads never pass through admission: a 403 on one is never admission's.
_READS = frozenset({"get", "list", "watch"})
# How admission names itself when it refuses: a ValidatingAdmissionPolicy
# ("ValidatingAdmissionPolicy 'p' with binding 'b' denied request: ...") or a webhook
# ('admission webhook "w" denied the request: ...').
_ADMISSION_DENIAL = re.compile(
    r"ValidatingAdmissionPolicy '[^']*' with binding|admission webhook \"[^\"]*\" denied"
)


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


def _status_body(data: bytes) -> Obj:
    try:
        body = json.loads(data)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _retry_after(headers: Mapping[str, str], body: Obj) -> float | None:
    """Seconds the server asked the client to wait: the Retry-After header (as the
    apiserver and its priority-and-fairness filter send it), else the Status's
    details.retryAfterSeconds."""
    value = headers.get("Retry-After")
    if value:
        try:
            seconds = float(value)
        except ValueError:
            pass
        else:
            if seconds > 0:
                return seconds
    detail = (body.get("details") or {}).get("retryAfterSeconds")
    return float(detail) if isinstance(detail, int | float) and detail > 0 else None


def _causes(body: Obj, cause_type: str) -> list[Obj]:
    causes = (body.get("details") or {}).get("causes") or []
    return [
        c for c in causes if isinstance(c, dict) and cause_type in (c.get("reason"), c.get("type"))
    ]


def translate(
    status: int,
    data: bytes,
    headers: Mapping[str, str],
    *,
    verb: str,
    resource: str,
    what: str,
) -> KubeError:
    """The drainer error for an HTTP error answer of the API server."""
    body = _status_body(data)
    raw = data[:_MAX_BODY_IN_MESSAGE].decode(errors="replace")
    return translate_status(
        status, body, headers, verb=verb, resource=resource, what=what, fallback=raw
    )


def translate_status(
    status: int,
    body: Obj,
    headers: Mapping[str, str],
    *,
    verb: str,
    resource: str,
    what: str,
    fallback: str = "",
) -> KubeError:
    """The same, from a Status object already parsed (a watch's ERROR event)."""
    message = str(body.get("message") or fallback)
    reason = str(body.get("reason") or "")
    if _ADMISSION_DENIAL.search(message):
        # A webhook chooses its own code (403 by default in controller-runtime, but
        # 404 or 409 too); whatever the code, admission refused this one object.
        return AdmissionDenied(what, message, status, reason)
    if status == 404:
        return KubeNotFound(f"{what}: not found ({message})", 404, reason)
    if status == 409:
        return KubeConflict(f"{what}: conflict ({message})", 409, reason)
    if status == 410:
        return KubeGone(f"{what}: {message}", 410, reason)
    if status == 401:
        return KubeUnauthorized(
            f"{what}: the API server refused the token (401 Unauthorized). Check that the "
            "function's IAM role has an EKS access entry (or aws-auth mapping) for this cluster.",
            401,
            reason,
        )
    if status == 403:
        return _forbidden(body, message, verb=verb, resource=resource, what=what)
    if status == 429:
        return _too_many_requests(body, message, headers, what=what)
    if status == 500 and "more than one PodDisruptionBudget" in message:
        return MultipleBudgets(f"{what}: {message}", 500, reason)
    if status >= 500:
        return KubeServerError(f"{what}: API server error {status}: {message}", status, reason)
    return KubeError(f"{what}: HTTP {status} {reason}: {message}", status, reason)


def _forbidden(body: Obj, message: str, *, verb: str, resource: str, what: str) -> KubeError:
    """A 403, judged by its causes and details, never by its code alone."""
    terminating = _causes(body, NAMESPACE_TERMINATING_CAUSE)
    if terminating:
        # The namespace lifecycle admission refuses new objects (evictions too) in
        # a namespace being deleted; the pod goes with its namespace.
        cause = str(terminating[0].get("message") or "")
        match = _TERMINATING_NAMESPACE.search(cause) or _TERMINATING_NAMESPACE.search(message)
        return NamespaceTerminating(
            f"{what}: {message} ({cause or 'namespace being terminated'})",
            namespace=match.group(1) if match else "",
        )
    details = body.get("details") or {}
    if details.get("group") == "policy" and details.get("kind") == "poddisruptionbudget":
        # eviction.go's checkAndDecrement: a budget whose status allows a negative
        # number of disruptions, or has too many evictions not yet confirmed by the
        # disruption controller. The budget refuses for now; it is not RBAC.
        return EvictionBlocked(
            f"{what}: PodDisruptionBudget {details.get('name', '?')} refuses for now: {message}",
            budget=str(details.get("name") or ""),
        )
    if _AUTHORIZER_DENIAL.search(message):
        return KubeForbidden(
            f"{what}: RBAC denied '{verb}' on '{resource}': {message}. Grant it to the group "
            f"eks-node-drainer (kubectl apply -f k8s-rbac/).",
            verb=verb,
            resource=resource,
        )
    if body.get("kind") == "Status" and verb not in _READS:
        # The API server's own Status, not in the authorizer's words: an admission
        # plugin refused this object (apierrors.NewForbidden, '<kind> "<name>" is
        # forbidden: <why>'), as a policy engine's webhook or a built-in plugin does.
        return AdmissionDenied(what, message, 403, "Forbidden")
    return KubeForbidden(
        f"{what}: 403 Forbidden, in neither the authorizer's nor admission's words "
        f"({message or 'no reason given'}): is a proxy or firewall in front of the API "
        f"server refusing '{verb}' on '{resource}'? If not, check the group eks-node-drainer "
        "has k8s-rbac/'s permissions.",
        verb=verb,
        resource=resource,
    )


def _too_many_requests(
    body: Obj, message: str, headers: Mapping[str, str], *, what: str
) -> KubeError:
    """A 429: a budget's refusal (DisruptionBudget cause) or API throttling."""
    budget_causes = _causes(body, DISRUPTION_BUDGET_CAUSE)
    if budget_causes:
        cause = str(budget_causes[0].get("message") or "")
        match = _BUDGET_NAME.search(cause)
        return EvictionBlocked(
            f"{what}: {message} {cause}".strip(),
            budget=match.group(1) if match else "",
            retry_after=_retry_after(headers, body),
        )
    return KubeTooManyRequests(
        f"{what}: API server throttled the request: {message}", _retry_after(headers, body)
    )


def _answer(raw: Any, *, verb: str, resource: str, what: str) -> Any:
    """A 2xx answer's JSON; a Failure Status inside it (read every body) is raised."""
    try:
        data = raw.read()
    except ERRORS as e:
        raise _transport_error(e, what) from e
    finally:
        raw.release_conn()
    if not data:
        return {}
    try:
        answer = json.loads(data)
    except ValueError as e:
        raise KubeServerError(
            f"{what}: the API server answered with something that is not JSON"
        ) from e
    failure = failure_in_success(answer, raw.headers, verb=verb, resource=resource, what=what)
    if failure is not None:
        raise failure
    return answer


def failure_in_success(
    answer: Any,
    headers: Mapping[str, str],
    *,
    verb: str,
    resource: str,
    what: str,
) -> KubeError | None:
    """The drainer error a 2xx answer stands for, or None when it is a success.

    A 2xx is not always success: the eviction handler returns (not raises) a Status
    whose status is Failure and code 500 for a pod selected by more than one
    PodDisruptionBudget; v1.33.13 writes it as HTTP 500, but a server that writes it
    as the create's 201 must not pass for a success. Such a body is translated by its
    code exactly like the equivalent error answer."""
    if not isinstance(answer, dict):
        return None
    if answer.get("kind") != "Status" or answer.get("status") != "Failure":
        return None
    code = answer.get("code")
    return translate_status(
        code if isinstance(code, int) and not isinstance(code, bool) and code >= 400 else 500,
        answer,
        headers,
        verb=verb,
        resource=resource,
        what=what,
    )


def _transport_error(error: Exception, what: str) -> KubeError:
    if isinstance(error, DeadlineExceeded):
        return KubeTimedOut(f"{what}: {error}")
    if isinstance(error, AnswerTooLarge):
        return KubeServerError(f"{what}: {error}")
    text = str(error)
    if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
        return TlsVerificationError(
            f"{what}: the API server's certificate does not verify against the cluster CA "
            f"({text[:200]}). Refusing to connect; check the cluster's certificateAuthority.",
        )
    return KubeServerError(f"{what}: cannot reach the API server: {_cause(error)}")


def _cause(error: Exception) -> str:
    """What went wrong on the wire, in a few words ("Connection refused (host:port)")."""
    if isinstance(error, Unreachable):
        return f"{error.error.strerror or _cause(error.error)} ({error.where})"
    if isinstance(error, TimeoutError) or "timed out" in str(error).lower():
        return "timed out"
    text = str(error)
    found = re.search(r"\[Errno -?\d+\] (.+)", text)
    if found:
        return found.group(1).strip()
    return text.splitlines()[0][:160] if text else type(error).__name__


def _server_gone(error: BaseException | None) -> bool:
    """The connection was refused or cut: no API server process answering there (a
    restart), as opposed to a slow answer or a watch this client ended itself."""
    if isinstance(error, Unreachable):
        return not isinstance(error.error, TimeoutError)
    return isinstance(error, (ConnectionError, http.client.HTTPException))


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


_AWS_PLUGINS = {"aws", "aws-iam-authenticator"}


def _refused_in_kubeconfig(user: str, token: TokenProvider | None) -> str:
    """What a 401 means for a kubeconfig's user, and what to check."""
    if not isinstance(token, ExecToken):
        return (
            f"the API server refused the credentials of kubeconfig user '{user}' (401 "
            "Unauthorized): a token or client certificate this cluster does not accept "
            "(expired, revoked, or another cluster's). Get current ones; `kubectl auth "
            "whoami` shows who the kubeconfig signs in as."
        )
    program = os.path.basename(shlex.split(token.command)[0]) if token.command else ""
    aws = (
        " (`aws eks get-token` signs in as the AWS profile or role it runs with, "
        "`aws sts get-caller-identity` shows which; that IAM principal needs an EKS access "
        "entry or aws-auth mapping for this cluster)"
        if program in _AWS_PLUGINS
        else ""
    )
    return (
        f"the API server refused the token of kubeconfig user '{user}' (401 Unauthorized), "
        f"and a fresh one from running its exec credential plugin again too. Run the "
        f"plugin yourself (`{token.command}`), see who it signs in as, and check that "
        f"this identity may use the cluster{aws}."
    )


def _query_value(value: Any) -> str:
    """A query parameter as the API server reads it (booleans in lower case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _on_node(node: str, label_selector: str) -> dict[str, str]:
    query = {"fieldSelector": f"spec.nodeName={node}"}
    if label_selector:
        query["labelSelector"] = label_selector
    return query


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
            event: Obj = json.loads(line)
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


class Kube:
    """A small, typed-by-convention client for the calls the drainer makes."""

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

    # -- construction ---------------------------------------------------------

    @classmethod
    def for_cluster(
        cls,
        endpoint: str,
        ca_pem: bytes,
        token: TokenProvider,
        *,
        request_timeout: float = 10.0,
        pool_size: int = 32,
    ) -> Kube:
        """A client for an EKS cluster: its endpoint, its CA, an IAM token source."""
        if not ca_pem.strip():
            raise TlsVerificationError(
                "the cluster has no certificate authority data; refusing to connect"
            )
        # The CA in memory: no file to race over between concurrent clients.
        where = Endpoint(endpoint, ca_pem=ca_pem.decode("ascii", errors="replace"))
        transport = Transport(where, pool_size=pool_size, user_agent=USER_AGENT)
        return cls(transport, token, request_timeout=request_timeout)

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | None = None,
        context: str | None = None,
        *,
        request_timeout: float = 10.0,
        pool_size: int = 32,
        clock: Callable[[], float] = time.time,
        impersonate: Impersonation | None = None,
    ) -> Kube:
        """A client from a kubeconfig (static tokens, client certificates, exec plugins).

        A user whose exec plugin gives tokens (what `aws eks update-kubeconfig` writes)
        gets an ExecToken: the plugin runs again after a 401 and near the token's stated
        expiry (`clock` tells the time). The official loader's own hook never re-runs it
        on a 401, and re-runs it on every request within 5 minutes of the expiry."""
        try:
            loaded = kubeconfig.found(path, context, clock=clock, impersonate=impersonate)
            transport = Transport(loaded.endpoint, pool_size=pool_size, user_agent=USER_AGENT)
        except (kubeconfig.KubeconfigError, OSError, ValueError) as e:
            raise KubeError(
                f"cannot load kubeconfig {path or '(default)'} "
                f"context {context or '(current)'}: {e}"
            ) from e
        client = cls(
            transport,
            loaded.token,
            request_timeout=request_timeout,
            refused=_refused_in_kubeconfig(loaded.user, loaded.token),
        )
        client.user = loaded.user
        return client

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
        elif _server_gone(error.__cause__):
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
            raise _transport_error(e, call.what) from e
        if raw.status >= 400:
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
        return _answer(raw, verb=call.verb, resource=call.resource, what=call.what)

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
            if _server_gone(e) and not streams.closed:  # cut by the server, not by us
                self._unreachable_at = time.monotonic()
            raise KubeServerError(f"watch {resource}: stream broken: {str(e)[:200]}") from e
        finally:
            streams.discard(raw)
            raw.release_conn()

    # -- the calls the drainer makes -------------------------------------------

    def get_node(self, name: str) -> Obj | None:
        try:
            node: Obj = self.request(
                "GET",
                f"/api/v1/nodes/{name}",
                verb="get",
                resource="nodes",
                what=f"get node {name}",
            )
        except KubeNotFound:
            return None
        return node

    def can_i(self, verb: str, group: str, resource: str) -> bool:
        """A SelfSubjectAccessReview (`kubectl auth can-i`): may this identity do it?
        `resource` may name a subresource: "pods/eviction"."""
        name, _, sub = resource.partition("/")
        review: Obj = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "verb": verb,
                    "group": group,
                    "resource": name,
                    **({"subresource": sub} if sub else {}),
                }
            },
        }
        answer: Obj = self.request(
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            body=review,
            verb="create",
            resource="selfsubjectaccessreviews",
            what=f"can I {verb} {resource}",
        )
        return bool((answer.get("status") or {}).get("allowed"))

    def list_nodes(self, *, label_selector: str = "", page_size: int = PAGE_SIZE) -> Iterator[Obj]:
        """All nodes, page by page (never one unbounded list); stop early at will."""
        query = {"labelSelector": label_selector or None}
        for page in self._pages("/api/v1/nodes", query, "nodes", page_size):
            yield from page.get("items") or []

    def _pages(
        self, path: str, query: Mapping[str, Any], resource: str, page_size: int = PAGE_SIZE
    ) -> Iterator[Obj]:
        """A list, one page (limit/continue) at a time."""
        token = None
        while True:
            params = {**query, "limit": str(page_size), "continue": token}
            page: Obj = self.request("GET", path, query=params, verb="list", resource=resource)
            yield page
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    def _list_all(
        self, path: str, resource: str, query: Mapping[str, Any] | None = None
    ) -> tuple[list[Obj], str]:
        """Every item, paged, and the first page's resourceVersion to watch from."""
        items: list[Obj] = []
        version = ""
        for page in self._pages(path, query or {}, resource):
            version = version or str((page.get("metadata") or {}).get("resourceVersion") or "")
            items.extend(page.get("items") or [])
        return items, version

    def patch_node(self, name: str, patch: Obj, *, dry_run: bool = False) -> Obj:
        node: Obj = self.request(
            "PATCH",
            f"/api/v1/nodes/{name}",
            query={"dryRun": "All"} if dry_run else None,
            body=patch,
            content_type="application/merge-patch+json",
            verb="patch",
            resource="nodes",
            what=f"patch node {name}",
        )
        return node

    def list_node(self, name: str) -> tuple[list[Obj], str]:
        """The node as a list of one (or none), and the resourceVersion to watch from."""
        return self._list_all("/api/v1/nodes", "nodes", {"fieldSelector": f"metadata.name={name}"})

    def watch_node(
        self,
        name: str,
        resource_version: str,
        timeout_seconds: int = 300,
        streams: Streams | None = None,
    ) -> Iterator[Obj]:
        return self.watch(
            "/api/v1/nodes",
            query={"fieldSelector": f"metadata.name={name}"},
            resource_version=resource_version,
            resource="nodes",
            timeout_seconds=timeout_seconds,
            streams=streams,
        )

    def list_pods_on_node(self, node: str, label_selector: str = "") -> tuple[list[Obj], str]:
        """The node's pods (paged; only those `label_selector` selects, when given)
        and the resourceVersion to watch from."""
        return self._list_all("/api/v1/pods", "pods", _on_node(node, label_selector))

    def watch_pods_on_node(
        self,
        node: str,
        resource_version: str,
        timeout_seconds: int = 300,
        streams: Streams | None = None,
        label_selector: str = "",
    ) -> Iterator[Obj]:
        return self.watch(
            "/api/v1/pods",
            query=_on_node(node, label_selector),
            resource_version=resource_version,
            resource="pods",
            timeout_seconds=timeout_seconds,
            streams=streams,
        )

    def evict(
        self, pod: Obj, *, grace_period_seconds: int | None = None, dry_run: bool = False
    ) -> None:
        """policy/v1 Eviction with a UID precondition: a pod recreated under the
        same name is never evicted by mistake."""
        metadata = pod["metadata"]
        delete_options: Obj = {"preconditions": {"uid": metadata["uid"]}}
        if grace_period_seconds is not None and grace_period_seconds >= 0:
            delete_options["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            # In the body (what the eviction acts on) and in the query (what admission
            # sees), as both must agree.
            delete_options["dryRun"] = ["All"]
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": metadata["name"], "namespace": metadata["namespace"]},
            "deleteOptions": delete_options,
        }
        self.request(
            "POST",
            f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}/eviction",
            query={"dryRun": "All"} if dry_run else None,
            body=body,
            verb="create",
            resource="pods/eviction",
            what=f"evict pod {metadata['namespace']}/{metadata['name']}",
        )

    def delete_pod(self, pod: Obj, *, grace_period_seconds: int) -> None:
        """Delete bypassing PodDisruptionBudgets (only for the `force` timeout policy)."""
        metadata = pod["metadata"]
        self.request(
            "DELETE",
            f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}",
            body={
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "gracePeriodSeconds": grace_period_seconds,
                "preconditions": {"uid": metadata["uid"]},
            },
            verb="delete",
            resource="pods",
            what=f"delete pod {metadata['namespace']}/{metadata['name']}",
        )

    def create_event(self, namespace: str, event: Obj) -> Obj:
        """Record an events.k8s.io/v1 Event (drainer/k8s/events.py)."""
        created: Obj = self.request(
            "POST",
            f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
            body=event,
            verb="create",
            resource="events.events.k8s.io",
            what=f"create event {namespace}/{event['metadata']['name']}",
        )
        return created

    def patch_event(self, namespace: str, name: str, patch: Obj) -> Obj:
        """Update an Event's series (one more occurrence of the same event)."""
        patched: Obj = self.request(
            "PATCH",
            f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}",
            body=patch,
            content_type="application/merge-patch+json",
            verb="patch",
            resource="events.events.k8s.io",
            what=f"patch event {namespace}/{name}",
        )
        return patched

    def list_budgets(self) -> tuple[list[Obj], str]:
        return self._list_all("/apis/policy/v1/poddisruptionbudgets", "poddisruptionbudgets")

    def watch_budgets(
        self, resource_version: str, timeout_seconds: int = 300, streams: Streams | None = None
    ) -> Iterator[Obj]:
        return self.watch(
            "/apis/policy/v1/poddisruptionbudgets",
            resource_version=resource_version,
            resource="poddisruptionbudgets",
            timeout_seconds=timeout_seconds,
            streams=streams,
        )

    def get_claim(self, namespace: str, name: str) -> Obj | None:
        try:
            claim: Obj = self.request(
                "GET",
                f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}",
                verb="get",
                resource="persistentvolumeclaims",
            )
        except KubeNotFound:
            return None
        return claim

    def list_volume_attachments(self) -> tuple[list[Obj], str]:
        return self._list_all("/apis/storage.k8s.io/v1/volumeattachments", "volumeattachments")

    def watch_volume_attachments(
        self, resource_version: str, timeout_seconds: int = 60, streams: Streams | None = None
    ) -> Iterator[Obj]:
        return self.watch(
            "/apis/storage.k8s.io/v1/volumeattachments",
            resource_version=resource_version,
            resource="volumeattachments",
            timeout_seconds=timeout_seconds,
            streams=streams,
        )
