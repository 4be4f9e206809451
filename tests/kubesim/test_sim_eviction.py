"""pods/eviction: each answer of the real server, through the official Python client."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubesim import KubeSim
from kubesim.api import is_pod_ready
from kubesim.testing import eventually, node, pdb, pod, request


def _eviction(name: str, uid: str | None = None, dry_run: bool = False) -> Any:
    options = None
    if uid is not None or dry_run:
        options = k8s.V1DeleteOptions(
            preconditions=k8s.V1Preconditions(uid=uid) if uid else None,
            dry_run=["All"] if dry_run else None,
        )
    return k8s.V1Eviction(
        metadata=k8s.V1ObjectMeta(name=name, namespace="default"), delete_options=options
    )


def _ready_pods(sim: KubeSim, names: list[str], labels: dict[str, str]) -> list[Any]:
    sim.apply([node("n1"), node("n2")])
    for i, name in enumerate(names):
        sim.apply(pod(name, node_name=f"n{i % 2 + 1}", labels=labels))
    return eventually(
        lambda: (
            [p for p in sim.list("Pod", "default") if is_pod_ready(p)]
            if all(is_pod_ready(p) for p in sim.list("Pod", "default"))
            else []
        ),
        what="pods Ready",
    )


def _status(error: ApiException) -> Any:
    import json

    return json.loads(error.body or "")


def test_eviction__budget_allows__201_and_pod_terminates(sim: KubeSim, core: Any) -> None:
    _ready_pods(sim, ["web-1", "web-2"], {"app": "web"})
    sim.apply(pdb("web", {"app": "web"}, max_unavailable=1))

    core.create_namespaced_pod_eviction("web-1", "default", _eviction("web-1"))

    eventually(lambda: "web-1" not in [p["metadata"]["name"] for p in sim.list("Pod")])


def test_eviction__raw_answer__201_status_success(sim: KubeSim) -> None:
    _ready_pods(sim, ["web-1"], {"app": "web"})

    response = request(
        sim,
        "POST",
        "/api/v1/namespaces/default/pods/web-1/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-1"}},
    )

    assert response.status == 201
    assert response.json()["kind"] == "Status"
    assert response.json()["status"] == "Success"


def test_eviction__pdb_exhausted__429_names_budget(sim: KubeSim, core: Any) -> None:
    _ready_pods(sim, ["web-1", "web-2"], {"app": "web"})
    sim.apply(pdb("web-budget", {"app": "web"}, min_available=2))

    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod_eviction("web-1", "default", _eviction("web-1"))

    assert raised.value.status == 429
    status = _status(raised.value)
    assert status["reason"] == "TooManyRequests"
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget web-budget needs 2 healthy pods and has 2 currently",
        }
    ]
    assert sim.get("Pod", "web-1", "default")["metadata"].get("deletionTimestamp") is None


def test_eviction__second_eviction_while_first_pod_terminates__429(sim: KubeSim, core: Any) -> None:
    annotations = {"kubesim.io/shutdown-seconds": "30"}
    sim.apply([node("n1")])
    for name in ("web-1", "web-2", "web-3"):
        sim.apply(pod(name, node_name="n1", labels={"app": "web"}, annotations=annotations))
    eventually(lambda: all(is_pod_ready(p) for p in sim.list("Pod", "default")))
    sim.apply(pdb("web", {"app": "web"}, max_unavailable=1))

    core.create_namespaced_pod_eviction("web-1", "default", _eviction("web-1"))
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod_eviction("web-2", "default", _eviction("web-2"))

    assert raised.value.status == 429


def test_eviction__two_budgets_match__500(sim: KubeSim, core: Any) -> None:
    _ready_pods(sim, ["web-1", "web-2"], {"app": "web", "tier": "front"})
    sim.apply(pdb("by-app", {"app": "web"}, max_unavailable=1))
    sim.apply(pdb("by-tier", {"tier": "front"}, max_unavailable=1))

    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod_eviction("web-1", "default", _eviction("web-1"))

    assert raised.value.status == 500
    assert "more than one PodDisruptionBudget" in _status(raised.value)["message"]


def test_eviction__uid_precondition_mismatch__409(sim: KubeSim, core: Any) -> None:
    _ready_pods(sim, ["web-1"], {"app": "web"})

    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod_eviction(
            "web-1", "default", _eviction("web-1", uid="00000000-0000-0000-0000-000000000000")
        )

    assert raised.value.status == 409
    status = _status(raised.value)
    assert status["reason"] == "Conflict"
    assert "Precondition failed: UID in precondition" in status["message"]
    assert sim.get("Pod", "web-1", "default")["metadata"].get("deletionTimestamp") is None


def test_eviction__uid_precondition_matches__201(sim: KubeSim, core: Any) -> None:
    [web] = _ready_pods(sim, ["web-1"], {"app": "web"})

    core.create_namespaced_pod_eviction(
        "web-1", "default", _eviction("web-1", uid=web["metadata"]["uid"])
    )

    eventually(lambda: not sim.list("Pod", "default"))


def test_eviction__missing_pod__404(core: Any) -> None:
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod_eviction("ghost", "default", _eviction("ghost"))

    assert raised.value.status == 404
    assert _status(raised.value)["message"] == 'pods "ghost" not found'


def test_eviction__pod_already_terminating__success_despite_exhausted_budget(
    sim: KubeSim, core: Any
) -> None:
    sim.apply([node("n1")])
    for name in ("web-1", "web-2"):
        sim.apply(
            pod(
                name,
                node_name="n1",
                labels={"app": "web"},
                annotations={"kubesim.io/shutdown-seconds": "60"},
            )
        )
    eventually(lambda: all(is_pod_ready(p) for p in sim.list("Pod", "default")))
    core.delete_namespaced_pod("web-1", "default")
    sim.apply(pdb("web", {"app": "web"}, min_available=2))

    core.create_namespaced_pod_eviction("web-1", "default", _eviction("web-1"))

    assert sim.get("Pod", "web-1", "default")["metadata"]["deletionTimestamp"]


def test_eviction__pending_pod__ignores_budget(sim: KubeSim, core: Any) -> None:
    sim.apply(pod("web-1", labels={"app": "web"}))  # no node: stays Pending
    sim.apply(pdb("web", {"app": "web"}, min_available=1))

    core.create_namespaced_pod_eviction("web-1", "default", _eviction("web-1"))

    eventually(lambda: not sim.list("Pod", "default"))


def test_eviction__dry_run__pod_stays(sim: KubeSim, core: Any) -> None:
    _ready_pods(sim, ["web-1"], {"app": "web"})

    core.create_namespaced_pod_eviction("web-1", "default", _eviction("web-1", dry_run=True))

    sim.settle()
    assert sim.get("Pod", "web-1", "default")["metadata"].get("deletionTimestamp") is None


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("IfHealthyBudget", 429), ("AlwaysAllow", 201)],
)
def test_eviction__running_unready_pod_below_budget__per_unhealthy_pod_policy(
    sim: KubeSim, core: Any, policy: str, expected: int
) -> None:
    _ready_pods(sim, ["web-1", "web-2"], {"app": "web"})
    core.patch_namespaced_pod_status(
        "web-2",
        "default",
        {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
    )
    budget = pdb("web", {"app": "web"}, min_available=2)
    budget["spec"]["unhealthyPodEvictionPolicy"] = policy
    sim.apply(budget)

    response = request(
        sim,
        "POST",
        "/api/v1/namespaces/default/pods/web-2/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-2"}},
    )

    assert response.status == expected, response.body


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}},
            "name in URL does not match name in Eviction object",
        ),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1"}}, "Eviction"),
    ],
    ids=["name-mismatch", "wrong-kind"],
)
def test_eviction__bad_body__400(sim: KubeSim, body: dict[str, Any], message: str) -> None:
    _ready_pods(sim, ["web-1"], {"app": "web"})

    response = request(sim, "POST", "/api/v1/namespaces/default/pods/web-1/eviction", body)

    assert response.status == 400
    assert message in response.json()["message"]
