"""make preflight's Kubernetes half, on both backends: the kubeconfig is the named
EKS cluster's (its certificate authority), and k8s-rbac/ as applied to the cluster,
read as an admin, against the repository's manifests."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from drainer.k8s.kube import Kube
from kubesim.certs import generate
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, rbac_manifests, wait_until
from tools import preflight
from tools.common import connect

ZONE = "topology.kubernetes.io/zone"


@pytest.fixture
def admin(world: World) -> Iterator[Kube]:
    kube = Kube.from_kubeconfig(str(world.cluster.kubeconfig), "admin")
    yield kube
    kube.close()


def _role_with(change: Any) -> list[dict[str, Any]]:
    manifests = rbac_manifests()
    for document in manifests:
        if document["kind"] == "ClusterRole":
            change(document["rules"])
    return manifests


def _drop_eviction(rules: list[dict[str, Any]]) -> None:
    rules[:] = [r for r in rules if r["resources"] != ["pods/eviction"]]


def _add_secrets(rules: list[dict[str, Any]]) -> None:
    rules.append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})


def test_k8s_rbac_applied__role_and_binding_ok(admin: Kube) -> None:
    checks = preflight.check_rbac(admin)
    assert [(c.what, c.status) for c in checks] == [
        ("RBAC role", preflight.Status.OK),
        ("RBAC binding", preflight.Status.OK),
    ]


@pytest.mark.parametrize("world", [{"rbac": _role_with(_drop_eviction)}], indirect=True)
def test_role_without_eviction__blocks_naming_it(admin: Kube) -> None:
    role = preflight.check_rbac(admin)[0]
    assert role.status == preflight.Status.FAIL
    assert role.detail == "lacks create pods/eviction"
    assert "kubectl apply -f k8s-rbac/" in role.fix


@pytest.mark.parametrize("world", [{"rbac": _role_with(_add_secrets)}], indirect=True)
def test_role_granting_more__warns_naming_it(admin: Kube) -> None:
    role = preflight.check_rbac(admin)[0]
    assert role.status == preflight.Status.WARN
    assert "get secrets" in role.detail


@pytest.mark.parametrize(
    "world", [{"rbac": [d for d in rbac_manifests() if d["kind"] != "ClusterRoleBinding"]}],
    indirect=True,
)  # fmt: skip
def test_binding_missing__blocks(admin: Kube) -> None:
    checks = preflight.check_rbac(admin)
    assert [(c.what, c.status) for c in checks] == [("k8s-rbac/", preflight.Status.FAIL)]


def _preflight(world: World) -> list[preflight.Check]:
    options = preflight.Options(
        world.cluster_name, (), region=world.region,
        kubeconfig=str(world.cluster.kubeconfig), context="admin",
    )  # fmt: skip
    return preflight.run(connect(world.region), options)


def test_kubeconfig_of_the_named_cluster__passes__then_rbac_checked(world: World) -> None:
    checks = {c.what: c for c in _preflight(world)}

    assert checks["kubeconfig"].status == preflight.Status.OK, checks["kubeconfig"]
    assert checks["RBAC role"].status == preflight.Status.OK
    assert checks["RBAC binding"].status == preflight.Status.OK


def test_kubeconfig_of_another_cluster__blocks__its_rbac_not_trusted(world: World) -> None:
    """The admin's kubeconfig reaches a cluster whose RBAC is right, but the EKS
    cluster of that name is another one (another certificate authority)."""
    other = base64.b64encode(generate("another-cluster-ca").ca_pem).decode()
    world.aws.point_cluster_at(world.cluster_name, world.cluster.url, other)

    checks = _preflight(world)

    identity = next(c for c in checks if c.what == "kubeconfig")
    assert identity.status == preflight.Status.FAIL
    assert f"is not cluster {world.cluster_name}" in identity.detail
    assert [c for c in checks if c.what.startswith("RBAC")] == []
    assert preflight.blocking(checks)


# --- the plan of each group (issue 40, item 5) ----------------------------------------


def _preflight_of_the_group(world: World, context: str = "admin") -> list[preflight.Check]:
    options = preflight.Options(
        world.cluster_name, (world.group.asg_name,), region=world.region,
        kubeconfig=str(world.cluster.kubeconfig), context=context,
    )  # fmt: skip
    return preflight.run(connect(world.region), options)


def _plan_rows(checks: list[preflight.Check], world: World) -> list[preflight.Check]:
    return [c for c in checks if c.what.startswith(f"plan {world.group.asg_name}")]


def _budget_counted(world: World, name: str, allowed: int) -> None:
    wait_until(
        lambda: (
            (world.cluster.get("PodDisruptionBudget", name, "default").get("status") or {}).get(
                "disruptionsAllowed"
            )
            == allowed
        )
    )


def test_plan_of_the_group__nothing_blocks__its_forecast_ok(world: World) -> None:
    node = world.nodes[sorted(world.instance_ids)[0]]
    web = w.deployment("web", 2, grace=7)
    place_on(world, node, [web, w.budget("web", {"app": "web"}, max_unavailable=1)])
    _budget_counted(world, "web", 1)

    checks = _preflight_of_the_group(world)

    [plan] = _plan_rows(checks, world)
    assert plan.status == preflight.Status.OK, plan
    # Three nodes one at a time (AWS's default of 90 % healthy, of 3), each followed by
    # the group's health check grace period as the warm-up (300 s); the web node's
    # drain is its budget's two waves, then a 7 s grace period.
    head = "a refresh of 3 node(s), 3 batch(es) of up to 1 with a 300 s warm-up: forecast "
    assert plan.detail.startswith(head) and plan.detail.endswith(" in all; nothing blocks"), plan
    total = int(plan.detail[len(head) :].split(" s")[0])
    assert 3 * 300 + 7 <= total < 3 * 300 + 60, plan


def test_plan_of_the_group__a_single_replica_its_budget_never_lets_go__warned_with_its_fix(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    node = world.nodes[sorted(world.instance_ids)[0]]
    place_on(world, node, [w.deployment("ledger", 1, grace=1)])
    world.cluster.apply(w.budget("ledger", {"app": "ledger"}, min_available=1))
    _budget_counted(world, "ledger", 0)

    checks = _preflight_of_the_group(world)

    print(preflight.table(checks))  # for the record
    plan, blocker = _plan_rows(checks, world)
    assert (plan.status, blocker.status) == (preflight.Status.WARN, preflight.Status.WARN)
    # The ledger's node waits out the drain's timeout (the function's 3600 s), then
    # each of the three batches its 300 s warm-up.
    assert plan.detail.endswith(
        "forecast 4500 s (~75 min) in all; 1 blocker(s); deadlocked: the refresh waits out "
        "a drain's timeout"
    ), plan
    assert "eks-node-drainer plan --asg eks-workers --timeout 3600s --force" in plan.fix
    assert blocker.what == "plan eks-workers blocker"
    assert blocker.detail.startswith("default/ledger-"), blocker
    assert f" on {node}: PodDisruptionBudget default/ledger allows 0 disruptions" in blocker.detail
    assert blocker.fix == (
        "scale the workload to 2 replicas (it has 1), or lower minAvailable on "
        "PodDisruptionBudget default/ledger to 0"
    )
    # A warning: it holds a refresh, not the deploy.
    assert not [c for c in preflight.blocking(checks) if c.what.startswith("plan")]


def _claimed(name: str, zone: str) -> list[dict[str, Any]]:
    """A volume held to `zone`, bound to the claim `name` (statically: each names the
    other), as an EBS volume is."""
    term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
    volume = {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{name}"},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": "gp3", "persistentVolumeReclaimPolicy": "Retain",
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-0{name}"},
            "claimRef": {"namespace": "default", "name": name},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
    }  # fmt: skip
    claim = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": "gp3",
            "volumeName": f"pv-{name}", "resources": {"requests": {"storage": "1Gi"}},
        },
    }  # fmt: skip
    user = w.deployment(f"{name}-user", 1, grace=1)
    user["spec"]["template"]["spec"]["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": name}}
    ]
    return [volume, claim, user]


def test_plan_of_the_group__volumes_not_readable__said_once__the_plan_made_all_the_same(
    world: World,
) -> None:
    """A kubeconfig whose identity is the drainer's (k8s-rbac/ without the optional
    k8s-rbac/plan/): it may not read RBAC (that row fails, as it did), nor the
    PersistentVolumes behind two claims; the plan is made without their zones."""
    node = world.nodes[sorted(world.instance_ids)[0]]
    zone = world.cluster.get("Node", node)["metadata"]["labels"][ZONE]
    place_on(world, node, _claimed("data-a", zone) + _claimed("data-b", zone), timeout=30)

    checks = _preflight_of_the_group(world, context="drainer")

    [plan] = _plan_rows(checks, world)
    assert plan.status == preflight.Status.OK, plan
    assert plan.detail.endswith(" in all; nothing blocks"), plan
    [volumes] = [c for c in checks if c.what == "plan volumes"]
    assert volumes.status == preflight.Status.WARN
    assert volumes.detail == (
        "the zones of the volumes behind 2 PersistentVolumeClaim(s) (default/data-a, "
        "default/data-b) are not checked: RBAC denies get persistentvolumes (grant it: "
        "kubectl apply -f k8s-rbac/plan/)"
    )
    assert volumes.fix.startswith("kubectl apply -f k8s-rbac/plan/")
    assert next(c for c in checks if c.what == "k8s-rbac/").status == preflight.Status.FAIL
