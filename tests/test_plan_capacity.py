"""Capacity in the refresh plan (drainer/plan/capacity.py): whether each evicted
pod fits on some schedulable node left, node by node, placed first-fit in the
plan's order; a pod that fits nowhere is a blocker whose fix names what is short."""

from __future__ import annotations

from typing import Any

import pytest

from drainer.engine.filters import FilterOptions, Overrides
from drainer.engine.options import DrainOptions
from drainer.plan.capacity import Capacity, quantity
from drainer.plan.model import Cluster, NodePlan, plan_node
from drainer.plan.timing import startups
from testbed import workloads as w

NOW = 1_767_225_600.0
OPTIONS = DrainOptions(filters=FilterOptions())
OVERRIDES = Overrides(ignore_daemonsets=True, delete_emptydir_data=True, force=True)


def node(name: str, cpu: str = "2", memory: str = "4Gi", **keywords: Any) -> dict[str, Any]:
    return w.node(name, allocatable={"cpu": cpu, "memory": memory, "pods": "110"}, **keywords)


def pod(name: str, on: str, cpu: str = "0", owner: str = "web", **spec: Any) -> dict[str, Any]:
    """A Ready pod of ReplicaSet `owner` on node `on`, requesting `cpu`; `spec`: more
    fields of its spec."""
    return w.pod(
        name,
        uid=name,
        node_name=on,
        labels={"app": owner},
        grace=5,
        created="2026-01-01T00:00:00Z",
        owner={"kind": "ReplicaSet", "name": owner, "controller": True},
        phase="Running",
        ready=True,
        requests={"cpu": cpu},
        spec_fields=spec,
    )


def plan(drained: list[dict[str, Any]], nodes: list[dict[str, Any]], others: list[Any]) -> NodePlan:
    everything = drained + others
    room = Capacity(nodes, everything, planned={"old"})
    cluster = Cluster([], startups(everything), room)
    return plan_node("old", drained, cluster, OPTIONS, OVERRIDES, timeout=600, now=NOW)


def test_totals_fit_but_no_single_node__the_pod_is_a_blocker_naming_what_is_short() -> None:
    nodes = [node("old"), node("a"), node("b")]
    busy = [pod("x", "a", cpu="1", owner="x"), pod("y", "b", cpu="1", owner="y")]
    result = plan([pod("web-1", "old", cpu="1500m")], nodes, busy)
    [blocker] = result.blockers
    assert (blocker.pod, blocker.reason) == ("default/web-1", "no node can take it")
    assert blocker.fix.startswith("add a node with 1.5 CPU free, or lower web's requests")
    assert "the most free on one node: 1 CPU" in blocker.fix
    assert result.paced_by.startswith("waits for new nodes: 1 pod(s) fit on no node left")


def test_pods_consume_the_room_of_the_node_they_land_on_in_the_plan_order() -> None:
    nodes = [node("old"), node("a", cpu="1")]
    result = plan([pod("web-1", "old", cpu="600m"), pod("web-2", "old", cpu="600m")], nodes, [])
    assert [b.pod for b in result.blockers] == ["default/web-2"]


def test_room_enough__no_blocker() -> None:
    nodes = [node("old"), node("a"), node("b")]
    result = plan([pod("web-1", "old", cpu="1500m")], nodes, [])
    assert result.blockers == []
    assert not result.paced_by.startswith("waits for new nodes")


def test_a_taint_the_pod_does_not_tolerate__blocker_naming_the_taint() -> None:
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    nodes = [node("old"), node("a", taints=[taint])]
    result = plan([pod("web-1", "old", cpu="100m")], nodes, [])
    [blocker] = result.blockers
    assert blocker.reason == "no node can take it"
    assert "taint dedicated=gpu:NoSchedule" in blocker.fix


def test_a_tolerated_taint_and_a_prefer_no_schedule_one_admit_it() -> None:
    taints = [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
        {"key": "soft", "effect": "PreferNoSchedule"},
    ]
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "gpu"}]
    nodes = [node("old"), node("a", taints=taints)]
    assert plan([pod("w", "old", tolerations=tolerations)], nodes, []).blockers == []


def test_node_selector_no_node_matches__blocker() -> None:
    nodes = [node("old", labels={"pool": "old"}), node("a", labels={"pool": "batch"})]
    result = plan([pod("web-1", "old", nodeSelector={"pool": "web"})], nodes, [])
    [blocker] = result.blockers
    assert "nodeSelector pool=web" in blocker.fix


def test_cordoned_nodes_take_nothing() -> None:
    nodes = [node("old"), node("a", unschedulable=True)]
    [blocker] = plan([pod("web-1", "old")], nodes, []).blockers
    assert "every node left is cordoned or planned" in blocker.fix


def _affinity(*expressions: dict[str, Any]) -> dict[str, Any]:
    terms = [{"matchExpressions": list(expressions)}]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}}  # fmt: skip


@pytest.mark.parametrize(
    ("expression", "fits"),
    [
        ({"key": "zone", "operator": "In", "values": ["a"]}, True),
        ({"key": "zone", "operator": "In", "values": ["b"]}, False),
        ({"key": "zone", "operator": "NotIn", "values": ["a"]}, False),
        ({"key": "zone", "operator": "Exists"}, True),
        ({"key": "gpu", "operator": "Exists"}, False),
        ({"key": "gpu", "operator": "DoesNotExist"}, True),
        ({"key": "zone", "operator": "DoesNotExist"}, False),
    ],
)
def test_required_node_affinity(expression: dict[str, Any], fits: bool) -> None:
    nodes = [node("old"), node("a", labels={"zone": "a"})]
    result = plan([pod("w", "old", affinity=_affinity(expression))], nodes, [])
    assert (result.blockers == []) is fits


def test_host_port_taken_on_the_only_node_left__blocker() -> None:
    ports = [{"name": "main", "ports": [{"containerPort": 80, "hostPort": 8080}]}]
    nodes = [node("old"), node("a")]
    taken = pod("other", "a", owner="other", containers=ports)
    [blocker] = plan([pod("w", "old", containers=ports)], nodes, [taken]).blockers
    assert "host port 8080/TCP" in blocker.fix


def test_pod_count_full__blocker() -> None:
    full = node("a")
    full["status"]["allocatable"]["pods"] = "1"
    [blocker] = plan([pod("w", "old")], [node("old"), full], [pod("x", "a", owner="x")]).blockers
    assert "room for one more pod" in blocker.fix


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", 0.5), ("1.5", 1.5), ("2", 2.0), ("128Mi", 128 * 2**20), ("1G", 1e9), ("1e3", 1e3)],
)
def test_quantity(text: str, value: float) -> None:
    assert quantity(text) == pytest.approx(value)
