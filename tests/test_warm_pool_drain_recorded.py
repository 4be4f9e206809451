"""An instance back from the warm pool whose node's record still says `draining`
for the terminate hook's drain into the pool, begun before the launch: that drain
may run on after its action ended (scale_in runs the drain to its end whatever the
heartbeat finds), so the launch must not release the node under it (the drain's
guard would cordon it again and evict what lands on it since), and must not leave
it cordoned unsaid either (launch_release.DRAIN_RECORDED: a notice)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from realapi import ApiFront, budget_blocks_429, front_kube
from support.clock import FakeClock
from test_drain import Settling

from drainer.engine.drain import Drain
from drainer.engine.options import DrainOptions
from drainer.k8s.cordon import PROGRESS_ANNOTATION, ProgressRecord
from drainer.k8s.kube import Kube
from drainer.lifecycle import launch_release
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER, WARM_POOL_NAME
from drainer.outcome import Outcome
from kubesim import KubeSim
from kubesim import testing as k
from testbed import workloads as objects

NODE = "n1"


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim() as running:
        running.apply([objects.node(NODE), objects.node("n2")])
        yield running


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(time.time())


@pytest.fixture
def front(sim: KubeSim, clock: FakeClock) -> Iterator[ApiFront]:
    running = ApiFront(sim, clock)
    yield running
    running.close()


def _place(sim: KubeSim, *placed: dict[str, Any]) -> None:
    sim.apply(list(placed))
    sim.settle()
    k.eventually(
        lambda: all(
            (p.get("status") or {}).get("phase") == "Running"
            for p in sim.list("Pod")
            if p["spec"].get("nodeName") == NODE
        ),
        what="pods running",
    )


def test_warm_pool_return__a_terminate_drain_still_running__released_then_recordoned_unsaid(
    sim: KubeSim, front: ApiFront, clock: FakeClock, kube: Kube
) -> None:
    """The terminate hook's drain into the pool runs on after its action timed out (a
    budget holds its last pod). The instance is back; its launch (begun after the
    drain began) releases the node and says it schedulable. The drain, still running,
    cordons it again and ends cordoning it: the node is InService and cordoned, while
    the launch said it was released."""
    _place(
        sim,
        objects.budget("web", {"app": "web"}, min_available=1),
        objects.pod("web-0", node_name=NODE, labels={"app": "web"}),
    )
    began = clock() + 1  # the launch's event: the instance back, after the drain began
    said: list[launch_release.Back] = []

    def instance_back() -> None:
        if not said:  # the launch hook's release, in another invocation, 30 s on
            said.append(launch_release.release_back(kube, NODE, "back", began, lambda: began + 30))

    refused = budget_blocks_429("web", 1, 1)
    front.script("POST", "/namespaces/default/pods/web-0/eviction$", refused, then=instance_back)
    front.script("POST", "/namespaces/default/pods/web-0/eviction$", refused, count=None)
    drain_kube = front_kube(front, sleep=clock.sleep)
    record = ProgressRecord(TERMINATE_HOOK_TRIGGER, WARM_POOL_NAME)
    engine = Drain(drain_kube, NODE, DrainOptions(), record=record, waits=Settling(clock, front))
    try:
        report = engine.run(clock() + 60)
    finally:
        drain_kube.close()

    (back,) = said
    assert report.outcome == Outcome.TIMED_OUT
    node = sim.get("Node", NODE)
    phase = json.loads(node["metadata"]["annotations"][PROGRESS_ANNOTATION])["phase"]
    assert back.not_released or not node["spec"].get("unschedulable"), (
        f"the launch said {back.message!r} (released {back.released}); the drain still "
        f"running cordoned the node again ({report.recordons} re-cordon(s), record "
        f"{phase!r}): InService, cordoned, and nothing says so"
    )


def test_warm_pool_return__a_terminate_drain_still_running__evicts_what_lands_after_the_release(
    sim: KubeSim, front: ApiFront, clock: FakeClock, kube: Kube
) -> None:
    """The same: once the launch released the node (and told the group CONTINUE), the
    scheduler puts a pod on it; the drain still running, into a warm pool the
    instance has left, evicts it. This one has no controller: EVICT_UNREPLICATED_PODS
    (default true: "the node is going away, so they die either way") evicts it, and
    nothing recreates it, on a node that is not going away. (TIMEOUT_POLICY=force
    would delete a budgeted one at the deadline.)"""
    _place(
        sim,
        objects.budget("web", {"app": "web"}, min_available=1),
        objects.pod("web-0", node_name=NODE, labels={"app": "web"}),
    )
    began = clock() + 1
    said: list[launch_release.Back] = []

    def instance_back() -> None:
        if not said:
            said.append(launch_release.release_back(kube, NODE, "back", began, lambda: began + 30))
            late = objects.pod("late-0", node_name=NODE)  # the scheduler's, on a node released
            sim.apply([late])

    refused = budget_blocks_429("web", 1, 1)
    front.script("POST", "/namespaces/default/pods/web-0/eviction$", refused, then=instance_back)
    front.script("POST", "/namespaces/default/pods/web-0/eviction$", refused, count=None)
    drain_kube = front_kube(front, sleep=clock.sleep)
    record = ProgressRecord(TERMINATE_HOOK_TRIGGER, WARM_POOL_NAME)
    engine = Drain(drain_kube, NODE, DrainOptions(), record=record, waits=Settling(clock, front))
    try:
        engine.run(clock() + 60)
    finally:
        drain_kube.close()

    (back,) = said
    evicted = front.requests("POST", "/namespaces/default/pods/late-0/eviction$")
    lost = not any(p["metadata"]["name"] == "late-0" for p in sim.list("Pod", "default"))
    assert back.not_released or not evicted, (
        f"the launch said {back.message!r}; a pod placed on the node after that was "
        f"evicted {len(evicted)} time(s) by the drain into the pool, still running "
        f"(gone for good, no controller: {lost})"
    )


def test_until_ready__a_fatal_error_at_the_straddling_last_look__failed_not_not_joined(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The look added after one that straddled the limit (naming every lack) ends
    `failed` on a fatal error, as the wait's own looks do: not `not_joined` from the
    look before (LaunchNotJoined, and advice to release once Ready)."""
    from drainer import aws
    from drainer.errors import KubeUnauthorized
    from drainer.lifecycle import joined, launch
    from drainer.lifecycle.job import Tools
    from drainer.lifecycle.settings import Settings

    start = 1_790_000_000.0
    clock = FakeClock(start)
    looks: list[bool] = []

    def look(*_: Any, every: bool = True, **__: Any) -> joined.Look:
        looks.append(every)
        if len(looks) == 1:  # begun before the limit, ended past it
            clock.advance(2.0)
            return joined.Look("n1", "u", "node n1 to lose the taint x", "taint x")
        raise KubeUnauthorized("401: the token was refused", 401)

    monkeypatch.setattr(joined, "look", look)
    clients = aws.AwsClients(None, None, None, lambda: None)
    tools = Tools(Settings(), clients, lambda *_: None, clock, clock.sleep)  # type: ignore[arg-type]
    identity = aws.NodeIdentity("i-0123456789abcdef0", "n1", "us-east-1a")

    joining = launch._until_ready(None, identity, tools, start + 1.0, start)  # type: ignore[arg-type]

    assert looks == [False, True], looks
    assert joining.result == "failed", (joining.result, joining.message)
