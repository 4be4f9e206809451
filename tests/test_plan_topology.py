"""The capacity check among the pods around a replacement (drainer/plan/topology.py):
required pod anti-affinity and affinity, and topology spread with DoNotSchedule,
counting the pods already on each node and the replacements the plan has placed."""

from __future__ import annotations

from typing import Any

import pytest
from test_plan_capacity import NOW, OPTIONS, OVERRIDES, node, pod

from drainer.plan.capacity import Capacity
from drainer.plan.model import Cluster, NodePlan, plan_node
from drainer.plan.timing import startups

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def host(name: str, zone: str = "a", **spec: Any) -> dict[str, Any]:
    """A node with its hostname and zone labels."""
    labels = {HOST: name, ZONE: zone, **spec.pop("labels", {})}
    return node(name, labels=labels, **spec)


def anti(key: str, **selector: Any) -> dict[str, Any]:
    """Required pod anti-affinity against pods matching `selector` (matchLabels)."""
    term = {"labelSelector": selector or {"matchLabels": {"app": "web"}}, "topologyKey": key}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def web(name: str, on: str, key: str = HOST, **spec: Any) -> dict[str, Any]:
    """A replica of web, kept off the nodes (or zones) with another."""
    return pod(name, on, affinity=anti(key), **spec)


def plan(drained: list[dict[str, Any]], nodes: list[dict[str, Any]], others: list[Any]) -> NodePlan:
    everything = drained + others
    room = Capacity(nodes, everything, planned={"old"})
    cluster = Cluster([], startups(everything), room)
    return plan_node("old", drained, cluster, OPTIONS, OVERRIDES, timeout=600, now=NOW)


# -- pod anti-affinity ---------------------------------------------------------------


def test_anti_affinity_hostname__every_node_left_runs_a_replica__blocker_naming_them() -> None:
    nodes = [host("old"), host("a"), host("b")]
    result = plan([web("web-1", "old")], nodes, [web("web-2", "a"), web("web-3", "b")])
    [blocker] = result.blockers
    assert (blocker.pod, blocker.reason) == ("default/web-1", "no node can take it")
    assert "add a node whose kubernetes.io/hostname is none of a, b" in blocker.fix
    assert "required pod anti-affinity keeps web out of those), or make web's anti-affinity " in (
        blocker.fix
    )
    assert "default/web-2 in kubernetes.io/hostname=a" in blocker.fix
    assert result.paced_by.startswith("waits for new nodes")


def test_anti_affinity_hostname__a_free_node__it_lands_there() -> None:
    nodes = [host("old"), host("a"), host("b")]
    assert plan([web("web-1", "old")], nodes, [web("web-2", "a")]).blockers == []


def test_anti_affinity_counts_the_replacements_already_placed() -> None:
    nodes = [host("old"), host("a")]
    result = plan([web("web-1", "old"), web("web-2", "old")], nodes, [])
    assert [b.pod for b in result.blockers] == ["default/web-2"]


def test_anti_affinity_zone__the_only_other_zone_is_taken() -> None:
    nodes = [host("old", "a"), host("a1", "a"), host("b1", "b")]
    result = plan([web("web-1", "old", key=ZONE)], nodes, [web("web-2", "b1", key=ZONE)])
    # a1 is in zone a, where the evicted pod ran: its replacement may go there.
    assert result.blockers == []
    nodes = [host("old", "a"), host("b1", "b"), host("b2", "b")]
    [blocker] = plan(
        [web("web-1", "old", key=ZONE)], nodes, [web("web-2", "b1", key=ZONE)]
    ).blockers
    assert "topology.kubernetes.io/zone is none of b" in blocker.fix


def test_anti_affinity_of_the_pods_already_there_refuses_the_newcomer() -> None:
    """Symmetry: the pods on the node keep a matching pod off it, even one with no
    anti-affinity of its own."""
    nodes = [host("old"), host("a")]
    guard = pod("guard", "a", owner="guard", affinity=anti(HOST, matchLabels={"app": "web"}))
    [blocker] = plan([pod("web-1", "old")], nodes, [guard]).blockers
    assert "their term: default/guard in kubernetes.io/hostname=a" in blocker.fix
    assert blocker.fix.startswith(
        "add a node whose kubernetes.io/hostname is none of a (required pod anti-affinity "
        "keeps web out of those), or make the anti-affinity of default/guard preferred"
    )


def test_anti_affinity_match_expressions_and_other_namespaces() -> None:
    nodes = [host("old"), host("a")]
    selector = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "x"]}]}
    drained = [pod("web-1", "old", affinity=anti(HOST, **selector))]
    db = pod("db-1", "a", owner="db")
    assert plan(drained, nodes, [db]).blockers != []
    db["metadata"]["namespace"] = "data"  # the term looks in the pod's own namespace
    assert plan(drained, nodes, [db]).blockers == []
    term = drained[0]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"][0]  # fmt: skip
    term["namespaces"] = ["data"]
    assert plan(drained, nodes, [db]).blockers != []
    del term["namespaces"]
    term["namespaceSelector"] = {}  # every namespace
    assert plan(drained, nodes, [db]).blockers != []


def test_anti_affinity_a_terminating_pod_does_not_count() -> None:
    nodes = [host("old"), host("a")]
    going = web("web-2", "a")
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert plan([web("web-1", "old")], nodes, [going]).blockers == []


def test_anti_affinity_node_without_the_topology_label_takes_it() -> None:
    """kube-scheduler: a term whose topologyKey the node lacks does not apply."""
    nodes = [host("old"), node("bare")]
    assert (
        plan([web("web-1", "old", key=ZONE)], nodes, [web("web-2", "bare", key=ZONE)]).blockers
        == []
    )


# -- pod affinity --------------------------------------------------------------------


def near_cache(key: str = ZONE) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": key}
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def test_pod_affinity__lands_only_in_the_zone_of_a_matching_pod() -> None:
    nodes = [host("old", "a"), host("b1", "b"), host("c1", "c")]
    cache = pod("cache-1", "c1", owner="cache")
    assert plan([pod("web-1", "old", affinity=near_cache())], nodes, [cache]).blockers == []
    cache["spec"]["nodeName"] = "old"  # the cache is on the drained node: it goes too
    [blocker] = plan([pod("web-1", "old", affinity=near_cache())], nodes, [cache]).blockers
    assert "pod affinity (no pod matching app=cache" in blocker.fix
    assert "run a pod matching app=cache on a node that stays (none does), or make web's pod " in (
        blocker.fix
    )
    cache["spec"]["nodeName"] = "b1"  # in zone b: that is where web may go
    nodes[1] = host("b1", "b", cpu="0")
    [blocker] = plan(
        [pod("web-1", "old", cpu="100m", affinity=near_cache())], nodes, [cache]
    ).blockers
    assert "add a node in topology.kubernetes.io/zone b (where pods matching app=cache run)" in (
        blocker.fix
    )


def test_pod_affinity_to_itself_with_no_match_anywhere__the_first_one_lands() -> None:
    nodes = [host("old"), host("a")]
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE}
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    assert plan([pod("web-1", "old", affinity=affinity)], nodes, []).blockers == []


# -- topology spread -----------------------------------------------------------------


def spread(key: str = ZONE, skew: int = 1, **more: Any) -> list[dict[str, Any]]:
    return [{
        "maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}}, **more,
    }]  # fmt: skip


def spread_web(name: str, on: str, cpu: str = "100m", **more: Any) -> dict[str, Any]:
    return pod(name, on, cpu=cpu, topologySpreadConstraints=spread(**more))


def test_spread_zone__only_the_fuller_zones_have_room__blocker_with_the_skew() -> None:
    """Zones b and c have one replica each, zone a (the drained node's) none left; the
    other node in a is full: the replacement would make b or c two over a."""
    nodes = [host("old", "a"), host("a1", "a", cpu="1"), host("b1", "b"), host("c1", "c")]
    others = [
        spread_web("web-2", "b1"),
        spread_web("web-3", "c1"),
        pod("big", "a1", cpu="1", owner="big"),
    ]
    [blocker] = plan([spread_web("web-1", "old", cpu="500m")], nodes, others).blockers
    assert "topology spread on topology.kubernetes.io/zone (b would be 2 over the fewest" in (
        blocker.fix
    )
    assert "add a node in topology.kubernetes.io/zone a (the fewest matching pods: 0)" in (
        blocker.fix
    )
    assert "raise maxSkew of web's constraint on topology.kubernetes.io/zone to 2" in blocker.fix


def test_spread_zone__room_in_the_emptier_zone__fits() -> None:
    nodes = [host("old", "a"), host("b1", "b"), host("c1", "c")]
    assert plan([spread_web("web-1", "old")], nodes, [spread_web("web-2", "b1")]).blockers == []


def test_spread_counts_the_replacements_placed_and_max_skew() -> None:
    nodes = [host("old", "a"), host("a1", "a", cpu="10"), host("b1", "b", cpu="10")]
    drained = [spread_web(f"web-{i}", "old") for i in range(4)]
    assert plan(drained, nodes, []).blockers == []
    # Room for one in zone b: web-0 to a1, web-1 to b1 (a would be 2 over b's 0),
    # web-2 to a1 (2 over 1), web-3 nowhere (a would be 3 over 1, b1 is full).
    nodes[2] = host("b1", "b", cpu="100m")
    [blocker] = plan(drained, nodes, []).blockers
    assert blocker.pod == "default/web-3"
    assert "raise maxSkew of web's constraint on topology.kubernetes.io/zone to 2" in blocker.fix


def test_spread_hostname__the_drained_node_counts_empty_until_deleted() -> None:
    """kube-scheduler counts the cordoned node's domain (kubernetes/kubernetes#106127):
    on hostname with maxSkew 1, with every other node running one, the replacement has
    nowhere to go until the drained node is gone; nodeTaintsPolicy: Honor leaves the
    cordoned node out."""
    nodes = [host("old"), host("a"), host("b")]
    others = [spread_web("web-2", "a", key=HOST), spread_web("web-3", "b", key=HOST)]
    [blocker] = plan([spread_web("web-1", "old", key=HOST)], nodes, others).blockers
    assert blocker.reason == "no node can take it"
    assert (
        "the fewest matching pods (0) are in kubernetes.io/hostname old, whose nodes are "
        "cordoned or drained: kube-scheduler counts them until they are deleted. Set "
        "nodeTaintsPolicy: Honor on web's constraint on kubernetes.io/hostname, or raise "
        "maxSkew of web's constraint on kubernetes.io/hostname to 2"
    ) in blocker.fix
    honour = spread_web("web-1", "old", key=HOST, nodeTaintsPolicy="Honor")
    assert plan([honour], nodes, others).blockers == []


def test_spread_a_cordoned_node_counts_unless_honoured() -> None:
    nodes = [host("old"), host("a"), host("c", unschedulable=True)]
    others = [spread_web("web-2", "a", key=HOST)]
    drained = [spread_web("web-1", "old", key=HOST, nodeTaintsPolicy="Honor")]
    assert plan(drained, nodes, others).blockers == []  # old and c left out: a only
    drained = [spread_web("web-1", "old", key=HOST)]
    [blocker] = plan(drained, nodes, others).blockers
    assert "kubernetes.io/hostname c, old, whose nodes are cordoned or drained" in blocker.fix


def test_spread_counts_over_nodes_the_pod_may_use_and_skips_schedule_anyway() -> None:
    """A zone whose only node the pod's nodeSelector refuses is no domain of its spread."""
    pool = {"pool": "web"}
    nodes = [host("old", "a", labels=pool), host("b1", "b", labels=pool), host("c1", "c")]
    drained = [pod("web-1", "old", nodeSelector=pool, topologySpreadConstraints=spread())]
    others = [pod("web-2", "b1", owner="web"), pod("web-3", "b1", owner="web")]
    # Domains a (0) and b (2): b would be 3 over 0. Zone c does not count.
    [blocker] = plan(drained, nodes, others).blockers
    assert "b would be 3 over the fewest" in blocker.fix
    nodes.append(host("a1", "a", labels=pool))
    assert plan(drained, nodes, others).blockers == []
    soft = spread()
    soft[0]["whenUnsatisfiable"] = "ScheduleAnyway"
    nodes = [host("old", "a"), host("b1", "b", cpu="10"), host("c1", "c", cpu="0")]
    drained = [pod("web-1", "old", cpu="100m", topologySpreadConstraints=soft)]
    assert plan(drained, nodes, others).blockers == []


def test_spread_min_domains__fewer_zones_than_asked__counts_from_zero() -> None:
    nodes = [host("old", "b"), host("b1", "b"), host("b2", "b")]
    others = [spread_web("web-2", "b1")]
    assert plan([spread_web("web-1", "old")], nodes, others).blockers == []
    [blocker] = plan([spread_web("web-1", "old", minDomains=3)], nodes, others).blockers
    assert (
        "add a node in a new topology.kubernetes.io/zone (1 of the constraint's minDomains 3"
        in (blocker.fix)
    )


def test_spread_a_node_without_the_key_is_no_place() -> None:
    nodes = [host("old", "a"), node("bare")]
    [blocker] = plan([spread_web("web-1", "old")], nodes, []).blockers
    assert "topology spread (no topology.kubernetes.io/zone label)" in blocker.fix


@pytest.mark.parametrize("keys", [["pod-template-hash"], []])
def test_spread_match_label_keys_counts_only_the_same_revision(keys: list[str]) -> None:
    nodes = [host("old", "a"), host("a1", "a", cpu="0"), host("b1", "b")]
    drained = [spread_web("web-1", "old", matchLabelKeys=keys)]
    drained[0]["metadata"]["labels"]["pod-template-hash"] = "new"
    older = pod("web-0", "b1")
    older["metadata"]["labels"]["pod-template-hash"] = "old"
    # a1 has no cpu for it: b1 is the only place. With matchLabelKeys the older
    # revision's pod on b1 does not count (skew 1); without, b would be 2 over a.
    assert (plan(drained, nodes, [older]).blockers == []) is bool(keys)


def test_a_namespace_selector_with_labels_adds_nothing() -> None:
    """The plan does not read the namespaces' labels: such a term looks in the
    namespaces it lists and no further (docs/cli.md says so)."""
    nodes = [host("old"), host("a")]
    db = pod("db-1", "a", owner="db")
    db["metadata"]["namespace"] = "data"
    drained = [pod("web-1", "old", affinity=anti(HOST, matchLabels={"app": "db"}))]
    term = drained[0]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"][0]  # fmt: skip
    term["namespaceSelector"] = {"matchLabels": {"team": "data"}}
    assert plan(drained, nodes, [db]).blockers == []
    term["namespaces"] = ["data"]
    assert plan(drained, nodes, [db]).blockers != []


def test_a_refresh_reopens_the_replaced_nodes_as_empty_domains() -> None:
    """Batch 1 (old) drained, then batch 2 (a): old's new instance is schedulable and
    empty, a closed; the spread on hostname lets a's replica land on the new old."""
    nodes = [host("old"), host("a"), host("b")]
    everything = [spread_web("web-1", "old", key=HOST), spread_web("web-2", "a", key=HOST)]
    everything.append(spread_web("web-3", "b", key=HOST))
    room = Capacity(nodes, everything, planned={"old"})
    assert room.place(everything[0]) is None  # old empty and closed: b and a would be 2
    room.replaced(["old"])
    room.leaving(["a"])
    assert room.place(everything[1]) == "old"
