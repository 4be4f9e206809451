"""Review 62, second look: what 027a436 (a scheduled change's event delivered again
ends `redelivered`) still gets wrong."""

from __future__ import annotations

import pytest
from test_review60_ec2 import TOPIC, _invoke, _record, published, world
from test_review62_redelivery import _first, queued

from drainer.lifecycle.ec2_handover import HANDED_OVER
from testbed import World

__all__ = ["published", "world"]


def test_a_redelivery_with_notify_on_start__no_start_notice_for_a_drain_that_never_starts(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """NotifyOnStart=true. ec2_events.handle publishes the start notice before the
    drain (so_far is None for any unmarked delivery), and only the runner then finds
    the delivery a duplicate. EventBridge's second delivery of the change's event
    so tells the operator "drain started" for the node a second time, then ends
    `redelivered` with no end notice: two starts, one end, for one drain, the second
    'start' of a drain that never ran (docs/operations.md says the redelivery ends
    'with no notice'). Lambda's queue running the first invocation twice does the
    same."""
    env = {"NOTIFICATION_TOPIC_ARN": TOPIC, "NOTIFY_ON_START": "true"}
    _, update = _first(world, monkeypatch)
    published.clear()

    again = _invoke(world, monkeypatch, update, lambda_seconds=10.0, **env)

    assert again["result"] == "redelivered", again
    assert published == [], "a delivery left to the drain under way tells nothing"


def test_a_hand_over_whose_mark_does_not_read__is_not_ended_as_a_redelivery(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """A hand-over whose mark does not read (cut short, or written by another version)
    counts as no mark: SoFar.of returns None, and ec2_events.drain records it as step
    0. The invocation before it (step 0, another request) handed over a second ago,
    so redelivered() takes the chain's own next step for EventBridge's duplicate and
    ends it `redelivered`: nothing drains on, no invocation is queued, no notice. The
    operator sees the node cordoned, its budget-held pod still on it, a log line
    saying the node is 'left to that drain' - a drain that no longer exists - and the
    pod dies with the instance at the window. Before 027a436 such a hand-over drained
    on (as a fresh drain) and handed over in turn."""
    node, _ = _first(world, monkeypatch)
    marked = queued(world)
    mark = dict(marked[HANDED_OVER])
    del mark["started_at"]  # cut short: the mark no longer reads
    marked[HANDED_OVER] = mark
    assert _record(world, node)["delivery"]["step"] == 0

    later = _invoke(world, monkeypatch, marked, lambda_seconds=10.0)

    assert later["result"] != "redelivered", later
    assert world.aws.pending_invocations(), "the chain goes on"
