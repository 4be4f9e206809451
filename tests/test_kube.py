"""How API answers become the drainer's errors (one table), and the client's own
retries, against kubesim.

The exact answers of the v1.33 apiserver and `ApiFront`, which serves them in
front of kubesim, live in tests/realapi.py."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from realapi import (
    EVICTED_201,
    LOGIN_REDIRECT_302,
    TWO_BUDGETS_201,
    TWO_BUDGETS_500,
    ApiFront,
    RealAnswer,
    budget_blocks_429,
    budget_lags_429,
    budget_refuses_403,
    front_kube,
    go_json,
    namespace_terminating_403,
    policy_denied,
    rbac_403,
    status_body,
    throttled_429,
    webhook_denied_403,
)
from support.clock import FakeClock
from support.sims import sim_with_a_node  # noqa: F401  (the fixture `sim`)

from drainer import errors
from drainer.k8s.client import RetryPolicy
from drainer.k8s.kube import Kube
from drainer.k8s.status import failure_in_success, translate
from kubesim import KubeSim
from kubesim.auth import User
from kubesim.testing import eventually


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
        (
            403,
            status(
                403,
                'nodes "n" is forbidden: User "u" cannot patch resource "nodes" in API group ""'
                " at the cluster scope",
                "Forbidden",
            ),
            {},
            errors.KubeForbidden,
        ),
        (
            403,
            status(403, 'pods "x" is forbidden: not during business hours', "Forbidden"),
            {},
            errors.AdmissionDenied,
        ),
        (403, b"", {}, errors.KubeForbidden),
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


@pytest.mark.parametrize(
    ("code", "body", "verb", "expected"),
    [
        pytest.param(
            409,
            status(409, 'admission webhook "w" denied the request: busy', "Conflict"),
            "create",
            errors.AdmissionDenied,
            id="webhook-409-not-gone",
        ),
        pytest.param(
            404,
            status(404, 'admission webhook "w" denied the request: no', "NotFound"),
            "create",
            errors.AdmissionDenied,
            id="webhook-404-not-gone",
        ),
        pytest.param(
            403,
            status(
                403,
                'admission webhook "guard" denied the request: User "u" cannot delete '
                'resource "pods"',
                "Forbidden",
            ),
            "create",
            errors.AdmissionDenied,
            id="webhook-quoting-the-authorizer",
        ),
        pytest.param(
            403,
            status(
                403,
                'pods "x" is forbidden: User "a\\"b" cannot create resource "pods/eviction" '
                'in API group "" in the namespace "n"',
                "Forbidden",
            ),
            "create",
            errors.KubeForbidden,
            id="rbac-quoted-user-name",
        ),
        pytest.param(
            403, b'{"message": "Forbidden"}', "create", errors.KubeForbidden, id="proxy-json"
        ),
        pytest.param(
            403,
            status(403, "pods is forbidden: something else", "Forbidden"),
            "list",
            errors.KubeForbidden,
            id="a-read-never-admission",
        ),
    ],
)
def test_translate__admission_told_from_rbac_and_proxies(
    code: int, body: bytes, verb: str, expected: type[errors.KubeError]
) -> None:
    error = translate(code, body, {}, verb=verb, resource="pods/eviction", what="evict pod n/x")

    assert type(error) is expected
    if expected is errors.KubeForbidden and b"User" not in body:
        assert "RBAC denied" not in str(error) and "proxy" in str(error)


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


@pytest.mark.parametrize(
    ("header", "details", "expected"),
    [
        pytest.param("inf", None, None, id="header-inf"),
        pytest.param("nan", None, None, id="header-nan"),
        pytest.param("-5", None, None, id="header-negative"),
        pytest.param("99999999999", None, 600.0, id="header-huge-capped"),
        pytest.param("1e400", None, None, id="header-overflows-to-inf"),
        pytest.param("", 99999999999, 600.0, id="details-huge-capped"),
        pytest.param("", float("inf"), None, id="details-inf"),
        pytest.param("", True, None, id="details-bool"),
        pytest.param("junk", 12, 12.0, id="bad-header-then-details"),
    ],
)
def test_translate__retry_after_only_finite_positive_and_capped(
    header: str, details: Any, expected: float | None
) -> None:
    """A Retry-After of inf or 1e11 (a proxy's, a forged one) made threading.Event.wait
    raise OverflowError in a tracker's thread, which died; it is now a finite positive
    number, at most 600 s (status.MAX_RETRY_AFTER), from the header and
    details.retryAfterSeconds alike."""
    body: dict[str, Any] = {"kind": "Status", "code": 429, "message": "slow down"}
    if details is not None:
        body["details"] = {"retryAfterSeconds": details}
    headers = {"Retry-After": header} if header else {}

    error = translate(
        429, json.dumps(body).encode(), headers, verb="list", resource="pods", what="x"
    )

    assert isinstance(error, errors.KubeTooManyRequests)
    assert error.retry_after == expected


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_translate__a_redirect_is_an_error_naming_it_and_where_it_points(code: int) -> None:
    location = {"Location": "https://sso.example.com/login"}
    error = translate(code, b"", location, verb="list", resource="pods", what="list pods")

    assert type(error) is errors.KubeError, "not retried: the same request meets the same"
    assert error.status == code
    assert f"redirect (HTTP {code} to https://sso.example.com/login)" in str(error)
    assert "proxy or gateway" in str(error)


def test_translate__forbidden_names_verb_resource_and_fix() -> None:
    error = translate(
        403,
        status(
            403,
            'nodes "n" is forbidden: User "eks-node-drainer" cannot patch resource "nodes" '
            'in API group "" at the cluster scope',
        ),
        {},
        verb="patch",
        resource="nodes",
        what="patch node n",
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
        pytest.param(
            policy_denied("web-0", "no-evict", "no-evict-b", "web is pinned"),
            errors.AdmissionDenied,
            {"status": 403},
            id="403-admission-policy",
        ),
        pytest.param(
            policy_denied("web-0", "no-evict", "no-evict-b", "web is pinned", code=422),
            errors.AdmissionDenied,
            {"status": 422},
            id="422-admission-policy",
        ),
        pytest.param(
            webhook_denied_403("validation.gatekeeper.sh", "pinned"),
            errors.AdmissionDenied,
            {"status": 403},
            id="403-webhook",
        ),
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


def _kube(sim: KubeSim, token: CountingToken, sleeps: list[float]) -> Kube:
    configured = Kube.for_cluster(sim.url, sim.ca_pem, token, request_timeout=2.0)
    return Kube(configured.transport, token, retry=RetryPolicy(attempts=4), sleep=sleeps.append)


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


def test_403_right_after_the_server_was_unreachable__retried_as_its_start_up(
    sim: KubeSim,
) -> None:
    # A restarted kube-apiserver serves before its authorizer has the RBAC rules (the
    # real control plane, restarted mid-drain by tests/e2e/test_chaos.py, did this).
    sim.faults.add(_fault({"kind": "drop", "count": 1, "path": "/api/v1/nodes/n1"}))
    # kubesim counts a request against every rule it matches: the drop takes one 403.
    sim.faults.add(
        _fault({"kind": "status", "status": 403, "count": 2, "path": "/api/v1/nodes/n1"})
    )
    sleeps: list[float] = []
    kube = _kube(sim, CountingToken([sim.admin_token]), sleeps)

    assert kube.get_node("n1") is not None
    eventually(lambda: len(sim.requests()) >= 2, timeout=2)
    # -1: the dropped connection (its record)
    assert [r.status for r in sim.requests()] == [-1, 403, 200]


def test_403_with_no_outage_before__rbac_denial_at_once(sim: KubeSim) -> None:
    sim.faults.add(
        _fault({"kind": "status", "status": 403, "count": 1, "path": "/api/v1/nodes/n1"})
    )
    sleeps: list[float] = []
    kube = _kube(sim, CountingToken([sim.admin_token]), sleeps)

    with pytest.raises(errors.KubeForbidden, match="RBAC denied"):
        kube.get_node("n1")
    assert sleeps == []


def test_403_from_a_server_not_ready_yet__retried_as_its_start_up(sim: KubeSim) -> None:
    # A server restarted before this client ever reached it (the drainer's first
    # request, seconds after a restart): no outage seen, but /readyz says it starts.
    sim.faults.add(
        _fault({"kind": "status", "status": 403, "count": 2, "path": "/api/v1/nodes/n1"})
    )
    sim.faults.add(_fault({"kind": "status", "status": 500, "count": 1, "path": "^/readyz$"}))
    sleeps: list[float] = []
    kube = _kube(sim, CountingToken([sim.admin_token]), sleeps)

    assert kube.get_node("n1") is not None
    statuses = [(r.path, r.status) for r in sim.requests()]
    assert statuses == [
        ("/api/v1/nodes/n1", 403),
        ("/readyz", 500),
        ("/api/v1/nodes/n1", 403),
        ("/api/v1/nodes/n1", 200),
    ]


def test_403_that_lasts_past_an_outage__rbac_denial_after_the_policy(sim: KubeSim) -> None:
    sim.faults.add(_fault({"kind": "drop", "count": 1, "path": "/api/v1/nodes/n1"}))
    sim.faults.add(_fault({"kind": "status", "status": 403, "path": "/api/v1/nodes/n1"}))
    sleeps: list[float] = []
    kube = _kube(sim, CountingToken([sim.admin_token]), sleeps)

    with pytest.raises(errors.KubeForbidden, match="RBAC denied"):
        kube.get_node("n1")
    assert len(sleeps) == 3  # RetryPolicy(attempts=4): four requests in all


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


def test_redirect_with_no_body__a_list_of_pods_is_an_error_not_an_empty_list(
    sim: KubeSim, front: ApiFront
) -> None:
    """A 302 (an auth proxy's or gateway's redirect to its login page) with an empty
    body was read as the JSON `{}`: the node's pods listed as none. Any non-2xx is an
    error (client-go's rule), named a redirect, and not retried."""
    front.script("GET", r"^/api/v1/pods$", LOGIN_REDIRECT_302, count=None)
    kube = front_kube(front)
    try:
        with pytest.raises(errors.KubeError, match="redirect") as raised:
            pods, _ = kube.list_pods_on_node("n1")
            pytest.fail(f"a 302 read as a success: {len(pods)} pods on the node")
    finally:
        kube.close()

    assert "https://sso.example.com/login" in str(raised.value)
    assert len(front.requests("GET", r"^/api/v1/pods$")) == 1, "a redirect is no outage"


def test_redirect_on_eviction__the_pod_is_not_counted_evicted(
    sim: KubeSim, front: ApiFront
) -> None:
    """The same 302 on an eviction's POST returned {} from Kube.evict: the eviction
    passed for accepted, though nothing was evicted."""
    front.script("POST", EVICTION, LOGIN_REDIRECT_302, count=None)
    kube = front_kube(front)
    try:
        with pytest.raises(errors.KubeError, match="redirect"):
            kube.evict(_web_0(sim))
    finally:
        kube.close()

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
def test_streams_close_all__a_watch_that_ended_on_its_own__no_error(
    sim: KubeSim, released: bool
) -> None:
    # Found on the real control plane: a watch ended and went back to the pool just as
    # the drain stopped its trackers; the shutdown then raised out of the drain.
    from drainer.k8s.client import Streams

    kube = _kube(sim, CountingToken([sim.admin_token]), [])
    response = kube.transport.send("GET", "/api/v1/nodes", bearer=sim.admin_token, timeout=5.0)
    streams = Streams()
    assert streams.add(response)
    if released:
        response.read()  # its connection back in the pool
    else:
        response.close()

    streams.close_all()  # must not raise

    later = kube.transport.send("GET", "/api/v1/nodes", bearer=sim.admin_token, timeout=5.0)
    assert not streams.add(later)
    assert kube.get_node("no-such-node") is None  # the pool still serves


# -- kubeconfig users: an exec credential plugin, a static token ----------------

PLUGIN = """\
import datetime, json, pathlib, sys

here = pathlib.Path(sys.argv[1])
state = json.loads((here / "state.json").read_text())
with (here / "runs").open("a") as runs:
    runs.write("x")
run = len((here / "runs").read_text())
if state["fail"]:
    sys.exit(state["fail"])
status = {"token": state["tokens"][min(run, len(state["tokens"])) - 1]}
if state["lifetime"] is not None:
    now = float((here / "now").read_text())
    expiry = datetime.datetime.fromtimestamp(now + state["lifetime"], datetime.timezone.utc)
    status["expirationTimestamp"] = expiry.strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "kind": "ExecCredential",
    "status": status,
}))
"""
EXEC_USER = "exec-user"
ADMIN_GROUPS = ("system:masters", "system:authenticated")


class ExecPlugin(FakeClock):
    """An exec credential plugin in a directory of its own, as `aws eks
    update-kubeconfig` configures one: each run prints the next of `tokens` (the last
    again once they run out), with an expiry `lifetime` seconds after the time in its
    `now` file (this object is the clock the client is given), and counts itself."""

    def __init__(
        self,
        directory: Path,
        tokens: list[str],
        *,
        lifetime: float | None = None,
        fail: int = 0,
    ) -> None:
        self.directory = directory
        self.script = directory / "plugin.py"
        self.script.write_text(PLUGIN)
        state = {"tokens": tokens, "lifetime": lifetime, "fail": fail}
        (directory / "state.json").write_text(json.dumps(state))
        super().__init__(float(int(time.time())))
        (directory / "now").write_text(str(self.now))

    def advance(self, seconds: float) -> None:
        super().advance(seconds)
        (self.directory / "now").write_text(str(self.now))

    @property
    def runs(self) -> int:
        runs = self.directory / "runs"
        return len(runs.read_text()) if runs.exists() else 0

    def kubeconfig(self, sim: KubeSim) -> Path:
        return _kubeconfig(
            self.directory,
            sim,
            {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1beta1",
                    "command": sys.executable,
                    "args": [str(self.script), str(self.directory)],
                    "interactiveMode": "Never",
                }
            },
        )


def _kubeconfig(directory: Path, sim: KubeSim, user: dict[str, Any]) -> Path:
    path = directory / "kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "sim",
                "cluster": {"server": sim.url, "certificate-authority-data": sim.ca_data},
            }
        ],
        "users": [{"name": EXEC_USER, "user": user}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": EXEC_USER}}],
        "current-context": "sim",
    }
    path.write_text(json.dumps(config))
    return path


def _admit(sim: KubeSim, *tokens: str) -> None:
    """Tokens the API server accepts, as an administrator's."""
    for token in tokens:
        sim.authenticator.tokens[token] = User(
            EXEC_USER, ("system:masters", "system:authenticated")
        )


def test_exec_token_refused_before_its_stated_expiry__plugin_runs_again_once_and_the_call_succeeds(
    sim: KubeSim, tmp_path: Path
) -> None:
    plugin = ExecPlugin(tmp_path, ["exec-1", "exec-2"], lifetime=600)
    _admit(sim, "exec-1", "exec-2")
    kube = Kube.from_kubeconfig(str(plugin.kubeconfig(sim)))
    assert kube.get_node("n1") is not None

    del sim.authenticator.tokens["exec-1"]  # refused 10 minutes before its stated expiry
    node = kube.get_node("n1")

    assert node is not None
    assert plugin.runs == 2
    assert [r.status for r in sim.requests()] == [200, 401, 200]


def test_exec_token_with_a_short_stated_expiry__one_plugin_run_for_many_requests(
    sim: KubeSim, tmp_path: Path
) -> None:
    # A minute: the official client's hook, which refreshes 5 minutes early, ran the
    # plugin again before every request (19 runs for these 18).
    plugin = ExecPlugin(tmp_path, ["exec-1"], lifetime=60)
    _admit(sim, "exec-1")
    kube = Kube.from_kubeconfig(str(plugin.kubeconfig(sim)))

    for _ in range(18):
        kube.get_node("n1")

    assert plugin.runs == 1


def test_exec_token_with_a_short_stated_expiry__plugin_runs_once_per_lifetime(
    sim: KubeSim, tmp_path: Path
) -> None:
    plugin = ExecPlugin(tmp_path, ["exec-1"], lifetime=60)
    _admit(sim, "exec-1")
    kube = Kube.from_kubeconfig(str(plugin.kubeconfig(sim)), clock=plugin)

    for _ in range(18):  # 3 minutes: 3 lifetimes
        kube.get_node("n1")
        plugin.advance(10)

    # At 0 s, then at 60 and 120 s: each token used until 6 s (a tenth of its minute)
    # before its expiry at the latest.
    assert plugin.runs == 3
    assert {r.status for r in sim.requests()} == {200}


def test_exec_token_refused_twice__clear_error_naming_the_plugin_and_what_to_check(
    sim: KubeSim, tmp_path: Path
) -> None:
    plugin = ExecPlugin(tmp_path, ["unknown-1", "unknown-2"], lifetime=600)
    kube = Kube.from_kubeconfig(str(plugin.kubeconfig(sim)))

    with pytest.raises(errors.KubeUnauthorized) as raised:
        kube.get_node("n1")

    message = str(raised.value)
    assert plugin.runs == 2
    assert [r.status for r in sim.requests()] == [401, 401]
    assert message.startswith("get node n1: ")
    assert "exec credential plugin again" in message
    assert f"kubeconfig user '{EXEC_USER}'" in message
    assert str(plugin.script) in message
    assert "IAM" not in message  # not the Lambda's role: the plugin's identity is to check


def test_exec_plugin_that_fails__clear_error_before_any_request(
    sim: KubeSim, tmp_path: Path
) -> None:
    plugin = ExecPlugin(tmp_path, ["exec-1"], fail=3)

    with pytest.raises(errors.CredentialsUnavailable, match="process returned 3") as raised:
        Kube.from_kubeconfig(str(plugin.kubeconfig(sim)))

    assert str(plugin.script) in str(raised.value)
    assert sim.requests() == []


def test_exec_plugin_that_gives_a_client_certificate__used_as_the_client_certificate(
    sim: KubeSim, tmp_path: Path
) -> None:
    script = tmp_path / "cert-plugin.py"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {
            "clientCertificateData": sim.tls.cert_pem.decode(),
            "clientKeyData": sim.tls.key_pem.decode(),
        },
    }
    script.write_text(f"import json\nprint(json.dumps({credential!r}))\n")
    exec_user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(script)],
        }
    }

    kube = Kube.from_kubeconfig(str(_kubeconfig(tmp_path, sim, exec_user)))

    assert Path(kube.transport.endpoint.cert_file).read_bytes() == sim.tls.cert_pem
    assert Path(kube.transport.endpoint.key_file).read_bytes() == sim.tls.key_pem


def test_kubeconfig_token_file_rotated__read_again_after_a_401_and_each_minute(
    sim: KubeSim, tmp_path: Path
) -> None:
    """A tokenFile something else rotates (a projected service-account token, a
    sidecar's): a drain of hours outlives the token it started with."""
    token_file = tmp_path / "token"
    token_file.write_text("file-1\n")
    _admit(sim, "file-1", "file-2", "file-3")
    clock = FakeClock()
    config = _kubeconfig(tmp_path, sim, {"tokenFile": str(token_file)})
    kube = Kube.from_kubeconfig(str(config), clock=clock)
    assert kube.get_node("n1") is not None

    token_file.write_text("file-2\n")
    del sim.authenticator.tokens["file-1"]  # rotated, and the old one revoked
    assert kube.get_node("n1") is not None
    token_file.write_text("file-3\n")
    clock.advance(60)
    del sim.authenticator.tokens["file-2"]  # read again before it is refused
    assert kube.get_node("n1") is not None

    assert [r.status for r in sim.requests()] == [200, 401, 200, 200]


def test_kubeconfig_static_token__works_and_a_refused_one_names_the_kubeconfig_user(
    sim: KubeSim, tmp_path: Path
) -> None:
    good = Kube.from_kubeconfig(str(_kubeconfig(tmp_path, sim, {"token": sim.admin_token})))
    assert good.get_node("n1") is not None
    bad = Kube.from_kubeconfig(str(_kubeconfig(tmp_path, sim, {"token": "revoked"})))

    with pytest.raises(errors.KubeUnauthorized) as raised:
        bad.get_node("n1")

    assert [r.status for r in sim.requests()] == [200, 401]  # nothing to renew it with
    assert f"kubeconfig user '{EXEC_USER}'" in str(raised.value)
    assert "IAM" not in str(raised.value)
