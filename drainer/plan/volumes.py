"""Where an evicted pod's volumes let its replacement go: a PersistentVolumeClaim
bound to a PersistentVolume with required node affinity (an EBS volume's zone)
holds the pod to the nodes that affinity admits. Read through the API server: the
claim (k8s-rbac/, the drain waits for its volume to detach) and its volume (the
optional k8s-rbac/plan/, a read the drain never makes); a read the identity is
denied leaves that claim unchecked, and `ApiVolumes.note` says so (the command line
prints it), rather than passing over it."""

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
        """The volume (None: no such claim, none named, or not to be read)."""


class Reader(Protocol):
    def get_claim(self, namespace: str, name: str) -> Obj | None: ...

    def get_volume(self, name: str) -> Obj | None: ...


@dataclass
class ApiVolumes:
    """The claims' volumes as the API server has them, each read once."""

    kube: Reader
    seen: dict[tuple[str, str], Obj | None] = field(default_factory=dict)
    denied: dict[str, list[str]] = field(default_factory=dict)
    """Per read RBAC denied ("get persistentvolumes"): the claims left unchecked."""

    def bound(self, namespace: str, claim: str) -> Obj | None:
        if (namespace, claim) not in self.seen:
            try:
                found = self.kube.get_claim(namespace, claim)
                name = ((found or {}).get("spec") or {}).get("volumeName")
                volume = self.kube.get_volume(str(name)) if name else None
            except KubeForbidden as e:
                read = f"{e.verb or 'get'} {e.resource or 'persistentvolumes'}"
                self.denied.setdefault(read, []).append(f"{namespace}/{claim}")
                volume = None
            self.seen[(namespace, claim)] = volume
        return self.seen[(namespace, claim)]

    def note(self) -> str:
        """What was not checked for want of a read, and the RBAC that grants it ("": all
        read)."""
        return "; ".join(
            f"the zones of the volumes behind {len(claims)} PersistentVolumeClaim(s) "
            f"({', '.join(claims[:3])}{', ...' if len(claims) > 3 else ''}) are not checked: "
            f"RBAC denies {read} (grant it: {_grant(read)})"
            for read, claims in self.denied.items()
        )


@dataclass(frozen=True)
class Held:
    """A claim of the pod whose volume admits only some nodes."""

    claim: str
    """namespace/name."""
    volume: str
    terms: tuple[Obj, ...]
    """The volume's required nodeSelectorTerms."""

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
    """The pod's claims whose volumes hold it to some nodes."""
    if volumes is None:
        return []
    namespace = str(pod["metadata"].get("namespace") or "default")
    found = []
    for claim in pods.claim_names(pod, ephemeral=False):  # the pod's own: not its replacement's
        volume = volumes.bound(namespace, claim)
        if volume is None:
            continue
        required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
        terms = tuple(required.get("nodeSelectorTerms") or [])
        if terms:
            found.append(Held(f"{namespace}/{claim}", str(volume["metadata"]["name"]), terms))
    return found


def _grant(read: str) -> str:
    """Where the read that was denied is granted."""
    if read.endswith("persistentvolumeclaims"):
        return "kubectl apply -f k8s-rbac/"
    return PLAN_RBAC
