"""API semantics on top of the store: defaulting, validation, graceful deletion,
garbage collection, status subresources and namespace lifecycle admission. The
pods/eviction subresource is in kubesim.eviction, budget arithmetic in
kubesim.disruption.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable
from typing import Any

from kubesim import errors

# Re-exported: the simulator and the tests know them from here.
from kubesim.disruption import controller_of as controller_of  # noqa: PLC0414
from kubesim.disruption import is_pod_ready as is_pod_ready  # noqa: PLC0414
from kubesim.errors import ApiError
from kubesim.resources import BY_KEY, Resource
from kubesim.selectors import (
    SelectorError,
    labels_match,
    selector_from_object,
    selector_to_string,
)
from kubesim.store import Obj, Store, now_iso

R = BY_KEY
PODS = R["pods"]
NODES = R["nodes"]
NAMESPACES = R["namespaces"]
PDBS = R["poddisruptionbudgets.policy"]
REPLICASETS = R["replicasets.apps"]
DEPLOYMENTS = R["deployments.apps"]
STATEFULSETS = R["statefulsets.apps"]
DAEMONSETS = R["daemonsets.apps"]

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def is_terminating(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


class Api:
    """Everything a request can do to the cluster state, minus HTTP."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        for name in DEFAULT_NAMESPACES:
            self.create(NAMESPACES, {"metadata": {"name": name}})

    # -- reads ----------------------------------------------------------------

    def get(self, resource: Resource, namespace: str, name: str) -> Obj:
        return self.store.get(resource, namespace, name)

    def select(
        self, resource: Resource, namespace: str, accept: Callable[[Obj], bool]
    ) -> tuple[list[Obj], int]:
        """Copies of the objects `accept` takes, and the store's resourceVersion."""
        with self.store.lock:
            items = [copy.deepcopy(o) for o in self.store.iter(resource, namespace) if accept(o)]
            return items, self.store.resource_version

    # -- create ---------------------------------------------------------------

    def create(
        self, resource: Resource, obj: Obj, namespace: str = "", dry_run: bool = False
    ) -> Obj:
        if not isinstance(obj, dict):
            raise errors.bad_request("the object provided is unrecognized")
        obj = copy.deepcopy(obj)
        metadata = obj.setdefault("metadata", {})
        if not isinstance(metadata, dict):
            raise errors.bad_request("metadata must be an object")
        if resource.namespaced:
            body_namespace = metadata.get("namespace")
            if body_namespace and namespace and body_namespace != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            metadata["namespace"] = namespace or body_namespace or "default"
        with self.store.lock:
            if resource.namespaced and isinstance(metadata.get("name", ""), str):
                # Admission runs before the registry: before generateName is filled in
                # and before validation.
                self.admit_create(
                    resource,
                    metadata["namespace"],
                    metadata.get("name") or metadata.get("generateName") or "Unknown",
                )
        if not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = metadata["generateName"] + _suffix()
        self._validate_meta(resource, obj)
        with self.store.lock:
            self._default(resource, obj)
            self._validate(resource, obj)
            metadata.pop("generation", None)
            if resource.kind in _GENERATION_KINDS:
                metadata["generation"] = 1
            metadata.pop("deletionTimestamp", None)
            metadata.pop("deletionGracePeriodSeconds", None)
            metadata.pop("resourceVersion", None)
            if dry_run:
                if self.store.peek(resource, metadata.get("namespace", ""), metadata["name"]):
                    raise errors.already_exists(resource.plural, metadata["name"], resource.group)
                return obj
            return self.store.create(resource, obj)

    # -- update and patch -----------------------------------------------------

    def update(
        self,
        resource: Resource,
        obj: Obj,
        namespace: str,
        name: str,
        *,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Obj:
        """PUT (and the result of a PATCH): the main resource ignores status changes, the
        status subresource ignores everything else, as the real registry strategies do."""
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            raise errors.bad_request("the object provided is unrecognized")
        obj = copy.deepcopy(obj)
        metadata = obj["metadata"]
        if metadata.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({metadata.get('name')}) does not match the name "
                f"on the URL ({name})"
            )
        metadata["name"] = name
        if resource.namespaced:
            metadata["namespace"] = namespace
        expect = metadata.get("resourceVersion")
        with self.store.lock:
            old = self.store.peek(resource, namespace, name)
            if old is None:
                raise errors.not_found(resource.plural, name, resource.group)
            if subresource == "status":
                new = copy.deepcopy(old)
                new["status"] = obj.get("status", {})
            else:
                new = obj
                if resource.subresources.get("status"):
                    new.pop("status", None)
                    if "status" in old:
                        new["status"] = copy.deepcopy(old["status"])
                self._validate_meta(resource, new)
                self._default(resource, new)
                self._validate(resource, new)
                self._validate_update(resource, old, new)
            _set_generation(resource, old, new)
            if dry_run:
                self.store.check_version(resource, new, expect)
                return new
            stored = self.store.update(resource, new, expect_rv=expect)
            if (
                is_terminating(stored)
                and not stored["metadata"].get("finalizers")
                and (resource is not PODS or self._pod_may_go(stored))
            ):
                # The last finalizer is gone: the object goes, and its dependents with it.
                gone = self.store.remove(resource, namespace, name)
                self._collect_garbage(gone, orphan=False)
                return gone
            return stored

    def _pod_may_go(self, pod: Obj) -> bool:
        """A terminating pod whose containers stopped (or that never ran) disappears once
        its finalizers are gone."""
        annotations = pod["metadata"].get("annotations") or {}
        return annotations.get("kubesim.io/stopped") == "true" or not pod.get("spec", {}).get(
            "nodeName"
        )

    # -- scale ----------------------------------------------------------------

    def get_scale(self, resource: Resource, namespace: str, name: str) -> Obj:
        """The autoscaling/v1 Scale of a Deployment, ReplicaSet or StatefulSet."""
        obj = self.store.get(resource, namespace, name)
        metadata = obj["metadata"]
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: metadata[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in metadata
            },
            "spec": {"replicas": int(obj["spec"].get("replicas", 1))},
            "status": {
                "replicas": int((obj.get("status") or {}).get("replicas", 0)),
                "selector": selector_to_string(obj["spec"].get("selector")),
            },
        }

    def set_scale(
        self, resource: Resource, namespace: str, name: str, scale: Any, *, dry_run: bool = False
    ) -> Obj:
        replicas = (
            ((scale or {}).get("spec") or {}).get("replicas") if isinstance(scale, dict) else None
        )
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise errors.invalid(
                "Scale",
                name,
                [
                    (
                        "spec.replicas",
                        f"Invalid value: {replicas}: must be greater than or equal to 0",
                    )
                ],
                "autoscaling",
            )
        with self.store.lock:
            obj = self.store.get(resource, namespace, name)
            expect = ((scale.get("metadata") or {}).get("resourceVersion")) or ""
            obj["metadata"]["resourceVersion"] = expect
            obj["spec"]["replicas"] = replicas
            updated = self.update(resource, obj, namespace, name, dry_run=dry_run)
            scaled = self.get_scale(resource, namespace, name)
            if dry_run:
                scaled["spec"]["replicas"] = updated["spec"]["replicas"]
            return scaled

    # -- delete ---------------------------------------------------------------

    def delete(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        options: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> Obj:
        options = options or {}
        with self.store.lock:
            obj = self.store.peek(resource, namespace, name)
            if obj is None:
                raise errors.not_found(resource.plural, name, resource.group)
            self._check_preconditions(resource, obj, options.get("preconditions") or {})
            if dry_run:
                return copy.deepcopy(obj)
            if resource is PODS:
                return self._delete_pod(obj, options)
            if resource is NAMESPACES:
                return self._delete_namespace(obj)
            propagation = options.get("propagationPolicy") or "Background"
            if obj["metadata"].get("finalizers") or propagation == "Foreground":
                if propagation == "Foreground":
                    self.store.update(resource, _with_finalizer(obj, "foregroundDeletion"))
                if is_terminating(obj):
                    return copy.deepcopy(self.store.peek(resource, namespace, name) or obj)
                return self.store.set_deletion(
                    resource, namespace, name, timestamp=now_iso(self.clock()), grace=0
                )
            gone = self.store.remove(resource, namespace, name)
            self._collect_garbage(gone, orphan=propagation == "Orphan")
            return gone

    def _delete_namespace(self, namespace: Obj) -> Obj:
        """Namespaces end in two steps: Terminating while the namespace controller
        deletes their contents, then gone (see the simulator)."""
        name = namespace["metadata"]["name"]
        if name in ("default", "kube-system", "kube-public"):
            raise ApiError(
                403,
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                reason="Forbidden",
                details={"kind": "namespaces", "name": name},
            )
        if is_terminating(namespace):
            return copy.deepcopy(namespace)

        def terminating(obj: Obj) -> None:
            obj.setdefault("status", {})["phase"] = "Terminating"

        return self.store.set_deletion(
            NAMESPACES, "", name, timestamp=now_iso(self.clock()), grace=0, mutate=terminating
        )

    def _check_preconditions(
        self, resource: Resource, obj: Obj, preconditions: dict[str, Any]
    ) -> None:
        uid = preconditions.get("uid")
        if uid and uid != obj["metadata"]["uid"]:
            raise errors.conflict(
                resource.plural,
                obj["metadata"]["name"],
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                f"{obj['metadata']['uid']}",
                resource.group,
            )
        rv = preconditions.get("resourceVersion")
        if rv and rv != obj["metadata"]["resourceVersion"]:
            raise errors.conflict(
                resource.plural,
                obj["metadata"]["name"],
                f"Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in "
                f"object meta: {obj['metadata']['resourceVersion']}",
                resource.group,
            )

    def _delete_pod(self, pod: Obj, options: dict[str, Any]) -> Obj:
        metadata = pod["metadata"]
        namespace, name = metadata["namespace"], metadata["name"]
        requested = options.get("gracePeriodSeconds")
        grace = (
            int(requested)
            if requested is not None
            else int(pod["spec"].get("terminationGracePeriodSeconds", 30))
        )
        grace = max(grace, 0)
        phase = (pod.get("status") or {}).get("phase")
        if not pod["spec"].get("nodeName") or phase in ("Succeeded", "Failed"):
            grace = 0
        if is_terminating(pod):
            current = int(metadata.get("deletionGracePeriodSeconds") or 0)
            if grace >= current:
                return copy.deepcopy(pod)
        now = self.clock()
        if (
            grace == 0
            and not metadata.get("finalizers")
            and (
                not pod["spec"].get("nodeName")
                or phase in ("Succeeded", "Failed")
                or requested == 0
            )
        ):
            return self.store.remove(PODS, namespace, name)
        return self.store.set_deletion(
            PODS, namespace, name, timestamp=now_iso(now + grace), grace=grace
        )

    def _collect_garbage(self, owner: Obj, orphan: bool) -> None:
        uid = owner["metadata"]["uid"]
        for resource in (REPLICASETS, PODS, R["persistentvolumeclaims"], R["events"]):
            for dependent in list(self.store.iter(resource)):
                refs = dependent["metadata"].get("ownerReferences") or []
                if not any(ref.get("uid") == uid for ref in refs):
                    continue
                if orphan:
                    updated = copy.deepcopy(dependent)
                    updated["metadata"]["ownerReferences"] = [
                        r for r in refs if r.get("uid") != uid
                    ]
                    self.store.update(resource, updated)
                elif not is_terminating(dependent):
                    self.delete(
                        resource,
                        dependent["metadata"].get("namespace", ""),
                        dependent["metadata"]["name"],
                    )

    def remove_now(self, resource: Resource, namespace: str, name: str) -> None:
        """Final removal (the kubelet confirming a pod stopped, a finalizer-free object)."""
        with self.store.lock:
            if self.store.peek(resource, namespace, name) is not None:
                gone = self.store.remove(resource, namespace, name)
                self._collect_garbage(gone, orphan=False)

    # -- eviction and admission ------------------------------------------------

    def evict(self, namespace: str, name: str, eviction: Any, dry_run: bool = False) -> Obj:
        """POST pods/NAME/eviction: the body of the 201 answer (see kubesim.eviction)."""
        from kubesim import eviction as evictions

        return evictions.evict(self, namespace, name, eviction, dry_run=dry_run)

    def admit_create(self, resource: Resource, namespace: str, name: str) -> None:
        """The NamespaceLifecycle admission plugin on a create (a pods/eviction too): a
        missing namespace is a 404, a terminating one a 403 with a NamespaceTerminating
        cause. Call with the store lock held."""
        if not resource.namespaced or not namespace:
            return
        namespace_obj = self.store.peek(NAMESPACES, "", namespace)
        if namespace_obj is None:
            raise errors.not_found("namespaces", namespace)
        if (namespace_obj.get("status") or {}).get("phase") != "Terminating":
            return
        error = errors.forbidden(
            resource.plural,
            name,
            f"unable to create new content in namespace {namespace} because it is being terminated",
            resource.group,
        )
        assert error.details is not None
        error.details["causes"] = [
            {
                "reason": "NamespaceTerminating",
                "message": f"namespace {namespace} is being terminated",
                "field": "metadata.namespace",
            }
        ]
        raise error

    # -- defaulting and validation --------------------------------------------

    def _validate_meta(self, resource: Resource, obj: Obj) -> None:
        metadata = obj["metadata"]
        name = metadata.get("name")
        if not name:
            raise errors.invalid(
                resource.kind,
                "",
                [("metadata.name", "Required value: name or generateName is required")],
                resource.group,
            )
        if (not isinstance(name, str) or len(name) > 253 or not _NAME.match(name)) and (
            resource.group != "rbac.authorization.k8s.io" or ":" not in str(name)
        ):
            raise errors.invalid(
                resource.kind,
                str(name),
                [
                    (
                        "metadata.name",
                        f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must '
                        "consist of lower case alphanumeric characters, '-' or '.', and must "
                        "start and end with an alphanumeric character",
                    )
                ],
                resource.group,
            )
        for field in ("labels", "annotations"):
            value = metadata.get(field)
            if value is not None and (
                not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values())
            ):
                raise errors.bad_request(
                    "json: cannot unmarshal into Go struct field "
                    f"ObjectMeta.metadata.{field} of type string"
                )

    def _default(self, resource: Resource, obj: Obj) -> None:
        metadata = obj["metadata"]
        spec = obj.setdefault("spec", {}) if resource.kind not in _SPECLESS else None
        if resource is PODS and spec is not None:
            spec.setdefault("terminationGracePeriodSeconds", 30)
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("dnsPolicy", "ClusterFirst")
            spec.setdefault("schedulerName", "default-scheduler")
            spec.setdefault("securityContext", {})
            spec.setdefault("enableServiceLinks", True)
            for container in spec.get("containers") or []:
                if isinstance(container, dict):
                    container.setdefault("imagePullPolicy", "IfNotPresent")
                    container.setdefault("terminationMessagePath", "/dev/termination-log")
                    container.setdefault("terminationMessagePolicy", "File")
                    container.setdefault("resources", {})
            if "priorityClassName" in spec and "priority" not in spec:
                spec["priority"] = {
                    "system-node-critical": 2000001000,
                    "system-cluster-critical": 2000000000,
                }.get(spec["priorityClassName"], 0)
            status = obj.setdefault("status", {})
            status.setdefault("phase", "Pending")
            status.setdefault("qosClass", "BestEffort")
        elif resource is NODES and spec is not None:
            labels = metadata.setdefault("labels", {})
            labels.setdefault("kubernetes.io/hostname", metadata["name"])
            labels.setdefault("kubernetes.io/os", "linux")
            labels.setdefault("kubernetes.io/arch", "amd64")
            if "status" not in obj or not obj["status"].get("nodeInfo"):
                obj["status"] = _node_status(
                    metadata["name"], obj.get("status") or {}, self.clock()
                )
        elif resource in (DEPLOYMENTS, REPLICASETS, STATEFULSETS) and spec is not None:
            spec.setdefault("replicas", 1)
            spec.setdefault("revisionHistoryLimit", 10)
            if resource is DEPLOYMENTS:
                spec.setdefault(
                    "strategy",
                    {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
                    },
                )
                spec.setdefault("progressDeadlineSeconds", 600)
            if resource is STATEFULSETS:
                spec.setdefault("podManagementPolicy", "OrderedReady")
                spec.setdefault(
                    "updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
                )
                spec.setdefault(
                    "persistentVolumeClaimRetentionPolicy",
                    {"whenDeleted": "Retain", "whenScaled": "Retain"},
                )
            obj.setdefault("status", {"replicas": 0})
        elif resource is DAEMONSETS and spec is not None:
            spec.setdefault(
                "updateStrategy",
                {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            )
            spec.setdefault("revisionHistoryLimit", 10)
            obj.setdefault(
                "status",
                {
                    "currentNumberScheduled": 0,
                    "desiredNumberScheduled": 0,
                    "numberMisscheduled": 0,
                    "numberReady": 0,
                },
            )
        elif resource is PDBS:
            obj.setdefault(
                "status",
                {
                    "currentHealthy": 0,
                    "desiredHealthy": 0,
                    "disruptionsAllowed": 0,
                    "expectedPods": 0,
                },
            )
        elif resource is NAMESPACES and spec is not None:
            # The real server labels every namespace with its own name.
            metadata.setdefault("labels", {})["kubernetes.io/metadata.name"] = metadata["name"]
            spec.setdefault("finalizers", ["kubernetes"])
            obj.setdefault("status", {"phase": "Active"})
        elif resource.kind == "VolumeAttachment":
            obj.setdefault("status", {"attached": False})
        elif resource.kind == "PersistentVolumeClaim" and spec is not None:
            obj.setdefault("status", {"phase": "Pending"})
        elif resource.kind == "PersistentVolume" and spec is not None:
            obj.setdefault("status", {"phase": "Available"})

    def _validate(self, resource: Resource, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        spec = obj.get("spec") or {}
        causes: list[tuple[str, str]] = []
        if resource is PODS:
            containers = spec.get("containers")
            if not isinstance(containers, list) or not containers:
                causes.append(("spec.containers", "Required value"))
            else:
                for i, container in enumerate(containers):
                    if not isinstance(container, dict) or not container.get("name"):
                        causes.append((f"spec.containers[{i}].name", "Required value"))
                    elif not container.get("image"):
                        causes.append((f"spec.containers[{i}].image", "Required value"))
        elif resource in (DEPLOYMENTS, REPLICASETS, STATEFULSETS, DAEMONSETS):
            selector = spec.get("selector")
            template_labels = ((spec.get("template") or {}).get("metadata") or {}).get(
                "labels"
            ) or {}
            if not isinstance(selector, dict) or not (
                selector.get("matchLabels") or selector.get("matchExpressions")
            ):
                causes.append(("spec.selector", "Required value"))
            else:
                try:
                    requirements = selector_from_object(selector)
                except SelectorError as e:
                    causes.append(("spec.selector", str(e)))
                else:
                    if not labels_match(requirements, template_labels):
                        causes.append(
                            (
                                "spec.template.metadata.labels",
                                f"Invalid value: {template_labels}: `selector` does not match "
                                "template `labels`",
                            )
                        )
            if not ((spec.get("template") or {}).get("spec") or {}).get("containers"):
                causes.append(("spec.template.spec.containers", "Required value"))
            replicas = spec.get("replicas", 1)
            if not isinstance(replicas, int) or replicas < 0:
                causes.append(
                    (
                        "spec.replicas",
                        f"Invalid value: {replicas}: must be greater than or equal to 0",
                    )
                )
        elif resource is PDBS:
            if "minAvailable" in spec and "maxUnavailable" in spec:
                causes.append(
                    ("spec", "Invalid value: minAvailable and maxUnavailable cannot be both set")
                )
            try:
                selector_from_object(spec.get("selector"))
            except SelectorError as e:
                causes.append(("spec.selector", str(e)))
        elif resource.kind == "VolumeAttachment":
            for field in ("attacher", "nodeName", "source"):
                if not spec.get(field):
                    causes.append((f"spec.{field}", "Required value"))
        if causes:
            raise errors.invalid(resource.kind, name, causes, resource.group)

    def _validate_update(self, resource: Resource, old: Obj, new: Obj) -> None:
        uid = new["metadata"].get("uid")
        if uid and uid != old["metadata"].get("uid"):
            # ValidateObjectMetaUpdate: a patch naming another UID is refused, so a
            # client that puts the UID it knows in its patch never writes to a new
            # object that took the name.
            raise errors.invalid(
                resource.kind,
                new["metadata"]["name"],
                [("metadata.uid", f'Invalid value: "{uid}": field is immutable')],
                resource.group,
            )
        if resource is PODS:
            old_node = old["spec"].get("nodeName")
            if old_node and new["spec"].get("nodeName") != old_node:
                raise errors.invalid(
                    "Pod",
                    new["metadata"]["name"],
                    [
                        (
                            "spec",
                            "Forbidden: pod updates may not change fields other than "
                            "`spec.containers[*].image`, ...",
                        )
                    ],
                )
        if resource.kind in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet") and (
            old["spec"].get("selector") != new["spec"].get("selector")
        ):
            raise errors.invalid(
                resource.kind,
                new["metadata"]["name"],
                [("spec.selector", "Invalid value: field is immutable")],
                resource.group,
            )


# Kinds whose registry strategy keeps metadata.generation (pods do not, before 1.33).
_GENERATION_KINDS = {
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "PodDisruptionBudget",
}


def _set_generation(resource: Resource, old: Obj, new: Obj) -> None:
    """The stored generation, one up when the spec changed (clients cannot set it)."""
    generation = old["metadata"].get("generation")
    if resource.kind not in _GENERATION_KINDS or generation is None:
        new["metadata"].pop("generation", None)
        return
    if old.get("spec") != new.get("spec"):
        generation += 1
    new["metadata"]["generation"] = generation


_SPECLESS = {
    "Event",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "SelfSubjectAccessReview",
    "SelfSubjectRulesReview",
}


def _with_finalizer(obj: Obj, finalizer: str) -> Obj:
    updated = copy.deepcopy(obj)
    finalizers = updated["metadata"].setdefault("finalizers", [])
    if finalizer not in finalizers:
        finalizers.append(finalizer)
    return updated


_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _suffix(length: int = 5) -> str:
    import random

    return "".join(random.choice(_ALPHABET) for _ in range(length))


def _node_status(name: str, status: Obj, now: float) -> Obj:
    stamp = now_iso(now)
    result: Obj = {
        "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "80Gi"},
        "allocatable": {
            "cpu": "3920m",
            "memory": "15Gi",
            "pods": "110",
            "ephemeral-storage": "73Gi",
        },
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
            }
        ],
        "addresses": [
            {"type": "InternalIP", "address": "10.0.0.1"},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "architecture": "amd64",
            "bootID": "kubesim",
            "containerRuntimeVersion": "containerd://1.7.0",
            "kernelVersion": "6.1.0",
            "kubeProxyVersion": "v1.32.0",
            "kubeletVersion": "v1.32.0",
            "machineID": "kubesim",
            "operatingSystem": "linux",
            "osImage": "Amazon Linux 2023",
            "systemUUID": "kubesim",
        },
    }
    result.update({k: v for k, v in status.items() if v})
    return result
