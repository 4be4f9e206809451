"""The one set of Kubernetes object builders for the drainer's tests: pods,
PodDisruptionBudgets and nodes, as small functions with keyword arguments.

Each builds on kubesim's own builders (`kubesim.testing`, which kubesim's tests use
for the simulator), so an object a test applies to kubesim is the manifest kubesim's
tests apply; the keywords add what the drainer's unit tests hand the engine directly:
a UID, an owner, a phase or readiness, a priority class, an emptyDir, a mirror or a
deletion mark. The end-to-end scenarios build theirs with testbed.workloads (shared
with the demo and the benchmarks), whose durations are kubesim annotations.
"""

from __future__ import annotations

from typing import Any

from kubesim import testing as k

Obj = dict[str, Any]

DELETED_AT = "2026-11-22T00:00:00Z"
"""The deletionTimestamp of a pod built `terminating`."""
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
CRITICAL = "system-cluster-critical"


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
    owner: str | Obj | None = None,
    phase: str | None = None,
    ready: bool | None = None,
    priority_class: str = "",
    emptydir: bool = False,
    claims: tuple[str, ...] = (),
    mirror: bool = False,
    terminating: bool = False,
) -> Obj:
    """A pod of one pause container.

    owner: its controller: a kind ("ReplicaSet", "DaemonSet", ...), or the
        ownerReference itself when pods must share one (None: a bare pod).
    phase, ready: its status (None: no status, as a pod not yet seen by a kubelet).
    claims: the PersistentVolumeClaims it mounts.
    terminating: deleted, not yet gone (a deletionTimestamp)."""
    manifest = k.pod(
        name,
        namespace=namespace,
        node_name=node_name,
        labels=labels,
        annotations={**(annotations or {}), **({MIRROR_ANNOTATION: "mirror"} if mirror else {})},
        finalizers=finalizers,
        grace=grace,
    )
    metadata, spec = manifest["metadata"], manifest["spec"]
    if uid is not None:
        metadata["uid"] = uid
    if isinstance(owner, str):
        owner = {"kind": owner, "name": f"{name}-owner", "uid": f"{name}-owner", "controller": True}
    if owner:
        metadata["ownerReferences"] = [owner]
    if terminating:
        metadata["deletionTimestamp"] = DELETED_AT
    if priority_class:
        spec["priorityClassName"] = priority_class
    volumes: list[Obj] = [{"name": "scratch", "emptyDir": {}}] if emptydir else []
    volumes += [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    if volumes:
        spec["volumes"] = volumes
    status: Obj = {}
    if phase is not None:
        status["phase"] = phase
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    if status:
        manifest["status"] = status
    return manifest


def budget(
    name: str,
    selector: dict[str, str],
    *,
    namespace: str = "default",
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    status: Obj | None = None,
) -> Obj:
    """A PodDisruptionBudget selecting pods by `selector` (matchLabels); `status` as
    the disruption controller would have written it, for tests without a server."""
    manifest = k.pdb(
        name,
        selector,
        namespace=namespace,
        min_available=min_available,
        max_unavailable=max_unavailable,
    )
    if status is not None:
        manifest["status"] = dict(status)
    return manifest


def node(
    name: str,
    *,
    instance: str | None = None,
    zone: str = "us-east-1a",
    hostname: str = "",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    unschedulable: bool = False,
    taints: list[Obj] | None = None,
) -> Obj:
    """A worker node. instance: the EC2 instance its providerID names (None: one
    made up from the name). hostname: its kubernetes.io/hostname label."""
    manifest = k.node(name, unschedulable=unschedulable, taints=taints)
    if instance is not None:
        manifest["spec"]["providerID"] = f"aws:///{zone}/{instance}"
    all_labels = {**({"kubernetes.io/hostname": hostname} if hostname else {}), **(labels or {})}
    if all_labels:
        manifest["metadata"]["labels"] = all_labels
    if annotations:
        manifest["metadata"]["annotations"] = dict(annotations)
    return manifest
