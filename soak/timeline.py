"""The soak's own eyes on the cluster, through the API as the admin, independent of
the drainer's word: one watch on every pod and one on every PodDisruptionBudget.

On every change it keeps, per service (a pod's `app` label), how many pods are
Ready and not terminating (the timeline's lines), and per budget the healthy pods
it selects against the budget's desiredHealthy, remembering the worst margin seen
(the invariant: never below zero). Counts are kept as sets updated per change, so
a cluster of hundreds of pods costs a few set operations per event.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kubesim.selectors import labels_match, selector_from_object
from testbed.cluster import ApiError, Cluster
from testbed.world import is_pod_ready

Obj = dict[str, Any]


def _key(obj: Obj) -> str:
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def _service(key: str, pod: Obj) -> str:
    """namespace/app: the pods of one workload."""
    return f"{key.split('/', maxsplit=1)[0]}/{(pod['metadata'].get('labels') or {}).get('app', '')}"


def _healthy(pod: Obj) -> bool:
    return is_pod_ready(pod) and not pod["metadata"].get("deletionTimestamp")


@dataclass
class _Budget:
    namespace: str
    selector: Any
    desired: int
    healthy: set[str] = field(default_factory=set)


class Timeline:
    """Start it once the workload is Ready; `samples` are (seconds since `origin`,
    service, Ready pods) at every change of a count."""

    def __init__(self, cluster: Cluster, origin: float | None = None) -> None:
        self.cluster = cluster
        self.origin = time.time() if origin is None else origin
        self.samples: list[tuple[float, str, int]] = []
        self.worst: dict[str, int] = {}
        self.worst_at: dict[str, str] = {}
        self.error: BaseException | None = None
        self._pods: dict[str, Obj] = {}
        self._ready: dict[str, set[str]] = {}
        self._budgets: dict[str, _Budget] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._primed = False  # both first lists in: before, budgets look unmet
        self._listing = False

    # -- running --------------------------------------------------------------------

    def start(self) -> None:
        ready = threading.Barrier(3)
        for kind in ("Pod", "PodDisruptionBudget"):
            thread = threading.Thread(
                target=self._follow, args=(kind, ready), daemon=True, name=f"soak-watch-{kind}"
            )
            thread.start()
            self._threads.append(thread)
        ready.wait(60)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(15)

    def _follow(self, kind: str, ready: threading.Barrier | None) -> None:
        client = self.cluster.client
        try:
            while not self._stop.is_set():
                items, version = client.list_with_version(kind)
                with self._lock:
                    self._replace_all(kind, items)
                if ready is not None:
                    ready.wait(60)
                    ready = None
                    with self._lock:
                        self._primed = True
                        self._check_all()
                version = self._watch(kind, version)
        except BaseException as e:
            if not self._stop.is_set():
                self.error = e
            if ready is not None:
                ready.abort()

    def _watch(self, kind: str, version: str) -> str:
        """Watch until the server ends the watch (then again from where it was) or
        says the version is too old (410: return, and the caller lists afresh)."""
        client = self.cluster.client
        while not self._stop.is_set():
            try:
                for event in client.watch(kind, resource_version=version, timeout=30):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        if int(obj.get("code") or 0) == 410:
                            return version
                        raise ApiError(int(obj.get("code") or 500), obj, {}, f"watch {kind}")
                    version = obj.get("metadata", {}).get("resourceVersion", version)
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        with self._lock:
                            self._apply(kind, str(event["type"]), obj)
                    if self._stop.is_set():
                        return version
            except ApiError as e:
                if e.status == 410:
                    return version
                raise
        return version

    # -- bookkeeping (under the lock) -------------------------------------------------

    def _replace_all(self, kind: str, items: list[Obj]) -> None:
        if kind == "Pod":
            # A list is one moment: one sample per service, not one per pod listed.
            self._listing = True
            listed = {_key(item) for item in items}
            for key in [k for k in self._pods if k not in listed]:
                self._apply_pod(key, None)
            for item in items:
                self._apply_pod(_key(item), item)
            self._listing = False
            now = time.time() - self.origin
            self.samples.extend((now, s, len(keys)) for s, keys in sorted(self._ready.items()))
        else:
            self._budgets.clear()
            for item in items:
                self._apply_budget(item)
        self._check_all()

    def _apply(self, kind: str, type_: str, obj: Obj) -> None:
        if kind == "Pod":
            touched = self._apply_pod(_key(obj), None if type_ == "DELETED" else obj)
            for name in touched:
                self._check(name)
        elif type_ == "DELETED":
            self._budgets.pop(_key(obj), None)
        else:
            self._apply_budget(obj)
            self._check(_key(obj))

    def _apply_pod(self, key: str, pod: Obj | None) -> list[str]:
        """Store the pod's new state (None: gone); the budgets it may have moved."""
        old = self._pods.pop(key, None)
        if pod is not None:
            self._pods[key] = pod
        was = _service(key, old) if old is not None else None
        now = _service(key, pod) if pod is not None else None
        if now is not None:
            self._ready.setdefault(now, set())
        if was is not None and was != now:
            self._count(was, key, False)
        if now is not None and pod is not None:
            self._count(now, key, _healthy(pod))
        touched = []
        namespace = key.split("/", maxsplit=1)[0]
        for name, budget in self._budgets.items():
            if budget.namespace != namespace:
                continue
            if (
                pod is not None
                and _healthy(pod)
                and labels_match(budget.selector, pod["metadata"].get("labels"))
            ):
                if key not in budget.healthy:
                    budget.healthy.add(key)
                    touched.append(name)
            elif key in budget.healthy:
                budget.healthy.discard(key)
                touched.append(name)
        return touched

    def _count(self, service: str, key: str, ready: bool) -> None:
        keys = self._ready.setdefault(service, set())
        before = len(keys)
        if ready:
            keys.add(key)
        else:
            keys.discard(key)
        if len(keys) != before and not self._listing:
            self.samples.append((time.time() - self.origin, service, len(keys)))

    def _apply_budget(self, budget: Obj) -> None:
        namespace = budget["metadata"]["namespace"]
        selector = selector_from_object(budget["spec"].get("selector"))
        healthy = {
            key
            for key, pod in self._pods.items()
            if pod["metadata"]["namespace"] == namespace
            and _healthy(pod)
            and labels_match(selector, pod["metadata"].get("labels"))
        }
        desired = int((budget.get("status") or {}).get("desiredHealthy", 0))
        self._budgets[_key(budget)] = _Budget(namespace, selector, desired, healthy)

    def _check_all(self) -> None:
        for name in self._budgets:
            self._check(name)

    def _check(self, name: str) -> None:
        budget = self._budgets.get(name)
        if budget is None or not self._primed:
            return
        margin = len(budget.healthy) - budget.desired
        if margin < self.worst.get(name, margin + 1):
            self.worst[name] = margin
            self.worst_at[name] = (
                f"{time.time() - self.origin:.2f} s: {len(budget.healthy)} healthy, "
                f"{budget.desired} desired"
            )

    # -- reading --------------------------------------------------------------------

    def violations(self) -> dict[str, str]:
        with self._lock:
            return {k: self.worst_at[k] for k, v in self.worst.items() if v < 0}
