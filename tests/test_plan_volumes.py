"""The blocker "a PVC bound to a zone with no other node" (drainer/plan/volumes.py and
capacity.py): a pod whose claim is bound to a PersistentVolume whose required node
affinity names a zone can only follow it to a schedulable node in that zone; none
left is a blocker naming the pod, the claim and the zone. The volume is read as the
drainer identity with the optional k8s-rbac/plan/ (and without it, what is left
unchecked is said, with the RBAC that grants the read)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from test_plan_capacity import NOW, OPTIONS, OVERRIDES, node, pod

from drainer.k8s.kube import Kube
from drainer.plan.capacity import Capacity
from drainer.plan.model import Cluster, NodePlan, plan_node
from drainer.plan.timing import startups
from drainer.plan.volumes import ApiVolumes
from kubesim import KubeSim
from testbed.world import ROOT, rbac_manifests

ZONE = "topology.kubernetes.io/zone"
LEGACY = "failure-domain.beta.kubernetes.io/zone"
Obj = dict[str, Any]


def volume(name: str, zone: str = "us-east-1a", key: str = ZONE) -> Obj:
    """An EBS volume as the CSI driver provisions it: held to its zone."""
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": [zone]}]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
    }


class Fake:
    """Claims bound to volumes: (namespace, claim) -> volume."""

    def __init__(self, bound: dict[tuple[str, str], Obj]):
        self.bound_to = bound

    def bound(self, namespace: str, claim: str) -> Obj | None:
        return self.bound_to.get((namespace, claim))


def db(name: str = "db-0", claim: str = "data-db-0", cpu: str = "0") -> Obj:
    mounted = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return pod(name, "old", cpu=cpu, owner="db", volumes=mounted)


def zoned(name: str, zone: str, key: str = ZONE, **spec: Any) -> Obj:
    return node(name, labels={key: zone}, **spec)


def plan(drained: list[Obj], nodes: list[Obj], volumes: Any) -> NodePlan:
    room = Capacity(nodes, drained, planned={"old"}, volumes=volumes)
    cluster = Cluster([], startups(drained), room)
    return plan_node("old", drained, cluster, OPTIONS, OVERRIDES, timeout=600, now=NOW)


BOUND = Fake({("default", "data-db-0"): volume("pv-db-0")})


def test_claim_bound_to_a_zone_with_no_other_node__blocker_naming_pod_claim_and_zone() -> None:
    nodes = [zoned("old", "us-east-1a"), zoned("b1", "us-east-1b")]
    result = plan([db()], nodes, BOUND)
    [blocker] = result.blockers
    assert blocker.pod == "default/db-0"
    assert blocker.reason == (
        "its PersistentVolumeClaim default/data-db-0 is bound to volume pv-db-0 in zone "
        "us-east-1a, where no schedulable node is left"
    )
    assert blocker.fix == (
        "add a node in zone us-east-1a first (a node group with a subnet in us-east-1a), "
        "or move db's data to a volume in a zone that keeps nodes"
    )
    assert result.paced_by.startswith("waits for new nodes: 1 pod(s) fit on no node left")


def test_another_node_in_the_zone__it_lands_there() -> None:
    nodes = [zoned("old", "us-east-1a"), zoned("b1", "us-east-1b"), zoned("a2", "us-east-1a")]
    assert plan([db()], nodes, BOUND).blockers == []


def test_the_other_node_in_the_zone_is_cordoned__blocker() -> None:
    nodes = [zoned("old", "us-east-1a"), zoned("a2", "us-east-1a", unschedulable=True)]
    [blocker] = plan([db()], nodes, BOUND).blockers
    assert "in zone us-east-1a, where no schedulable node is left" in blocker.reason


def test_the_legacy_zone_label() -> None:
    bound = Fake({("default", "data-db-0"): volume("pv-db-0", key=LEGACY)})
    nodes = [zoned("old", "us-east-1a", LEGACY), zoned("b1", "us-east-1b", LEGACY)]
    [blocker] = plan([db()], nodes, bound).blockers
    assert "in zone us-east-1a" in blocker.reason and "in zone us-east-1a" in blocker.fix
    nodes.append(zoned("a2", "us-east-1a", LEGACY))
    assert plan([db()], nodes, bound).blockers == []


def test_the_zone_has_a_node_but_no_room__no_node_can_take_it_naming_the_volume() -> None:
    """The pod may only go where its volume is: a node elsewhere with room is no help."""
    nodes = [
        zoned("old", "us-east-1a"),
        zoned("a2", "us-east-1a", cpu="1"),
        zoned("b1", "us-east-1b"),
    ]
    [blocker] = plan([db(cpu="1500m")], nodes, BOUND).blockers
    assert blocker.reason == "no node can take it"
    assert "volume pv-db-0 of claim default/data-db-0 (us-east-1a)" in blocker.fix


def test_a_local_volume_held_to_the_drained_node() -> None:
    local = volume("pv-local")
    local["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["old"]}]}
    ]
    nodes = [zoned("old", "us-east-1a"), zoned("a2", "us-east-1a")]
    [blocker] = plan([db()], nodes, Fake({("default", "data-db-0"): local})).blockers
    assert blocker.reason == (
        "its PersistentVolumeClaim default/data-db-0 is bound to volume pv-local, whose node "
        "affinity admits no schedulable node left"
    )
    assert blocker.fix.startswith("add a node that volume pv-local's node affinity admits")


def test_a_claim_with_no_volume_or_one_without_affinity__no_blocker() -> None:
    nodes = [zoned("old", "us-east-1a"), zoned("b1", "us-east-1b")]
    open_volume = volume("pv-efs")
    del open_volume["spec"]["nodeAffinity"]
    assert plan([db()], nodes, Fake({("default", "data-db-0"): open_volume})).blockers == []
    assert plan([db(claim="other")], nodes, BOUND).blockers == []


# -- as the drainer identity, on kubesim -------------------------------------------


def _plan_rbac() -> list[Obj]:
    return [
        document
        for path in sorted((ROOT / "k8s-rbac" / "plan").glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
        if document
    ]


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(speed=20) as running:
        running.apply(rbac_manifests())
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-db-0", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv-db-0",
                     "resources": {"requests": {"storage": "1Gi"}}},
        }  # fmt: skip
        running.apply([volume("pv-db-0"), claim])
        yield running


@pytest.fixture
def drainer(sim: KubeSim) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(str(sim.kubeconfig), "drainer")
    yield client
    client.close()


def test_as_the_drainer__k8s_rbac_alone_cannot_read_the_volume__said_not_passed_over(
    drainer: Kube,
) -> None:
    nodes = [zoned("old", "us-east-1a"), zoned("b1", "us-east-1b")]
    volumes = ApiVolumes(drainer)
    assert plan([db()], nodes, volumes).blockers == []  # unknown: not a blocker
    assert volumes.note() == (
        "the zones of the volumes behind 1 PersistentVolumeClaim(s) (default/data-db-0) are "
        "not checked: RBAC denies get persistentvolumes (grant it: kubectl apply -f "
        "k8s-rbac/plan/)"
    )


def test_as_the_drainer__with_k8s_rbac_plan__reads_it_and_may_not_write_it(
    sim: KubeSim, drainer: Kube
) -> None:
    sim.apply(_plan_rbac())
    nodes = [zoned("old", "us-east-1a"), zoned("b1", "us-east-1b")]
    volumes = ApiVolumes(drainer)
    [blocker] = plan([db()], nodes, volumes).blockers
    assert "bound to volume pv-db-0 in zone us-east-1a" in blocker.reason
    assert volumes.note() == ""
    assert drainer.can_i("get", "", "persistentvolumes")
    for verb in ("list", "watch", "create", "update", "patch", "delete"):
        assert not drainer.can_i(verb, "", "persistentvolumes"), verb
    assert not drainer.can_i("list", "", "persistentvolumeclaims")


class Counting:
    """A reader that counts its reads."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    def get_claim(self, namespace: str, name: str) -> Obj | None:
        self.reads.append(f"claim {namespace}/{name}")
        return {"spec": {"volumeName": "pv-db-0"}}

    def get_volume(self, name: str) -> Obj | None:
        self.reads.append(f"volume {name}")
        return volume(name)


def test_each_claim_and_its_volume_read_once_however_often_asked() -> None:
    reader = Counting()
    nodes = [zoned("old", "us-east-1a"), zoned("b1", "us-east-1b")]
    [blocker] = plan([db()], nodes, ApiVolumes(reader)).blockers  # placed, then explained
    assert "in zone us-east-1a" in blocker.reason
    assert reader.reads == ["claim default/data-db-0", "volume pv-db-0"]
