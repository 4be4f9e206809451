"""The pods/eviction subresource, after v1.33 pkg/registry/core/pod/storage/eviction.go.

The order of the real handler is kept, because it decides which answer wins:

1. the namespace lifecycle admission plugin (a create in a terminating namespace:
   403 with a NamespaceTerminating cause; a missing namespace: 404), before the
   handler sees the body's name;
2. the pod (404); a pod that is terminating, Pending, Succeeded or Failed is deleted
   without looking at budgets;
3. more than one budget: not an error but a Failure Status *returned as the result*,
   which the server writes with the Status's own code: HTTP 500, no reason (checked
   against the real v1.33 apiserver by tests/e2e/test_conformance.py);
4. a pod that is not Ready may go without using the budget (AlwaysAllow, or
   IfHealthyBudget when the budget is healthy), from the budget's *stored* status;
5. checkAndDecrement on the stored status: a lagging observedGeneration is a 429 with
   Retry-After 10, no disruption left a 429 without Retry-After; otherwise
   disruptionsAllowed goes down by one and the pod is recorded in disruptedPods;
6. the pod gets the DisruptionTarget condition, then the graceful delete. UID and
   resourceVersion preconditions are checked here, after the budget was charged.

A dry run changes nothing at any step.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.disruption import PDBS, PODS, budgets_for, is_pod_ready, update_allowed_condition
from kubesim.errors import ApiError
from kubesim.store import Obj, now_iso

if TYPE_CHECKING:
    from kubesim.api import Api

TOO_MANY = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)


def success() -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def evict(api: Api, namespace: str, name: str, eviction: Any, dry_run: bool = False) -> Obj:
    """The Status body of a 201 answer, or an ApiError."""
    if not isinstance(eviction, dict) or eviction.get("kind", "Eviction") != "Eviction":
        raise errors.bad_request(f"not a Eviction object: {type(eviction).__name__}")
    if eviction.get("apiVersion", "policy/v1") not in ("policy/v1", "policy/v1beta1"):
        raise errors.bad_request(f"unsupported Eviction apiVersion {eviction.get('apiVersion')!r}")
    metadata = eviction.get("metadata") or {}
    body_namespace = metadata.get("namespace")
    if body_namespace and body_namespace != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    with api.store.lock:
        api.admit_create(PODS, namespace, metadata.get("name") or name)
        if metadata.get("name") != name:
            raise errors.bad_request("name in URL does not match name in Eviction object")
        options = copy.deepcopy(eviction.get("deleteOptions") or {})
        if options.get("ignoreStoreReadErrorWithClusterBreakingPotential"):
            raise errors.invalid(
                "Eviction",
                name,
                [
                    (
                        "deleteOptions.ignoreStoreReadErrorWithClusterBreakingPotential",
                        "Invalid value: true: can not be set for pod eviction, try after "
                        "removing the option",
                    )
                ],
                "policy",
            )
        dry_run = dry_run or bool(options.get("dryRun"))
        pod = api.store.peek(PODS, namespace, name)
        if pod is None:
            raise errors.not_found("pods", name)
        phase = (pod.get("status") or {}).get("phase")
        if pod["metadata"].get("deletionTimestamp") or phase in ("Succeeded", "Failed", "Pending"):
            # canIgnorePDB: the pod already caused its disruption, or never ran.
            _add_condition_and_delete(api, pod, options, dry_run)
            return success()
        budgets = budgets_for(api.store, pod)
        if len(budgets) > 1:
            # Returned, not raised, by the real handler: the HTTP status stays 201.
            return {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": MORE_THAN_ONE,
                "code": 500,
            }
        if budgets:
            budget = budgets[0]
            status = budget.get("status") or {}
            spares_unhealthy = not is_pod_ready(pod) and (
                budget["spec"].get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
                or (
                    int(status.get("currentHealthy") or 0) >= int(status.get("desiredHealthy") or 0)
                    and int(status.get("desiredHealthy") or 0) > 0
                )
            )
            if not spares_unhealthy:
                _check_and_decrement(api, budget, name, dry_run)
        _add_condition_and_delete(api, pod, options, dry_run)
        return success()


def too_many_requests(budget: str, cause: str, retry_after: int = 0) -> ApiError:
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    headers = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return ApiError(429, TOO_MANY, reason="TooManyRequests", details=details, headers=headers)


def _check_and_decrement(api: Api, budget: Obj, pod_name: str, dry_run: bool) -> None:
    name = budget["metadata"]["name"]
    status = copy.deepcopy(budget.get("status") or {})
    if int(status.get("observedGeneration") or 0) < int(budget["metadata"].get("generation", 1)):
        raise too_many_requests(
            name, f"The disruption budget {name} is still being processed by the server.", 10
        )
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise errors.forbidden(
            "poddisruptionbudget", name, "pdb disruptions allowed is negative", "policy"
        )
    if len(status.get("disruptedPods") or {}) > 2000:
        raise errors.forbidden(
            "poddisruptionbudget",
            name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
            "policy",
        )
    if allowed == 0:
        raise too_many_requests(
            name,
            f"The disruption budget {name} needs {int(status.get('desiredHealthy') or 0)} "
            f"healthy pods and has {int(status.get('currentHealthy') or 0)} currently",
        )
    if dry_run:
        return
    now = api.clock()
    status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        update_allowed_condition(status, now)
    status.setdefault("disruptedPods", {})[pod_name] = now_iso(now)
    updated = copy.deepcopy(budget)
    updated["status"] = status
    api.store.update(PDBS, updated)


def _add_condition_and_delete(api: Api, pod: Obj, options: dict[str, Any], dry_run: bool) -> None:
    metadata = pod["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    if dry_run:
        # The delete's own precondition check (and messages), nothing stored.
        api.delete(PODS, namespace, name, options, dry_run=True)
        return
    preconditions = options.get("preconditions") or {}
    uid, version = preconditions.get("uid"), preconditions.get("resourceVersion")
    if uid and uid != metadata["uid"]:
        raise errors.conflict(
            "Pod",
            name,
            f"the UID in the precondition ({uid}) does not match the UID in record "
            f"({metadata['uid']}). The object might have been deleted and then recreated",
        )
    if version and version != metadata["resourceVersion"]:
        raise errors.conflict(
            "Pod",
            name,
            f"the ResourceVersion in the precondition ({version}) does not match the "
            f"ResourceVersion in record ({metadata['resourceVersion']}). The object might "
            "have been modified",
        )
    updated = copy.deepcopy(pod)
    conditions = updated.setdefault("status", {}).setdefault("conditions", [])
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": now_iso(api.clock()),
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
    }
    for i, existing in enumerate(conditions):
        if existing.get("type") == "DisruptionTarget":
            if existing.get("status") == "True":
                condition["lastTransitionTime"] = existing.get("lastTransitionTime")
            conditions[i] = condition
            break
    else:
        conditions.append(condition)
    stored = api.store.update(PODS, updated)
    if version:
        # The condition moved the version on; the delete checks against the new one.
        preconditions = {**preconditions, "resourceVersion": stored["metadata"]["resourceVersion"]}
        options = {**options, "preconditions": preconditions}
    api.delete(PODS, namespace, name, options)
