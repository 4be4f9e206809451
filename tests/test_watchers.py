"""BudgetTracker lets as many refused evictions retry as a budget change allows,
not every waiter at once; PodTracker's idea of "gone"."""

from __future__ import annotations

import threading
import time
from typing import Any
from unittest.mock import create_autospec

from drainer.kube import Kube
from drainer.watchers import BudgetTracker, PodTracker


def budget(allowed: int, version: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": version},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": allowed},
    }


def tracker_with(allowed: int) -> BudgetTracker:
    tracker = BudgetTracker(create_autospec(Kube, instance=True))
    with tracker.cond:
        tracker._replace([budget(allowed, "1")])
        tracker._changed()
    return tracker


def change(tracker: BudgetTracker, allowed: int, version: str) -> None:
    with tracker.cond:
        tracker._apply("MODIFIED", budget(allowed, version))
        tracker._changed()


def start_waiters(
    tracker: BudgetTracker, count: int, timeout: float
) -> tuple[list[float], list[threading.Thread]]:
    seen = tracker.seen("shop", "web")
    released: list[float] = []
    lock = threading.Lock()

    def wait() -> None:
        if tracker.wait_for_room("shop", "web", seen, timeout):
            with lock:
                released.append(time.monotonic())

    threads = [threading.Thread(target=wait) for _ in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        with tracker.cond:
            if len(tracker._queues.get(("shop", "web"), [])) == count:
                break
        time.sleep(0.001)
    return released, threads


def test_budget_allows_one__only_one_of_five_waiters_retries() -> None:
    tracker = tracker_with(0)
    released, threads = start_waiters(tracker, 5, timeout=1.0)

    change(tracker, 1, "2")
    time.sleep(0.1)

    assert len(released) == 1
    change(tracker, 2, "3")
    time.sleep(0.1)
    assert len(released) == 3
    for thread in threads:
        thread.join()
    assert len(released) == 3, "the rest fall back to their timeout, not a stampede"


def test_budget_unchanged__waiters_wait_for_their_timeout() -> None:
    tracker = tracker_with(1)  # allows, but the waiters were refused at this version
    started = time.monotonic()
    released, threads = start_waiters(tracker, 2, timeout=0.2)
    for thread in threads:
        thread.join()

    assert released == []
    assert time.monotonic() - started >= 0.2


def test_budget_deleted__everyone_retries() -> None:
    tracker = tracker_with(0)
    released, threads = start_waiters(tracker, 3, timeout=1.0)

    with tracker.cond:
        tracker._apply("DELETED", budget(0, "2"))
        tracker._changed()
    for thread in threads:
        thread.join()

    assert len(released) == 3


def pod(name: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "shop", "uid": uid}}


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
    from kubesim import testing as k

    with KubeSim() as sim:
        sim.apply(
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
                k.pdb("web-a", {"app": "web"}, namespace="shop", max_unavailable=1),
                k.pdb("web-b", {"tier": "front"}, namespace="shop", max_unavailable=1),
                k.pdb("db", {"app": "db"}, namespace="shop", max_unavailable=1),
                k.pdb("web-c", {"app": "web"}, namespace="default", max_unavailable=1),
            ]
        )
        kube = Kube.for_cluster(sim.url, sim.ca_pem, _Token(sim.admin_token))
        tracker = BudgetTracker(kube)
        assert not tracker.listed
        tracker.start()
        try:
            assert tracker.wait_listed(5.0)
            web = {
                "metadata": {
                    "name": "web-0",
                    "namespace": "shop",
                    "labels": {"app": "web", "tier": "front"},
                }
            }

            assert tracker.matching(web) == ["shop/web-a", "shop/web-b"]
        finally:
            tracker.stop()
            kube.close()


def test_budget_tracker__wait_listed_gives_up_at_its_timeout() -> None:
    tracker = BudgetTracker(create_autospec(Kube, instance=True))  # never started
    started = time.monotonic()

    assert not tracker.wait_listed(0.05)
    assert time.monotonic() - started >= 0.05


class _Token:
    def __init__(self, token: str) -> None:
        self._token = token

    def token(self) -> str:
        return self._token

    def invalidate(self) -> None:
        pass
