"""PodTracker's idea of "gone"; BudgetTracker names the budgets that select a pod."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any
from unittest.mock import create_autospec

import pytest
from realapi import StaticToken, status_body
from support.views import wait_listed

from drainer import errors
from drainer.backoff import Backoff
from drainer.engine.watchers import BudgetTracker, PodTracker
from drainer.k8s.kube import Kube
from drainer.k8s.status import translate
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


class _Instant:
    """A client whose pod watch ends (or says 410) the moment it is opened; or, with
    `events`, after sending that many bookmarks."""

    def __init__(self, gone: bool, events: int = 0) -> None:
        self.gone = gone
        self.events = events
        self.lists = 0
        self.watches = 0

    def list_pods_on_node(self, node: str, selector: str = "") -> tuple[list[Any], str]:
        self.lists += 1
        return [], "7"

    def watch_pods_on_node(self, *args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.watches += 1
        for _ in range(self.events):
            yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "8"}}}
        if self.gone:
            raise errors.KubeGone("watch pods: too old resource version", 410)


@pytest.mark.parametrize("gone", [False, True], ids=["closes-at-once", "410-at-once"])
def test_watch_ending_at_once__reopened_with_a_pause__not_in_a_tight_loop(gone: bool) -> None:
    """_Tracker._run reset its failures after a watch that ended "normally" and
    re-listed at once after a 410, with no pause either way: a server (or proxy) that
    ends every watch at once got thousands of requests a second from each tracker.
    Both are paced by the relist backoff now, as client-go's reflector does (a watch
    shorter than a second with no event is an error)."""
    kube = _Instant(gone)
    tracker = PodTracker(kube, "node-1")  # type: ignore[arg-type]
    tracker.start([], "1")
    time.sleep(1.0)
    tracker.stop()

    assert kube.watches + kube.lists <= 20, (
        f"{kube.watches} watches and {kube.lists} lists in one second"
    )


def test_watch_with_events__reopened_at_once__no_pause() -> None:
    """A watch that brought events and ended (the server's timeout) is re-opened at
    once: the pause is for watches that end at once with nothing, never the normal
    case (here the relist backoff is 5 s: one pause would show)."""
    kube = _Instant(gone=False, events=1)
    tracker = PodTracker(kube, "node-1")  # type: ignore[arg-type]
    tracker.relist = Backoff(first=5.0, cap=5.0, jitter=0.0)
    tracker.start([], "1")
    time.sleep(0.5)
    tracker.stop()

    assert kube.watches >= 3, f"{kube.watches} watches in half a second"


class _Throttled:
    def __init__(self, retry_after: str) -> None:
        self.retry_after = retry_after
        self.lists = 0

    def list_budgets(self) -> tuple[list[Any], str]:
        self.lists += 1
        raise translate(
            429,
            status_body("too many requests, please try again later", 429, "TooManyRequests"),
            {"Retry-After": self.retry_after},
            verb="list",
            resource="poddisruptionbudgets",
            what="list poddisruptionbudgets",
        )


@pytest.mark.parametrize("value", ["inf", "99999999999"])
def test_huge_retry_after__the_tracker_thread_survives(value: str) -> None:
    """status.retry_after took any positive float (`inf`, 1e11); _Tracker._run then
    waited `self._stop.wait(delay)`, which raised OverflowError ("timestamp out of
    range for platform time_t"): the thread died, its view frozen, `error` still None
    (so the drain was not told)."""
    died: list[BaseException | None] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: died.append(args.exc_value)
    kube = _Throttled(value)
    tracker = BudgetTracker(kube)  # type: ignore[arg-type]
    try:
        tracker.start()
        time.sleep(0.5)
        thread = tracker._thread
        assert thread is not None
        assert thread.is_alive() and not died, f"the tracker's thread died: {died!r}"
    finally:
        tracker.stop()
        threading.excepthook = previous


class _Scripted:
    """A client whose pod watch sends `events` and ends."""

    def __init__(self, events: list[tuple[str, Obj]]) -> None:
        self.events = events

    def watch_pods_on_node(self, *args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        for kind, obj in self.events:
            yield {"type": kind, "object": obj}


class _Counting(threading.Condition):
    def __init__(self) -> None:
        super().__init__()
        self.woken: list[str] = []
        self.last = ""

    def notify_all(self) -> None:
        self.woken.append(self.last)
        super().notify_all()


def test_pod_tracker__update_of_a_pod_on_its_way_out_wakes_nobody__any_other_change_does() -> None:
    """On a real API server a pod evicted sends three or four updates before its end,
    and each woke the drain's loop to find nothing to do: some 14 context switches
    a pod where the floor makes 5 (issue 39, item 10). The loop takes such an update
    in at its next turn; what it acts on wakes it at once."""
    leaving = {("shop", "db-0")}
    events = [
        ("MODIFIED", pod("db-0", "u1")),  # evicted: terminating, its containers stop
        ("MODIFIED", pod("web-1", "u2")),  # still to evict: its readiness may matter
        ("MODIFIED", pod("db-0", "u9")),  # a new pod under the name
        ("ADDED", pod("api-2", "u3")),  # new on the node
        ("DELETED", pod("db-0", "u1")),
    ]
    cond = _Counting()
    tracker = PodTracker(
        _Scripted(events),  # type: ignore[arg-type]
        "node-1",
        leaving=lambda key, uid: key in leaving and uid == "u1",
        cond=cond,
    )
    tracker._replace([pod("db-0", "u1"), pod("web-1", "u2")])
    original = tracker._apply

    def apply(kind: str, obj: Obj) -> None:
        cond.last = f"{kind} {obj['metadata']['name']} {obj['metadata']['uid']}"
        original(kind, obj)

    tracker._apply = apply  # type: ignore[method-assign]

    tracker._list_and_watch("1")

    assert cond.woken == [
        "MODIFIED web-1 u2",
        "MODIFIED db-0 u9",
        "ADDED api-2 u3",
        "DELETED db-0 u1",
    ]
    assert tracker.take_changed() == {("shop", "db-0"), ("shop", "web-1"), ("shop", "api-2")}, (
        "the quiet update is still the loop's to take in at its next turn"
    )
