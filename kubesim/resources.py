"""The API resources kubesim serves, as discovery describes them."""

from __future__ import annotations

from dataclasses import dataclass, field

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
READ_VERBS = ("get", "list", "watch")


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    # Subresources served beside the main resource: name -> (kind, group, version, verbs).
    subresources: dict[str, tuple[str, str, str, tuple[str, ...]]] = field(default_factory=dict)
    # Field selectors the real server accepts for this resource, beyond metadata.*.
    field_labels: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        return self.group_version

    @property
    def key(self) -> str:
        """Unique name, e.g. "pods" or "deployments.apps"."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


_STATUS = ("get", "patch", "update")
_SCALE = ("Scale", "autoscaling", "v1", _STATUS)

RESOURCES: tuple[Resource, ...] = (
    Resource(
        "",
        "v1",
        "namespaces",
        "Namespace",
        namespaced=False,
        singular="namespace",
        short_names=("ns",),
        subresources={"status": ("Namespace", "", "v1", _STATUS)},
        field_labels=("status.phase",),
    ),
    Resource(
        "",
        "v1",
        "nodes",
        "Node",
        namespaced=False,
        singular="node",
        short_names=("no",),
        subresources={"status": ("Node", "", "v1", _STATUS)},
        field_labels=("spec.unschedulable",),
    ),
    Resource(
        "",
        "v1",
        "pods",
        "Pod",
        namespaced=True,
        singular="pod",
        short_names=("po",),
        categories=("all",),
        subresources={
            "eviction": ("Eviction", "policy", "v1", ("create",)),
            "status": ("Pod", "", "v1", _STATUS),
        },
        field_labels=(
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ),
    ),
    Resource(
        "",
        "v1",
        "events",
        "Event",
        namespaced=True,
        singular="event",
        short_names=("ev",),
        field_labels=(
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ),
    ),
    Resource(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        namespaced=True,
        singular="event",
        short_names=("ev",),
        verbs=("create", "get", "list", "patch"),
    ),
    Resource(
        "",
        "v1",
        "configmaps",
        "ConfigMap",
        namespaced=True,
        singular="configmap",
        short_names=("cm",),
    ),
    Resource(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        namespaced=True,
        singular="persistentvolumeclaim",
        short_names=("pvc",),
        subresources={"status": ("PersistentVolumeClaim", "", "v1", _STATUS)},
    ),
    Resource(
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        namespaced=False,
        singular="persistentvolume",
        short_names=("pv",),
        subresources={"status": ("PersistentVolume", "", "v1", _STATUS)},
    ),
    Resource(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        namespaced=True,
        singular="deployment",
        short_names=("deploy",),
        categories=("all",),
        subresources={"status": ("Deployment", "apps", "v1", _STATUS), "scale": _SCALE},
    ),
    Resource(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        namespaced=True,
        singular="replicaset",
        short_names=("rs",),
        categories=("all",),
        subresources={"status": ("ReplicaSet", "apps", "v1", _STATUS), "scale": _SCALE},
    ),
    Resource(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        namespaced=True,
        singular="statefulset",
        short_names=("sts",),
        categories=("all",),
        subresources={"status": ("StatefulSet", "apps", "v1", _STATUS), "scale": _SCALE},
    ),
    Resource(
        "apps",
        "v1",
        "daemonsets",
        "DaemonSet",
        namespaced=True,
        singular="daemonset",
        short_names=("ds",),
        categories=("all",),
        subresources={"status": ("DaemonSet", "apps", "v1", _STATUS)},
    ),
    Resource(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        namespaced=True,
        singular="poddisruptionbudget",
        short_names=("pdb",),
        subresources={"status": ("PodDisruptionBudget", "policy", "v1", _STATUS)},
    ),
    Resource(
        "storage.k8s.io",
        "v1",
        "volumeattachments",
        "VolumeAttachment",
        namespaced=False,
        singular="volumeattachment",
        subresources={"status": ("VolumeAttachment", "storage.k8s.io", "v1", _STATUS)},
    ),
    Resource(
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "Role",
        namespaced=True,
        singular="role",
    ),
    Resource(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        namespaced=False,
        singular="clusterrole",
    ),
    Resource(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        namespaced=True,
        singular="rolebinding",
    ),
    Resource(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        namespaced=False,
        singular="clusterrolebinding",
    ),
    Resource(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        namespaced=False,
        singular="selfsubjectaccessreview",
        verbs=("create",),
    ),
    Resource(
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        namespaced=False,
        singular="selfsubjectrulesreview",
        verbs=("create",),
    ),
)

BY_KEY: dict[str, Resource] = {r.key: r for r in RESOURCES}
BY_KIND: dict[tuple[str, str], Resource] = {(r.group_version, r.kind): r for r in RESOURCES}
# Group versions served, in discovery order; the preferred version is the only one.
GROUP_VERSIONS: dict[str, list[Resource]] = {}
for _r in RESOURCES:
    GROUP_VERSIONS.setdefault(_r.group_version, []).append(_r)

# Review APIs are computed on request and never stored.
VIRTUAL = frozenset(
    {
        "selfsubjectaccessreviews.authorization.k8s.io",
        "selfsubjectrulesreviews.authorization.k8s.io",
    }
)


def lookup(group: str, version: str, plural: str) -> Resource | None:
    key = f"{plural}.{group}" if group else plural
    resource = BY_KEY.get(key)
    if resource is None or resource.version != version:
        return None
    return resource


def for_kind(api_version: str, kind: str) -> Resource | None:
    return BY_KIND.get((api_version, kind))
