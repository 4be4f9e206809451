"""How API answers become the drainer's errors (one table), and the client's own
retries, against kubesim."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from drainer import errors
from drainer.kube import Kube, RetryPolicy, translate
from kubesim import KubeSim


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
