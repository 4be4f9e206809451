"""A pod's workload (drainer/engine/pods.py:workload), what the drains' stops and the
plan's times to Ready are kept per: a Deployment's pods under the Deployment, whichever
ReplicaSet made them, so a rollout (a new ReplicaSet) loses nothing learnt of it; any
other controller's pods under that controller."""

from __future__ import annotations

from typing import Any

import pytest

from drainer.engine import pods
from drainer.plan.timing import startup_of, startups
from testbed import workloads as w

T0 = "2026-01-01T00:00:00Z"


def _pod(
    name: str, kind: str = "ReplicaSet", owner: str = "web-5d8f9c", template_hash: str = "5d8f9c"
) -> dict[str, Any]:
    labels = {"app": "web", **({"pod-template-hash": template_hash} if template_hash else {})}
    return w.pod(
        name,
        namespace="shop",
        node_name="n1",
        labels=labels,
        created=T0,
        owner={"kind": kind, "name": owner, "controller": True},
        phase="Running",
    )


def _ready(pod: dict[str, Any], after: int, restarts: int = 0) -> dict[str, Any]:
    at = f"2026-01-01T00:00:{after:02d}Z"
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": at}]
    pod["status"]["containerStatuses"] = [{"restartCount": restarts}]
    return pod


@pytest.mark.parametrize(
    ("kind", "owner", "template_hash", "workload"),
    [
        ("ReplicaSet", "web-5d8f9c", "5d8f9c", ("shop", "Deployment", "web")),
        ("ReplicaSet", "web-api-7b4c", "7b4c", ("shop", "Deployment", "web-api")),
        # a ReplicaSet of its own (no Deployment's hash label, or not its suffix)
        ("ReplicaSet", "web-5d8f9c", "", ("shop", "ReplicaSet", "web-5d8f9c")),
        ("ReplicaSet", "batch", "5d8f9c", ("shop", "ReplicaSet", "batch")),
        ("StatefulSet", "db", "", ("shop", "StatefulSet", "db")),
    ],
)
def test_workload(kind: str, owner: str, template_hash: str, workload: tuple[str, ...]) -> None:
    assert pods.workload(_pod("p", kind, owner, template_hash)) == workload


def test_workload__a_bare_pod_has_none() -> None:
    bare = _pod("p")
    bare["metadata"]["ownerReferences"] = []

    assert pods.workload(bare) is None


def test_time_to_ready__a_deployment_rolled_out_midway__one_workload() -> None:
    """Mid-rollout, a Deployment's pods are under two ReplicaSets: its time to Ready is
    measured on both. Before, the new ReplicaSet's only pod (restarted, so not
    measured) fell back to the cluster's median, another workload's 2 s."""
    old = [_ready(_pod(f"web-5d8f9c-{i}"), 8) for i in range(2)]
    new = _ready(_pod("web-7b4c2d-0", owner="web-7b4c2d", template_hash="7b4c2d"), 30, restarts=1)
    other = _ready(_pod("api-0", "StatefulSet", "api", ""), 2)

    known = startups([*old, new, other])

    startup = startup_of(new, known)
    assert startup is not None
    assert (startup.median, startup.observed) == (8.0, 2)
