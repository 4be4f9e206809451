"""The function's self-check, as its own identity (an EKS token through the
authenticator), on both backends: what `make deploy` asks before turning the
lifecycle hooks on; and the plan's blockers for the groups it drains (with the
optional k8s-rbac/plan/), never a failed check."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from drainer.k8s.cordon import EXCLUDE_LB_LABEL, PROGRESS_ANNOTATION
from testbed import World
from testbed import workloads as w
from testbed.world import RBAC_DIR, drainer_may, place_on, rbac_manifests, wait_until

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


def _plan_rbac(world: World) -> None:
    """k8s-rbac/plan/ applied, and in force for the drainer's group."""
    world.cluster.apply(
        [
            document
            for path in sorted((RBAC_DIR / "plan").glob("*.yaml"))
            for document in yaml.safe_load_all(path.read_text())
            if document
        ]
    )
    wait_until(lambda: drainer_may(world.cluster, "get", "persistentvolumes"), 10)


def _deadlocked_budget(world: World) -> str:
    """One replica under minAvailable 1 on the group's first node, counted by the
    disruption controller: a budget no drain can satisfy."""
    node = world.nodes[world.instance_ids[0]]
    place_on(
        world, node, [w.deployment("solo", 1), w.budget("solo", {"app": "solo"}, min_available=1)]
    )

    def counted() -> bool:
        status = world.cluster.get("PodDisruptionBudget", "solo", "default").get("status") or {}
        return status.get("expectedPods") == 1 and status.get("currentHealthy") == 1

    wait_until(counted, 20)
    return node


def test_plan_rbac_applied__deadlocked_budget_on_a_node_of_an_allowed_group__warned_check_passes(
    world: World, invoke: Invoke
) -> None:
    _plan_rbac(world)
    node = _deadlocked_budget(world)

    result = invoke({"self_check": {}}, ALLOWED_ASGS=world.group.asg_name)

    assert result["result"] == "check_passed", result
    [group] = result["plan"]["groups"]
    assert (group["group"], group["deadlocked"], group["not_planned"]) == (
        world.group.asg_name,
        True,
        "",
    )
    assert sorted(n["node"] for n in group["nodes"]) == sorted(world.nodes.values())
    [held] = [n for n in group["nodes"] if n["blockers"]]
    assert (held["node"], held["deadlocked"]) == (node, True)
    [blocker] = held["blockers"]
    assert blocker["pod"].startswith("default/solo-")
    assert blocker["budget"] == "default/solo"
    assert "scale the workload to 2 replicas" in blocker["fix"]
    # One line per group in the message, naming the blocker and its fix.
    line = str(result["message"]).splitlines()[-1]
    assert line.startswith(f"plan of group {world.group.asg_name}: 3 node(s), 1 blocker(s), ")
    assert f"deadlocked on {node}" in line and "fix: scale the workload to 2" in line


def test_without_plan_rbac__not_planned_saying_how_to_enable_it__check_passes(
    world: World, invoke: Invoke
) -> None:
    _deadlocked_budget(world)

    result = invoke({"self_check": {}}, ALLOWED_ASGS=world.group.asg_name)

    assert result["result"] == "check_passed", result
    assert result["missing"] == []
    assert result["plan"]["groups"] == []
    assert result["plan"]["not_planned"] == (
        "not planned: this function may not get persistentvolumes, a read only the plan "
        "makes; to see the plan's blockers here: kubectl apply -f k8s-rbac/plan/"
    )
    assert str(result["message"]).splitlines()[-1] == f"plan: {result['plan']['not_planned']}"
