"""Review 62 (third look): a chain step that finds its change over in EC2 and
releases the node (late.over_in_ec2_mid_chain, runner.released_over)."""

from __future__ import annotations

import time

import pytest
from test_review60_ec2 import TOPIC, _invoke, _node, _record, published, world
from test_review62_closed import _cancelled, _closed_mid_invocation
from test_review62_redelivery import _set_record

from drainer.k8s.cordon import DRAINING
from testbed import World

__all__ = ["published", "world"]


def test_dry_run_step_does_not_say_released_while_the_node_stays_cordoned(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """DRY_RUN=true: release() only dry-runs its patch, so the node stays cordoned,
    yet the run ends 'released' and the notice says the node was released: an
    operator trusting the notice believes the node is schedulable again."""
    node, marked = _closed_mid_invocation(world, monkeypatch, _cancelled)
    published.clear()

    later = _invoke(
        world, monkeypatch, marked, lambda_seconds=10.0, NOTIFICATION_TOPIC_ARN=TOPIC,
        DRY_RUN="true",
    )  # fmt: skip

    assert _node(world, node)["spec"].get("unschedulable"), "a dry run changed the node"
    said = " ".join(f"{s} {t}" for s, t in published) + " " + str(later.get("message", ""))
    assert later["result"] != "released" or "dry run" in said.lower(), (later, published)


def test_dead_draining_record_of_this_change_does_not_keep_the_node_cordoned_silently(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """A step of the chain killed mid-drain (Lambda timeout; its async retry carries
    the same mark) left this change's record 'draining', its deadline long past.
    released_over takes any 'draining' phase as a live drain and ends 'stale', with
    no notice at all (before, the stale-event notice told of it): the node stays
    cordoned for a change that is over and nobody is told."""
    node, marked = _closed_mid_invocation(world, monkeypatch, _cancelled)
    hour_ago = int(time.time()) - 3600
    _set_record(world, node, phase=DRAINING, since=hour_ago - 600, until=hour_ago)
    published.clear()

    later = _invoke(world, monkeypatch, marked, lambda_seconds=10.0, NOTIFICATION_TOPIC_ARN=TOPIC)

    released = not _node(world, node)["spec"].get("unschedulable")
    assert released or published, (later, _record(world, node))


def test_released_end_message_does_not_also_say_the_node_is_left_alone(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """released_over prefixes over_in_ec2's Skip reason, which ends "its node is left
    alone", to "... is released": the end line and the notice say both that the node
    was left alone and that it was released."""
    _, marked = _closed_mid_invocation(world, monkeypatch, _cancelled)
    published.clear()

    later = _invoke(world, monkeypatch, marked, lambda_seconds=10.0, NOTIFICATION_TOPIC_ARN=TOPIC)

    assert later["result"] == "released", later
    said = str(later.get("message", "")) + " ".join(t for _, t in published)
    assert "left alone" not in said, said
