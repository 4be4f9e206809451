"""The real kubectl against kubesim: create, wait, get, drain (with a PDB refusing and
then allowing), and auth can-i per RBAC."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kubesim import KubeSim
from kubesim.api import is_pod_ready
from kubesim.testing import Admin, Kubectl, eventually

pytestmark = pytest.mark.kubectl

MANIFESTS = Path(__file__).parent / "manifests"
NODE = "ip-10-0-1-10.ec2.internal"


def _all_ready(sim: KubeSim) -> bool:
    pods = sim.list("Pod")
    # 3 web + 2 db + 3 node-agent
    return len(pods) == 8 and all(is_pod_ready(p) for p in pods)


@pytest.fixture
def cluster(sim: KubeSim, kubectl: Kubectl) -> KubeSim:
    """The manifests created with `kubectl create -f`, every pod Ready."""
    created = kubectl("create", "-f", str(MANIFESTS / "cluster.yaml"))
    assert "deployment.apps/web created" in created.stdout
    assert "poddisruptionbudget.policy/web created" in created.stdout
    assert "statefulset.apps/db created" in created.stdout
    assert "daemonset.apps/node-agent created" in created.stdout
    eventually(lambda: _all_ready(sim), timeout=10, what="all pods Ready")
    return sim


def _pods_by_node(sim: KubeSim) -> dict[str, list[str]]:
    by_node: dict[str, list[str]] = {}
    for p in sim.list("Pod"):
        by_node.setdefault(p["spec"].get("nodeName", ""), []).append(p["metadata"]["name"])
    return by_node


def test_kubectl_create__pods_scheduled_and_ready(cluster: KubeSim, kubectl: Kubectl) -> None:
    waited = kubectl("wait", "--for=condition=Ready", "pods", "--all", "-A", "--timeout=10s")
    listed = kubectl("get", "pods", "-A", "-o", "wide")

    assert waited.stdout.count("condition met") == 8
    rows = listed.stdout.splitlines()[1:]
    assert len(rows) == 8
    assert all(" 1/1 " in row and " Running " in row for row in rows), listed.stdout
    assert {p["spec"]["nodeName"] for p in cluster.list("Pod")} == {
        NODE,
        "ip-10-0-1-11.ec2.internal",
        "ip-10-0-1-12.ec2.internal",
    }


def test_kubectl_get__server_side_tables(cluster: KubeSim, kubectl: Kubectl) -> None:
    pdbs = kubectl("get", "pdb").stdout
    nodes = kubectl("get", "nodes").stdout
    deployments = kubectl("get", "deployments").stdout

    assert pdbs.split("\n")[0].split() == [
        "NAME",
        "MIN",
        "AVAILABLE",
        "MAX",
        "UNAVAILABLE",
        "ALLOWED",
        "DISRUPTIONS",
        "AGE",
    ]
    assert pdbs.split("\n")[1].split()[:4] == ["web", "N/A", "1", "1"]
    assert nodes.count(" Ready ") == 3
    assert deployments.split("\n")[1].split()[:4] == ["web", "3/3", "3", "3"]


def test_kubectl_drain__evicts_replaces_elsewhere_keeps_daemonset_pod(
    cluster: KubeSim, kubectl: Kubectl
) -> None:
    before = _pods_by_node(cluster)[NODE]

    drained = kubectl(
        "drain", NODE, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=30s"
    )

    assert f"node/{NODE} cordoned" in drained.stdout
    assert f"node/{NODE} drained" in drained.stdout
    assert "ignoring DaemonSet-managed Pods: kube-system/node-agent-" in drained.stderr
    evicted = [name for name in before if not name.startswith("node-agent-")]
    assert evicted
    for name in evicted:
        assert f"pod/{name} evicted" in drained.stdout
    assert cluster.get("Node", NODE)["spec"]["unschedulable"] is True
    eventually(lambda: _all_ready(cluster), timeout=10, what="replacements Ready")
    remaining = _pods_by_node(cluster)[NODE]
    assert len(remaining) == 1
    assert remaining[0].startswith("node-agent-")


def test_kubectl_drain__pdb_refuses__429_reported_and_retried_until_allowed(
    cluster: KubeSim, kubectl: Kubectl, admin: Admin, core: Any
) -> None:
    from kubernetes import client as k8s

    k8s.PolicyV1Api(core.api_client).patch_namespaced_pod_disruption_budget(
        "web", "default", {"spec": {"maxUnavailable": 0}}
    )
    admin.reset()
    drain = kubectl.start(
        "drain", NODE, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=30s"
    )
    try:
        eventually(
            lambda: any(
                r["resource"] == "pods/eviction" and r["status"] == 429 for r in admin.requests()
            ),
            timeout=10,
            what="kubectl's first eviction refused",
        )
        refused_at = time.monotonic()
        k8s.PolicyV1Api(core.api_client).patch_namespaced_pod_disruption_budget(
            "web", "default", {"spec": {"maxUnavailable": 1}}
        )
        stdout, stderr = drain.communicate(timeout=30)
    finally:
        drain.kill()

    assert drain.returncode == 0, stderr
    assert "Cannot evict pod as it would violate the pod's disruption budget." in stderr
    assert "(will retry after 5s)" in stderr
    assert f"node/{NODE} drained" in stdout
    assert time.monotonic() - refused_at >= 4  # kubectl waited to retry
    statuses = [r["status"] for r in admin.requests() if r["resource"] == "pods/eviction"]
    assert 429 in statuses
    assert statuses[-1] == 201


def test_kubectl_auth_can_i__drainer_context_per_rbac(sim: KubeSim, kubectl: Kubectl) -> None:
    def can(*args: str) -> str:
        result = kubectl("auth", "can-i", *args, context="drainer", check=False)
        assert result.returncode in (0, 1), result.stderr
        return result.stdout.strip()

    assert can("create", "pods", "--subresource=eviction") == "no"

    kubectl("create", "-f", str(MANIFESTS / "rbac.yaml"))

    assert can("create", "pods", "--subresource=eviction") == "yes"
    assert can("create", "pods/eviction") == "no"  # kubectl reads this as pod "eviction"
    assert can("create", "pods", "--subresource=eviction", "-n", "kube-system") == "yes"
    assert can("patch", "nodes") == "yes"
    assert can("delete", "nodes") == "no"
    assert can("delete", "pods") == "no"
    assert can("get", "daemonsets.apps") == "yes"
    assert can("list", "deployments.apps") == "no"
    listed = kubectl("auth", "can-i", "--list", context="drainer").stdout
    assert "pods/eviction" in listed


def test_kubectl__drainer_context_forbidden__real_error_message(
    sim: KubeSim, kubectl: Kubectl
) -> None:
    result = kubectl("get", "nodes", context="drainer", check=False)

    assert result.returncode == 1
    assert (
        'Error from server (Forbidden): nodes is forbidden: User "drainer" cannot list '
        'resource "nodes" in API group "" at the cluster scope'
    ) in result.stderr


def test_kubectl_create__unknown_field__strict_validation_error(
    sim: KubeSim, kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = tmp_path / "typo.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\nspec:\n  unschedulabel: true\n"
    )

    result = kubectl("create", "-f", str(manifest), check=False)

    assert result.returncode == 1
    assert 'strict decoding error: unknown field "spec.unschedulabel"' in result.stderr


def test_kubectl_scale__deployment__new_pods_ready(cluster: KubeSim, kubectl: Kubectl) -> None:
    scaled = kubectl("scale", "deployment", "web", "--replicas=4")

    assert "deployment.apps/web scaled" in scaled.stdout
    eventually(lambda: len([p for p in cluster.list("Pod") if is_pod_ready(p)]) == 9)


def test_kubectl__cordon_uncordon_and_delete_pod(cluster: KubeSim, kubectl: Kubectl) -> None:
    kubectl("cordon", NODE)
    assert cluster.get("Node", NODE)["spec"]["unschedulable"] is True
    kubectl("uncordon", NODE)
    assert not cluster.get("Node", NODE)["spec"].get("unschedulable")

    # db pods take 0.5 s to stop: kubectl's wait lists before the StatefulSet
    # recreates db-0 (with a quicker pod, kubectl itself races and waits forever).
    deleted = kubectl("delete", "pod", "db-0", "--wait=true", "--timeout=10s")

    assert 'pod "db-0" deleted' in deleted.stdout
    eventually(lambda: _all_ready(cluster), timeout=10)


def test_kubectl_create_namespace__protobuf_body__created_labelled_then_deleted(
    sim: KubeSim, kubectl: Kubectl
) -> None:
    kubectl("create", "namespace", "team")

    labels = sim.get("Namespace", "team")["metadata"]["labels"]
    assert labels == {"kubernetes.io/metadata.name": "team"}
    kubectl("delete", "namespace", "team", "--timeout=10s")
    assert "team" not in kubectl("get", "namespaces", "-o", "name").stdout
