"""`plan`'s capacity check among the pods around a replacement, on both backends, as
the drainer identity: replicas kept one per node by required pod anti-affinity on
kubernetes.io/hostname. With a node free the evicted replica's replacement has
somewhere to go (exit 0); once every other node runs one, it has none: a blocker
naming the pod and the nodes its anti-affinity keeps it off, exit 1. (The real
scheduler placed them one per node too: the state is one it would have made.)

And topology spread on kubernetes.io/hostname, maxSkew 1, one replica per node: the
drained node stays an empty domain until it is deleted, so the replacement has
nowhere to go; the plan says so, and on the real control plane the drain shows it
(its replacement Pending, the scheduler naming the spread). The anti-affinity case
is drained there too, its replacement Pending for the reason the plan gives.

And a pod whose claim is bound to a volume in a zone with no other schedulable node
(the drainer identity with the optional k8s-rbac/plan/, which lets it read the
volume): a blocker naming the pod, the claim and the zone."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
import yaml

from drainer.cli.main import main
from testbed import World
from testbed import workloads as w
from testbed.world import RBAC_DIR, drainer_may, place_on, set_schedulable, wait_until

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def _cli(world: World, *words: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    where = ["--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"]
    code = main([*words, "--ignore-daemonsets", "-o", "json", *where], stdout=out)
    return code, json.loads(out.getvalue())


def _drained_then_pending(world: World, node: str) -> str:
    """Drain the node with the CLI (real backend: kubesim's scheduler knows no inter-pod
    rules), then the real scheduler's message on the replacement it cannot place."""
    out = io.StringIO()
    where = ["--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"]
    code = main(["drain", node, "--ignore-daemonsets", "--timeout", "60s", *where], stdout=out)
    assert code == 0, out.getvalue()

    def unschedulable() -> str:
        """The scheduler's message on a Pending pod ("": none yet)."""
        for pod in world.cluster.list("Pod", "default"):
            for c in (pod.get("status") or {}).get("conditions") or []:
                if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
                    return str(c.get("message"))
        return ""

    message = wait_until(unschedulable, 20)
    print(f"the replacement, Pending: {message}")
    return message


def _replica(name: str) -> dict[str, Any]:
    """A one-replica Deployment of the `tier=web` pods, none on a node with another."""
    deployment = w.deployment(name, 1, labels={"app": name, "tier": "web"}, grace=1)
    term = {"labelSelector": {"matchLabels": {"tier": "web"}}, "topologyKey": HOSTNAME}
    deployment["spec"]["template"]["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    return deployment


def _spread(name: str) -> dict[str, Any]:
    """A one-replica Deployment of the `tier=api` pods, spread over the nodes by
    hostname with maxSkew 1 (DoNotSchedule)."""
    deployment = w.deployment(name, 1, labels={"app": name, "tier": "api"}, grace=1)
    deployment["spec"]["template"]["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": HOSTNAME,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"tier": "api"}},
        }
    ]
    return deployment


# "custom" node names: the nodes carry a kubernetes.io/hostname label (the DNS-named
# ones of World's default have none, and a term whose key a node lacks does not apply).
@pytest.mark.parametrize("world", [{"node_names": "custom"}], indirect=True)
def test_plan__anti_affinity_every_other_node_runs_one__no_node_can_take_it(
    world: World,
) -> None:
    old, second, third = (world.nodes[i] for i in world.instance_ids)
    place_on(world, old, [_replica("web-a")])
    place_on(world, second, [_replica("web-b")])

    code, plan = _cli(world, "plan", old)
    assert (code, plan["result"]) == (0, "planned"), plan
    assert plan["nodes"][0]["blockers"] == []

    place_on(world, third, [_replica("web-c")])
    code, plan = _cli(world, "plan", old)

    assert (code, plan["result"], plan["deadlocked"]) == (1, "blocked", False), plan
    [node] = plan["nodes"]
    [blocker] = node["blockers"]
    assert blocker["pod"].startswith("default/web-a-")
    assert blocker["reason"] == "no node can take it"
    taken = ", ".join(sorted([second, third]))
    assert f"add a node whose {HOSTNAME} is none of {taken}" in blocker["fix"]
    assert "pod anti-affinity (its term: default/web-" in blocker["fix"]
    assert node["paced_by"].startswith("waits for new nodes: 1 pod(s) fit on no node left")
    if world.cluster.backend == "kubesim":
        return  # kubesim's scheduler knows no anti-affinity: what follows is the real one's
    message = _drained_then_pending(world, old)
    assert "didn't match pod anti-affinity rules" in message, message


@pytest.mark.parametrize("world", [{"node_names": "custom"}], indirect=True)
def test_plan__spread_by_hostname_one_per_node__the_drained_node_holds_the_replacement(
    world: World,
) -> None:
    old, second, third = (world.nodes[i] for i in world.instance_ids)
    for node, name in [(old, "api-a"), (second, "api-b"), (third, "api-c")]:
        place_on(world, node, [_spread(name)])

    code, plan = _cli(world, "plan", old)

    assert (code, plan["result"]) == (1, "blocked"), plan
    [blocker] = plan["nodes"][0]["blockers"]
    assert blocker["pod"].startswith("default/api-a-")
    assert blocker["reason"] == "no node can take it"
    assert (
        f"the fewest matching pods (0) are in {HOSTNAME} {old}, whose nodes are cordoned"
        in (blocker["fix"])
    )
    assert "Set nodeTaintsPolicy: Honor" in blocker["fix"]
    if world.cluster.backend == "kubesim":
        return  # kubesim's scheduler does not spread: what follows is the real one's
    message = _drained_then_pending(world, old)
    assert "didn't match pod topology spread constraints" in message, message


def _plan_rbac() -> list[dict[str, Any]]:
    """k8s-rbac/plan/: plan's optional read of PersistentVolumes."""
    return [
        document
        for path in sorted((RBAC_DIR / "plan").glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
        if document
    ]


def _zoned_claim(zone: str) -> list[dict[str, Any]]:
    """An EBS volume held to `zone`, bound to the claim `data` (statically: the claim
    names it, it names the claim)."""
    term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-plan-data"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "gp3",
            "persistentVolumeReclaimPolicy": "Retain",
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0plan0data0000001"},
            "claimRef": {"namespace": "default", "name": "data"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "gp3",
            "volumeName": "pv-plan-data",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    return [volume, claim]


def test_plan__claim_bound_to_a_zone_with_no_other_node__blocker_naming_claim_and_zone(
    world: World,
) -> None:
    old, *others = (world.nodes[i] for i in world.instance_ids)
    zone = world.cluster.get("Node", old)["metadata"]["labels"][ZONE]
    world.cluster.apply(_plan_rbac())
    wait_until(lambda: drainer_may(world.cluster, "get", "persistentvolumes"), 10)
    db = w.deployment("db", 1, grace=1)
    db["spec"]["template"]["spec"]["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    ]
    world.cluster.apply(_zoned_claim(zone))
    if world.cluster.backend != "kubesim":  # whose scheduler does not wait on a claim
        # The claim bound before its pod exists: on the real control plane a pod whose
        # claim the volume controller has not bound yet is unschedulable, and its retry
        # waited past place_on's 30 s once, on a loaded machine (a fresh clone's run).
        claim = lambda: world.cluster.get("PersistentVolumeClaim", "data", "default")  # noqa: E731
        wait_until(lambda: (claim().get("status") or {}).get("phase") == "Bound", 30)
    place_on(world, old, [db], timeout=30)
    # A node in another zone, free: room enough, but not where the volume is.
    world.cluster.apply(w.node("spare-other-zone", zone=f"{zone}-other", pods=110))

    code, plan = _cli(world, "plan", old)
    assert (code, plan["nodes"][0]["blockers"]) == (0, []), plan  # the zone has nodes left

    set_schedulable(world.cluster, others, False)
    code, plan = _cli(world, "plan", old)

    assert (code, plan["result"]) == (1, "blocked"), plan
    [blocker] = plan["nodes"][0]["blockers"]
    assert blocker["pod"].startswith("default/db-")
    assert blocker["reason"] == (
        f"its PersistentVolumeClaim default/data is bound to volume pv-plan-data in zone "
        f"{zone}, where no schedulable node is left"
    )
    assert blocker["fix"].startswith(f"add a node in zone {zone} first")
