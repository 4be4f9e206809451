"""Review 58, the engine's handling of the eviction API's answers: each test fails
on the code it was written against. kubesim is the cluster, `ApiFront`
(tests/realapi.py) sends the real server's answers where a test scripts them, and
the drain's clock is a fake one its pauses move."""

from __future__ import annotations

import time
from typing import Any

from realapi import TWO_BUDGETS_500, ApiFront, front_kube, namespace_terminating_403
from support.clock import FakeClock, SteppedWaits
from test_drain import NODE, admin, clock, eviction_path, front, place, sim  # noqa: F401  (fixtures)

from drainer.engine.drain import Drain
from drainer.engine.options import DrainOptions
from drainer.engine.report import DrainReport
from drainer.k8s.cordon import ProgressRecord
from drainer.outcome import Outcome
from kubesim import KubeSim
from testbed import workloads as objects


class Settling(SteppedWaits):
    """The clock does not jump while a pod on the node is being deleted by kubesim
    (no finalizer): its DELETED event comes in real time (as tests/test_drain.py)."""

    def __init__(self, clock: FakeClock, sim: KubeSim, cap: float = 5.0) -> None:  # noqa: F811
        super().__init__(clock, hold=self.settling)
        self.sim, self.cap = sim, cap
        self.since: float | None = None

    def settling(self) -> bool:
        stopping = any(
            p["spec"].get("nodeName") == NODE
            and p["metadata"].get("deletionTimestamp")
            and not p["metadata"].get("finalizers")
            for p in self.sim.list("Pod")
        )
        if not stopping:
            self.since = None
            return False
        now = time.monotonic()
        if self.since is None:
            self.since = now
        return now - self.since < self.cap


def drain(
    front: ApiFront,  # noqa: F811
    sim: KubeSim,  # noqa: F811
    clock: FakeClock,  # noqa: F811
    seconds: float,
    **options: Any,
) -> DrainReport:
    kube = front_kube(front, sleep=clock.sleep)
    engine = Drain(
        kube, NODE, DrainOptions(**options), record=ProgressRecord(), waits=Settling(clock, sim)
    )
    try:
        return engine.run(clock() + seconds)
    finally:
        kube.close()


def still_there(sim: KubeSim, namespace: str, name: str) -> dict[str, Any] | None:  # noqa: F811
    return next((p for p in sim.list("Pod", namespace) if p["metadata"]["name"] == name), None)


# -- two budgets: the report keeps "cannot evict" for a pod that went -------------


def test_pod_under_two_budgets_deleted_by_a_person__drained_report_no_longer_says_it_cannot_be(
    sim: KubeSim,  # noqa: F811
    front: ApiFront,  # noqa: F811
    clock: FakeClock,  # noqa: F811
) -> None:
    """The eviction API refuses a pod two budgets select (500). The drain tells
    people so; one of them deletes the pod (`kubectl delete pod`, the usual answer
    to a pod the eviction API will not take), and the drain ends drained. Its report
    must not still say the pod cannot be evicted: `errors` is the drained result's
    reason on the end line, the notice and the node's Event, and `multiple_budgets`
    the end line's key; both are cleared when the pod is evicted after all
    (test_drain.py::test_two_budgets_fixed_mid_drain...), not when it goes another way."""
    place(
        sim,
        objects.pod(
            "web-0", namespace="shop", node_name=NODE, labels={"app": "web", "t": "f"}, grace=1
        ),
        objects.budget("web-a", {"app": "web"}, namespace="shop", min_available=0),
        objects.budget("web-b", {"t": "f"}, namespace="shop", min_available=0),
    )
    front.script(
        "POST",
        eviction_path("shop", "web-0"),
        TWO_BUDGETS_500,
        count=None,
        then=lambda: admin(sim).delete("Pod", "web-0", "shop"),
    )

    report = drain(front, sim, clock, 120)

    assert report.outcome == Outcome.DRAINED
    assert still_there(sim, "shop", "web-0") is None
    assert report.multiple_budgets == {}, report.multiple_budgets
    assert report.errors == [], report.errors


# -- a terminating namespace: a pod not deleted yet is not "stuck terminating" -----


def test_terminating_namespace_pod_never_deleted__not_called_stuck__drain_not_drained(
    sim: KubeSim,  # noqa: F811
    front: ApiFront,  # noqa: F811
    clock: FakeClock,  # noqa: F811
) -> None:
    """The namespace lifecycle admission refuses the eviction (403 NamespaceTerminating)
    from the moment the namespace is deleted; the namespace controller deletes its
    pods later, when its queue reaches it. Here it has not within the drain's 120 s:
    the pod runs on, no deletionTimestamp. kubectl drain retries such an eviction
    every 5 s until the pod is marked deleted, then waits for it. The engine instead
    gives it its grace from the 403, calls it stuck ("still terminating N s past its
    grace period") at the stuck check, and ends the drain DRAINED with the pod
    running on the node: untrue, and the node goes with a live pod on it."""
    place(
        sim,
        objects.pod("web-0", namespace="shop", node_name=NODE, grace=5),
        objects.pod("api-0", node_name=NODE, grace=1),
    )
    front.script(
        "POST",
        eviction_path("shop", "web-0"),
        namespace_terminating_403("web-0", "shop"),
        count=None,
    )

    report = drain(front, sim, clock, 120, stuck_pod_seconds=10)

    pod = still_there(sim, "shop", "web-0")
    assert pod is not None and not pod["metadata"].get("deletionTimestamp"), "never deleted"
    assert report.going_with_namespace == ["shop/web-0"]
    assert "shop/web-0" not in report.stuck, "never terminating, so never stuck terminating"
    assert report.outcome != Outcome.DRAINED, "a running pod is still on the node"
    assert report.remaining == ["shop/web-0"]
