"""PodTracker's idea of "gone"; BudgetTracker names the budgets that select a pod."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any
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


class _OneBadEvent:
    """A client whose budget watch sends one event the tracker cannot apply (no name),
    then, re-listed, a healthy watch that stays open until stopped."""

    def __init__(self) -> None:
        self.watches = 0
        self.lists = 0
        self.stop = threading.Event()

    def list_budgets(self) -> tuple[list[dict[str, Any]], str]:
        self.lists += 1
        return [], str(self.lists)

    def watch_budgets(self, version: str, timeout: int, streams: Any) -> Iterator[dict[str, Any]]:
        self.watches += 1
        if self.watches == 1:
            yield {"type": "ADDED", "object": {"metadata": {"namespace": "shop"}}}
        while not self.stop.wait(0.05):
            yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": version}}}


def test_budget_watch_recovered_from_an_unexpected_error__synced_again() -> None:
    """An unexpected error sets `error` and re-lists; once re-listed and watching, the
    tracker is `synced` again: else Evictions._fallback paces every budget refusal on
    the failure backoff (0.25-4 s) instead of RETRY_WATCHED (15-30 s), for the rest
    of the drain."""
    kube = _OneBadEvent()
    tracker = BudgetTracker(kube, cond=threading.Condition())  # type: ignore[arg-type]
    tracker.start([], "0")
    try:
        until = time.monotonic() + 5
        while kube.watches < 2 and time.monotonic() < until:
            time.sleep(0.05)
        time.sleep(0.2)
        assert kube.lists >= 1 and kube.watches >= 2, "re-listed and watching again"
        assert tracker.synced, f"re-listed and watching, yet not synced: error={tracker.error!r}"
    finally:
        kube.stop.set()
        tracker.stop()
