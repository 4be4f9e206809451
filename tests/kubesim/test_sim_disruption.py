"""The disruption controller's budget arithmetic, as v1.33 pkg/controller/disruption
computes it (getExpectedPodCount, getExpectedScale, countHealthyPods, failSafe)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim import KubeSim
from kubesim.api import is_pod_ready
from kubesim.store import now_iso
from kubesim.testing import eventually, request
from testbed.workloads import budget, node, pod, workload


def _synced(sim: KubeSim, name: str = "web") -> dict[str, Any]:
    def check() -> Any:
        budget = sim.get("PodDisruptionBudget", name, "default")
        conditions = budget["status"].get("conditions") or []
        return budget if conditions else None

    sim.settle()
    budget: dict[str, Any] = eventually(check, what=f"budget {name} has a condition")
    return budget


def _counts(status: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        status["expectedPods"],
        status["desiredHealthy"],
        status["currentHealthy"],
        status["disruptionsAllowed"],
    )


def _bare_pods(sim: KubeSim, count: int) -> None:
    sim.apply(node("n1"))
    for i in range(count):
        sim.apply(pod(f"web-{i}", node_name="n1", labels={"app": "web"}))
    eventually(lambda: len([p for p in sim.list("Pod", "default") if is_pod_ready(p)]) == count)


@pytest.mark.parametrize(
    ("kind", "replicas", "limits", "expected"),
    [
        # (expectedPods, desiredHealthy, currentHealthy, disruptionsAllowed)
        ("Deployment", 3, {"max_unavailable": 1}, (3, 2, 3, 1)),
        ("Deployment", 3, {"max_unavailable": "50%"}, (3, 1, 3, 2)),
        ("Deployment", 3, {"min_available": "50%"}, (3, 2, 3, 1)),
        ("Deployment", 3, {"min_available": 3}, (3, 3, 3, 0)),
        ("ReplicaSet", 2, {"max_unavailable": 1}, (2, 1, 2, 1)),
        ("StatefulSet", 2, {"max_unavailable": "50%"}, (2, 1, 2, 1)),
        ("DaemonSet", 0, {"min_available": 1}, (1, 1, 1, 0)),
    ],
)
def test_budget__controller_scale__counts(
    sim: KubeSim, kind: str, replicas: int, limits: dict[str, Any], expected: tuple[int, ...]
) -> None:
    sim.apply([node("n1"), workload(kind, "web", replicas=replicas)])
    want = replicas or 1
    eventually(lambda: len([p for p in sim.list("Pod", "default") if is_pod_ready(p)]) == want)
    sim.apply(budget("web", {"app": "web"}, **limits))

    status = eventually(
        lambda: (
            s
            if (s := _synced(sim)["status"]).get("currentHealthy") == want
            and s.get("observedGeneration") == 1
            else None
        )
    )

    assert _counts(status) == expected


@pytest.mark.parametrize(
    ("limits", "expected", "reason"),
    [
        # Bare pods have no controller: v1.33 leaves them out of expectedPods, so a
        # maxUnavailable or a percentage allows nothing, forever.
        ({"max_unavailable": 1}, (0, 0, 2, 0), "InsufficientPods"),
        ({"min_available": "50%"}, (0, 0, 2, 0), "InsufficientPods"),
        # An integer minAvailable counts the pods themselves.
        ({"min_available": 1}, (2, 1, 2, 1), "SufficientPods"),
        # Neither field: nothing expected, nothing allowed.
        ({}, (0, 0, 2, 0), "InsufficientPods"),
    ],
    ids=["max-unavailable", "percent", "int-min-available", "neither"],
)
def test_budget__bare_pods__counts(
    sim: KubeSim, limits: dict[str, Any], expected: tuple[int, ...], reason: str
) -> None:
    _bare_pods(sim, 2)
    sim.apply(budget("web", {"app": "web"}, **limits))

    status = eventually(
        lambda: s if (s := _synced(sim)["status"]).get("currentHealthy") == 2 else None
    )

    assert _counts(status) == expected
    assert status["observedGeneration"] == 1
    [condition] = status["conditions"]
    assert (condition["type"], condition["reason"], condition["message"]) == (
        "DisruptionAllowed",
        reason,
        "",
    )


def test_budget__daemonset_pods_max_unavailable__sync_failed_and_evictions_429(
    sim: KubeSim,
) -> None:
    sim.apply([node("n1"), workload("DaemonSet", "agent", labels={"app": "web"})])
    eventually(lambda: [p for p in sim.list("Pod", "default") if is_pod_ready(p)])
    sim.apply(budget("web", {"app": "web"}, max_unavailable=1))

    status = _synced(sim)["status"]

    # failSafe: disruptionsAllowed 0, the rest of the status (observedGeneration too)
    # left as it was at creation.
    assert _counts(status) == (0, 0, 0, 0)
    assert "observedGeneration" not in status
    [condition] = status["conditions"]
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "SyncFailed",
        "daemonsets.apps does not implement the scale subresource",
    )
    assert "observedGeneration" not in condition
    [daemon] = sim.list("Pod", "default")
    response = request(
        sim,
        "POST",
        f"/api/v1/namespaces/default/pods/{daemon['metadata']['name']}/eviction",
        {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": daemon["metadata"]["name"]},
        },
    )
    assert response.status == 429
    assert response.headers["retry-after"] == "10"
    [cause] = response.json()["details"]["causes"]
    assert cause["message"] == "The disruption budget web is still being processed by the server."


def test_budget__controller_gone__sync_failed_found_no_controllers(sim: KubeSim) -> None:
    orphan = pod("web-0", node_name="n1", labels={"app": "web"})
    orphan["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "gone",
            "uid": "6a1f2d5e-0000-4000-8000-000000000000",
            "controller": True,
        }
    ]
    sim.apply([node("n1"), orphan])
    sim.apply(budget("web", {"app": "web"}, max_unavailable=1))

    [condition] = _synced(sim)["status"]["conditions"]

    assert (condition["reason"], condition["message"]) == (
        "SyncFailed",
        'found no controllers for pod "web-0"',
    )


def test_budget__recorded_disruption__not_healthy_until_deletion_timeout(
    sim: KubeSim, policy: Any
) -> None:
    _bare_pods(sim, 3)
    sim.apply(budget("web", {"app": "web"}, min_available=1))
    eventually(lambda: _synced(sim)["status"].get("currentHealthy") == 3)

    # As the eviction handler records a pod it let go (the pod is not terminating yet).
    recent = now_iso()
    policy.patch_namespaced_pod_disruption_budget_status(
        "web", "default", {"status": {"disruptedPods": {"web-1": recent}}}
    )

    status = eventually(
        lambda: s if (s := _synced(sim)["status"]).get("currentHealthy") == 2 else None
    )
    assert status["disruptedPods"] == {"web-1": recent}
    assert status["disruptionsAllowed"] == 1


def test_budget__recorded_disruption_past_deletion_timeout__dropped_and_healthy(
    sim: KubeSim, policy: Any
) -> None:
    import time

    _bare_pods(sim, 3)
    sim.apply(budget("web", {"app": "web"}, min_available=1))
    eventually(lambda: _synced(sim)["status"].get("currentHealthy") == 3)

    stale = now_iso(time.time() - 121)  # DeletionTimeout is 2 minutes
    policy.patch_namespaced_pod_disruption_budget_status(
        "web", "default", {"status": {"disruptedPods": {"web-1": stale}}}
    )

    status = eventually(lambda: s if "disruptedPods" not in (s := _synced(sim)["status"]) else None)
    assert status["currentHealthy"] == 3


def test_budget__recorded_disruption__rechecked_when_it_expires(sim: KubeSim, policy: Any) -> None:
    _bare_pods(sim, 3)
    sim.apply(budget("web", {"app": "web"}, min_available=1))
    eventually(lambda: _synced(sim)["status"].get("currentHealthy") == 3)
    sim.simulator.disruption.deletion_timeout = 1.5  # stamps are whole seconds

    policy.patch_namespaced_pod_disruption_budget_status(
        "web", "default", {"status": {"disruptedPods": {"web-1": now_iso()}}}
    )

    # Without another change, the controller's own timer brings web-1 back.
    eventually(lambda: _synced(sim)["status"].get("currentHealthy") == 2, timeout=2)
    eventually(lambda: "disruptedPods" not in _synced(sim)["status"], timeout=4)
    assert _synced(sim)["status"]["currentHealthy"] == 3


def test_budget__spec_change__generation_bumped_status_catches_up(
    sim: KubeSim, policy: Any
) -> None:
    _bare_pods(sim, 3)
    sim.apply(budget("web", {"app": "web"}, min_available=1))
    eventually(lambda: _synced(sim)["status"].get("observedGeneration") == 1)

    with sim.simulator.paused():
        policy.patch_namespaced_pod_disruption_budget(
            "web", "default", {"spec": {"minAvailable": 3}}
        )
        lagging = sim.get("PodDisruptionBudget", "web", "default")

    assert lagging["metadata"]["generation"] == 2
    assert lagging["status"]["observedGeneration"] == 1
    assert lagging["status"]["disruptionsAllowed"] == 2
    status = eventually(
        lambda: s if (s := _synced(sim)["status"]).get("observedGeneration") == 2 else None
    )
    assert (status["desiredHealthy"], status["disruptionsAllowed"]) == (3, 0)
    assert status["conditions"][0]["observedGeneration"] == 2
