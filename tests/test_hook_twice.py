"""A terminate hook's event delivered twice.

EventBridge delivers an event at least once, and Lambda's queue may hand an
asynchronous invocation to the function more than once (each time in a request of
its own; Lambda's retry of a failed one keeps its request). A second delivery of the
hook's event drained the node beside the first: two heartbeats, two sets of
evictions, two end lines, two end notices and DrainSucceeded counted twice for one
scale-in, and a second chain of hand-overs when the first was long. Now the hook's
drain records which delivery runs it, as a scheduled change's does
(drainer/lifecycle/redelivered.py), and a delivery of the same event in another
request that finds that record fresh is left to that drain: it answers nothing, tells
nothing and evicts nothing. Its start notice waits for its own cordon. And a hook's
drain never waits for a live drain whose deadline is after its own (the instance goes
at the hook's)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from test_review60_ec2 import TOPIC, _guarded, _invoke, _node, _record, published, world
from test_two_deliveries import _at_each_look, _cordoned_by, _pods

from drainer import handler
from drainer.k8s.cordon import DRAINING
from drainer.lifecycle import live, notices
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER
from drainer.lifecycle.handover import HANDOVER_KEY
from testbed import LambdaContext, World
from testbed import workloads as w
from testbed.world import place_on

__all__ = ["published", "world"]


def _notified(world: World, monkeypatch: pytest.MonkeyPatch, event: dict[str, Any]) -> Any:
    env = {"NOTIFICATION_TOPIC_ARN": TOPIC, "NOTIFY_ON_START": "true"}
    return _invoke(world, monkeypatch, event, **env)


def _hook_drain(event: dict[str, Any], *, step: int = 0, phase: str = DRAINING) -> dict[str, Any]:
    """The record another delivery of the hook's `event` writes as it cordons (in its
    own request)."""
    now = int(time.time())
    record = {
        "phase": phase,
        "trigger": TERMINATE_HOOK_TRIGGER,
        "delivery": {"event": event["id"], "request": "the-other-delivery", "step": step},
        "added": ["cordon"],
    }
    record.update({"since": now - 30} if phase == DRAINING else {"since": now - 60, "at": now})
    return record


def _drained_and_answered(world: World, node: str, run: dict[str, Any]) -> None:
    """The invocation drained the node and answered CONTINUE, the one answer given."""
    assert run["result"] == "drained", run
    assert _pods(world, node) == [], "pods left on the node"
    assert [c["LifecycleActionResult"] for c in world.completions()] == ["CONTINUE"]


def _scale_in(world: World) -> tuple[str, list[tuple[str, Any]], dict[str, Any]]:
    """The first instance's node with one serving pod, that pod, and the event of the
    instance's scale-in (its terminate hook)."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 1, grace=5)])
    return node, _pods(world, node), world.terminate(instance)


def _lost_the_race(
    world: World, monkeypatch: pytest.MonkeyPatch, node: str, event: dict[str, Any]
) -> Any:
    """The event's delivery, whose look finds no record, and another delivery's cordon
    (its record) landing between that look and this one's cordon."""
    other = _hook_drain(event)

    def the_other_cordons_meanwhile(look: int) -> None:
        if look == 1:
            world.cluster.client.patch("Node", node, _cordoned_by(other))

    _at_each_look(monkeypatch, the_other_cordons_meanwhile)
    return _notified(world, monkeypatch, event)


def test_delivered_again_while_the_first_drains__left_to_it(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """The first delivery's drain is under way (its record on the node). The second is
    left to it: no eviction (no budget holds the pod, a drain would take it), no
    answer to the Auto Scaling group (the first gives it), no start or end notice."""
    node, before, event = _scale_in(world)
    other = _hook_drain(event)
    world.cluster.client.patch("Node", node, _cordoned_by(other))

    again = _notified(world, monkeypatch, event)

    assert again["result"] == "redelivered", again
    assert "delivered again" in again["message"], again
    assert _pods(world, node) == before, "the second delivery evicted"
    assert _record(world, node) == other, "the first drain's record as it wrote it"
    assert world.completions() == [], "the second delivery answered the lifecycle action"
    assert published == [], "a notice for a drain this delivery never ran"
    assert not world.aws.pending_invocations(), "a chain of its own"


def test_delivered_again_after_the_first_drained__nothing_told_twice(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """The first delivery drained the node and said so; the second, minutes later,
    finds its record `drained`: one end line with DrainSucceeded, one answer, one start
    and one end notice for the scale-in."""
    node, _, event = _scale_in(world)

    first = _notified(world, monkeypatch, event)
    assert first["result"] == "drained", first
    told = list(published)
    assert len(told) == 2, [subject for subject, _ in told]  # the start, the end

    again = _notified(world, monkeypatch, event)

    assert again["result"] == "redelivered", again
    assert published == told, "told again of a drain done once"
    assert len(world.completions()) == 1, world.completions()
    assert _record(world, node)["phase"] == "drained"


def test_delivered_again_mid_chain__the_chains_next_step_drains_on(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """A long drain hands over; the event as EventBridge sent it comes again while
    the chain goes on. It is left to the chain; the chain's next invocation (its own
    request, a later step) drains on to the end and answers CONTINUE."""
    node, _, event = _scale_in(world)
    world.cluster.client.patch("Node", node, _cordoned_by(_hook_drain(event, step=1)))

    again = _notified(world, monkeypatch, event)
    assert again["result"] == "redelivered", again

    handed = json.loads(json.dumps(event))
    handed[HANDOVER_KEY] = {
        "started_at": time.time() - 30,
        "handovers": 2,
        "heartbeats": 1,
        "recorded": True,
    }
    step = _notified(world, monkeypatch, handed)

    _drained_and_answered(world, node, step)


def test_another_events_record__this_hook_drains(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """A record of the hook's drain for another lifecycle action of the instance (an
    event of its own: the instance back from the warm pool, scaled in again) is not
    this event's: it drains."""
    node, _, event = _scale_in(world)
    world.cluster.client.patch(
        "Node", node, _cordoned_by(_hook_drain({"id": "an-earlier-action"}, phase="drained"))
    )

    run = _notified(world, monkeypatch, event)

    _drained_and_answered(world, node, run)


def test_start_notice__after_the_cordon__none_for_a_delivery_that_lost_the_race(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """Both deliveries read the node before either cordoned: this one's look finds no
    record, the other's cordon lands before this one's. This one is left to it and
    sends no start notice (it went before the drain, and so for a drain never run)."""
    node, before, event = _scale_in(world)
    again = _lost_the_race(world, monkeypatch, node, event)

    assert again["result"] == "redelivered", again
    assert published == [], "a start notice for a drain this delivery never ran"
    assert _pods(world, node) == before
    assert _node(world, node)["spec"].get("unschedulable")


def test_start_notice__none_for_an_instance_whose_node_is_gone(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """No drain starts for an instance with no node (gone already, or never joined):
    the end notice says so, and no notice told a drain starting."""
    instance = world.instance_ids[0]
    world.cluster.client.delete("Node", world.nodes[instance])
    event = world.terminate(instance)

    run = _notified(world, monkeypatch, event)

    assert run["result"] == "no_node", run
    assert len(published) == 1, [subject for subject, _ in published]
    assert [c["LifecycleActionResult"] for c in world.completions()] == ["CONTINUE"]


def test_lambdas_retry_of_a_failed_invocation__drains_on(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """Lambda tries a failed invocation again in the same request: the record its
    first try left is its own, and it drains on to the answer."""
    node, _, event = _scale_in(world)
    mine = _hook_drain(event)
    mine["delivery"]["request"] = "the-request"
    world.cluster.client.patch("Node", node, _cordoned_by(mine))
    for key, value in world.env().items():
        monkeypatch.setenv(key, value)
    handler.reset()

    run = handler.lambda_handler(event, LambdaContext(aws_request_id="the-request"))

    _drained_and_answered(world, node, run)


def test_lambdas_retry_of_an_invocation_that_cordoned__no_second_start_notice(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """The first try cordoned the node (and sent NOTIFY_ON_START's notice), then
    failed (an AWS call past botocore's retries); Lambda's retry, the same request,
    drains on from its record and cordoned again: a second "draining" notice for the
    one drain. The end notice only."""
    node, _, event = _scale_in(world)
    mine = _hook_drain(event)
    mine["delivery"]["request"] = "the-request"
    mine["until"] = int(time.time()) + 3600  # its deadline, as the cordon writes it
    world.cluster.client.patch("Node", node, _cordoned_by(mine))
    env = {"NOTIFICATION_TOPIC_ARN": TOPIC, "NOTIFY_ON_START": "true"}
    for key, value in world.env(**env).items():
        monkeypatch.setenv(key, value)
    handler.reset()

    run = handler.lambda_handler(event, LambdaContext(aws_request_id="the-request"))

    _drained_and_answered(world, node, run)
    assert [title for title, _ in published if ": draining " in title] == [], published
    assert len(published) == 1, published


def test_a_real_chain__the_event_again_between_its_steps__left_to_it__the_next_step_drains_on(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """Through the handler: the first invocation runs out of time with a pod its
    budget holds and hands over (the next step queued); the event as EventBridge sent
    it comes again and is left to the chain; the budget lets go, and the chain's next
    step (a request of its own, the step after) drains on and answers CONTINUE."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    event = world.terminate(instance)
    env = {"HANDOVER_MARGIN_SECONDS": "5", "NOTIFICATION_TOPIC_ARN": TOPIC}

    first = _invoke(world, monkeypatch, event, lambda_seconds=7.0, **env)
    assert first["result"] == "handed_over", first
    (step,) = world.aws.pending_invocations()
    assert world.aws.pop_invocation() is not None

    again = _invoke(world, monkeypatch, event, **env)
    assert again["result"] == "redelivered", again

    world.cluster.client.delete("PodDisruptionBudget", "db", "default")
    after = _invoke(world, monkeypatch, step["payload"], **env)

    _drained_and_answered(world, node, after)


def test_hook_following_a_spot_drain__the_start_notice_goes_as_it_follows(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """The hook's drain waits for the drain a spot warning began rather than starting
    another: it never cordons, and its start notice goes as it begins to follow (then
    its end notice), not never."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    now = int(time.time())
    spot = {"phase": DRAINING, "trigger": "spot-interruption", "since": now, "until": now + 2}
    world.cluster.client.patch("Node", node, _cordoned_by(spot))
    monkeypatch.setattr(live, "LIVE_DRAIN_POLL_SECONDS", 0.05)
    monkeypatch.setattr(live, "LIVE_DRAIN_SLACK_SECONDS", 0.5)  # without a notice: no wait
    recorded = notices.publish  # the `published` fixture's

    def publish(sns: Any, topic: str, notice: notices.Notice) -> bool:
        if not published:  # the spot drain ends once the hook follows it
            ended = {**spot, "phase": "drained", "at": int(time.time())}
            world.cluster.client.patch("Node", node, _cordoned_by(ended))
        return recorded(sns, topic, notice)

    monkeypatch.setattr(notices, "publish", publish)

    run = _notified(world, monkeypatch, world.terminate(instance))

    assert run["result"] == "drained", run
    assert len(published) == 2, [subject for subject, _ in published]  # the start, the end
    assert _record(world, node)["trigger"] == "spot-interruption", "the hook drained itself"
    assert [c["LifecycleActionResult"] for c in world.completions()] == ["CONTINUE"]


def test_hook_beside_a_live_drain_whose_deadline_is_after_its_own__drains_itself(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """A scheduled change's drain is under way, its record to its invocation's end ten
    minutes off; the hook's deadline is a minute away (as for a hook delivered late,
    or capped by its GlobalTimeout: here DRAIN_TIMEOUT_SECONDS 60). The other drain
    will not act by the hook's deadline as the hook's must (its critical tier, its
    TIMEOUT_POLICY), so the hook drains the node itself rather than wait to its end."""
    node, _, event = _scale_in(world)
    now = int(time.time())
    change = {
        "phase": DRAINING,
        "trigger": "scheduled-change",
        "since": now - 60,
        "until": now + 600,
        "added": ["cordon"],
    }
    world.cluster.client.patch("Node", node, _cordoned_by(change))
    monkeypatch.setattr(live, "LIVE_DRAIN_POLL_SECONDS", 0.05)
    env = {"HANDOVER_MARGIN_SECONDS": "5", "DRAIN_TIMEOUT_SECONDS": "60"}

    run = _invoke(world, monkeypatch, event, lambda_seconds=8.0, **env)

    _drained_and_answered(world, node, run)
    assert _record(world, node)["trigger"] == TERMINATE_HOOK_TRIGGER


def test_a_hand_over_delivered_twice__the_second_end_line_claims_no_chain_totals(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """A step of a chain (its hand-over, as Lambda's queue sent it) comes in a second
    request while the first runs it. The second is left to it, and its end line says
    so without the chain's totals (evicted, forced, heartbeats): a Logs Insights sum
    over end lines would count the chain's evictions twice."""
    node, before, event = _scale_in(world)
    world.cluster.client.patch("Node", node, _cordoned_by(_hook_drain(event, step=2)))
    handed = json.loads(json.dumps(event))
    handed[HANDOVER_KEY] = {
        "started_at": time.time() - 300,
        "handovers": 2,
        "heartbeats": 3,
        "evicted": 40,
        "forced": 1,
        "recorded": True,
    }

    again = _notified(world, monkeypatch, handed)

    assert again["result"] == "redelivered", again
    assert _pods(world, node) == before, "the second delivery evicted"
    totals = {"evicted_total", "forced_total", "heartbeats_total", "drain_seconds_total"}
    assert not totals & set(again), again
    assert again.get("evicted", 0) == 0, again


def test_a_delivery_that_lost_the_race__says_nothing_of_the_nodes_do_not_disrupt(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The node is annotated do-not-disrupt, which the drain does not honour and says
    so, once its own cordon took: a delivery that read the node before the other's
    cordon, and lost the race to it, says nothing (the other's drain says it)."""
    node, _, event = _scale_in(world)
    world.cluster.client.patch(
        "Node", node, {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}
    )
    again = _lost_the_race(world, monkeypatch, node, event)

    assert again["result"] == "redelivered", again
    said = [line for line in capsys.readouterr().out.splitlines() if "do-not-disrupt=" in line]
    assert said == [], "the warning, by a delivery whose drain never began"
