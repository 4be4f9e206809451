"""How API answers become the drainer's errors (one table), and the client's own
retries, against kubesim.

The exact answers of the v1.33 apiserver (status, headers, body as it serializes
them) live here, with `ApiFront`, a plain-HTTP front that serves them in front of
kubesim; tests/test_drain.py drives the drain through both."""

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from drainer import errors
from drainer.kube import Kube, RetryPolicy, failure_in_success, translate
from kubesim import KubeSim
from kubesim.testing import eventually

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
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    break
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.flush()
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
    from kubernetes.client import Configuration

    return Kube(
        Configuration(host=front.url),
        StaticToken(front.sim.admin_token),
        request_timeout=5.0,
        retry=retry or RetryPolicy(attempts=3),
        sleep=sleep,
    )


def status(
    code: int, message: str, reason: str = "", causes: list[dict[str, Any]] | None = None
) -> bytes:
    body: dict[str, Any] = {"kind": "Status", "code": code, "message": message, "reason": reason}
    if causes is not None:
        body["details"] = {"causes": causes}
    return json.dumps(body).encode()


PDB_CAUSE = [
    {
        "reason": "DisruptionBudget",
        "message": "The disruption budget web needs 2 healthy pods and has 2 currently",
    }
]


@pytest.mark.parametrize(
    ("code", "body", "headers", "expected"),
    [
        (404, status(404, 'pods "x" not found', "NotFound"), {}, errors.KubeNotFound),
        (409, status(409, "Precondition failed", "Conflict"), {}, errors.KubeConflict),
        (410, status(410, "too old resource version", "Expired"), {}, errors.KubeGone),
        (401, status(401, "Unauthorized", "Unauthorized"), {}, errors.KubeUnauthorized),
        (403, status(403, "forbidden", "Forbidden"), {}, errors.KubeForbidden),
        (
            429,
            status(429, "Cannot evict pod", "TooManyRequests", PDB_CAUSE),
            {},
            errors.EvictionBlocked,
        ),
        (
            429,
            status(429, "too many requests", "TooManyRequests"),
            {"Retry-After": "3"},
            errors.KubeTooManyRequests,
        ),
        (
            500,
            status(
                500, "This pod has more than one PodDisruptionBudget, which ...", "InternalError"
            ),
            {},
            errors.MultipleBudgets,
        ),
        (500, status(500, "etcd timeout", "InternalError"), {}, errors.KubeServerError),
        (503, b"<html>bad gateway</html>", {}, errors.KubeServerError),
        (400, status(400, "bad request", "BadRequest"), {}, errors.KubeError),
    ],
)
def test_translate(
    code: int, body: bytes, headers: dict[str, str], expected: type[errors.KubeError]
) -> None:
    error = translate(
        code, body, headers, verb="create", resource="pods/eviction", what="evict pod ns/x"
    )

    assert type(error) is expected
    assert "evict pod ns/x" in str(error)


def test_translate__pdb_refusal_names_the_budget() -> None:
    error = translate(
        429,
        status(429, "Cannot evict", "TooManyRequests", PDB_CAUSE),
        {},
        verb="create",
        resource="pods/eviction",
        what="x",
    )

    assert isinstance(error, errors.EvictionBlocked)
    assert error.budget == "web"


def test_translate__throttling_keeps_retry_after() -> None:
    error = translate(
        429, status(429, "slow down"), {"Retry-After": "7"}, verb="list", resource="pods", what="x"
    )

    assert isinstance(error, errors.KubeTooManyRequests)
    assert error.retry_after == 7.0


def test_translate__forbidden_names_verb_resource_and_fix() -> None:
    error = translate(
        403, status(403, "no"), {}, verb="patch", resource="nodes", what="patch node n"
    )

    assert isinstance(error, errors.KubeForbidden)
    assert (error.verb, error.resource) == ("patch", "nodes")
    assert "RBAC denied 'patch' on 'nodes'" in str(error)
    assert "k8s-rbac/" in str(error)


# -- the real v1.33 answers, translated ---------------------------------------


def _translate(answer: RealAnswer) -> errors.KubeError:
    return translate(
        answer.status,
        answer.body,
        answer.headers,
        verb="create",
        resource="pods/eviction",
        what="evict pod shop/web-0",
    )


@pytest.mark.parametrize(
    ("answer", "expected", "attributes"),
    [
        pytest.param(
            namespace_terminating_403("web-0", "shop"),
            errors.NamespaceTerminating,
            {"namespace": "shop", "status": 403, "reason": "Forbidden"},
            id="403-NamespaceTerminating",
        ),
        pytest.param(
            rbac_403("web-0", "shop"),
            errors.KubeForbidden,
            {"verb": "create", "resource": "pods/eviction"},
            id="403-rbac",
        ),
        pytest.param(
            budget_refuses_403("web", "pdb disruptions allowed is negative"),
            errors.EvictionBlocked,
            {"budget": "web", "retry_after": None},
            id="403-budget-negative",
        ),
        pytest.param(
            budget_refuses_403(
                "web",
                "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
            ),
            errors.EvictionBlocked,
            {"budget": "web", "retry_after": None},
            id="403-budget-too-many-unconfirmed",
        ),
        pytest.param(
            budget_lags_429("web"),
            errors.EvictionBlocked,
            {"budget": "web", "retry_after": 10.0},
            id="429-budget-status-lags",
        ),
        pytest.param(
            budget_blocks_429("web"),
            errors.EvictionBlocked,
            {"budget": "web", "retry_after": None},
            id="429-budget-allows-none",
        ),
        pytest.param(
            throttled_429(3), errors.KubeTooManyRequests, {"retry_after": 3.0}, id="429-apf"
        ),
        pytest.param(TWO_BUDGETS_500, errors.MultipleBudgets, {}, id="500-two-budgets"),
    ],
)
def test_real_error_answers__translated_by_status_reason_and_causes(
    answer: RealAnswer, expected: type[errors.KubeError], attributes: dict[str, Any]
) -> None:
    error = _translate(answer)

    assert type(error) is expected
    assert {name: getattr(error, name) for name in attributes} == attributes
    assert "evict pod shop/web-0" in str(error)


def test_namespace_terminating_403__not_an_rbac_denial() -> None:
    error = _translate(namespace_terminating_403("web-0", "shop"))

    assert not isinstance(error, errors.KubeForbidden)
    assert "RBAC" not in str(error)
    assert "namespace shop is being terminated" in str(error)


def test_rbac_403__names_verb_resource_and_the_fix() -> None:
    error = _translate(rbac_403("web-0", "shop"))

    assert isinstance(error, errors.KubeForbidden)
    assert "RBAC denied 'create' on 'pods/eviction'" in str(error)
    assert 'cannot create resource "pods/eviction"' in str(error)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(TWO_BUDGETS_201, errors.MultipleBudgets, id="201-Failure-code-500"),
        pytest.param(
            RealAnswer(200, status_body("etcdserver: leader changed", 500)),
            errors.KubeServerError,
            id="200-Failure-other-500",
        ),
        pytest.param(
            RealAnswer(201, status_body("no code", 0)), errors.KubeServerError, id="no-code"
        ),
        pytest.param(EVICTED_201, None, id="201-Success"),
        pytest.param(
            RealAnswer(200, go_json({"kind": "Pod", "status": {"phase": "Failed"}})),
            None,
            id="a-failed-pod-is-not-a-failure",
        ),
    ],
)
def test_2xx_answers__a_failure_status_body_is_not_success(
    answer: RealAnswer, expected: type[errors.KubeError] | None
) -> None:
    error = failure_in_success(
        json.loads(answer.body),
        answer.headers,
        verb="create",
        resource="pods/eviction",
        what="evict pod shop/web-0",
    )

    assert (type(error) if error else None) is expected


class CountingToken:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.invalidations = 0

    def token(self) -> str:
        return self.tokens[min(self.invalidations, len(self.tokens) - 1)]

    def invalidate(self) -> None:
        self.invalidations += 1


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim() as running:
        running.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        yield running


def _kube(sim: KubeSim, token: CountingToken, sleeps: list[float]) -> Kube:
    configured = Kube.for_cluster(sim.url, sim.ca_pem, token, request_timeout=2.0)
    return Kube(configured.configuration, token, retry=RetryPolicy(attempts=4), sleep=sleeps.append)


def test_stale_token__one_new_token_and_one_retry(sim: KubeSim) -> None:
    token = CountingToken(["stale", sim.admin_token])
    kube = _kube(sim, token, [])

    assert kube.get_node("n1") is not None
    assert token.invalidations == 1


def test_refused_token__never_more_than_one_401_in_a_row(sim: KubeSim) -> None:
    token = CountingToken(["bad", "still-bad"])
    kube = _kube(sim, token, [])

    with pytest.raises(errors.KubeUnauthorized):
        kube.get_node("n1")
    assert [r.status for r in sim.requests()] == [401, 401]


def test_server_errors__retried_with_backoff_then_succeed(sim: KubeSim) -> None:
    sim.faults.add(
        _fault({"kind": "status", "status": 503, "count": 2, "path": "/api/v1/nodes/n1"})
    )
    sleeps: list[float] = []
    kube = _kube(sim, CountingToken([sim.admin_token]), sleeps)

    assert kube.get_node("n1") is not None
    assert len(sleeps) == 2
    assert 0 < sleeps[0] <= sleeps[1] * 2


def test_throttling__retry_after_respected(sim: KubeSim) -> None:
    sim.faults.add(
        _fault(
            {"kind": "status", "status": 429, "retry_after": 3, "count": 1, "path": "/api/v1/nodes"}
        )
    )
    sleeps: list[float] = []
    kube = _kube(sim, CountingToken([sim.admin_token]), sleeps)

    assert kube.get_node("n1") is not None
    assert sleeps == [3.0]


def test_server_errors__give_up_after_the_policy(sim: KubeSim) -> None:
    sim.faults.add(_fault({"kind": "status", "status": 500, "path": "/api/v1/nodes"}))
    kube = _kube(sim, CountingToken([sim.admin_token]), [])

    with pytest.raises(errors.KubeServerError):
        kube.get_node("n1")
    # kubesim files a request's record just after its answer has gone out.
    eventually(lambda: len(sim.requests()) == 4, timeout=2)
    assert len(sim.requests()) == 4


def test_wrong_ca__refused_with_a_clear_error(sim: KubeSim) -> None:
    from kubesim import certs

    other_ca = certs.generate().ca_pem
    kube = Kube.for_cluster(sim.url, other_ca, CountingToken([sim.admin_token]))

    with pytest.raises(errors.TlsVerificationError, match="does not verify against the cluster CA"):
        kube.get_node("n1")
    assert sim.requests() == []


def test_no_ca__refused_before_connecting(sim: KubeSim) -> None:
    with pytest.raises(errors.TlsVerificationError):
        Kube.for_cluster(sim.url, b"", CountingToken([sim.admin_token]))


def _fault(data: dict[str, Any]) -> Any:
    from kubesim.faults import Fault

    return Fault.from_json(data)


# -- the client, through a front that sends the real answers --------------------


@pytest.fixture
def front(sim: KubeSim) -> Iterator[ApiFront]:
    sim.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "default"},
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
            },
        }
    )
    running = ApiFront(sim)
    yield running
    running.close()


EVICTION = "/pods/web-0/eviction$"


def _web_0(sim: KubeSim) -> dict[str, Any]:
    return sim.get("Pod", "web-0", "default")


def test_two_budgets_answered_201_failure__raises_multiple_budgets_not_success(
    sim: KubeSim, front: ApiFront
) -> None:
    front.script("POST", EVICTION, TWO_BUDGETS_201)
    kube = front_kube(front)

    with pytest.raises(errors.MultipleBudgets, match="more than one PodDisruptionBudget"):
        kube.evict(_web_0(sim))
    assert len(front.requests("POST", EVICTION)) == 1, "not retried: retrying will not help"


def test_eviction_201_success__accepted(sim: KubeSim, front: ApiFront) -> None:
    front.script("POST", EVICTION, EVICTED_201)

    front_kube(front).evict(_web_0(sim))


def test_dry_run_eviction__dry_run_in_query_and_body(sim: KubeSim, front: ApiFront) -> None:
    front_kube(front).evict(_web_0(sim), dry_run=True)

    (request,) = front.requests("POST", EVICTION)
    assert request.query == {"dryRun": ["All"]}
    assert json.loads(request.body)["deleteOptions"]["dryRun"] == ["All"]
    assert request.status == 201
    assert not _web_0(sim)["metadata"].get("deletionTimestamp"), "nothing evicted"


def test_throttled_with_retry_after__client_waits_exactly_that(
    sim: KubeSim, front: ApiFront
) -> None:
    front.script("POST", EVICTION, throttled_429(3))
    sleeps: list[float] = []

    front_kube(front, sleep=sleeps.append).evict(_web_0(sim))

    assert sleeps == [3.0]
    assert [r.status for r in front.requests("POST", EVICTION)] == [429, 201]


def test_throttled_longer_than_the_client_waits__raised_for_the_caller_never_retried_early(
    sim: KubeSim, front: ApiFront
) -> None:
    front.script("POST", EVICTION, throttled_429(45))
    sleeps: list[float] = []
    kube = front_kube(front, sleep=sleeps.append, retry=RetryPolicy(max_retry_after=30.0))

    with pytest.raises(errors.KubeTooManyRequests) as raised:
        kube.evict(_web_0(sim))

    assert raised.value.retry_after == 45.0
    assert sleeps == []
    assert len(front.requests("POST", EVICTION)) == 1


@pytest.mark.parametrize("released", [True, False], ids=["released-to-pool", "already-closed"])
def test_streams_close_all__a_watch_that_ended_on_its_own__no_error(released: bool) -> None:
    # Found on the real control plane: a watch ended and went back to the pool just as
    # the drain stopped its followers; urllib3's shutdown() then raised out of the drain.
    import io

    import urllib3

    from drainer.kube import Streams

    response = urllib3.response.HTTPResponse(body=io.BytesIO(b""), preload_content=False)
    if released:
        # As urllib3 leaves a response whose connection went back to the pool.
        response._sock_shutdown = lambda how: None  # type: ignore[assignment]
    streams = Streams()
    assert streams.add(response)

    streams.close_all()  # must not raise

    assert not streams.add(urllib3.response.HTTPResponse(body=io.BytesIO(b"")))
