"""Simulated cluster life: scheduler, kubelet, workload controllers, the node
lifecycle controller's NoSchedule taints, the disruption controller, volume binding
and attachment, namespace and foreground garbage collection.

All of it runs in one background thread that holds the store lock while it works,
woken by changes and by its own timers. Durations come from pod annotations and
are divided by `speed`, so tests can run a 20-second shutdown in 0.2 s:

- kubesim.io/startup-seconds: from binding to Ready (default 0)
- kubesim.io/shutdown-seconds: from deletion to exit, capped by the grace period
  (default 0)
- kubesim.io/detach-seconds: from the pod's exit to its VolumeAttachments going
  away (default 0)
"""

from __future__ import annotations

import copy
import hashlib
import heapq
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kubesim.api import (
    DAEMONSETS,
    DEPLOYMENTS,
    NAMESPACES,
    NODES,
    PODS,
    REPLICASETS,
    STATEFULSETS,
    Api,
    _suffix,
    controller_of,
    is_pod_ready,
    is_terminating,
)
from kubesim.disruption import PDBS, DisruptionController
from kubesim.resources import BY_KEY
from kubesim.store import Change, Obj, now_iso

log = logging.getLogger(__name__)

PVCS = BY_KEY["persistentvolumeclaims"]
PVS = BY_KEY["persistentvolumes"]
ATTACHMENTS = BY_KEY["volumeattachments.storage.k8s.io"]
ATTACHER = "ebs.csi.aws.com"

STARTUP = "kubesim.io/startup-seconds"
SHUTDOWN = "kubesim.io/shutdown-seconds"
DETACH = "kubesim.io/detach-seconds"
STOPPED = "kubesim.io/stopped"

_DAEMON_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


# The node lifecycle controller's NoSchedule taints (doNoScheduleTaintingPass): node
# condition -> status -> taint key, and spec.unschedulable -> the unschedulable taint.
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_CONDITION_TAINTS = {
    "Ready": {"False": "node.kubernetes.io/not-ready", "Unknown": "node.kubernetes.io/unreachable"},
    "MemoryPressure": {"True": "node.kubernetes.io/memory-pressure"},
    "DiskPressure": {"True": "node.kubernetes.io/disk-pressure"},
    "NetworkUnavailable": {"True": "node.kubernetes.io/network-unavailable"},
    "PIDPressure": {"True": "node.kubernetes.io/pid-pressure"},
}
# Changes the disruption controller watches (pods, budgets, the scale of controllers).
_BUDGET_INPUTS = (PODS, PDBS, DEPLOYMENTS, REPLICASETS, STATEFULSETS, DAEMONSETS)
_CONTROLLER_TAINT_KEYS = {UNSCHEDULABLE_TAINT} | {
    key for by_status in _CONDITION_TAINTS.values() for key in by_status.values()
}


def _seconds(obj: Obj, annotation: str) -> float:
    value = (obj["metadata"].get("annotations") or {}).get(annotation, "0")
    try:
        return max(0.0, float(value))
    except ValueError:
        return 0.0


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration["key"] == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get(
            "value", ""
        ):
            return True
    return False


def node_accepts(node: Obj, pod_spec: dict[str, Any], *, daemon: bool = False) -> bool:
    spec = node.get("spec") or {}
    tolerations = list(pod_spec.get("tolerations") or [])
    if daemon:
        tolerations += _DAEMON_TOLERATIONS
    if spec.get("unschedulable") and not tolerates(
        tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ):
        return False
    for taint in spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return False
    selector = pod_spec.get("nodeSelector") or {}
    labels = node["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _keeps_daemon_pod(node: Obj, pod_spec: dict[str, Any]) -> bool:
    """As the DaemonSet controller's shouldContinueRunning: a NoSchedule taint (a
    cordon, a stopped instance's shutdown taint) keeps the pods already there; only
    a NoExecute taint they do not tolerate, or labels that no longer match, end them."""
    tolerations = list(pod_spec.get("tolerations") or []) + _DAEMON_TOLERATIONS
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") == "NoExecute" and not tolerates(tolerations, taint):
            return False
    selector = pod_spec.get("nodeSelector") or {}
    labels = node["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


class Simulator:
    def __init__(
        self, api: Api, speed: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.api = api
        self.store = api.store
        self.speed = speed
        self.clock = clock
        self._timers: list[tuple[float, str]] = []
        self._due: dict[str, float] = {}  # pod uid / attachment name -> due time
        self._dirty = True
        self._paused = False
        self._budgets_dirty = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.disruption = DisruptionController(self.store, clock=api.clock)
        self.store.add_hook(self._on_change)

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kubesim-controllers", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self.store.lock:
            self.store.changed.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No controller pass while inside (for tests that need the state in between,
        e.g. a budget whose status has not caught up with its spec yet)."""
        with self.store.lock:
            self._paused = True
        try:
            yield
        finally:
            with self.store.lock:
                self._paused = False
                self.store.changed.notify_all()

    def delay(self, seconds: float) -> float:
        return seconds / self.speed if self.speed > 0 else seconds

    def _on_change(self, change: Change) -> None:
        self._dirty = True
        if change.resource in _BUDGET_INPUTS:
            self._budgets_dirty = True

    def _schedule(self, key: str, at: float) -> None:
        if self._due.get(key) == at:
            return
        self._due[key] = at
        heapq.heappush(self._timers, (at, key))

    def _run(self) -> None:
        pass_seconds = 0.0
        while not self._stop.is_set():
            if pass_seconds:
                # A pass holds the store lock for time proportional to the cluster:
                # give the API at least as long between passes, so a stream of changes
                # cannot keep the controllers and the requests they cause starved.
                time.sleep(min(pass_seconds, 0.05))
                pass_seconds = 0.0
            with self.store.lock:
                now = self.clock()
                due = bool(self._timers) and self._timers[0][0] <= now
                if self._paused:
                    self.store.wait(0.05)
                    continue
                if self._dirty or due:
                    self._dirty = False
                    started = time.monotonic()
                    try:
                        self.reconcile()
                    except Exception:  # the simulator must never die silently
                        log.exception("kubesim controller pass failed")
                    else:
                        # That pass acted on every timer due by `now`. Drop them from
                        # the heap (`_due` still remembers them): left there, the next
                        # turn finds them due again and runs full passes back to back,
                        # holding the store lock, for as long as their objects exist.
                        while self._timers and self._timers[0][0] <= now:
                            heapq.heappop(self._timers)
                    pass_seconds = time.monotonic() - started
                if self._dirty:
                    continue
                while self._timers and self._due.get(self._timers[0][1]) != self._timers[0][0]:
                    heapq.heappop(self._timers)
                wait = self._timers[0][0] - self.clock() if self._timers else 1.0
                if wait > 0:
                    self.store.wait(min(wait, 1.0))

    def settle(self, timeout: float = 5.0) -> None:
        """Wait until a controller pass ran after every change so far (for tests)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.store.lock:
                if not self._dirty and not self._paused:
                    return
            time.sleep(0.005)

    # -- one pass -------------------------------------------------------------

    def reconcile(self) -> None:
        now = self.clock()
        self._namespaces()
        self._foreground()
        self._node_taints()
        self._deployments()
        self._replicasets()
        self._statefulsets()
        self._daemonsets()
        self._volumes()
        self._schedule_pods()
        self._kubelet(now)
        self._attachments(now)
        self._budgets(now)
        # Drop timers of objects that no longer exist.
        uids = {p["metadata"]["uid"] for p in self.store.iter(PODS)}
        live = {k for k in self._due if k.split(":")[1] in uids}
        live |= {"detach:" + a["metadata"]["name"] for a in self.store.iter(ATTACHMENTS)}
        live |= {k for k in self._due if k == "pdb:recheck"}
        for key in [k for k in self._due if k not in live]:
            del self._due[key]

    # -- node lifecycle and disruption controllers ----------------------------

    def _node_taints(self) -> None:
        """A cordoned node gets node.kubernetes.io/unschedulable:NoSchedule (and loses
        it when uncordoned); node conditions map to their NoSchedule taints."""
        for node in list(self.store.iter(NODES)):
            spec = node.get("spec") or {}
            wanted = set()
            for condition in (node.get("status") or {}).get("conditions") or []:
                key = _CONDITION_TAINTS.get(condition.get("type", ""), {}).get(
                    condition.get("status", "")
                )
                if key:
                    wanted.add(key)
            if spec.get("unschedulable"):
                wanted.add(UNSCHEDULABLE_TAINT)
            taints = list(spec.get("taints") or [])
            present = {
                t.get("key")
                for t in taints
                if t.get("effect") == "NoSchedule" and t.get("key") in _CONTROLLER_TAINT_KEYS
            }
            if present == wanted:
                continue
            kept = [
                t
                for t in taints
                if not (
                    t.get("effect") == "NoSchedule"
                    and t.get("key") in _CONTROLLER_TAINT_KEYS
                    and t.get("key") not in wanted
                )
            ]
            stamp = now_iso(self.api.clock())
            kept += [
                {"key": key, "effect": "NoSchedule", "timeAdded": stamp}
                for key in sorted(wanted - present)
            ]
            updated = copy.deepcopy(node)
            if kept:
                updated["spec"]["taints"] = kept
            else:
                updated["spec"].pop("taints", None)
            self.store.update(NODES, updated)

    def _budgets(self, now: float) -> None:
        recheck_due = self._due.get("pdb:recheck")
        if not self._budgets_dirty and (recheck_due is None or recheck_due > now):
            return
        self._budgets_dirty = False
        recheck = self.disruption.sync_all()
        if recheck is None:
            self._due.pop("pdb:recheck", None)
        else:
            # The disruptedPods entries are wall-clock stamps; timers run on our clock.
            self._schedule("pdb:recheck", now + max(0.0, recheck - self.api.clock()))

    # -- kubelet and scheduler ------------------------------------------------

    def _kubelet(self, now: float) -> None:
        nodes = {n["metadata"]["name"] for n in self.store.iter(NODES)}
        for pod in list(self.store.iter(PODS)):
            metadata = pod["metadata"]
            node = pod["spec"].get("nodeName")
            uid = metadata["uid"]
            if node and node not in nodes:
                # Pod garbage collection: pods bound to a node that is gone are deleted
                # at once; as in Kubernetes, a finalizer keeps one (terminating) until
                # its owner removes it.
                self._collect_orphan(pod)
                continue
            if is_terminating(pod):
                if (metadata.get("annotations") or {}).get(STOPPED) == "true":
                    if not metadata.get("finalizers"):
                        self.api.remove_now(PODS, metadata["namespace"], metadata["name"])
                    continue
                # A second delete with a shorter grace period brings the stop forward.
                grace = float(metadata.get("deletionGracePeriodSeconds") or 0)
                key = f"stop:{uid}:{grace:g}"
                if key not in self._due:
                    running = (pod.get("status") or {}).get("phase") == "Running"
                    seconds = min(_seconds(pod, SHUTDOWN), grace) if running else 0.0
                    due = now + self.delay(seconds)
                    earlier = [t for k, t in self._due.items() if k.startswith(f"stop:{uid}:")]
                    self._schedule(key, min([due, *earlier]))
                if self._due[key] <= now:
                    self._stop_pod(pod)
                continue
            if node and (pod.get("status") or {}).get("phase") == "Pending":
                key = "start:" + uid
                if key not in self._due:
                    self._schedule(key, now + self.delay(_seconds(pod, STARTUP)))
                if self._due[key] <= now:
                    self._start_pod(pod)

    def _collect_orphan(self, pod: Obj) -> None:
        metadata = pod["metadata"]
        if not metadata.get("finalizers"):
            self.api.remove_now(PODS, metadata["namespace"], metadata["name"])
            return
        if (metadata.get("annotations") or {}).get(STOPPED) == "true":
            return

        def stopped(obj: Obj) -> None:
            obj["metadata"].setdefault("annotations", {})[STOPPED] = "true"
            obj.setdefault("status", {})["phase"] = "Failed"

        stamp = metadata.get("deletionTimestamp") or now_iso(self.api.clock())
        self.store.set_deletion(
            PODS, metadata["namespace"], metadata["name"], timestamp=stamp, grace=0, mutate=stopped
        )

    def _start_pod(self, pod: Obj) -> None:
        updated = copy.deepcopy(pod)
        stamp = now_iso()
        status = updated.setdefault("status", {})
        status["phase"] = "Running"
        status["hostIP"] = "10.0.0.1"
        status["podIP"] = (
            f"10.1.{hash(pod['metadata']['uid']) % 250}.{hash(pod['metadata']['name']) % 250}"
        )
        status["startTime"] = stamp
        status["conditions"] = [
            {"type": t, "status": "True", "lastTransitionTime": stamp, "lastProbeTime": None}
            for t in (
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            )
        ]
        status["containerStatuses"] = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "containerID": "containerd://"
                + hashlib.sha1(
                    (pod["metadata"]["uid"] + c["name"]).encode(), usedforsecurity=False
                ).hexdigest(),
                "state": {"running": {"startedAt": stamp}},
            }
            for c in pod["spec"].get("containers") or []
        ]
        self.store.update(PODS, updated)

    def _stop_pod(self, pod: Obj) -> None:
        metadata = pod["metadata"]
        if not metadata.get("finalizers"):
            self.api.remove_now(PODS, metadata["namespace"], metadata["name"])
            return
        updated = copy.deepcopy(pod)
        updated["metadata"].setdefault("annotations", {})[STOPPED] = "true"
        status = updated.setdefault("status", {})
        for condition in status.get("conditions") or []:
            if condition["type"] in ("Ready", "ContainersReady"):
                condition["status"] = "False"
        for container in status.get("containerStatuses") or []:
            container["ready"] = False
            container["state"] = {
                "terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now_iso()}
            }
        self.store.update(PODS, updated)

    def _schedule_pods(self) -> None:
        pending = [
            p
            for p in self.store.iter(PODS)
            if not p["spec"].get("nodeName") and not is_terminating(p)
        ]
        if not pending:
            return
        load: dict[str, int] = defaultdict(int)
        for pod in self.store.iter(PODS):
            if pod["spec"].get("nodeName"):
                load[pod["spec"]["nodeName"]] += 1
        nodes = list(self.store.iter(NODES))
        for pod in pending:
            candidates = []
            for node in nodes:
                name = node["metadata"]["name"]
                capacity = int(
                    ((node.get("status") or {}).get("allocatable") or {}).get("pods", "110")
                )
                if load[name] < capacity and node_accepts(node, pod["spec"]):
                    candidates.append(node)
            if not candidates:
                self._mark_unschedulable(pod)
                continue
            chosen = min(
                candidates, key=lambda n: (load[n["metadata"]["name"]], n["metadata"]["name"])
            )
            load[chosen["metadata"]["name"]] += 1
            updated = copy.deepcopy(pod)
            updated["spec"]["nodeName"] = chosen["metadata"]["name"]
            updated.setdefault("status", {})["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": now_iso(),
                    "lastProbeTime": None,
                }
            ]
            self.store.update(PODS, updated)

    def _mark_unschedulable(self, pod: Obj) -> None:
        conditions = (pod.get("status") or {}).get("conditions") or []
        if any(
            c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in conditions
        ):
            return
        updated = copy.deepcopy(pod)
        updated.setdefault("status", {})["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/0 nodes are available: no node accepts the pod.",
                "lastTransitionTime": now_iso(),
                "lastProbeTime": None,
            }
        ]
        self.store.update(PODS, updated)

    # -- workload controllers -------------------------------------------------

    def _owned(self, namespace: str, uid: str, resource: Any = PODS) -> list[Obj]:
        return [
            o
            for o in self.store.iter(resource, namespace)
            if (controller_of(o) or {}).get("uid") == uid
        ]

    def _pods_by_owner(self) -> dict[str, list[Obj]]:
        owned: dict[str, list[Obj]] = defaultdict(list)
        for pod in self.store.iter(PODS):
            ref = controller_of(pod)
            if ref is not None:
                owned[ref["uid"]].append(pod)
        return owned

    @staticmethod
    def _owner_ref(owner: Obj) -> dict[str, Any]:
        return {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def _pod_from_template(self, owner: Obj, name: str | None, generate_name: str | None) -> Obj:
        template = copy.deepcopy(owner["spec"]["template"])
        metadata = template.get("metadata") or {}
        pod_metadata: dict[str, Any] = {
            "namespace": owner["metadata"]["namespace"],
            "labels": dict(metadata.get("labels") or {}),
            "ownerReferences": [self._owner_ref(owner)],
        }
        if metadata.get("annotations"):
            pod_metadata["annotations"] = dict(metadata["annotations"])
        if name:
            pod_metadata["name"] = name
        else:
            pod_metadata["name"] = f"{generate_name}{_suffix()}"
            pod_metadata["generateName"] = generate_name
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": pod_metadata,
            "spec": template["spec"],
        }

    def _update_status(self, resource: Any, obj: Obj, status: dict[str, Any]) -> None:
        status = {
            **(obj.get("status") or {}),
            **status,
            "observedGeneration": obj["metadata"].get("generation", 1),
        }
        if obj.get("status") != status:
            updated = copy.deepcopy(obj)
            updated["status"] = status
            self.store.update(resource, updated)

    def _deployments(self) -> None:
        for deployment in list(self.store.iter(DEPLOYMENTS)):
            if is_terminating(deployment):
                continue
            namespace = deployment["metadata"]["namespace"]
            template = deployment["spec"]["template"]
            digest = hashlib.sha256(repr(sorted(str(template).split())).encode()).hexdigest()[:10]
            owned = self._owned(namespace, deployment["metadata"]["uid"], REPLICASETS)
            current = next(
                (
                    rs
                    for rs in owned
                    if (rs["metadata"].get("labels") or {}).get("pod-template-hash") == digest
                ),
                None,
            )
            replicas = int(deployment["spec"].get("replicas", 1))
            if current is None:
                labels = {
                    **(template.get("metadata", {}).get("labels") or {}),
                    "pod-template-hash": digest,
                }
                rs_template = copy.deepcopy(template)
                rs_template.setdefault("metadata", {})["labels"] = labels
                selector = copy.deepcopy(deployment["spec"]["selector"])
                selector.setdefault("matchLabels", {})["pod-template-hash"] = digest
                self.api.create(
                    REPLICASETS,
                    {
                        "metadata": {
                            "name": f"{deployment['metadata']['name']}-{digest}",
                            "namespace": namespace,
                            "labels": labels,
                            "ownerReferences": [self._owner_ref(deployment)],
                        },
                        "spec": {
                            "replicas": replicas,
                            "selector": selector,
                            "template": rs_template,
                        },
                    },
                )
            elif int(current["spec"].get("replicas", 1)) != replicas:
                updated = copy.deepcopy(current)
                updated["spec"]["replicas"] = replicas
                self.store.update(REPLICASETS, updated)
            for old in owned:
                if (
                    old is not current
                    and int(old["spec"].get("replicas", 0)) != 0
                    and current is not None
                ):
                    updated = copy.deepcopy(old)
                    updated["spec"]["replicas"] = 0
                    self.store.update(REPLICASETS, updated)
            owned = self._owned(namespace, deployment["metadata"]["uid"], REPLICASETS)
            total = sum(int((rs.get("status") or {}).get("replicas", 0)) for rs in owned)
            ready = sum(int((rs.get("status") or {}).get("readyReplicas", 0)) for rs in owned)
            self._update_status(
                DEPLOYMENTS,
                deployment,
                {
                    "replicas": total,
                    "readyReplicas": ready,
                    "availableReplicas": ready,
                    "updatedReplicas": total,
                    "unavailableReplicas": max(0, replicas - ready),
                },
            )

    def _replicasets(self) -> None:
        owned = self._pods_by_owner()
        for rs in list(self.store.iter(REPLICASETS)):
            if is_terminating(rs):
                continue
            pods = owned.get(rs["metadata"]["uid"], [])
            active = [p for p in pods if not is_terminating(p)]
            want = int(rs["spec"].get("replicas", 1))
            for _ in range(want - len(active)):
                self.api.create(
                    PODS, self._pod_from_template(rs, None, rs["metadata"]["name"] + "-")
                )
            if len(active) > want:
                extras = sorted(
                    active, key=lambda p: (is_pod_ready(p), bool(p["spec"].get("nodeName")))
                )
                for pod in extras[: len(active) - want]:
                    self.api.delete(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])
            pods = [
                p
                for p in self._owned(rs["metadata"]["namespace"], rs["metadata"]["uid"])
                if not is_terminating(p)
            ]
            ready = sum(1 for p in pods if is_pod_ready(p))
            self._update_status(
                REPLICASETS,
                rs,
                {
                    "replicas": len(pods),
                    "fullyLabeledReplicas": len(pods),
                    "readyReplicas": ready,
                    "availableReplicas": ready,
                },
            )

    def _statefulsets(self) -> None:
        for sts in list(self.store.iter(STATEFULSETS)):
            if is_terminating(sts):
                continue
            namespace, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
            want = int(sts["spec"].get("replicas", 1))
            ordered = sts["spec"].get("podManagementPolicy", "OrderedReady") == "OrderedReady"
            blocked = False
            for ordinal in range(want):
                pod_name = f"{name}-{ordinal}"
                pod = self.store.peek(PODS, namespace, pod_name)
                if pod is None:
                    if blocked:
                        break
                    self._create_sts_pod(sts, pod_name)
                    blocked = ordered
                elif ordered and (is_terminating(pod) or not is_pod_ready(pod)):
                    blocked = True
            for pod in self._owned(namespace, sts["metadata"]["uid"]):
                ordinal_text = pod["metadata"]["name"].rsplit("-", 1)[-1]
                if ordinal_text.isdigit() and int(ordinal_text) >= want and not is_terminating(pod):
                    self.api.delete(PODS, namespace, pod["metadata"]["name"])
            pods = [
                p for p in self._owned(namespace, sts["metadata"]["uid"]) if not is_terminating(p)
            ]
            ready = sum(1 for p in pods if is_pod_ready(p))
            self._update_status(
                STATEFULSETS,
                sts,
                {
                    "replicas": len(pods),
                    "readyReplicas": ready,
                    "currentReplicas": len(pods),
                    "updatedReplicas": len(pods),
                    "availableReplicas": ready,
                },
            )

    def _create_sts_pod(self, sts: Obj, pod_name: str) -> None:
        pod = self._pod_from_template(sts, pod_name, None)
        pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] = pod_name
        pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = pod_name.rsplit("-", 1)[-1]
        pod["spec"]["hostname"] = pod_name
        if sts["spec"].get("serviceName"):
            pod["spec"]["subdomain"] = sts["spec"]["serviceName"]
        volumes = pod["spec"].setdefault("volumes", [])
        for claim in sts["spec"].get("volumeClaimTemplates") or []:
            template_name = claim["metadata"]["name"]
            claim_name = f"{template_name}-{pod_name}"
            if self.store.peek(PVCS, sts["metadata"]["namespace"], claim_name) is None:
                self.api.create(
                    PVCS,
                    {
                        "metadata": {
                            "name": claim_name,
                            "namespace": sts["metadata"]["namespace"],
                            "labels": dict(pod["metadata"]["labels"]),
                        },
                        "spec": copy.deepcopy(claim.get("spec") or {}),
                    },
                )
            volumes[:] = [v for v in volumes if v.get("name") != template_name]
            volumes.append(
                {"name": template_name, "persistentVolumeClaim": {"claimName": claim_name}}
            )
        self.api.create(PODS, pod)

    def _daemonsets(self) -> None:
        nodes = list(self.store.iter(NODES))
        owned = self._pods_by_owner()
        for ds in list(self.store.iter(DAEMONSETS)):
            if is_terminating(ds):
                continue
            template_spec = ds["spec"]["template"]["spec"]
            eligible = {
                n["metadata"]["name"] for n in nodes if node_accepts(n, template_spec, daemon=True)
            }
            pods = [p for p in owned.get(ds["metadata"]["uid"], []) if not is_terminating(p)]
            covered = {p["spec"].get("nodeName") for p in pods}
            terminating_on = {
                p["spec"].get("nodeName")
                for p in owned.get(ds["metadata"]["uid"], [])
                if is_terminating(p)
            }
            for node_name in sorted(eligible - covered - terminating_on):
                pod = self._pod_from_template(ds, None, ds["metadata"]["name"] + "-")
                pod["spec"]["nodeName"] = node_name
                pod["spec"]["tolerations"] = (
                    list(pod["spec"].get("tolerations") or []) + _DAEMON_TOLERATIONS
                )
                pod["spec"]["affinity"] = {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": [node_name],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                }
                self.api.create(PODS, pod)
            for pod in pods:
                if pod["spec"].get("nodeName") not in eligible:
                    node = self.store.peek(NODES, "", pod["spec"].get("nodeName") or "")
                    # A cordoned node keeps its daemon pods; a node that stopped matching
                    # (its labels, or a NoExecute taint they do not tolerate) loses them.
                    if node is None or not _keeps_daemon_pod(node, template_spec):
                        self.api.delete(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])
            pods = [
                p
                for p in self._owned(ds["metadata"]["namespace"], ds["metadata"]["uid"])
                if not is_terminating(p)
            ]
            ready = sum(1 for p in pods if is_pod_ready(p))
            self._update_status(
                DAEMONSETS,
                ds,
                {
                    "currentNumberScheduled": len(pods),
                    "desiredNumberScheduled": len(eligible),
                    "numberMisscheduled": 0,
                    "numberReady": ready,
                    "numberAvailable": ready,
                    "updatedNumberScheduled": len(pods),
                },
            )

    # -- volumes --------------------------------------------------------------

    def _volumes(self) -> None:
        for claim in list(self.store.iter(PVCS)):
            if claim["spec"].get("volumeName") or is_terminating(claim):
                continue
            pv_name = "pvc-" + claim["metadata"]["uid"]
            size = (((claim["spec"].get("resources") or {}).get("requests")) or {}).get(
                "storage", "1Gi"
            )
            if self.store.peek(PVS, "", pv_name) is None:
                self.api.create(
                    PVS,
                    {
                        "metadata": {"name": pv_name},
                        "spec": {
                            "capacity": {"storage": size},
                            "accessModes": claim["spec"].get("accessModes") or ["ReadWriteOnce"],
                            "persistentVolumeReclaimPolicy": "Delete",
                            "storageClassName": claim["spec"].get("storageClassName", "gp3"),
                            "claimRef": {
                                "apiVersion": "v1",
                                "kind": "PersistentVolumeClaim",
                                "namespace": claim["metadata"]["namespace"],
                                "name": claim["metadata"]["name"],
                                "uid": claim["metadata"]["uid"],
                            },
                            "csi": {
                                "driver": ATTACHER,
                                "volumeHandle": "vol-"
                                + claim["metadata"]["uid"][:17].replace("-", ""),
                            },
                        },
                    },
                )
                pv = self.store.peek(PVS, "", pv_name)
                if pv is not None:
                    bound = copy.deepcopy(pv)
                    bound["status"] = {"phase": "Bound"}
                    self.store.update(PVS, bound)
            updated = copy.deepcopy(claim)
            updated["spec"]["volumeName"] = pv_name
            updated["status"] = {
                "phase": "Bound",
                "accessModes": claim["spec"].get("accessModes") or ["ReadWriteOnce"],
                "capacity": {"storage": size},
            }
            self.store.update(PVCS, updated)

    def _attached_elsewhere(self, pv: str, node: str) -> bool:
        return any(
            a["spec"]["source"].get("persistentVolumeName") == pv and a["spec"]["nodeName"] != node
            for a in self.store.iter(ATTACHMENTS)
        )

    @staticmethod
    def attachment_name(pv: str, node: str) -> str:
        return "csi-" + hashlib.sha256(f"{pv}{node}{ATTACHER}".encode()).hexdigest()

    def _attachments(self, now: float) -> None:
        wanted: dict[str, tuple[str, str, float, bool]] = {}
        for pod in self.store.iter(PODS):
            node = pod["spec"].get("nodeName")
            if not node or (pod["metadata"].get("annotations") or {}).get(STOPPED) == "true":
                continue
            for volume in pod["spec"].get("volumes") or []:
                claim_name = (volume.get("persistentVolumeClaim") or {}).get("claimName")
                if not claim_name:
                    continue
                claim = self.store.peek(PVCS, pod["metadata"]["namespace"], claim_name)
                if claim is None or not claim["spec"].get("volumeName"):
                    continue
                pv = claim["spec"]["volumeName"]
                modes = claim["spec"].get("accessModes") or ["ReadWriteOnce"]
                single = bool({"ReadWriteOnce", "ReadWriteOncePod"} & set(modes))
                wanted[self.attachment_name(pv, node)] = (pv, node, _seconds(pod, DETACH), single)
        for name, (pv, node, detach, single) in wanted.items():
            existing = self.store.peek(ATTACHMENTS, "", name)
            self._due.pop("detach:" + name, None)
            if existing is None and single and self._attached_elsewhere(pv, node):
                continue  # the attach-detach controller's Multi-Attach wait: detach first
            if existing is None:
                self.api.create(
                    ATTACHMENTS,
                    {
                        "metadata": {"name": name, "annotations": {DETACH: str(detach)}},
                        "spec": {
                            "attacher": ATTACHER,
                            "nodeName": node,
                            "source": {"persistentVolumeName": pv},
                        },
                    },
                )
                created = self.store.peek(ATTACHMENTS, "", name)
                if created is not None:
                    attached = copy.deepcopy(created)
                    attached["status"] = {
                        "attached": True,
                        "attachmentMetadata": {"devicePath": "/dev/xvdba"},
                    }
                    self.store.update(ATTACHMENTS, attached)
        for attachment in list(self.store.iter(ATTACHMENTS)):
            name = attachment["metadata"]["name"]
            if name in wanted:
                continue
            key = "detach:" + name
            if key not in self._due:
                self._schedule(key, now + self.delay(_seconds(attachment, DETACH)))
            if self._due[key] <= now:
                del self._due[key]
                self.api.remove_now(ATTACHMENTS, "", name)

    # -- namespaces and foreground deletion ----------------------------------

    def _namespaces(self) -> None:
        for namespace in list(self.store.iter(NAMESPACES)):
            if not is_terminating(namespace):
                continue
            name = namespace["metadata"]["name"]
            remaining = 0
            for resource in BY_KEY.values():
                if not resource.namespaced or resource.key.startswith("selfsubject"):
                    continue
                for obj in list(self.store.iter(resource, name)):
                    remaining += 1
                    if not is_terminating(obj):
                        # As the namespace controller: pods get their own grace period.
                        self.api.delete(resource, name, obj["metadata"]["name"])
            if remaining == 0:
                self.api.remove_now(NAMESPACES, "", name)

    def _foreground(self) -> None:
        for resource in (DEPLOYMENTS, REPLICASETS, STATEFULSETS, DAEMONSETS):
            for owner in list(self.store.iter(resource)):
                finalizers = owner["metadata"].get("finalizers") or []
                if not is_terminating(owner) or "foregroundDeletion" not in finalizers:
                    continue
                uid = owner["metadata"]["uid"]
                dependents = [
                    (r, o)
                    for r in (REPLICASETS, PODS)
                    for o in self.store.iter(r, owner["metadata"]["namespace"])
                    if any(
                        ref.get("uid") == uid for ref in o["metadata"].get("ownerReferences") or []
                    )
                ]
                for dep_resource, dependent in dependents:
                    if not is_terminating(dependent):
                        self.api.delete(
                            dep_resource,
                            dependent["metadata"]["namespace"],
                            dependent["metadata"]["name"],
                            {"propagationPolicy": "Foreground"},
                        )
                if not dependents:
                    updated = copy.deepcopy(owner)
                    updated["metadata"]["finalizers"] = [
                        f for f in finalizers if f != "foregroundDeletion"
                    ]
                    self.api.update(
                        resource, updated, owner["metadata"]["namespace"], owner["metadata"]["name"]
                    )
