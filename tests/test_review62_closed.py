"""Review 62: a scheduled change closed while an invocation of its drain ran. The
close cannot release a node under a live drain (its guard would cordon it again),
so it leaves it; the invocation then ends, after the close, and hands over. The
next one finds EC2 listing the change's window over and stopped there: the node was
left cordoned for a change that is over, and the notice said "left alone (event
older than its start)"."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from email.utils import parsedate_to_datetime

import pytest
from test_review60_ec2 import (
    TOPIC,
    _guarded,
    _invoke,
    _node,
    _record,
    close_change,
    published,
    world,
)
from test_review62_redelivery import _set_record, queued

from awssim.instances import schedule_events
from drainer.k8s.cordon import DRAINING
from testbed import World

__all__ = ["published", "world"]


def _closed_mid_invocation(
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    listed: Callable[[datetime], list[dict[str, object]]],
) -> tuple[str, dict]:
    """The chain's first invocation handed over; the close came while it ran (its
    record said draining then: the close released the node unless EC2 listed another
    event for it), and it ended after the close, writing its end record before its
    watch saw a release; EC2 lists `listed(window)` for the instance."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    update = world.scheduled_change([instance], starts_in=600)
    first = _invoke(world, monkeypatch, update, lambda_seconds=10.0)
    assert first["result"] == "handed_over", first
    ended = _record(world, node)
    window = parsedate_to_datetime(update["detail"]["startTime"])
    schedule_events(world.aws.account_id, world.region, instance, listed(window))
    _set_record(world, node, phase=DRAINING, since=int(time.time()) - 5)
    close_change(world, monkeypatch, update)
    # The drain's end record, cordoning the node again with it (record_end, the node
    # open): written before the drain's watch saw the release.
    _set_record(world, node, **{**ended, "at": int(time.time()) + 1})
    world.cluster.client.patch("Node", node, {"spec": {"unschedulable": True}})
    return node, queued(world)


def _cancelled(window: datetime) -> list[dict[str, object]]:
    return [{"Code": "instance-retirement", "Description": "[Canceled] ", "NotBefore": window}]


def test_change_cancelled_while_its_drain_ran__the_next_invocation_releases_the_node(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    node, marked = _closed_mid_invocation(world, monkeypatch, _cancelled)
    published.clear()

    later = _invoke(world, monkeypatch, marked, lambda_seconds=10.0, NOTIFICATION_TOPIC_ARN=TOPIC)

    assert later["result"] == "released", later
    assert not _node(world, node)["spec"].get("unschedulable"), "cordoned for a change that is over"
    assert not _record(world, node)
    assert not world.aws.pending_invocations(), "the chain ends"
    (subject, text), *_ = published or [("", "")]
    assert "released" in subject and "older than its start" not in subject, published
    assert "over" in text, text


def test_window_moved_while_its_drain_ran__the_old_chain_ends__the_node_stays_for_the_new_window(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EC2 cancelled the old window and scheduled the change again later: the node
    stays cordoned for it (the update's own drain comes), and the old chain ends."""

    def moved(window: datetime) -> list[dict[str, object]]:
        later = window.replace(year=window.year + 1)
        again = {"Code": "instance-retirement", "Description": "moved", "NotBefore": later}
        return [*_cancelled(window), again]

    node, marked = _closed_mid_invocation(world, monkeypatch, moved)
    assert _node(world, node)["spec"].get("unschedulable"), "the close kept it for the new window"

    later = _invoke(world, monkeypatch, marked, lambda_seconds=10.0)

    assert later["result"] != "released", later
    assert _node(world, node)["spec"].get("unschedulable"), "kept for the new window"
    assert not world.aws.pending_invocations(), "the old chain ends"


def test_an_update_after_the_close__its_notice_does_not_call_it_older_than_its_start(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """An update delivered after the change's close, EC2 listing its window canceled:
    left alone, and its notice was titled "event older than its start", the words for
    an event about an earlier life of the instance, which this is not."""
    instance = world.instance_ids[0]
    update = world.scheduled_change([instance], starts_in=5 * 86400, age=3600)
    close_change(world, monkeypatch, update)
    window = parsedate_to_datetime(update["detail"]["startTime"])
    event = {"Code": "instance-retirement", "Description": "[Canceled] ", "NotBefore": window}
    schedule_events(world.aws.account_id, world.region, instance, [event])
    published.clear()

    late = _invoke(world, monkeypatch, update, NOTIFICATION_TOPIC_ARN=TOPIC)

    assert late["result"] == "skipped", late
    ((subject, text),) = published
    assert "older than its start" not in subject and "late event" in subject, subject
    assert "after the change's close" in text, text
