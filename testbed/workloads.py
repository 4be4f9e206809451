"""The one set of Kubernetes object builders for tests, the demo, the benchmarks and
the soak: nodes, pods, PodDisruptionBudgets and workloads, as small functions with
keyword arguments.

Durations are kubesim annotations (divided by the simulator's speed):
startup (binding to Ready), shutdown (deletion to exit) and detach (exit to the
VolumeAttachment going away).

Their home is here, beside the test-side client (testbed.cluster): testbed imports
kubesim, never the reverse, so kubesim's own tests, the drainer's unit and
end-to-end tests, the demo, the benchmarks and the soak all import them without a
cycle, and kubesim stays a package that knows nothing of its users.
"""

from __future__ import annotations

import hashlib
from typing import Any

Obj = dict[str, Any]

DELETED_AT = "2026-11-22T00:00:00Z"
"""The deletionTimestamp of a pod built `terminating`."""
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
CRITICAL = "system-cluster-critical"
PAUSE = "registry.k8s.io/pause:3.10"


def node(
    name: str,
    instance: str | None = None,
    zone: str = "us-east-1a",
    *,
    pods: int | None = None,
    hostname: str = "",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    unschedulable: bool = False,
    taints: list[Obj] | None = None,
    allocatable: dict[str, str] | None = None,
    created: str = "",
    ready: bool | None = None,
    ready_since: str = "",
) -> Obj:
    """A worker node. instance: the EC2 instance its providerID names (None: one
    made up from the name). hostname: its kubernetes.io/hostname label.

    pods: registered as an EKS node's kubelet registers it, with room for that many
    pods, its zone label, and its volumes attached by the attach-detach controller
    (the annotation the kubelet sets, which kwok does not: without it the real
    controller never attaches a volume to the node). None: the bare object, as the
    unit tests hand the engine and kubesim's tests apply.
    allocatable: its status.allocatable as given (the plan's capacity tests).
    created: its creationTimestamp; ready: its Ready condition (None: none), whose
        lastTransitionTime is ready_since (the plan's refresh tests read both)."""
    instance = instance or f"i-{abs(hash(name)) % 10**17:017x}"
    all_labels = {**({"kubernetes.io/hostname": hostname} if hostname else {}), **(labels or {})}
    all_annotations = dict(annotations or {})
    if pods is not None:
        all_labels = {"topology.kubernetes.io/zone": zone, **all_labels}
        all_annotations = {
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            **all_annotations,
        }
    metadata: Obj = {"name": name}
    if all_labels:
        metadata["labels"] = all_labels
    if all_annotations:
        metadata["annotations"] = all_annotations
    if created:
        metadata["creationTimestamp"] = created
    spec: Obj = {"providerID": f"aws:///{zone}/{instance}"}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    if pods is not None:
        spec["podCIDR"] = pod_cidr(name)
    manifest: Obj = {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "spec": spec}
    if pods is not None:
        manifest["status"] = {
            "capacity": {"pods": str(pods), "cpu": "4", "memory": "16Gi"},
            "allocatable": {"pods": str(pods), "cpu": "3920m", "memory": "15Gi"},
        }
    if allocatable is not None:
        manifest.setdefault("status", {})["allocatable"] = dict(allocatable)
    if ready is not None:
        manifest.setdefault("status", {})["conditions"] = [_ready(ready, ready_since)]
    return manifest


def pod_cidr(node: str) -> str:
    """The node's own pod IP range, from its name: kwok gives a pod an IP of its
    node's range (without one, every node shares kwok's --cidr, and a pod evicted from
    one node hands its IP at once to a pod made on another, which the VPC CNI does
    not: its IPs belong to the node's network interfaces)."""
    digest = hashlib.sha256(node.encode()).digest()
    return f"10.{128 + digest[0] % 128}.{digest[1]}.0/24"


def _ready(ready: bool, since: str) -> Obj:
    """A Ready condition, its lastTransitionTime `since` when given."""
    condition: Obj = {"type": "Ready", "status": "True" if ready else "False"}
    if since:
        condition["lastTransitionTime"] = since
    return condition


def _annotations(startup: float, shutdown: float, detach: float = 0.0) -> dict[str, str]:
    annotations = {}
    if startup:
        annotations["kubesim.io/startup-seconds"] = str(startup)
    if shutdown:
        annotations["kubesim.io/shutdown-seconds"] = str(shutdown)
    if detach:
        annotations["kubesim.io/detach-seconds"] = str(detach)
    return annotations


def workload(
    kind: str,
    name: str,
    *,
    replicas: int = 1,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    startup: float = 0.0,
    shutdown: float = 0.0,
    detach: float = 0.0,
    grace: int = 30,
    priority_class: str = "",
) -> Obj:
    """A Deployment, ReplicaSet, StatefulSet or DaemonSet of one container per pod;
    `annotations` go on its pod template, beside the kubesim durations."""
    labels = labels or {"app": name}
    template: Obj = {
        "metadata": {
            "labels": dict(labels),
            "annotations": {**_annotations(startup, shutdown, detach), **(annotations or {})},
        },
        "spec": {
            "containers": [{"name": "main", "image": PAUSE}],
            "terminationGracePeriodSeconds": grace,
            **({"priorityClassName": priority_class} if priority_class else {}),
        },
    }
    spec: Obj = {"selector": {"matchLabels": dict(labels)}, "template": template}
    if kind != "DaemonSet":
        spec["replicas"] = replicas
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": spec,
    }


def deployment(name: str, replicas: int, **keywords: Any) -> Obj:
    """workload("Deployment", ...), its replicas said first."""
    return workload("Deployment", name, replicas=replicas, **keywords)


def budget(
    name: str,
    selector: dict[str, str],
    *,
    namespace: str = "default",
    max_unavailable: int | str | None = None,
    min_available: int | str | None = None,
    unhealthy_pod_eviction_policy: str = "",
    status: Obj | None = None,
) -> Obj:
    """A PodDisruptionBudget selecting pods by `selector` (matchLabels); `status` as
    the disruption controller would have written it, for tests without a server.
    unhealthy_pod_eviction_policy: its spec's unhealthyPodEvictionPolicy
    ("": none, the API's IfHealthyBudget)."""
    spec: Obj = {"selector": {"matchLabels": dict(selector)}}
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if min_available is not None:
        spec["minAvailable"] = min_available
    if unhealthy_pod_eviction_policy:
        spec["unhealthyPodEvictionPolicy"] = unhealthy_pod_eviction_policy
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        **({"status": dict(status)} if status is not None else {}),
    }


def statefulset(
    name: str,
    replicas: int,
    *,
    namespace: str = "default",
    startup: float = 0.0,
    shutdown: float = 0.0,
    detach: float = 0.0,
    storage: str = "10Gi",
) -> Obj:
    """A StatefulSet whose pods each claim `storage` of gp3 (`storage=""`: no volume
    claims, which a cluster without a provisioner can run)."""
    manifest = workload(
        "StatefulSet",
        name,
        replicas=replicas,
        namespace=namespace,
        startup=startup,
        shutdown=shutdown,
        detach=detach,
    )
    manifest["spec"]["podManagementPolicy"] = "Parallel"
    manifest["spec"]["volumeClaimTemplates"] = (
        [
            {
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "gp3",
                    "resources": {"requests": {"storage": storage}},
                },
            }
        ]
        if storage
        else []
    )
    return manifest


def daemonset(name: str, *, namespace: str = "kube-system") -> Obj:
    return workload("DaemonSet", name, namespace=namespace)


def pod(
    name: str = "p",
    *,
    namespace: str = "default",
    uid: str | None = None,
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    finalizers: list[str] | None = None,
    grace: int | None = None,
    shutdown: float = 0.0,
    owner: str | Obj | None = None,
    phase: str | None = None,
    ready: bool | None = None,
    priority_class: str = "",
    emptydir: bool = False,
    claims: tuple[str, ...] = (),
    mirror: bool = False,
    terminating: bool = False,
    created: str = "",
    ready_since: str = "",
    requests: dict[str, str] | None = None,
    spec_fields: Obj | None = None,
) -> Obj:
    """A pod of one pause container (a bare pod unless `owner` says otherwise).

    grace: its terminationGracePeriodSeconds (None: the API server's default, 30).
    shutdown: kubesim's seconds from its deletion to its exit.
    owner: its controller: a kind ("ReplicaSet", "DaemonSet", ...), or the
        ownerReference itself when pods must share one (None: a bare pod).
    phase, ready: its status (None: no status, as a pod not yet seen by a kubelet).
    claims: the PersistentVolumeClaims it mounts.
    mirror: a static pod's mirror (its config.mirror annotation).
    terminating: deleted, not yet gone (a deletionTimestamp).
    created: its creationTimestamp; ready_since: its Ready condition's
        lastTransitionTime (the plan reads both: how long a pod took to be Ready).
    requests: its container's resource requests.
    spec_fields: more fields of its spec, over the built ones (tolerations,
        affinity, nodeSelector, containers...)."""
    metadata: Obj = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    all_annotations = {
        **_annotations(0.0, shutdown),
        **(annotations or {}),
        **({MIRROR_ANNOTATION: "mirror"} if mirror else {}),
    }
    if all_annotations:
        metadata["annotations"] = all_annotations
    if finalizers:
        metadata["finalizers"] = list(finalizers)
    if uid is not None:
        metadata["uid"] = uid
    if isinstance(owner, str):
        owner = {"kind": owner, "name": f"{name}-owner", "uid": f"{name}-owner", "controller": True}
    if owner:
        metadata["ownerReferences"] = [owner]
    if terminating:
        metadata["deletionTimestamp"] = DELETED_AT
    if created:
        metadata["creationTimestamp"] = created
    container: Obj = {"name": "main", "image": PAUSE}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    spec: Obj = {"containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    if priority_class:
        spec["priorityClassName"] = priority_class
    volumes: list[Obj] = [{"name": "scratch", "emptyDir": {}}] if emptydir else []
    volumes += [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    if volumes:
        spec["volumes"] = volumes
    spec.update(spec_fields or {})
    manifest: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    status: Obj = {}
    if phase is not None:
        status["phase"] = phase
    if ready is not None:
        status["conditions"] = [_ready(ready, ready_since)]
    if status:
        manifest["status"] = status
    return manifest
