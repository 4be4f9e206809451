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
from testbed.world import rbac_manifests
from tools import preflight
from tools.common import connect


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
