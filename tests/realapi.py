"""The exact answers of the v1.33 apiserver (status, headers, body as it serializes
them), `ApiFront`, a plain-HTTP front that serves them in front of kubesim, and a
drainer client that talks through it. tests/test_kube.py checks how each answer is
translated; tests/test_drain.py drives the drain through them."""

from __future__ import annotations

import dataclasses
import http.client
import http.server
import json
import re
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from drainer.k8s.client import RetryPolicy
from drainer.k8s.kube import Kube
from kubesim import KubeSim

# -- the real answers ---------------------------------------------------------


def go_json(obj: dict[str, Any]) -> bytes:
    """JSON as Go's encoding/json writes it (no spaces)."""
    return json.dumps(obj, separators=(",", ":")).encode()


def status_body(
    message: str,
    code: int,
    reason: str = "",
    details: dict[str, Any] | None = None,
    outcome: str = "Failure",
) -> bytes:
    """A metav1.Status in the apiserver's field order, empty fields omitted."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}}
    body["status"] = outcome
    if message:
        body["message"] = message
    if reason:
        body["reason"] = reason
    if details:
        body["details"] = details
    body["code"] = code
    return go_json(body)


@dataclass(frozen=True)
class RealAnswer:
    """One answer byte for byte as kube-apiserver v1.33 sends it."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})


JSON = {"Content-Type": "application/json"}
TWO_BUDGETS_MESSAGE = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)


def namespace_terminating_403(pod: str, namespace: str) -> RealAnswer:
    """The namespace lifecycle admission refusing an eviction in a namespace being
    deleted: admission.NewForbidden (errors.NewForbidden for the resource "pods" and
    the pod's name) plus the cause NamespaceTerminating (a cause's type is its JSON
    "reason")."""
    return RealAnswer(
        403,
        status_body(
            f'pods "{pod}" is forbidden: unable to create new content in namespace '
            f"{namespace} because it is being terminated",
            403,
            "Forbidden",
            {
                "name": pod,
                "kind": "pods",
                "causes": [
                    {
                        "reason": "NamespaceTerminating",
                        "message": f"namespace {namespace} is being terminated",
                        "field": "metadata.namespace",
                    }
                ],
            },
        ),
    )


def rbac_403(pod: str, namespace: str, user: str = "eks-node-drainer") -> RealAnswer:
    """The authorization filter's refusal (responsewriters.ForbiddenStatusError)."""
    return RealAnswer(
        403,
        status_body(
            f'pods "{pod}" is forbidden: User "{user}" cannot create resource "pods/eviction" '
            f'in API group "" in the namespace "{namespace}"',
            403,
            "Forbidden",
            {"name": pod, "kind": "pods"},
        ),
        {**JSON, "X-Content-Type-Options": "nosniff"},
    )


def policy_denied(
    pod: str, policy: str, binding: str, message: str, *, code: int = 403
) -> RealAnswer:
    """A ValidatingAdmissionPolicy refusing an eviction (its validation's `reason`
    Forbidden: 403; the default, Invalid: 422): the policy plugin's StatusError on
    the pod, the message naming the policy and its binding."""
    reason = "Forbidden" if code == 403 else "Invalid"
    text = (
        f"pods \"{pod}\" is forbidden: ValidatingAdmissionPolicy '{policy}' with binding "
        f"'{binding}' denied request: {message}"
    )
    return RealAnswer(
        code,
        status_body(text, code, reason, {"name": pod, "kind": "pods"}),
    )


def webhook_denied_403(webhook: str, message: str) -> RealAnswer:
    """A validating webhook answering allowed=false with code 403, as
    controller-runtime's admission.Denied() does (Gatekeeper, Kyverno)."""
    return RealAnswer(
        403,
        status_body(
            f'admission webhook "{webhook}" denied the request: {message}', 403, "Forbidden"
        ),
    )


def budget_refuses_403(budget: str, reason: str) -> RealAnswer:
    """checkAndDecrement's other refusals: errors.NewForbidden on the budget itself
    (a negative disruptionsAllowed; too many evictions not yet confirmed)."""
    return RealAnswer(
        403,
        status_body(
            f'poddisruptionbudgets.policy "{budget}" is forbidden: {reason}',
            403,
            "Forbidden",
            {"name": budget, "group": "policy", "kind": "poddisruptionbudget"},
        ),
    )


def budget_lags_429(budget: str) -> RealAnswer:
    """checkAndDecrement when the budget's status.observedGeneration lags its
    generation: errors.NewTooManyRequests(..., 10) plus a DisruptionBudget cause;
    the Status writer turns retryAfterSeconds into a Retry-After header."""
    return RealAnswer(
        429,
        status_body(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            429,
            "TooManyRequests",
            {
                "causes": [
                    {
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {budget} is still being processed "
                        "by the server.",
                    }
                ],
                "retryAfterSeconds": 10,
            },
        ),
        {**JSON, "Retry-After": "10"},
    )


def budget_blocks_429(budget: str, desired: int = 2, current: int = 2) -> RealAnswer:
    """checkAndDecrement when disruptionsAllowed is 0: retryAfterSeconds 0 (omitted),
    so no Retry-After."""
    return RealAnswer(
        429,
        status_body(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            429,
            "TooManyRequests",
            {
                "causes": [
                    {
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {budget} needs {desired} healthy "
                        f"pods and has {current} currently",
                    }
                ]
            },
        ),
    )


def throttled_429(retry_after: int) -> RealAnswer:
    """API priority and fairness rejecting a request: http.Error, plain text."""
    return RealAnswer(
        429,
        b"Too many requests, please try again later.\n",
        {
            "Content-Type": "text/plain; charset=utf-8",
            "X-Content-Type-Options": "nosniff",
            "Retry-After": str(retry_after),
        },
    )


# A 2xx whose body is a Failure Status: what the eviction handler's returned Status
# would be if it were written as the create's 201. The drainer reads every 2xx body.
TWO_BUDGETS_201 = RealAnswer(201, status_body(TWO_BUDGETS_MESSAGE, 500))
# The real v1.33.13 apiserver (measured by tests/e2e/test_conformance.py): the
# returned Failure Status written with its own code, HTTP 500, no reason.
TWO_BUDGETS_500 = RealAnswer(500, status_body(TWO_BUDGETS_MESSAGE, 500))
EVICTED_201 = RealAnswer(201, status_body("", 201, outcome="Success"))
# Not the API server's: an auth proxy's or an SSO gateway's redirect to its login
# page, with an empty body (the API server never redirects an API call).
LOGIN_REDIRECT_302 = RealAnswer(302, b"", {"Location": "https://sso.example.com/login"})


# -- a front that serves them before kubesim ---------------------------------


@dataclass
class Script:
    method: str
    path: str  # a regular expression searched in the path
    answer: RealAnswer
    count: int | None = 1  # None: every matching request
    then: Callable[[], None] | None = None  # runs before the answer is sent
    hits: int = 0


@dataclass(frozen=True)
class Seen:
    at: float  # on the front's clock
    method: str
    path: str
    query: dict[str, list[str]]
    body: bytes
    status: int
    scripted: bool


class ApiFront:
    """Plain HTTP on 127.0.0.1: scripted answers for the requests they match, every
    other request passed to kubesim over HTTPS (watches streamed as they come);
    every request recorded with the time on `clock`."""

    def __init__(self, sim: KubeSim, clock: Callable[[], float] = time.time) -> None:
        self.sim = sim
        self.clock = clock
        self.scripts: list[Script] = []
        self.seen: list[Seen] = []
        self.drop_event: Callable[[dict[str, Any]], bool] | None = None
        """Which watch events the front drops, as a stream that broke would lose them."""
        self.told_deleted: set[str] = set()
        """namespace/name of every object a watch's DELETED event has passed the front
        for, on its way to the client."""
        self._lock = threading.Lock()
        self._context = ssl.create_default_context(cadata=sim.ca_pem.decode())
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                front._serve(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def script(
        self,
        method: str,
        path: str,
        answer: RealAnswer,
        *,
        count: int | None = 1,
        then: Callable[[], None] | None = None,
    ) -> None:
        with self._lock:
            self.scripts.append(Script(method, path, answer, count, then))

    def requests(self, method: str = "", path: str = "") -> list[Seen]:
        with self._lock:
            return [
                r
                for r in self.seen
                if (not method or r.method == method) and re.search(path, r.path)
            ]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _take(self, method: str, path: str) -> Script | None:
        with self._lock:
            for script in self.scripts:
                if script.method != method or not re.search(script.path, path):
                    continue
                if script.count is None or script.hits < script.count:
                    script.hits += 1
                    return script
        return None

    def _serve(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        url = urllib.parse.urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        script = self._take(handler.command, url.path)
        record = Seen(
            self.clock(),
            handler.command,
            url.path,
            urllib.parse.parse_qs(url.query),
            body,
            script.answer.status if script else 0,
            script is not None,
        )
        with self._lock:
            self.seen.append(record)
        if script is not None:
            if script.then is not None:
                script.then()
            handler.send_response(script.answer.status)
            for name, value in script.answer.headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(script.answer.body)))
            handler.end_headers()
            handler.wfile.write(script.answer.body)
            return
        self._forward(handler, body, record)

    def _dropped(self, line: bytes) -> bool:
        assert self.drop_event is not None
        try:
            return self.drop_event(json.loads(line))
        except ValueError:
            return False

    def _note_deleted(self, lines: list[bytes]) -> None:
        for line in lines:
            if b'"DELETED"' not in line:
                continue
            try:
                metadata = json.loads(line)["object"]["metadata"]
            except (ValueError, KeyError, TypeError):
                continue
            with self._lock:
                self.told_deleted.add(f"{metadata.get('namespace', '')}/{metadata['name']}")

    def _forward(
        self, handler: http.server.BaseHTTPRequestHandler, body: bytes, record: Seen
    ) -> None:
        upstream = http.client.HTTPSConnection(
            "127.0.0.1", self.sim.port, context=self._context, timeout=600
        )
        headers = {
            k: v
            for k, v in handler.headers.items()
            if k.lower() in ("authorization", "content-type", "accept", "user-agent")
        }
        try:
            upstream.request(handler.command, handler.path, body=body or None, headers=headers)
            response = upstream.getresponse()
            with self._lock:
                index = self.seen.index(record)
                self.seen[index] = dataclasses.replace(record, status=response.status)
            handler.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    handler.send_header(name, value)
            if response.getheader("Transfer-Encoding", "").lower() != "chunked":
                data = response.read()
                handler.send_header("Content-Length", str(len(data)))
                handler.end_headers()
                handler.wfile.write(data)
                return
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            pending = b""
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    break
                *lines, pending = (pending + chunk).split(b"\n")
                if self.drop_event is not None:  # whole lines only, some of them dropped
                    lines = [line for line in lines if not self._dropped(line)]
                    chunk = b"".join(line + b"\n" for line in lines)
                    if not chunk:
                        continue
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.flush()
                self._note_deleted(lines)
            handler.wfile.write(b"0\r\n\r\n")
        except (OSError, http.client.HTTPException):
            handler.close_connection = True
        finally:
            upstream.close()


class StaticToken:
    def __init__(self, token: str) -> None:
        self._token = token

    def token(self) -> str:
        return self._token

    def invalidate(self) -> None:
        pass


def front_kube(
    front: ApiFront,
    *,
    sleep: Callable[[float], None] = time.sleep,
    retry: RetryPolicy | None = None,
) -> Kube:
    """A drainer client (the admin identity) that talks to kubesim through `front`."""
    from drainer.k8s.transport import Endpoint, Transport

    return Kube(
        Transport(Endpoint(front.url)),
        StaticToken(front.sim.admin_token),
        request_timeout=5.0,
        retry=retry or RetryPolicy(attempts=3),
        sleep=sleep,
    )
