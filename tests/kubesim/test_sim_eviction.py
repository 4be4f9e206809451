"""pods/eviction: each answer of the real v1.33 server (pkg/registry/core/pod/storage/
eviction.go and the NamespaceLifecycle admission plugin), through the official Python
client and raw HTTPS."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubesim import KubeSim
from kubesim.api import is_pod_ready
from kubesim.testing import eventually, request
from testbed import workloads as w
from testbed.workloads import node, pod


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


def _budget(sim: KubeSim, manifest: dict[str, Any]) -> dict[str, Any]:
    """Create a budget and wait for the disruption controller to have synced it."""
    sim.apply(manifest)
    name = manifest["metadata"]["name"]
    return eventually(
        lambda: (
            budget
            if (budget := sim.get("PodDisruptionBudget", name, "default"))["status"].get(
                "observedGeneration"
            )
            == budget["metadata"]["generation"]
            else None
        ),
        what=f"budget {name} synced",
    )


def _evict(sim: KubeSim, name: str, namespace: str = "default", **body: Any) -> Any:
    return request(
        sim,
        "POST",
        f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}, **body},
    )


def test_eviction__budget_allows__201_and_pod_terminates(sim: KubeSim, core: Any) -> None:
    _ready_pods(sim, ["web-1", "web-2"], {"app": "web"})
    _budget(sim, w.budget("web", {"app": "web"}, min_available=1))

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
    _budget(sim, w.budget("web-budget", {"app": "web"}, min_available=2))

    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod_eviction("web-1", "default", _eviction("web-1"))

    assert raised.value.status == 429
    assert "Retry-After" not in (raised.value.headers or {})
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


def test_eviction__second_eviction_before_controller_pass__429_budget_already_charged(
    sim: KubeSim, core: Any
) -> None:
    annotations = {"kubesim.io/shutdown-seconds": "30"}
    sim.apply([node("n1")])
    for name in ("web-1", "web-2", "web-3"):
        sim.apply(pod(name, node_name="n1", labels={"app": "web"}, annotations=annotations))
    eventually(lambda: all(is_pod_ready(p) for p in sim.list("Pod", "default")))
    _budget(sim, w.budget("web", {"app": "web"}, min_available=2))

    with sim.simulator.paused():  # the eviction itself charges the budget
        core.create_namespaced_pod_eviction("web-1", "default", _eviction("web-1"))
        with pytest.raises(ApiException) as raised:
            core.create_namespaced_pod_eviction("web-2", "default", _eviction("web-2"))

    assert raised.value.status == 429
    assert _status(raised.value)["details"]["causes"][0]["message"] == (
        "The disruption budget web needs 2 healthy pods and has 3 currently"
    )


def test_eviction__two_budgets_match__500_with_failure_status_body(sim: KubeSim) -> None:
    # eviction.go returns (not raises) a Failure Status; the real v1.33 apiserver writes
    # it with its own code, 500, and no reason (tests/e2e/test_conformance.py).
    _ready_pods(sim, ["web-1", "web-2"], {"app": "web", "tier": "front"})
    _budget(sim, w.budget("by-app", {"app": "web"}, min_available=1))
    _budget(sim, w.budget("by-tier", {"tier": "front"}, min_available=1))

    response = _evict(sim, "web-1")

    assert response.status == 500
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "This pod has more than one PodDisruptionBudget, which the eviction "
        "subresource does not support.",
        "code": 500,
    }
    sim.settle()
    assert sim.get("Pod", "web-1", "default")["metadata"].get("deletionTimestamp") is None


def test_eviction__uid_precondition_mismatch__409_from_condition_update(
    sim: KubeSim, core: Any
) -> None:
    [web] = _ready_pods(sim, ["web-1"], {"app": "web"})
    wrong = "00000000-0000-0000-0000-000000000000"

    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod_eviction("web-1", "default", _eviction("web-1", uid=wrong))

    assert raised.value.status == 409
    status = _status(raised.value)
    assert status["reason"] == "Conflict"
    assert status["details"] == {"name": "web-1", "kind": "Pod"}
    assert status["message"] == (
        f'Operation cannot be fulfilled on Pod "web-1": the UID in the precondition ({wrong}) '
        f"does not match the UID in record ({web['metadata']['uid']}). The object might have "
        "been deleted and then recreated"
    )
    assert sim.get("Pod", "web-1", "default")["metadata"].get("deletionTimestamp") is None


def test_eviction__uid_precondition_mismatch_dry_run__409_from_delete_preconditions(
    sim: KubeSim, core: Any
) -> None:
    _ready_pods(sim, ["web-1"], {"app": "web"})

    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod_eviction(
            "web-1",
            "default",
            _eviction("web-1", uid="00000000-0000-0000-0000-000000000000", dry_run=True),
        )

    assert raised.value.status == 409
    assert "Precondition failed: UID in precondition" in _status(raised.value)["message"]


def test_eviction__uid_precondition_mismatch_under_exhausted_budget__429_first(
    sim: KubeSim, core: Any
) -> None:
    _ready_pods(sim, ["web-1"], {"app": "web"})
    _budget(sim, w.budget("web", {"app": "web"}, min_available=1))

    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod_eviction(
            "web-1", "default", _eviction("web-1", uid="00000000-0000-0000-0000-000000000000")
        )

    assert raised.value.status == 429


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
    sim.apply(w.budget("web", {"app": "web"}, min_available=2))

    core.create_namespaced_pod_eviction("web-1", "default", _eviction("web-1"))

    assert sim.get("Pod", "web-1", "default")["metadata"]["deletionTimestamp"]


def test_eviction__pending_pod__ignores_budget(sim: KubeSim, core: Any) -> None:
    sim.apply(pod("web-1", labels={"app": "web"}))  # no node: stays Pending
    sim.apply(w.budget("web", {"app": "web"}, min_available=1))

    core.create_namespaced_pod_eviction("web-1", "default", _eviction("web-1"))

    eventually(lambda: not sim.list("Pod", "default"))


def test_eviction__dry_run__pod_stays(sim: KubeSim, core: Any) -> None:
    _ready_pods(sim, ["web-1"], {"app": "web"})

    core.create_namespaced_pod_eviction("web-1", "default", _eviction("web-1", dry_run=True))

    sim.settle()
    assert sim.get("Pod", "web-1", "default")["metadata"].get("deletionTimestamp") is None


@pytest.mark.parametrize(
    ("policy", "expected"),
    [(None, 429), ("IfHealthyBudget", 429), ("AlwaysAllow", 201)],
)
def test_eviction__running_unready_pod_below_budget__per_unhealthy_pod_policy(
    sim: KubeSim, core: Any, policy: str | None, expected: int
) -> None:
    _ready_pods(sim, ["web-1", "web-2"], {"app": "web"})
    core.patch_namespaced_pod_status(
        "web-2",
        "default",
        {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
    )
    budget = w.budget("web", {"app": "web"}, min_available=2)
    if policy:
        budget["spec"]["unhealthyPodEvictionPolicy"] = policy
    _budget(sim, budget)
    eventually(
        lambda: sim.get("PodDisruptionBudget", "web", "default")["status"]["currentHealthy"] == 1
    )

    response = _evict(sim, "web-2")

    assert response.status == expected, response.body


def test_eviction__unready_pod_healthy_budget__goes_without_charging_budget(
    sim: KubeSim, core: Any
) -> None:
    # IfHealthyBudget: currentHealthy >= desiredHealthy > 0 lets a not-Ready pod go even
    # with 0 disruptions allowed, and the budget is not decremented.
    _ready_pods(sim, ["web-1", "web-2", "web-3"], {"app": "web"})
    core.patch_namespaced_pod_status(
        "web-3",
        "default",
        {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
    )
    _budget(sim, w.budget("web", {"app": "web"}, min_available=2))
    eventually(
        lambda: sim.get("PodDisruptionBudget", "web", "default")["status"]["currentHealthy"] == 2
    )

    with sim.simulator.paused():
        response = _evict(sim, "web-3")
        status = sim.get("PodDisruptionBudget", "web", "default")["status"]

    assert response.status == 201, response.body
    assert status["disruptionsAllowed"] == 0
    assert "disruptedPods" not in status


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


# -- the namespace lifecycle admission plugin ------------------------------------


def test_eviction__namespace_terminating__403_namespace_terminating_cause(
    sim: KubeSim, core: Any
) -> None:
    sim.apply([node("n1"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}])
    # A finalizer keeps the pod, and so the namespace, Terminating.
    sim.apply(pod("web-1", namespace="shop", node_name="n1", finalizers=["example.com/hold"]))
    eventually(lambda: is_pod_ready(sim.get("Pod", "web-1", "shop")))
    core.delete_namespace("shop")
    eventually(lambda: sim.get("Pod", "web-1", "shop")["metadata"].get("deletionTimestamp"))

    response = _evict(sim, "web-1", namespace="shop")

    assert response.status == 403
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "web-1" is forbidden: unable to create new content in namespace shop '
        "because it is being terminated",
        "reason": "Forbidden",
        "details": {
            "name": "web-1",
            "kind": "pods",
            "causes": [
                {
                    "reason": "NamespaceTerminating",
                    "message": "namespace shop is being terminated",
                    "field": "metadata.namespace",
                }
            ],
        },
        "code": 403,
    }


def test_eviction__namespace_terminating__403_even_for_a_missing_pod(
    sim: KubeSim, core: Any
) -> None:
    sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    sim.apply(pod("held", namespace="shop", finalizers=["example.com/hold"]))
    core.delete_namespace("shop")

    response = _evict(sim, "ghost", namespace="shop")

    assert response.status == 403
    assert response.json()["details"]["causes"][0]["reason"] == "NamespaceTerminating"


def test_eviction__missing_namespace__404_names_the_namespace(sim: KubeSim) -> None:
    response = _evict(sim, "web-1", namespace="nowhere")

    assert response.status == 404
    assert response.json()["message"] == 'namespaces "nowhere" not found'


# -- the budget as the eviction handler reads and charges it ---------------------


def test_eviction__budget_status_lags_generation__429_retry_after_10(
    sim: KubeSim, policy: Any
) -> None:
    _ready_pods(sim, ["web-1", "web-2", "web-3"], {"app": "web"})
    _budget(sim, w.budget("web", {"app": "web"}, min_available=1))

    with sim.simulator.paused():
        policy.patch_namespaced_pod_disruption_budget(
            "web", "default", {"spec": {"minAvailable": 2}}
        )
        budget = sim.get("PodDisruptionBudget", "web", "default")
        response = _evict(sim, "web-1")

    assert (budget["metadata"]["generation"], budget["status"]["observedGeneration"]) == (2, 1)
    assert response.status == 429
    assert response.headers["retry-after"] == "10"
    assert response.json()["details"] == {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget web is still being processed by the server.",
            }
        ],
        "retryAfterSeconds": 10,
    }
    # The controller catches up on its next pass; then the budget decides.
    eventually(
        lambda: (
            sim.get("PodDisruptionBudget", "web", "default")["status"]["observedGeneration"] == 2
        )
    )
    assert _evict(sim, "web-1").status == 201


def test_eviction__charges_budget__disrupted_pods_and_allowed_decremented(sim: KubeSim) -> None:
    _ready_pods(sim, ["web-1", "web-2", "web-3"], {"app": "web"})
    _budget(sim, w.budget("web", {"app": "web"}, min_available=1))

    with sim.simulator.paused():
        response = _evict(sim, "web-1")
        status = sim.get("PodDisruptionBudget", "web", "default")["status"]

    assert response.status == 201
    assert status["disruptionsAllowed"] == 1
    assert list(status["disruptedPods"]) == ["web-1"]
    # The pod is gone (terminating) on the next pass: the entry is dropped then.
    sim.settle()
    eventually(
        lambda: "disruptedPods" not in sim.get("PodDisruptionBudget", "web", "default")["status"]
    )


def test_eviction__last_disruption_used__condition_flips_to_insufficient(sim: KubeSim) -> None:
    _ready_pods(sim, ["web-1", "web-2"], {"app": "web"})
    _budget(sim, w.budget("web", {"app": "web"}, min_available=1))

    with sim.simulator.paused():
        _evict(sim, "web-1")
        status = sim.get("PodDisruptionBudget", "web", "default")["status"]

    assert status["disruptionsAllowed"] == 0
    [condition] = status["conditions"]
    assert (condition["status"], condition["reason"]) == ("False", "InsufficientPods")


def test_eviction__evicted_pod__disruption_target_condition_then_terminating(
    sim: KubeSim,
) -> None:
    sim.apply(node("n1"))
    sim.apply(
        pod(
            "web-1",
            node_name="n1",
            labels={"app": "web"},
            annotations={"kubesim.io/shutdown-seconds": "60"},
        )
    )
    eventually(lambda: is_pod_ready(sim.get("Pod", "web-1", "default")))

    assert _evict(sim, "web-1").status == 201

    evicted = sim.get("Pod", "web-1", "default")
    assert evicted["metadata"]["deletionTimestamp"]
    [condition] = [c for c in evicted["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert condition["status"] == "True"
    assert condition["reason"] == "EvictionByEvictionAPI"
    assert condition["message"] == "Eviction API: evicting"
    assert condition["lastTransitionTime"]


def test_eviction__pending_pod__also_gets_disruption_target(sim: KubeSim) -> None:
    sim.apply(pod("web-1", labels={"app": "web"}, finalizers=["example.com/hold"]))

    assert _evict(sim, "web-1").status == 201

    types = [c["type"] for c in sim.get("Pod", "web-1", "default")["status"]["conditions"]]
    assert "DisruptionTarget" in types


def test_eviction__dry_run__no_condition_no_charge(sim: KubeSim) -> None:
    _ready_pods(sim, ["web-1", "web-2"], {"app": "web"})
    budget = _budget(sim, w.budget("web", {"app": "web"}, min_available=1))

    response = request(
        sim,
        "POST",
        "/api/v1/namespaces/default/pods/web-1/eviction?dryRun=All",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-1"}},
    )

    assert response.status == 201
    sim.settle()
    web = sim.get("Pod", "web-1", "default")
    assert web["metadata"].get("deletionTimestamp") is None
    assert "DisruptionTarget" not in [c["type"] for c in web["status"]["conditions"]]
    after = sim.get("PodDisruptionBudget", "web", "default")
    assert after["metadata"]["resourceVersion"] == budget["metadata"]["resourceVersion"]
