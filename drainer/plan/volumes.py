"""Where an evicted pod's volumes let its replacement go: a PersistentVolumeClaim
bound to a PersistentVolume with required node affinity (an EBS volume's zone)
holds the pod to the nodes that affinity admits. Read through the API server: the
claim (k8s-rbac/, the drain waits for its volume to detach) and its volume (the
optional k8s-rbac/plan/, a read the drain never makes); a volume the identity may
not read is said, per pod, rather than passed over."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from drainer.engine import pods
from drainer.engine.pods import Pod
from drainer.errors import KubeForbidden

Obj = dict[str, Any]
ZONE_KEYS = (
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.ebs.csi.aws.com/zone",
)
PLAN_RBAC = "kubectl apply -f k8s-rbac/plan/"


class Volumes(Protocol):
    """The PersistentVolume bound to a claim."""

    def bound(self, namespace: str, claim: str) -> Obj | None:
        """The volume (None: no such claim, or none named). Raises KubeForbidden."""


class Reader(Protocol):
    def get_claim(self, namespace: str, name: str) -> Obj | None: ...

    def get_volume(self, name: str) -> Obj | None: ...


@dataclass
class ApiVolumes:
    """The claims' volumes as the API server has them, each read once."""

    kube: Reader
    seen: dict[tuple[str, str], Obj | None] = field(default_factory=dict)

    def bound(self, namespace: str, claim: str) -> Obj | None:
        if (namespace, claim) not in self.seen:
            found = self.kube.get_claim(namespace, claim)
            name = ((found or {}).get("spec") or {}).get("volumeName")
            self.seen[(namespace, claim)] = self.kube.get_volume(str(name)) if name else None
        return self.seen[(namespace, claim)]


@dataclass(frozen=True)
class Held:
    """A claim of the pod whose volume admits only some nodes."""

    claim: str
    """namespace/name."""
    volume: str
    terms: tuple[Obj, ...]
    """The volume's required nodeSelectorTerms ("" volume and none: unreadable)."""
    unread: str = ""
    """Why the volume could not be read."""
    grant: str = ""
    """The RBAC that lets it be read."""

    @property
    def zone(self) -> str:
        """The zones its terms name (", "-joined), "" none."""
        zones = [
            str(v)
            for term in self.terms
            for e in term.get("matchExpressions") or []
            if e.get("key") in ZONE_KEYS and e.get("operator") == "In"
            for v in e.get("values") or []
        ]
        return ", ".join(dict.fromkeys(zones))


def held(pod: Pod, volumes: Volumes | None) -> list[Held]:
    """The pod's claims whose volumes hold it to some nodes (or could not be read)."""
    if volumes is None:
        return []
    namespace = str(pod["metadata"].get("namespace") or "default")
    found = []
    for claim in pods.claim_names(pod):
        where = f"{namespace}/{claim}"
        try:
            volume = volumes.bound(namespace, claim)
        except KubeForbidden as e:
            denied = f"RBAC denies {e.verb or 'get'} {e.resource or 'persistentvolumes'}"
            found.append(Held(where, "", (), unread=denied, grant=_grant(e.resource)))
            continue
        if volume is None:
            continue
        required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
        terms = tuple(required.get("nodeSelectorTerms") or [])
        if terms:
            found.append(Held(where, str(volume["metadata"]["name"]), terms))
    return found


def _grant(resource: str) -> str:
    """Where the read that was denied is granted."""
    if resource == "persistentvolumeclaims":
        return "kubectl apply -f k8s-rbac/"
    return PLAN_RBAC
