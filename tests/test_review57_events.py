"""Review 57: how the handler parses and routes what invokes it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_scale_in import kubesim, scene_for  # noqa: F401  (fixtures)

from drainer import handler

LoadEvent = Callable[[str], dict[str, Any]]


@pytest.fixture
def clean_handler(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any], dict[str, Any]]:
    def run(event: Any) -> dict[str, Any]:
        handler.reset()
        return handler.lambda_handler(event, None)

    return run


def test_cloudtrail_event_name_a_list__skipped_not_a_traceback(
    load_event: LoadEvent, clean_handler: Callable[[Any], dict[str, Any]]
) -> None:
    """parse_event promises never to raise (a crash only makes Lambda run the same
    bad event again, then the failed-events queue and its alarm): an Auto Scaling
    API call whose eventName is not a string is a Skip like any other odd field."""
    event = load_event("api-create-auto-scaling-group")
    event["detail"]["eventName"] = ["CreateAutoScalingGroup"]

    result = clean_handler(event)

    assert result["result"] == "skipped"


def test_ec2_event_detail_type_a_list__skipped_not_a_traceback(
    load_event: LoadEvent, clean_handler: Callable[[Any], dict[str, Any]]
) -> None:
    """The same for an event of aws.ec2 whose detail-type is a list."""
    event = load_event("spot-interruption")
    event["detail-type"] = ["EC2 Spot Instance Interruption Warning"]

    result = clean_handler(event)

    assert result["result"] == "skipped"


def test_hand_over_started_within_the_clock_skew_ahead__duration_never_negative(
    scene_for: Callable[..., Any],  # noqa: F811
    kubesim: Any,  # noqa: F811
) -> None:
    """A hand-over whose started_at lies ahead of this invocation's clock (accepted:
    up to 5 minutes of clock skew) makes the end line's drain_seconds_total and the
    notice's Duration negative ("Duration: -250 s", "begun -250 s ago")."""
    import time

    from test_scale_in import CLUSTER, _node

    from drainer.lifecycle import notices, scale_in
    from drainer.lifecycle.events import parse_event
    from drainer.lifecycle.handover import Handover, with_handover
    from drainer.lifecycle.job import Tools
    from drainer.lifecycle.settings import Settings

    scene = scene_for(waited=10)
    _node(kubesim, scene.node_name)
    raw = with_handover(scene.raw_event, Handover(time.time() + 250, 1, 3))
    event = parse_event(raw)
    tools = Tools(Settings(cluster_name=CLUSTER), scene.clients, scene.kube)

    summary = scale_in.handle(event, tools, None, raw_event=raw)

    assert summary["result"] == "drained"
    assert summary["drain_seconds_total"] >= 0, summary["drain_seconds_total"]
    assert "Duration: -" not in notices.end_notice(event, summary)[1]
