"""Two deliveries of one event that both read the node before either cordons it.

EventBridge delivers an event at least once, and Lambda's queue may hand an
invocation over twice. The runner decides from the node it read (the record of a
drain under way: drainer/lifecycle/redelivered.py, live.py); the engine cordons
later, after the forecast (up to 5 s). A second delivery whose read came before the
first's cordon drained beside it: two chains of invocations, two start notices, two
end notices for one change. Now the cordon begins only on the record the decision was
made on, and its patch carries the version it read: the loser of the race looks
again and is left to the winner's drain."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from realapi import ApiFront, front_kube
from support.clock import FakeClock
from support.said import said
from test_drain import NODE, Settling, admin, place
from test_guard import _drain, clock, front, sim
from test_review60_ec2 import TOPIC, _guarded, _invoke, _node, _record, published, world

from drainer.engine.drain import Drain
from drainer.engine.guard import BEGIN_TRIES
from drainer.engine.options import DrainOptions
from drainer.errors import KubeConflict, RecordChanged
from drainer.k8s.cordon import DRAINING, PROGRESS_ANNOTATION, ProgressRecord
from drainer.lifecycle import live, notices, runner
from drainer.lifecycle.events_ec2 import Ec2Kind
from drainer.outcome import Outcome
from kubesim import KubeSim
from testbed import World
from testbed import workloads as objects
from testbed import workloads as w
from testbed.world import place_on, pods_on

__all__ = ["clock", "front", "published", "said", "sim", "world"]


def _other_drain(event: str) -> dict[str, Any]:
    """The record another delivery's drain of `event` writes as it cordons."""
    now = int(time.time())
    return {
        "phase": DRAINING,
        "trigger": str(Ec2Kind.SCHEDULED_CHANGE),
        "delivery": {"event": event, "request": "the-other-delivery", "step": 0},
        "since": now,
        "until": now + 600,
        "added": ["cordon"],
    }


def _at_each_look(monkeypatch: pytest.MonkeyPatch, act: Callable[[int], None]) -> None:
    """`act(n)` as the runner begins its n-th look for a drain under way
    (wait_for_live_drain), after its read of the node: what another writer does then
    lands between this delivery's look and its cordon."""
    real_wait = runner.wait_for_live_drain
    looks = [0]

    def looking(*args: Any, **kwargs: Any) -> Any:
        looks[0] += 1
        act(looks[0])
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(runner, "wait_for_live_drain", looking)


def _notified(world: World, monkeypatch: pytest.MonkeyPatch, event: dict[str, Any]) -> Any:
    """The event's invocation, with start and end notices on."""
    env = {"NOTIFICATION_TOPIC_ARN": TOPIC, "NOTIFY_ON_START": "true"}
    return _invoke(world, monkeypatch, event, lambda_seconds=10.0, **env)


def _cordoned_by(record: dict[str, Any]) -> dict[str, Any]:
    annotations = {PROGRESS_ANNOTATION: json.dumps(record)}
    return {"metadata": {"annotations": annotations}, "spec": {"unschedulable": True}}


def test_the_other_delivery_cordons_after_this_ones_look__left_to_its_drain(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """The runner read the node with no record; the other delivery's drain cordons it
    before this one's cordon. This one is left to that drain: no eviction (no budget
    holds the pod: a drain would have taken it), no chain of its own, no start notice,
    the other's record as it wrote it."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 1, grace=5)])
    before = _pods(world, node)
    change = world.scheduled_change([instance], starts_in=600)
    other = _other_drain(change["id"])
    raced: list[int] = []

    def the_other_cordons_meanwhile(look: int) -> None:
        if look == 1:
            raced.append(look)
            world.cluster.client.patch("Node", node, _cordoned_by(other))

    _at_each_look(monkeypatch, the_other_cordons_meanwhile)

    again = _notified(world, monkeypatch, change)

    assert raced, "the race was never run"
    assert again["result"] == "redelivered", again
    assert _record(world, node) == other, "the other drain's record as it wrote it"
    assert not world.aws.pending_invocations(), "no second chain"
    assert published == [], "no start notice for a drain this delivery never ran"
    assert _pods(world, node) == before, "this delivery evicted"
    assert _node(world, node)["spec"].get("unschedulable")


def test_nothing_changed_since_the_look__the_start_notice_goes_once_the_node_is_cordoned(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """The start notice waits for the cordon (the drain is this invocation's then),
    and goes once."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    change = world.scheduled_change([instance], starts_in=600)
    recorded = notices.publish  # the `published` fixture's
    cordoned: list[bool] = []

    def publish(sns: Any, topic: str, notice: notices.Notice) -> bool:
        cordoned.append(bool(_node(world, node)["spec"].get("unschedulable")))
        return recorded(sns, topic, notice)

    monkeypatch.setattr(notices, "publish", publish)

    first = _notified(world, monkeypatch, change)

    assert first["result"] == "handed_over", first
    assert len(published) == 1, published  # the start; a hand-over sends no end notice
    assert cordoned == [True], "the start notice went before the cordon"


class _Meanwhile:
    """A Kube whose read of the node is followed, before the cordon's write, by another
    writer's patch of it (`patch(n)` for the n-th): the first read's only, or `every`
    read's."""

    def __init__(
        self, sim: KubeSim, patch: Callable[[int], dict[str, Any]], *, every: bool = False
    ):
        self.sim, self.patch, self.every, self.writes = sim, patch, every, 0

    def wrap(self, kube: Any) -> Any:
        real_get = kube.get_node

        def get_node(name: str) -> Any:
            node = real_get(name)
            if self.every or not self.writes:
                self.writes += 1
                admin(self.sim).patch("Node", NODE, self.patch(self.writes))
            return node

        kube.get_node = get_node
        return kube


def test_another_drains_record_written_between_the_cordons_read_and_write__not_overwritten(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """The cordon's patch carries the version it read: the other's write makes it a
    409, the node is read again, and its record is not the one the caller decided on:
    RecordChanged, nothing written, nothing evicted."""
    place(sim, objects.pod("web-0", node_name=NODE))
    other = _other_drain("e-1")
    record = ProgressRecord(str(Ec2Kind.SCHEDULED_CHANGE), judged=sim.get("Node", NODE))

    with pytest.raises(RecordChanged, match="changed since it was read"):
        _drain(front, clock, record, 60, _Meanwhile(sim, lambda _: _cordoned_by(other)).wrap)

    annotations = sim.get("Node", NODE)["metadata"]["annotations"]
    assert json.loads(annotations[PROGRESS_ANNOTATION]) == other
    assert [r.status for r in front.requests("PATCH", f"/nodes/{NODE}$")] == [409]
    assert not front.requests("POST", "/eviction$")
    assert not sim.get("Pod", "web-0", "default")["metadata"].get("deletionTimestamp")


def test_a_label_written_between_the_cordons_read_and_write__cordoned_on_the_next_read(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """A write that leaves the record alone (a label, a kubelet's status) costs one
    more read: the drain cordons and drains, and the label stays."""
    place(sim, objects.pod("web-0", node_name=NODE))
    record = ProgressRecord(judged=sim.get("Node", NODE))

    engine = _drain(front, clock, record, 60, _Meanwhile(sim, lambda _: _labelled("b")).wrap)

    assert engine.report.outcome == Outcome.DRAINED
    node = sim.get("Node", NODE)
    assert node["metadata"]["labels"]["team"] == "b"
    assert json.loads(node["metadata"]["annotations"][PROGRESS_ANNOTATION])["phase"] == "drained"
    cordons = [r for r in front.requests("PATCH", f"/nodes/{NODE}$") if b"unschedulable" in r.body]
    assert [r.status for r in cordons][:2] == [409, 200], [r.status for r in cordons]


def test_the_record_changes_before_every_cordon__said__and_the_last_look_drains_beside_it(
    world: World, monkeypatch: pytest.MonkeyPatch, said: list[str]
) -> None:
    """Another writer rewrites the record between each look and each cordon: after
    RECORD_TRIES looks a warning says so and the next drains without the check, beside
    that writer, as before the check (a terminate hook's drain ending failed would
    abandon the instance with its pods)."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 1, grace=5)])
    change = world.scheduled_change([instance], starts_in=600)
    written: list[dict[str, Any]] = []
    long_ago = int(time.time()) - 3600

    def rewritten_each_time(look: int) -> None:
        written.append({"phase": "drained", "at": long_ago - look})  # each its own
        world.cluster.client.patch("Node", node, _cordoned_by(written[-1]))

    _at_each_look(monkeypatch, rewritten_each_time)

    ran = _invoke(world, monkeypatch, change, lambda_seconds=10.0)

    assert ran["result"] == "drained", ran
    assert len(written) == runner.RECORD_TRIES + 1
    assert any("changed before each of 3 cordons" in line for line in said), said
    assert _record(world, node)["phase"] == "drained"
    assert _record(world, node)["delivery"]["event"] == change["id"], "this drain's record"
    assert not _pods(world, node), "drained"


def _pods(world: World, node: str) -> list[tuple[str, Any]]:
    return sorted(
        (p["metadata"]["name"], p["metadata"].get("deletionTimestamp"))
        for p in pods_on(world.cluster, node)
    )


def test_a_followed_drain_ends_with_time_left__this_one_drains_on__one_look_enough(
    world: World, monkeypatch: pytest.MonkeyPatch, said: list[str]
) -> None:
    """The terminate hook's event finds a rebalance's drain under way and waits for it;
    it ends timed out (cut to its one invocation) with this drain's time left, so this
    one drains on. Its cordon judges the record as the wait last read it (the other's
    end), not the one it began waiting on: no second look, no second forecast."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 1, grace=5)])
    now = int(time.time())
    rebalance = {
        "phase": DRAINING,
        "trigger": str(Ec2Kind.REBALANCE),
        "since": now,
        "until": now + 60,
        "added": ["cordon"],
    }
    world.cluster.client.patch("Node", node, _cordoned_by(rebalance))
    monkeypatch.setattr(live, "LIVE_DRAIN_POLL_SECONDS", 0.05)
    ended = {**rebalance, "phase": "timed_out", "at": now}
    ends = threading.Timer(0.3, world.cluster.client.patch, ("Node", node, _cordoned_by(ended)))
    # after this invocation's look, which found the rebalance under way
    _at_each_look(monkeypatch, lambda look: ends.start() if look == 1 else None)
    event = world.terminate(instance)

    try:
        ran = _invoke(world, monkeypatch, event)
    finally:
        ends.cancel()

    text = "\n".join(said)
    assert ran["result"] == "drained", ran
    assert "waiting for it instead of starting another" in text
    assert "draining here until this drain's deadline" in text
    assert "changed since it was read" not in text, "a second look"
    assert not _pods(world, node)


def _labelled(team: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"team": team}}}


def test_the_node_changes_before_every_cordon__refused_not_lost__nothing_written(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """Every write of the cordon refused (409: the node changed since its read, each
    time): after BEGIN_TRIES the conflict is raised (the runner's drain ends failed,
    the CLI's says so), and the drain does not claim a cordon that may have taken: a
    409 is a refusal, not an answer lost."""
    place(sim, objects.pod("web-0", node_name=NODE))
    kube = _Meanwhile(sim, lambda n: _labelled(f"b{n}"), every=True).wrap(
        front_kube(front, sleep=clock.sleep)
    )
    engine = Drain(
        kube, NODE, DrainOptions(), record=ProgressRecord(), waits=Settling(clock, front)
    )
    try:
        with pytest.raises(KubeConflict):
            engine.run(clock() + 60)
    finally:
        kube.close()

    assert not engine.ctx.cordon_sent, "a refused cordon said to be maybe cordoned"
    statuses = [r.status for r in front.requests("PATCH", f"/nodes/{NODE}$")]
    assert statuses == [409] * BEGIN_TRIES, statuses
    node = sim.get("Node", NODE)
    assert not node["spec"].get("unschedulable")
    assert PROGRESS_ANNOTATION not in (node["metadata"].get("annotations") or {})
