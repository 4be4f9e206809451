"""PodDisruptionBudgets: the disruption controller's arithmetic and the budget half of
the eviction handler, after k8s.io/kubernetes v1.33 pkg/controller/disruption and
pkg/registry/core/pod/storage/eviction.go.

Why a module of its own: the status an eviction reads is the one the controller last
wrote, not a live count. Between a change and the controller's next pass the two
differ, and the real apiserver answers from the stored status (a budget whose
observedGeneration lags its generation answers 429 "still being processed"; a pod
the eviction handler recorded in status.disruptedPods stays out of currentHealthy for
DeletionTimeout even before it terminates).
"""

from __future__ import annotations

import calendar
import copy
import math
import time
from collections.abc import Callable
from typing import Any

from kubesim.resources import BY_KEY, BY_KIND, Resource
from kubesim.selectors import SelectorError, labels_match, selector_from_object
from kubesim.store import Obj, Store, now_iso

PODS = BY_KEY["pods"]
PDBS = BY_KEY["poddisruptionbudgets.policy"]
REPLICASETS = BY_KEY["replicasets.apps"]
DEPLOYMENTS = BY_KEY["deployments.apps"]
STATEFULSETS = BY_KEY["statefulsets.apps"]

# pkg/controller/disruption DeletionTimeout: how long a pod the eviction handler put in
# status.disruptedPods is taken as about to go (not counted healthy) before the
# controller decides it will not be deleted after all. Wall-clock seconds, not scaled.
DELETION_TIMEOUT = 120.0

# Real built-in kinds kubesim does not serve that have no scale subresource: a budget
# over their pods cannot compute a percentage or maxUnavailable (the controller's
# getScaleController asks discovery, which answers "does not implement").
_UNSCALABLE_ELSEWHERE = {
    ("batch", "Job"): "jobs.batch",
    ("batch", "CronJob"): "cronjobs.batch",
    ("", "Pod"): "pods",
    ("", "Node"): "nodes",
}


class SyncError(Exception):
    """The controller cannot compute the budget: its failSafe path takes over."""


def is_pod_ready(pod: Obj) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def controller_of(obj: Obj) -> dict[str, Any] | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def parse_time(stamp: str) -> float:
    """A metav1.Time (RFC 3339, whole seconds, UTC) as epoch seconds."""
    return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))


def budgets_for(store: Store, pod: Obj) -> list[Obj]:
    """The budgets whose selector matches the pod (a nil selector matches nothing, {}
    everything; an invalid one nothing), as getPodDisruptionBudgets finds them."""
    labels = pod["metadata"].get("labels") or {}
    matching = []
    for budget in store.iter(PDBS, pod["metadata"]["namespace"]):
        try:
            selector = selector_from_object((budget.get("spec") or {}).get("selector"))
        except SelectorError:
            continue
        if labels_match(selector, labels):
            matching.append(budget)
    return matching


def set_condition(
    conditions: list[dict[str, Any]],
    *,
    kind: str,
    status: str,
    reason: str,
    message: str,
    observed_generation: int,
    now: float,
) -> None:
    """apimachinery meta.SetStatusCondition: lastTransitionTime moves only when the
    status changes."""
    for condition in conditions:
        if condition.get("type") == kind:
            if condition.get("status") != status:
                condition["status"] = status
                condition["lastTransitionTime"] = now_iso(now)
            condition["reason"] = reason
            condition["message"] = message
            if observed_generation:
                condition["observedGeneration"] = observed_generation
            else:
                condition.pop("observedGeneration", None)
            return
    condition = {"type": kind, "status": status}
    if observed_generation:
        condition["observedGeneration"] = observed_generation
    condition.update({"lastTransitionTime": now_iso(now), "reason": reason, "message": message})
    conditions.append(condition)


def update_allowed_condition(status: dict[str, Any], now: float) -> None:
    """component-helpers UpdateDisruptionAllowedCondition."""
    conditions = status.setdefault("conditions", [])
    if int(status.get("disruptionsAllowed") or 0) > 0:
        values = ("True", "SufficientPods")
    else:
        values = ("False", "InsufficientPods")
    set_condition(
        conditions,
        kind="DisruptionAllowed",
        status=values[0],
        reason=values[1],
        message="",
        observed_generation=int(status.get("observedGeneration") or 0),
        now=now,
    )


def _conditions_up_to_date(budget: Obj) -> bool:
    status = budget.get("status") or {}
    condition = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "DisruptionAllowed"),
        None,
    )
    if condition is None:
        return False
    if int(status.get("observedGeneration") or 0) != int(budget["metadata"].get("generation", 0)):
        return False
    if int(status.get("disruptionsAllowed") or 0) > 0:
        return bool(
            condition.get("status") == "True" and condition.get("reason") == "SufficientPods"
        )
    return bool(
        condition.get("status") == "False" and condition.get("reason") == "InsufficientPods"
    )


def scaled_value(value: Any, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent, rounding up."""
    if isinstance(value, str):
        if not value.endswith("%"):
            raise SyncError(
                "invalid value for IntOrString: invalid type: string is not a percentage"
            )
        try:
            percent = int(value[:-1])
        except ValueError as e:
            raise SyncError(f'invalid value "{value}": {e}') from e
        return math.ceil(percent * total / 100)
    return int(value)


class DisruptionController:
    """Writes PodDisruptionBudget status as kube-controller-manager's disruption
    controller does; `sync_all` runs in the simulator's pass."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self.deletion_timeout = DELETION_TIMEOUT

    def sync_all(self) -> float | None:
        """Sync every budget; the earliest wall-clock time one needs another look."""
        recheck: float | None = None
        budgets = list(self.store.iter(PDBS))
        if not budgets:
            return None
        by_namespace: dict[str, list[Obj]] = {}
        for pod in self.store.iter(PODS):
            by_namespace.setdefault(pod["metadata"]["namespace"], []).append(pod)
        for budget in budgets:
            if budget["metadata"].get("deletionTimestamp"):
                continue
            due = self.sync(budget, by_namespace.get(budget["metadata"]["namespace"], []))
            if due is not None and (recheck is None or due < recheck):
                recheck = due
        return recheck

    def sync(self, budget: Obj, candidates: list[Obj] | None = None) -> float | None:
        """One budget (trySync); `candidates` are the pods of its namespace, if known."""
        now = self.clock()
        pods = self.pods_for(budget, candidates)
        try:
            expected, desired = self.expected_pod_count(budget, pods)
        except SyncError as e:
            self._fail_safe(budget, str(e), now)
            return None
        disrupted, recheck = self._disrupted_pods(budget, pods, now)
        healthy = 0
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                continue
            since = disrupted.get(pod["metadata"]["name"])
            if since is not None and parse_time(since) + self.deletion_timeout > now:
                continue
            if is_pod_ready(pod):
                healthy += 1
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            allowed = 0
        old = budget.get("status") or {}
        generation = int(budget["metadata"].get("generation", 1))
        if (
            old.get("currentHealthy") == healthy
            and old.get("desiredHealthy") == desired
            and old.get("expectedPods") == expected
            and old.get("disruptionsAllowed") == allowed
            and (old.get("disruptedPods") or {}) == disrupted
            and int(old.get("observedGeneration") or 0) == generation
            and _conditions_up_to_date(budget)
        ):
            return recheck
        status: dict[str, Any] = {"observedGeneration": generation}
        if disrupted:
            status["disruptedPods"] = disrupted
        status.update(
            {
                "disruptionsAllowed": allowed,
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "expectedPods": expected,
                "conditions": copy.deepcopy(old.get("conditions") or []),
            }
        )
        update_allowed_condition(status, now)
        self._write(budget, status)
        return recheck

    def pods_for(self, budget: Obj, candidates: list[Obj] | None = None) -> list[Obj]:
        try:
            selector = selector_from_object((budget.get("spec") or {}).get("selector"))
        except SelectorError:
            return []
        if candidates is None:
            candidates = list(self.store.iter(PODS, budget["metadata"]["namespace"]))
        return [p for p in candidates if labels_match(selector, p["metadata"].get("labels"))]

    def expected_pod_count(self, budget: Obj, pods: list[Obj]) -> tuple[int, int]:
        """getExpectedPodCount: (expectedPods, desiredHealthy). An integer minAvailable
        counts the pods; a percentage or maxUnavailable needs the controllers' scale;
        neither field set leaves both at 0 (so nothing is allowed)."""
        spec = budget.get("spec") or {}
        if spec.get("maxUnavailable") is not None:
            expected = self.expected_scale(pods)
            unavailable = scaled_value(spec["maxUnavailable"], expected)
            return expected, max(0, expected - unavailable)
        minimum = spec.get("minAvailable")
        if minimum is None:
            return 0, 0
        if isinstance(minimum, str):
            expected = self.expected_scale(pods)
            return expected, scaled_value(minimum, expected)
        return len(pods), int(minimum)

    def expected_scale(self, pods: list[Obj]) -> int:
        """getExpectedScale: the sum of the scale of the pods' controllers. Pods without
        a controller are left out (v1.33 logs them as unmanaged); a controller without a
        scale (a DaemonSet, a Job) or one that is gone is an error."""
        scales: dict[str, int] = {}
        for pod in pods:
            ref = controller_of(pod)
            if ref is None or ref.get("uid") in scales:
                continue
            found = self._controller_scale(pod["metadata"]["namespace"], ref)
            if found is None:
                raise SyncError(f'found no controllers for pod "{pod["metadata"]["name"]}"')
            uid, replicas = found
            scales[uid] = replicas
        return sum(scales.values())

    def _controller_scale(self, namespace: str, ref: dict[str, Any]) -> tuple[str, int] | None:
        api_version = str(ref.get("apiVersion") or "")
        group = api_version.split("/", maxsplit=1)[0] if "/" in api_version else ""
        kind = str(ref.get("kind") or "")
        name, uid = str(ref.get("name") or ""), str(ref.get("uid") or "")
        if kind == "ReplicaSet" and group in ("apps", "extensions"):
            rs = self.store.peek(REPLICASETS, namespace, name)
            if rs is not None and rs["metadata"]["uid"] == uid:
                parent = controller_of(rs)
                if parent is not None and parent.get("kind") == "Deployment":
                    parent_group = str(parent.get("apiVersion") or "").split("/", maxsplit=1)[0]
                    deployment = self.store.peek(DEPLOYMENTS, namespace, str(parent["name"]))
                    if (
                        parent_group in ("apps", "extensions")
                        and deployment is not None
                        and deployment["metadata"]["uid"] == parent.get("uid")
                    ):
                        return deployment["metadata"]["uid"], _replicas(deployment)
                else:
                    return uid, _replicas(rs)
        if kind == "StatefulSet" and group == "apps":
            sts = self.store.peek(STATEFULSETS, namespace, name)
            if sts is not None and sts["metadata"]["uid"] == uid:
                return uid, _replicas(sts)
        # getScaleController: any kind with a scale subresource, through its Scale.
        resource = _resource_for(group, kind)
        if resource is None:
            plural = _UNSCALABLE_ELSEWHERE.get((group, kind))
            if plural is not None:
                raise SyncError(f"{plural} does not implement the scale subresource")
            raise SyncError(f'no matches for kind "{kind}" in version "{api_version}"')
        if "scale" not in resource.subresources:
            raise SyncError(f"{resource.key} does not implement the scale subresource")
        owner = self.store.peek(resource, namespace, name)
        if owner is None or owner["metadata"]["uid"] != uid:
            return None
        return uid, _replicas(owner)

    def _disrupted_pods(
        self, budget: Obj, pods: list[Obj], now: float
    ) -> tuple[dict[str, str], float | None]:
        """buildDisruptedPodMap: keep the entries of pods that exist, are not yet
        terminating and are still inside DeletionTimeout; when to look again."""
        recorded = (budget.get("status") or {}).get("disruptedPods") or {}
        kept: dict[str, str] = {}
        recheck: float | None = None
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                continue
            since = recorded.get(pod["metadata"]["name"])
            if since is None:
                continue
            expires = parse_time(since) + self.deletion_timeout
            if expires < now:
                continue
            kept[pod["metadata"]["name"]] = since
            if recheck is None or expires < recheck:
                recheck = expires
        return kept, recheck

    def _fail_safe(self, budget: Obj, message: str, now: float) -> None:
        """failSafe: disruptionsAllowed 0 and a SyncFailed condition; the rest of the
        status (observedGeneration included) stays as it was."""
        status = copy.deepcopy(budget.get("status") or {})
        status["disruptionsAllowed"] = 0
        conditions = status.setdefault("conditions", [])
        set_condition(
            conditions,
            kind="DisruptionAllowed",
            status="False",
            reason="SyncFailed",
            message=message,
            observed_generation=int(status.get("observedGeneration") or 0),
            now=now,
        )
        self._write(budget, status)

    def _write(self, budget: Obj, status: dict[str, Any]) -> None:
        if budget.get("status") == status:
            return
        updated = copy.deepcopy(budget)
        updated["status"] = status
        self.store.update(PDBS, updated)


def _replicas(obj: Obj) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1))


def _resource_for(group: str, kind: str) -> Resource | None:
    for (_, resource_kind), resource in BY_KIND.items():
        if resource_kind == kind and resource.group == group:
            return resource
    return None
