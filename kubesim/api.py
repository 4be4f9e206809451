"""API semantics on top of the store: defaulting, validation, graceful deletion,
garbage collection, status subresources, and the pods/eviction subresource with
PodDisruptionBudget enforcement as the real kube-apiserver does it.
"""

from __future__ import annotations

import copy
import math
import re
import time
from collections.abc import Callable
from typing import Any

from kubesim import errors
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


def is_pod_ready(pod: Obj) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def is_terminating(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def controller_of(obj: Obj) -> dict[str, Any] | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def _int_or_percent(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        fraction = int(value[:-1]) * total / 100
        return math.ceil(fraction) if round_up else math.floor(fraction)
    return int(value)


class Api:
    """Everything a request can do to the cluster state, minus HTTP."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self.store.add_hook(self._on_change)
        self._syncing_pdbs = False
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
        if not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = metadata["generateName"] + _suffix()
        self._validate_meta(resource, obj)
        with self.store.lock:
            if (
                resource.namespaced
                and self.store.peek(NAMESPACES, "", metadata["namespace"]) is None
            ):
                raise errors.not_found("namespaces", metadata["namespace"])
            if resource.namespaced:
                namespace_obj = self.store.peek(NAMESPACES, "", metadata["namespace"])
                if namespace_obj is not None and is_terminating(namespace_obj):
                    raise ApiError(
                        403,
                        f'{resource.plural} "{metadata["name"]}" is forbidden: unable to create '
                        f"new content in namespace {metadata['namespace']} because it is being "
                        "terminated",
                    )
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

    # -- eviction -------------------------------------------------------------

    def evict(self, namespace: str, name: str, eviction: Any, dry_run: bool = False) -> Obj:
        if not isinstance(eviction, dict) or eviction.get("kind", "Eviction") != "Eviction":
            raise errors.bad_request(f"not a Eviction object: {type(eviction).__name__}")
        if eviction.get("apiVersion", "policy/v1") not in ("policy/v1", "policy/v1beta1"):
            raise errors.bad_request(
                f"unsupported Eviction apiVersion {eviction.get('apiVersion')!r}"
            )
        if (eviction.get("metadata") or {}).get("name") != name:
            raise errors.bad_request("name in URL does not match name in Eviction object")
        options = eviction.get("deleteOptions") or {}
        dry_run = dry_run or bool(options.get("dryRun"))
        with self.store.lock:
            pod = self.store.peek(PODS, namespace, name)
            if pod is None:
                raise errors.not_found("pods", name)
            self._check_preconditions(PODS, pod, options.get("preconditions") or {})
            phase = (pod.get("status") or {}).get("phase")
            if is_terminating(pod) or phase in ("Succeeded", "Failed", "Pending"):
                if not dry_run:
                    self._delete_pod(pod, options)
                return _success()
            budgets = self.budgets_for(pod)
            if len(budgets) > 1:
                raise ApiError(
                    500,
                    "Internal error occurred: This pod has more than one PodDisruptionBudget, "
                    "which the eviction subresource does not support.",
                    reason="InternalError",
                    details={
                        "causes": [
                            {
                                "message": "This pod has more than one PodDisruptionBudget, which "
                                "the eviction subresource does not support."
                            }
                        ]
                    },
                )
            if budgets:
                budget = budgets[0]
                status = self.pdb_status(budget)
                unhealthy_ok = not is_pod_ready(pod) and (
                    budget["spec"].get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
                    or (
                        status["currentHealthy"] >= status["desiredHealthy"]
                        and status["desiredHealthy"] > 0
                    )
                )
                if not unhealthy_ok and status["disruptionsAllowed"] <= 0:
                    raise ApiError(
                        429,
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        reason="TooManyRequests",
                        details={
                            "causes": [
                                {
                                    "reason": "DisruptionBudget",
                                    "message": (
                                        f"The disruption budget {budget['metadata']['name']} "
                                        f"needs {status['desiredHealthy']} healthy pods and has "
                                        f"{status['currentHealthy']} currently"
                                    ),
                                }
                            ]
                        },
                    )
            if not dry_run:
                self._delete_pod(pod, options)
            return _success()

    # -- PodDisruptionBudgets -------------------------------------------------

    def budgets_for(self, pod: Obj) -> list[Obj]:
        labels = pod["metadata"].get("labels") or {}
        matching = []
        for budget in self.store.iter(PDBS, pod["metadata"]["namespace"]):
            try:
                selector = selector_from_object((budget.get("spec") or {}).get("selector"))
            except SelectorError:
                continue
            if selector is not None and labels_match(selector, labels):
                matching.append(budget)
        return matching

    def _expected_scale(self, pods: list[Obj]) -> int:
        seen: dict[str, int] = {}
        uncontrolled = 0
        for pod in pods:
            ref = controller_of(pod)
            if ref is None:
                uncontrolled += 1
                continue
            if ref["uid"] in seen:
                continue
            scale = self._controller_scale(pod["metadata"]["namespace"], ref)
            seen[ref["uid"]] = scale if scale is not None else 1
        return sum(seen.values()) + uncontrolled

    def _controller_scale(self, namespace: str, ref: dict[str, Any]) -> int | None:
        kinds = {"ReplicaSet": REPLICASETS, "StatefulSet": STATEFULSETS, "Deployment": DEPLOYMENTS}
        resource = kinds.get(ref.get("kind", ""))
        if resource is None:
            return None
        owner = self.store.peek(resource, namespace, ref["name"])
        if owner is None:
            return None
        if resource is REPLICASETS:
            parent = controller_of(owner)
            if parent and parent.get("kind") == "Deployment":
                deployment = self.store.peek(DEPLOYMENTS, namespace, parent["name"])
                if deployment is not None:
                    return int(deployment["spec"].get("replicas", 1))
        return int(owner["spec"].get("replicas", 1))

    def pdb_status(self, budget: Obj) -> dict[str, Any]:
        spec = budget.get("spec") or {}
        try:
            selector = selector_from_object(spec.get("selector"))
        except SelectorError:
            selector = None
        pods = [
            p
            for p in self.store.iter(PODS, budget["metadata"]["namespace"])
            if labels_match(selector, p["metadata"].get("labels"))
        ]
        healthy = sum(1 for p in pods if is_pod_ready(p) and not is_terminating(p))
        if "maxUnavailable" in spec and spec["maxUnavailable"] is not None:
            expected = self._expected_scale(pods)
            desired = max(0, expected - _int_or_percent(spec["maxUnavailable"], expected, True))
        elif isinstance(spec.get("minAvailable"), str):
            expected = self._expected_scale(pods)
            desired = _int_or_percent(spec["minAvailable"], expected, True)
        else:
            expected = len(pods)
            desired = int(spec.get("minAvailable", 1) if spec else 1)
        allowed = max(0, healthy - desired)
        old_status = budget.get("status") or {}
        condition_status = "True" if allowed > 0 else "False"
        conditions = old_status.get("conditions") or []
        previous = next((c for c in conditions if c.get("type") == "DisruptionAllowed"), None)
        transition = (
            previous["lastTransitionTime"]
            if previous and previous.get("status") == condition_status
            else now_iso(self.clock())
        )
        return {
            "observedGeneration": budget["metadata"].get("generation", 1),
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "disruptionsAllowed": allowed,
            "expectedPods": expected,
            "conditions": [
                {
                    "type": "DisruptionAllowed",
                    "status": condition_status,
                    "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                    "message": "",
                    "observedGeneration": budget["metadata"].get("generation", 1),
                    "lastTransitionTime": transition,
                }
            ],
        }

    def sync_budget(self, budget: Obj) -> None:
        status = self.pdb_status(budget)
        if budget.get("status") != status:
            updated = copy.deepcopy(budget)
            updated["status"] = status
            self.store.update(PDBS, updated)

    def _on_change(self, change: Any) -> None:
        """Keep PodDisruptionBudget status live, as the disruption controller does."""
        if self._syncing_pdbs:
            return
        resource = change.resource
        if resource not in (PODS, PDBS, DEPLOYMENTS, REPLICASETS, STATEFULSETS):
            return
        self._syncing_pdbs = True
        try:
            if resource is PDBS:
                if change.type != "DELETED":
                    budget = self.store.peek(
                        PDBS, change.obj["metadata"]["namespace"], change.obj["metadata"]["name"]
                    )
                    if budget is not None:
                        self.sync_budget(budget)
                return
            namespace = change.obj["metadata"].get("namespace", "")
            if resource is PODS:
                relevant: list[Obj] = []
                for version in (change.obj, change.old):
                    if version is not None:
                        relevant.extend(b for b in self.budgets_for(version) if b not in relevant)
            else:
                relevant = list(self.store.iter(PDBS, namespace))
            for budget in relevant:
                self.sync_budget(budget)
        finally:
            self._syncing_pdbs = False

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


def _success() -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


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
