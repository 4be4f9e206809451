"""The differential conformance table: the API answers the drainer depends on, sent
to kubesim and to the real control plane in the same test and compared field by
field (HTTP status, Status status/code/reason, details causes, Retry-After, the
resulting object state). Each row also states the real answer, so the table reads
as the specification of what kubesim must say. A difference is a bug in kubesim.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubesim import KubeSim
from testbed import workloads as w
from testbed.cluster import ApiClient, Cluster
from testbed.world import is_pod_ready, node_tainted, wait_until

from .conftest import CLUSTER_NAME, SPEED

Obj = dict[str, Any]


@dataclass
class Scene:
    """One case's own namespace and node on one backend."""

    cluster: Cluster
    namespace: str
    node: str
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def api(self) -> ApiClient:
        return self.cluster.client

    def pod_path(self, name: str, sub: str = "") -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods/{name}" + (f"/{sub}" if sub else "")

    def run_pod(self, name: str, **kwargs: Any) -> Obj:
        self.cluster.apply(w.pod(name, node_name=self.node, namespace=self.namespace, **kwargs))
        wait_until(lambda: is_pod_ready(self.api.get("Pod", name, self.namespace)), 15)
        return self.api.get("Pod", name, self.namespace)

    def settled_budget(
        self, name: str, allowed: int | None = None, healthy: int | None = None
    ) -> Obj:
        """The budget once the disruption controller has caught up with its spec (and,
        with `allowed`, allows that many disruptions; with `healthy`, counts that many
        healthy pods: its informer may see a pod's status change after the budget)."""

        def caught_up() -> Obj | None:
            budget = self.api.get("PodDisruptionBudget", name, self.namespace)
            status = budget.get("status") or {}
            if status.get("observedGeneration") != budget["metadata"].get("generation"):
                return None
            if allowed is not None and status.get("disruptionsAllowed") != allowed:
                return None
            if healthy is not None and status.get("currentHealthy") != healthy:
                return None
            return budget

        result: Obj = wait_until(caught_up, 15, what="the budget's status caught up")
        return result

    def evict(self, pod: Obj, *, uid: str = "", dry_run: bool = False) -> Answer:
        options: Obj = {"preconditions": {"uid": uid or pod["metadata"]["uid"]}}
        if dry_run:
            options["dryRun"] = ["All"]
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod["metadata"]["name"], "namespace": self.namespace},
            "deleteOptions": options,
        }
        return Answer.of(
            *self.api.request("POST", self.pod_path(pod["metadata"]["name"], "eviction"), body=body)
        )


@dataclass(frozen=True)
class Answer:
    """What the drainer can see of an answer, with names and times taken out."""

    status: int
    body_status: str
    body_code: int | None
    reason: str
    message: str
    causes: tuple[tuple[str, str, str], ...]
    retry_after: str

    @classmethod
    def of(cls, status: int, headers: dict[str, str], body: Any) -> Answer:
        body = body if isinstance(body, dict) else {}
        is_status = body.get("kind") == "Status"
        details = body.get("details") or {}
        return cls(
            status=status,
            body_status=str(body.get("status") or "") if is_status else f"<{body.get('kind')}>",
            body_code=body.get("code") if is_status else None,
            reason=str(body.get("reason") or ""),
            message=str(body.get("message") or "") if is_status else "",
            causes=tuple(
                (
                    str(c.get("reason") or c.get("type") or ""),
                    str(c.get("field") or ""),
                    str(c.get("message") or ""),
                )
                for c in details.get("causes") or []
            ),
            retry_after=str({k.lower(): v for k, v in headers.items()}.get("retry-after", "")),
        )


# -- the table ----------------------------------------------------------------------
# Each row: (setup and request on one backend) -> what to compare. Names are fixed per
# row (pods "p", "q"; budgets "b1", "b2"), so messages compare as they are.


def no_budget(s: Scene) -> Obj:
    pod = s.run_pod("p", shutdown=100)  # (capped by the grace period) long enough to look
    answer = s.evict(pod)
    after = s.api.get("Pod", "p", s.namespace)
    return {
        "answer": answer,
        "deleting": bool(after["metadata"].get("deletionTimestamp")),
        "disruption_target": _condition(after, "DisruptionTarget"),
    }


def budget_allows_zero(s: Scene) -> Obj:
    pod = s.run_pod("p", labels={"app": "x"})
    s.cluster.apply(w.budget("b1", {"app": "x"}, namespace=s.namespace, min_available=1))
    s.settled_budget("b1", allowed=0)
    # Its phase and readiness as the eviction finds them: the server lets a pod that is
    # Pending, or not Ready under a healthy budget, go without asking the budget.
    before = s.api.get("Pod", "p", s.namespace)
    answer = s.evict(pod)
    after = s.api.get("Pod", "p", s.namespace)
    return {
        "answer": answer,
        "deleting": bool(after["metadata"].get("deletionTimestamp")),
        "before": (before["status"].get("phase"), is_pod_ready(before)),
    }


def two_budgets(s: Scene) -> Obj:
    pod = s.run_pod("p", labels={"app": "x"})
    s.cluster.apply(
        [
            w.budget("b1", {"app": "x"}, namespace=s.namespace, min_available=0),
            w.budget("b2", {"app": "x"}, namespace=s.namespace, min_available=0),
        ]
    )
    s.settled_budget("b1")
    s.settled_budget("b2")
    answer = s.evict(pod)
    after = s.api.get("Pod", "p", s.namespace)
    return {"answer": answer, "deleting": bool(after["metadata"].get("deletionTimestamp"))}


def terminating_namespace(s: Scene) -> Obj:
    # The finalizer keeps the pod, and so its namespace, terminating.
    pod = s.run_pod("p", finalizers=["example.com/hold"])
    s.api.call("DELETE", f"/api/v1/namespaces/{s.namespace}")
    wait_until(
        lambda: s.api.get("Namespace", s.namespace).get("status", {}).get("phase") == "Terminating",
        15,
    )
    answer = s.evict(pod)
    s.api.patch("Pod", "p", {"metadata": {"finalizers": None}}, s.namespace)
    return {"answer": answer}


def stale_uid(s: Scene) -> Obj:
    pod = s.run_pod("p")
    answer = s.evict(pod, uid="00000000-0000-0000-0000-000000000000")
    after = s.api.get("Pod", "p", s.namespace)
    return {
        "status": answer.status,
        "reason": answer.reason,
        "deleting": bool(after["metadata"].get("deletionTimestamp")),
    }


def _not_ready_under(policy: str | None) -> Callable[[Scene], Obj]:
    def case(s: Scene) -> Obj:
        s.run_pod("p", labels={"app": "x"})
        # Running but not Ready: nothing in kwok or kubesim makes it Ready again.
        s.api.patch(
            "Pod",
            "p",
            {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
            s.namespace,
            sub="status",
        )
        budget = w.budget("b1", {"app": "x"}, namespace=s.namespace, min_available=1)
        if policy:
            budget["spec"]["unhealthyPodEvictionPolicy"] = policy
        s.cluster.apply(budget)
        # Under load the real controller's informer has seen the budget before the pod's
        # patch (it counted the pod healthy once): the eviction waits for its settled view.
        settled = s.settled_budget("b1", healthy=0)
        answer = s.evict(s.api.get("Pod", "p", s.namespace))
        return {"answer": answer, "healthy": settled["status"].get("currentHealthy")}

    return case


def daemonset_pod_percentage(s: Scene) -> Obj:
    s.cluster.apply(w.daemonset("agent", namespace=s.namespace))
    pods = wait_until(lambda: [p for p in s.api.list("Pod", s.namespace) if is_pod_ready(p)], 20)
    s.cluster.apply(w.budget("b1", {"app": "agent"}, namespace=s.namespace, max_unavailable="50%"))
    budget = wait_until(
        lambda: (
            b
            if (b := s.api.get("PodDisruptionBudget", "b1", s.namespace)).get("status")
            and b["status"].get("conditions")
            else None
        ),
        15,
    )
    answer = s.evict(pods[0])
    return {"answer": _nameless(answer, pods[0]), "status": _budget_state(budget)}


def bare_pod_percentage(s: Scene) -> Obj:
    pod = s.run_pod("p", labels={"app": "x"})
    s.cluster.apply(w.budget("b1", {"app": "x"}, namespace=s.namespace, max_unavailable="50%"))
    budget = s.settled_budget("b1")
    answer = s.evict(pod)
    return {"answer": answer, "status": _budget_state(budget)}


def empty_budget(s: Scene) -> Obj:
    pod = s.run_pod("p", labels={"app": "x"})
    s.cluster.apply(w.budget("b1", {"app": "x"}, namespace=s.namespace))
    # healthy=1: the disruption controller's informer may see the pod Ready after the
    # budget (under load the real one answered "has 0 currently" where kubesim said 1)
    budget = s.settled_budget("b1", healthy=1)
    answer = s.evict(pod)
    return {"answer": answer, "status": _budget_state(budget)}


def _tainted(s: Scene) -> Obj | None:
    return s.api.get("Node", s.node) if node_tainted(s.cluster, s.node) else None


def _untainted(s: Scene) -> Obj | None:
    node = s.api.get("Node", s.node)
    return None if node["spec"].get("taints") else node


def cordon(s: Scene) -> Obj:
    s.api.patch("Node", s.node, {"spec": {"unschedulable": True}})
    node = wait_until(lambda: _tainted(s), 15, what="the cordon taint")
    taints = sorted((t["key"], t["effect"]) for t in node["spec"]["taints"])
    s.api.patch("Node", s.node, {"spec": {"unschedulable": None}})
    uncordoned = wait_until(lambda: _untainted(s), 15, what="the cordon taint gone")
    return {"taints": taints, "after_uncordon": uncordoned["spec"].get("taints")}


def dry_run_patch(s: Scene) -> Obj:
    status, _, answer = s.api.request(
        "PATCH",
        f"/api/v1/nodes/{s.node}",
        query={"dryRun": "All"},
        body={"spec": {"unschedulable": True}},
        content_type="application/merge-patch+json",
    )
    after = s.api.get("Node", s.node)
    return {
        "status": status,
        "answered_unschedulable": answer["spec"].get("unschedulable"),
        "stored_unschedulable": after["spec"].get("unschedulable"),
    }


def dry_run_eviction(s: Scene) -> Obj:
    pod = s.run_pod("p", shutdown=100)
    answer = s.evict(pod, dry_run=True)
    after = s.api.get("Pod", "p", s.namespace)
    return {
        "answer": answer,
        "deleting": bool(after["metadata"].get("deletionTimestamp")),
        "disruption_target": _condition(after, "DisruptionTarget"),
    }


def list_resource_versions(s: Scene) -> Obj:
    for name in ("p", "q", "r"):
        s.cluster.apply(w.pod(name, node_name=s.node, namespace=s.namespace))
    path = f"/api/v1/namespaces/{s.namespace}/pods"
    _, _, first = s.api.request("GET", path)
    version = first["metadata"]["resourceVersion"]
    results: Obj = {}
    for label, query in {
        "rv0": {"resourceVersion": "0"},
        "not_older": {"resourceVersion": version, "resourceVersionMatch": "NotOlderThan"},
        "exact": {"resourceVersion": version, "resourceVersionMatch": "Exact"},
        "match_without_rv": {"resourceVersionMatch": "NotOlderThan"},
        "exact_rv0": {"resourceVersion": "0", "resourceVersionMatch": "Exact"},
    }.items():
        status, _, body = s.api.request("GET", path, query=query)
        results[label] = (
            status,
            sorted(i["metadata"]["name"] for i in body.get("items") or []),
            str(body.get("reason") or ""),
        )
    # limit/continue: pages of 2, then the rest.
    status, _, page = s.api.request("GET", path, query={"limit": "2"})
    token = page["metadata"].get("continue")
    _, _, rest = s.api.request("GET", path, query={"limit": "2", "continue": token})
    results["pages"] = (
        status,
        len(page["items"]),
        bool(token),
        len(rest["items"]),
        rest["metadata"].get("continue") or "",
    )
    return results


def watch_resumes(s: Scene) -> Obj:
    path = f"/api/v1/namespaces/{s.namespace}/pods"
    _, _, listed = s.api.request("GET", path)
    version = listed["metadata"]["resourceVersion"]
    s.cluster.apply(w.pod("p", namespace=s.namespace))
    seen = []
    for event in s.api.watch("Pod", s.namespace, resource_version=version, timeout=2):
        if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
            seen.append((event["type"], event["object"]["metadata"]["name"]))
            break
    return {"first_event": seen[:1]}


def watch_too_old(s: Scene) -> Obj:
    if s.cluster.backend == "kubesim":
        s.cluster.kubesim.store.compact()  # the real one starts its watch cache above 1
    events = list(s.api.watch("Pod", s.namespace, resource_version="1", timeout=2))
    first = events[0] if events else {}
    obj = first.get("object") or {}
    return {"type": first.get("type"), "code": obj.get("code"), "reason": obj.get("reason")}


def _condition(pod: Obj, kind: str) -> tuple[str, str, str] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return (c.get("status"), c.get("reason"), c.get("message"))
    return None


def _budget_state(budget: Obj) -> Obj:
    status = budget.get("status") or {}
    return {
        "disruptionsAllowed": status.get("disruptionsAllowed"),
        "expectedPods": status.get("expectedPods"),
        "desiredHealthy": status.get("desiredHealthy"),
        "conditions": sorted(
            (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
            for c in status.get("conditions") or []
        ),
    }


def _nameless(answer: Answer, pod: Obj) -> Answer:
    """A DaemonSet pod's name is random: take it out of the message."""
    name = pod["metadata"]["name"]
    return Answer(
        answer.status,
        answer.body_status,
        answer.body_code,
        answer.reason,
        answer.message.replace(name, "<pod>"),
        tuple((r, f, m.replace(name, "<pod>")) for r, f, m in answer.causes),
        answer.retry_after,
    )


# The real answers, as the v1.33 apiserver gives them (what kubesim must match too).
NO_PDB = "Cannot evict pod as it would violate the pod's disruption budget."
ROWS: dict[str, tuple[Callable[[Scene], Obj], Callable[[Obj], None]]] = {}


def row(name: str, expect: Callable[[Obj], None]) -> Callable[[Callable[[Scene], Obj]], Any]:
    def register(case: Callable[[Scene], Obj]) -> Callable[[Scene], Obj]:
        ROWS[name] = (case, expect)
        return case

    return register


def _expect_eviction_created(seen: Obj) -> None:
    assert seen["answer"].status == 201
    assert seen["answer"].body_status == "Success"
    assert seen["deleting"]
    assert seen["disruption_target"] == ("True", "EvictionByEvictionAPI", "Eviction API: evicting")


def _expect_blocked(seen: Obj) -> None:
    answer = seen["answer"]
    assert seen["before"] == ("Running", True), f"not the scene: the pod was {seen['before']}"
    assert (answer.status, answer.reason) == (429, "TooManyRequests")
    assert answer.causes[0][0] == "DisruptionBudget"
    assert (
        "The disruption budget b1 needs 1 healthy pods and has 1 currently" in answer.causes[0][2]
    )
    assert not seen["deleting"]


def _expect_two_budgets(seen: Obj) -> None:
    answer = seen["answer"]
    # HTTP 500 (the Failure Status the handler returns is written with its code).
    assert (answer.status, answer.body_status, answer.body_code, answer.reason) == (
        500,
        "Failure",
        500,
        "",
    )
    assert "more than one PodDisruptionBudget" in answer.message
    assert not seen["deleting"]


def _expect_namespace_terminating(seen: Obj) -> None:
    answer = seen["answer"]
    assert (answer.status, answer.reason) == (403, "Forbidden")
    assert [c[0] for c in answer.causes] == ["NamespaceTerminating"]


row("eviction without a budget", _expect_eviction_created)(no_budget)
row("eviction under a budget allowing 0", _expect_blocked)(budget_allows_zero)
row("eviction under two budgets", _expect_two_budgets)(two_budgets)
row("eviction in a terminating namespace", _expect_namespace_terminating)(terminating_namespace)
row(
    "eviction with a stale UID precondition",
    lambda seen: (
        (seen["status"], seen["reason"], seen["deleting"]) == (409, "Conflict", False)
        or pytest.fail(f"{seen}")
    ),
)(stale_uid)
row(
    "not-Ready pod, IfHealthyBudget (default)",
    lambda seen: seen["answer"].status == 429 or pytest.fail(f"{seen}"),
)(_not_ready_under(None))
row(
    "not-Ready pod, AlwaysAllow",
    lambda seen: seen["answer"].status == 201 or pytest.fail(f"{seen}"),
)(_not_ready_under("AlwaysAllow"))
row(
    "DaemonSet pod under a percentage budget",
    lambda seen: seen["answer"].status == 429 or pytest.fail(f"{seen}"),
)(daemonset_pod_percentage)
row(
    "bare pod under a percentage budget",
    lambda seen: seen["status"]["disruptionsAllowed"] == 0 or pytest.fail(f"{seen}"),
)(bare_pod_percentage)
row(
    "budget with an empty spec",
    lambda seen: seen["status"]["disruptionsAllowed"] == 0 or pytest.fail(f"{seen}"),
)(empty_budget)
row(
    "cordon: spec and taint",
    lambda seen: (
        seen["taints"] == [("node.kubernetes.io/unschedulable", "NoSchedule")]
        or pytest.fail(f"{seen}")
    ),
)(cordon)
row(
    "server-side dry run of a patch",
    lambda seen: (
        (seen["answered_unschedulable"], seen["stored_unschedulable"]) == (True, None)
        or pytest.fail(f"{seen}")
    ),
)(dry_run_patch)
row(
    "server-side dry run of an eviction",
    lambda seen: (
        (seen["answer"].status, seen["deleting"], seen["disruption_target"]) == (201, False, None)
        or pytest.fail(f"{seen}")
    ),
)(dry_run_eviction)
row(
    "list with resourceVersion, resourceVersionMatch, limit/continue",
    lambda seen: seen["rv0"][1] == ["p", "q", "r"] or pytest.fail(f"{seen}"),
)(list_resource_versions)
row(
    "watch resuming from a resourceVersion",
    lambda seen: seen["first_event"] == [("ADDED", "p")] or pytest.fail(f"{seen}"),
)(watch_resumes)
row(
    "watch from a compacted resourceVersion: 410 Gone",
    lambda seen: (
        (seen["type"], seen["code"], seen["reason"]) == ("ERROR", 410, "Expired")
        or pytest.fail(f"{seen}")
    ),
)(watch_too_old)


@pytest.fixture
def kubesim_cluster() -> Iterator[Cluster]:
    with KubeSim(speed=SPEED, cluster_name=CLUSTER_NAME) as sim:
        yield Cluster.of_kubesim(sim)


@pytest.fixture
def real_cluster(control_plane: Any) -> Iterator[Cluster]:
    cluster = Cluster.of_control_plane(control_plane)
    try:
        yield cluster
    finally:
        cluster.check()
        cluster.clean_up()


def _observe(cluster: Cluster, case: Callable[[Scene], Obj]) -> Obj:
    suffix = secrets.token_hex(3)
    namespace, node = f"conf-{suffix}", f"conf-node-{suffix}"
    cluster.apply(
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            w.node(node, f"i-{suffix}", "us-east-1a", pods=110),
        ]
    )
    scene = Scene(cluster, namespace, node)
    seen = case(scene)
    return {k: _rename(v, namespace, node) for k, v in seen.items()}


def _rename(value: Any, namespace: str, node: str) -> Any:
    """Take the per-case namespace and node names out, so answers compare."""
    if isinstance(value, str):
        return value.replace(namespace, "<ns>").replace(node, "<node>")
    if isinstance(value, Answer):
        return Answer(
            value.status,
            value.body_status,
            value.body_code,
            value.reason,
            _rename(value.message, namespace, node),
            tuple(tuple(_rename(x, namespace, node) for x in c) for c in value.causes),  # type: ignore[misc]
            value.retry_after,
        )
    if isinstance(value, tuple | list):
        return type(value)(_rename(v, namespace, node) for v in value)
    if isinstance(value, dict):
        return {k: _rename(v, namespace, node) for k, v in value.items()}
    return value


@pytest.mark.parametrize("name", list(ROWS))
def test_conformance__kubesim_answers_as_the_real_apiserver(
    name: str, kubesim_cluster: Cluster, real_cluster: Cluster
) -> None:
    case, expect = ROWS[name]
    real = _observe(real_cluster, case)
    emulated = _observe(kubesim_cluster, case)
    print(f"{name}: real {real}")
    expect(real)
    assert emulated == real, f"kubesim differs from the real apiserver on: {name}"
