"""Can this function drain? Asked as its own identity, before its hooks go live.

`make deploy` creates the stack with its lifecycle hooks off, then invokes the
function with a self-check event; only when the check passes does it turn the
hooks on. A scale-in before that is not held, rather than held and then abandoned
by a drain that is refused (RBAC not applied yet, an access entry missing, an
endpoint out of reach). The check is what a drain does, minus the changes: a
token for the cluster, one SelfSubjectAccessReview per permission a drain uses
(k8s-rbac/clusterrole.yaml; tests/test_selfcheck.py holds the two together), and a
server-side dry run of a cordon of one node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from drainer.errors import KubeError
from drainer.k8s.cordon import cordon_patch
from drainer.k8s.kube import Kube

Permission = tuple[str, str, str]
"""(verb, API group, resource[/subresource]), as k8s-rbac/ grants it."""

NEEDED: tuple[Permission, ...] = (
    ("get", "", "nodes"),
    ("list", "", "nodes"),
    ("watch", "", "nodes"),
    ("patch", "", "nodes"),
    ("list", "", "pods"),
    ("watch", "", "pods"),
    ("create", "", "pods/eviction"),
    ("list", "policy", "poddisruptionbudgets"),
    ("watch", "policy", "poddisruptionbudgets"),
    ("get", "", "persistentvolumeclaims"),
    ("list", "storage.k8s.io", "volumeattachments"),
    ("watch", "storage.k8s.io", "volumeattachments"),
)
FORCE: Permission = ("delete", "", "pods")
"""TIMEOUT_POLICY=force deletes pods, and the drains whose deadline EC2 sets do at it."""
EVENTS: tuple[Permission, ...] = (
    ("create", "events.k8s.io", "events"),
    ("patch", "events.k8s.io", "events"),
)
"""The drain's Kubernetes Events (drainer/k8s/events.py): a drain goes on without them."""
DAEMONSETS: Permission = ("list", "apps", "daemonsets")
"""The launch hook's DaemonSets owed to a new node (drainer/lifecycle/daemons.py): it
waits for the DaemonSet pods already on the node only without it."""
FORECAST_READS: tuple[Permission, ...] = (("get", "", "persistentvolumes"),)
"""What only the plan reads (k8s-rbac/plan/, optional): the self-check plans the
function's groups (drainer/plan/groups.py) only when it is granted."""


def describe(permission: Permission) -> str:
    verb, group, resource = permission
    return f"{verb} {group + '/' if group else ''}{resource}"


@dataclass(frozen=True)
class SelfCheck:
    cluster: str
    missing: list[str] = field(default_factory=list)
    cordon: str = ""
    """What the server-side dry run of a cordon said ("" when no node to try)."""
    error: str = ""
    no_events: list[str] = field(default_factory=list)
    """Event permissions missing: drains go on, without Kubernetes Events."""
    no_daemonsets: bool = False
    """DAEMONSETS missing: launches wait for the DaemonSet pods already on the node only."""
    no_delete: tuple[str, ...] = ()
    """The settings on whose drains delete pods at EC2's deadline, when delete pods is
    not granted (without TIMEOUT_POLICY=force: a drain goes on until that deadline)."""

    @property
    def passed(self) -> bool:
        return not self.missing and not self.error

    def message(self) -> str:
        if self.error:
            return f"cannot drain in cluster {self.cluster}: {self.error}"
        if self.missing:
            return (
                f"cannot drain in cluster {self.cluster}: not allowed to "
                f"{', '.join(self.missing)}. Apply the RBAC: kubectl apply -f k8s-rbac/"
            )
        events = (
            f"; not allowed to {', '.join(self.no_events)}: drains record no Kubernetes "
            "Events (kubectl apply -f k8s-rbac/)"
            if self.no_events
            else ""
        )
        if self.no_delete:
            events += (
                f"; not allowed to {describe(FORCE)}: a drain of {', '.join(self.no_delete)} "
                "still holding pods at EC2's deadline fails there (put the rule back: "
                "docs/operations.md, Dropping delete on pods)"
            )
        if self.no_daemonsets:
            events += (
                f"; not allowed to {describe(DAEMONSETS)}: the launch hook waits only for the "
                "DaemonSet pods already on a new node (kubectl apply -f k8s-rbac/)"
            )
        partly = self.no_events or self.no_delete or self.no_daemonsets
        granted = "may drain" if partly else "every permission granted"
        return f"can drain in cluster {self.cluster}: {granted}; {self.cordon}{events}"

    def result(self) -> dict[str, object]:
        return {
            "result": "check_passed" if self.passed else "check_failed",
            "cluster": self.cluster,
            "missing": self.missing,
            "message": self.message(),
        }


def check(kube: Kube, cluster: str, *, force: bool, deadlines: tuple[str, ...] = ()) -> SelfCheck:
    """Ask the API server, as this function, whether it may do what a drain does.
    `deadlines`: the settings on whose drains delete pods at EC2's deadline whatever
    TIMEOUT_POLICY says (SPOT_INTERRUPTION_DRAIN, ...): without delete, said, not failed."""
    needed = (*NEEDED, FORCE) if force else NEEDED
    try:
        missing = [describe(p) for p in needed if not kube.can_i(*p)]
        if missing:
            return SelfCheck(cluster, missing)
        no_events = [describe(p) for p in EVENTS if not kube.can_i(*p)]
        no_delete = deadlines if deadlines and not force and not kube.can_i(*FORCE) else ()
        cordon = _dry_run_cordon(kube)
        return SelfCheck(
            cluster,
            cordon=cordon,
            no_events=no_events,
            no_delete=no_delete,
            no_daemonsets=not kube.can_i(*DAEMONSETS),
        )
    except KubeError as e:
        return SelfCheck(cluster, error=str(e))


def _dry_run_cordon(kube: Kube) -> str:
    for node in kube.list_nodes(page_size=1):
        name = str(node["metadata"]["name"])
        patch, _ = cordon_patch(node, 0.0)
        kube.patch_node(name, patch, dry_run=True)
        return f"a dry-run cordon of node {name} was accepted"
    return "no node to try a dry-run cordon on"
