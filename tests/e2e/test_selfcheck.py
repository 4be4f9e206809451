"""The function's self-check, as its own identity (an EKS token through the
authenticator), on both backends: what `make deploy` asks before turning the
lifecycle hooks on."""

from __future__ import annotations

from typing import Any

import pytest

from drainer.k8s.cordon import EXCLUDE_LB_LABEL, PROGRESS_ANNOTATION
from testbed import World
from testbed.world import rbac_manifests

from .conftest import Invoke


def _without(resource: str) -> list[dict[str, Any]]:
    manifests = rbac_manifests()
    for document in manifests:
        if document["kind"] == "ClusterRole":
            document["rules"] = [r for r in document["rules"] if r["resources"] != [resource]]
    return manifests


def _what_a_drain_changes(world: World) -> dict[str, Any]:
    """Per node: what a cordon would change (kwok and the node controller keep
    updating the rest, so not the resourceVersion)."""
    nodes = {n: world.cluster.get("Node", n) for n in world.nodes.values()}
    return {
        name: (
            bool(node["spec"].get("unschedulable")),
            (node["metadata"].get("labels") or {}).get(EXCLUDE_LB_LABEL),
            (node["metadata"].get("annotations") or {}).get(PROGRESS_ANNOTATION),
        )
        for name, node in nodes.items()
    }


def test_k8s_rbac_applied__check_passes__dry_run_cordon_changes_nothing(
    world: World, invoke: Invoke
) -> None:
    before = _what_a_drain_changes(world)

    result = invoke({"self_check": {}}, TIMEOUT_POLICY="force")

    assert result["result"] == "check_passed", result
    assert result["missing"] == []
    assert "a dry-run cordon of node" in str(result["message"])
    assert _what_a_drain_changes(world) == before
    assert all(state == (False, None, None) for state in before.values())


@pytest.mark.parametrize("world", [{"rbac": _without("pods/eviction")}], indirect=True)
def test_role_without_eviction__check_fails_naming_it(world: World, invoke: Invoke) -> None:
    result = invoke({"self_check": {}})

    assert result["result"] == "check_failed"
    assert result["missing"] == ["create pods/eviction"]
    assert "kubectl apply -f k8s-rbac/" in str(result["message"])


@pytest.mark.parametrize("world", [{"rbac": []}], indirect=True)
def test_no_rbac_at_all__check_fails_naming_every_permission(world: World, invoke: Invoke) -> None:
    result = invoke({"self_check": {}}, TIMEOUT_POLICY="force")

    assert result["result"] == "check_failed"
    assert len(result["missing"]) == 13


def test_unknown_cluster__check_fails_saying_so(world: World, invoke: Invoke) -> None:
    result = invoke({"self_check": {"cluster_name": "nosuch"}})

    assert result["result"] == "check_failed"
    assert "EKS cluster 'nosuch' not found" in str(result["message"])
