"""Builders for the Kubernetes objects of test, demo and benchmark scenarios.

Durations are kubesim annotations (divided by the simulator's speed):
startup (binding to Ready), shutdown (deletion to exit) and detach (exit to the
VolumeAttachment going away).
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def node(
    name: str,
    instance_id: str,
    zone: str,
    *,
    pods: int = 110,
    labels: dict[str, str] | None = None,
) -> Obj:
    """A worker node as an EKS node's kubelet registers it: its providerID names the
    instance, its capacity says how many pods fit, and its volumes are attached by
    the attach-detach controller (the annotation the kubelet sets, which kwok does
    not: without it the real controller never attaches a volume to the node)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"topology.kubernetes.io/zone": zone, **(labels or {})},
            "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": {"providerID": f"aws:///{zone}/{instance_id}"},
        "status": {
            "capacity": {"pods": str(pods), "cpu": "4", "memory": "16Gi"},
            "allocatable": {"pods": str(pods), "cpu": "3920m", "memory": "15Gi"},
        },
    }


def _annotations(startup: float, shutdown: float, detach: float = 0.0) -> dict[str, str]:
    annotations = {}
    if startup:
        annotations["kubesim.io/startup-seconds"] = str(startup)
    if shutdown:
        annotations["kubesim.io/shutdown-seconds"] = str(shutdown)
    if detach:
        annotations["kubesim.io/detach-seconds"] = str(detach)
    return annotations


def pod_spec(
    name: str,
    *,
    grace: int = 30,
    priority_class: str = "",
    volumes: list[Obj] | None = None,
    node_selector: dict[str, str] | None = None,
) -> Obj:
    spec: Obj = {
        "containers": [{"name": name, "image": f"registry.example/{name}:1"}],
        "terminationGracePeriodSeconds": grace,
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if volumes:
        spec["volumes"] = volumes
    if node_selector:
        spec["nodeSelector"] = node_selector
    return spec


def deployment(
    name: str,
    replicas: int,
    *,
    namespace: str = "default",
    startup: float = 0.0,
    shutdown: float = 0.0,
    grace: int = 30,
    priority_class: str = "",
    labels: dict[str, str] | None = None,
) -> Obj:
    labels = labels or {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {
                    "labels": dict(labels),
                    "annotations": _annotations(startup, shutdown),
                },
                "spec": pod_spec(name, grace=grace, priority_class=priority_class),
            },
        },
    }


def budget(
    name: str,
    selector: dict[str, str],
    *,
    namespace: str = "default",
    max_unavailable: int | str | None = None,
    min_available: int | str | None = None,
) -> Obj:
    spec: Obj = {"selector": {"matchLabels": dict(selector)}}
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if min_available is not None:
        spec["minAvailable"] = min_available
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
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
    """`storage=""`: no volume claims (a cluster without a provisioner can run it)."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": _annotations(startup, shutdown, detach),
                },
                "spec": pod_spec(name),
            },
            "volumeClaimTemplates": [
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
            else [],
        },
    }


def daemonset(name: str, *, namespace: str = "kube-system") -> Obj:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec(name)},
        },
    }


def bare_pod(
    name: str,
    *,
    node: str = "",
    namespace: str = "default",
    shutdown: float = 0.0,
    grace: int = 30,
    emptydir: bool = False,
    finalizers: list[str] | None = None,
    mirror: bool = False,
    priority_class: str = "",
    labels: dict[str, str] | None = None,
) -> Obj:
    annotations = _annotations(0.0, shutdown)
    if mirror:
        annotations["kubernetes.io/config.mirror"] = "mirror-hash"
    metadata: Obj = {
        "name": name,
        "namespace": namespace,
        "annotations": annotations,
        "labels": labels or {"app": name},
    }
    if finalizers:
        metadata["finalizers"] = list(finalizers)
    volumes = [{"name": "scratch", "emptyDir": {}}] if emptydir else None
    spec = pod_spec(name, grace=grace, volumes=volumes, priority_class=priority_class)
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
