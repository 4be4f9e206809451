"""PodTracker's idea of "gone"; BudgetTracker names the budgets that select a pod."""

from __future__ import annotations

from unittest.mock import create_autospec

from realapi import StaticToken
from support.views import wait_listed

from drainer.engine.watchers import BudgetTracker, PodTracker
from drainer.k8s.kube import Kube
from testbed import workloads as objects
from testbed.workloads import Obj


def pod(name: str, uid: str) -> Obj:
    return objects.pod(name, namespace="shop", uid=uid)


def test_pod_tracker__gone_when_deleted_or_replaced_under_the_same_name() -> None:
    tracker = PodTracker(create_autospec(Kube, instance=True), "node-1")
    old, other = pod("db-0", "u1"), pod("web-1", "u2")
    tracker._replace([old, other])

    assert not tracker.gone(old)
    tracker._apply("DELETED", pod("web-1", "u2"))
    assert tracker.gone(other)
    tracker._apply("ADDED", pod("db-0", "u3"))  # a StatefulSet pod recreated here
    assert tracker.gone(old)
    assert tracker.current(old) is None
    tracker._apply("DELETED", pod("db-0", "u1"))  # a late event for the old pod
    assert tracker.current(pod("db-0", "u3")) is not None, (
        "a stale DELETED must not hide the new pod"
    )


def test_budget_tracker__names_every_budget_that_selects_a_pod_once_listed() -> None:
    from kubesim import KubeSim

    with KubeSim() as sim:
        sim.apply(
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
                objects.budget("web-a", {"app": "web"}, namespace="shop", max_unavailable=1),
                objects.budget("web-b", {"tier": "front"}, namespace="shop", max_unavailable=1),
                objects.budget("db", {"app": "db"}, namespace="shop", max_unavailable=1),
                objects.budget("web-c", {"app": "web"}, namespace="default", max_unavailable=1),
            ]
        )
        kube = Kube.for_cluster(sim.url, sim.ca_pem, StaticToken(sim.admin_token))
        tracker = BudgetTracker(kube)
        assert not tracker.listed
        tracker.start()
        try:
            assert wait_listed(tracker, 5.0)
            web = objects.pod("web-0", namespace="shop", labels={"app": "web", "tier": "front"})

            assert tracker.matching(web) == ["shop/web-a", "shop/web-b"]
        finally:
            tracker.stop()
            kube.close()
