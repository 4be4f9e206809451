"""Facts about a pod, read from its JSON: who owns it, how critical it is, whether
it is on its way out and when it should have gone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

Pod = dict[str, Any]
PodKey = tuple[str, str]

CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
# The priority of system-cluster-critical; anything at or above it is critical.
CRITICAL_PRIORITY = 2_000_000_000
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
DO_NOT_DISRUPT_ANNOTATIONS = ("karpenter.sh/do-not-disrupt", "eks-node-drainer/do-not-disrupt")
"""A pod annotated with either, "true", must not be evicted while it works (a batch
job, a long request): Karpenter's annotation, which the ecosystem uses, and ours."""


def key(pod: Pod) -> PodKey:
    metadata = pod["metadata"]
    return metadata.get("namespace", ""), metadata["name"]


def name(pod: Pod) -> str:
    namespace, pod_name = key(pod)
    return f"{namespace}/{pod_name}"


def uid(pod: Pod) -> str:
    return str(pod["metadata"].get("uid", ""))


def controller(pod: Pod) -> dict[str, Any] | None:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def workload(pod: Pod) -> tuple[str, str, str] | None:
    """What the pod belongs to, as what is learnt of it should outlive a rollout:
    namespace, kind, name of its controller, a Deployment's pod by its Deployment (its
    ReplicaSet's name less the pod's pod-template-hash suffix, as the Deployment
    controller names them: a rollout makes a new ReplicaSet). None: no controller."""
    ref = controller(pod)
    if ref is None:
        return None
    metadata = pod["metadata"]
    kind, owner = str(ref.get("kind", "")), str(ref.get("name", ""))
    suffix = f"-{(metadata.get('labels') or {}).get('pod-template-hash', '')}"
    if kind == "ReplicaSet" and len(suffix) > 1 and owner.endswith(suffix) and owner != suffix:
        kind, owner = "Deployment", owner.removesuffix(suffix)
    return metadata.get("namespace", ""), kind, owner


def opted_out(pod: Pod) -> str:
    """The do-not-disrupt annotation set to "true" on the pod ("" when none is)."""
    annotations = pod["metadata"].get("annotations") or {}
    for annotation in DO_NOT_DISRUPT_ANNOTATIONS:
        if str(annotations.get(annotation, "")).strip().lower() == "true":
            return annotation
    return ""


def is_ready(obj: Pod) -> bool:
    """Its Ready condition is True: a pod's, or a node's (the same shape)."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def is_mirror(pod: Pod) -> bool:
    return MIRROR_ANNOTATION in (pod["metadata"].get("annotations") or {})


def is_daemonset_pod(pod: Pod) -> bool:
    ref = controller(pod)
    return ref is not None and ref.get("kind") == "DaemonSet"


UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
"""The taint the node lifecycle controller puts on a cordoned node; the scheduler
goes by it, so a pod that tolerates it may be placed on the node being drained."""


def tolerates(pod: Pod, taint: dict[str, str]) -> bool:
    """Whether one of the pod's tolerations matches `taint` (v1.Toleration.ToleratesTaint)."""
    for toleration in (pod.get("spec") or {}).get("tolerations") or []:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key") or ""
        if toleration.get("operator") == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif key == taint.get("key") and (toleration.get("value") or "") == taint.get("value", ""):
            return True
    return False


def tolerates_cordon(pod: Pod) -> bool:
    return tolerates(pod, UNSCHEDULABLE_TAINT)


def is_finished(pod: Pod) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_terminating(pod: Pod) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def is_critical(pod: Pod) -> bool:
    spec = pod.get("spec") or {}
    if spec.get("priorityClassName") in CRITICAL_PRIORITY_CLASSES:
        return True
    priority = spec.get("priority")
    return isinstance(priority, int) and priority >= CRITICAL_PRIORITY


def has_emptydir(pod: Pod) -> bool:
    return any("emptyDir" in volume for volume in (pod.get("spec") or {}).get("volumes") or [])


def claim_names(pod: Pod, *, ephemeral: bool = True) -> list[str]:
    """The PersistentVolumeClaims the pod mounts: those it names and, with
    `ephemeral`, those of its generic ephemeral volumes, which Kubernetes names
    <pod>-<volume> and deletes with the pod (a replacement gets a claim of its own,
    wherever it lands: they hold no replacement to a zone)."""
    name = str((pod.get("metadata") or {}).get("name") or "")
    claims = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        named = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if named:
            claims.append(str(named))
        elif ephemeral and isinstance(volume.get("ephemeral"), dict) and volume.get("name"):
            claims.append(f"{name}-{volume['name']}")
    return claims


def parse_time(stamp: str) -> float:
    """RFC 3339 (as the API server writes it) to epoch seconds."""
    base = stamp.split(".", maxsplit=1)[0].rstrip("Z")
    return datetime.fromisoformat(base).replace(tzinfo=UTC).timestamp()


def deletion_deadline(pod: Pod) -> float | None:
    """When a terminating pod should be gone: its deletionTimestamp, which the API
    server sets to the deletion time plus the grace period."""
    stamp = pod["metadata"].get("deletionTimestamp")
    return parse_time(stamp) if stamp else None


DEFAULT_GRACE_PERIOD = 30
"""Kubernetes' terminationGracePeriodSeconds when a pod sets none."""


def ip(pod: Pod) -> str:
    """The pod's IP ("" before it has one)."""
    return str((pod.get("status") or {}).get("podIP") or "")


def grace_period(pod: Pod) -> int:
    """The pod's own terminationGracePeriodSeconds."""
    value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return value if isinstance(value, int) and value >= 0 else DEFAULT_GRACE_PERIOD
