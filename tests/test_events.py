"""parse_event: what is acted on, what is skipped and why, and the hand-over payload."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from drainer.lifecycle.events import HookSyncEvent, parse_event
from drainer.lifecycle.events_fields import Skip
from drainer.lifecycle.events_hook import LifecycleEvent
from drainer.lifecycle.handover import MAX_COUNT, Handover, with_handover

LoadEvent = Callable[[str], dict[str, Any]]
EVENT_AT = datetime(2026, 11, 22, 2, 15, 30, tzinfo=UTC).timestamp()
"""The time of tests/events/terminate*.json."""
NOW = EVENT_AT + 25 * 3600
"""The clock these tests parse at: the fixture's hand-over (begun 24 h after its
event) is one hour old."""


def test_parse_event__terminate_fixture__gives_lifecycle_event(load_event: LoadEvent) -> None:
    parsed = parse_event(load_event("terminate"))

    assert parsed == LifecycleEvent(
        instance_id="i-0a1b2c3d4e5f60718",
        asg_name="eks-workers-a",
        hook_name="drain-before-terminate",
        action_token="c613620e-07e2-4ed2-a9e2-ef8258911ade",
        transition="autoscaling:EC2_INSTANCE_TERMINATING",
        notification_metadata='{"cluster_name": "prod-eu"}',
        event_id="6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        event_time="2026-11-22T02:15:30Z",
        region="eu-west-1",
        account="123456789012",
        handover=None,
        origin="AutoScalingGroup",
        destination="EC2",
    )


def test_parse_event__no_metadata_origin_or_destination__are_empty(
    load_event: LoadEvent,
) -> None:
    parsed = parse_event(load_event("terminate-no-metadata"))

    assert isinstance(parsed, LifecycleEvent)
    assert parsed.notification_metadata == ""
    assert parsed.origin == ""
    assert parsed.destination == ""
    assert parsed.region == "us-east-1"


def test_parse_event__handover_key__gives_handover(load_event: LoadEvent) -> None:
    parsed = parse_event(load_event("terminate-handover"), now=NOW)

    assert isinstance(parsed, LifecycleEvent)
    assert parsed.handover == Handover(started_at=1795400130.25, handovers=2, heartbeats=57)


def test_log_keys__are_the_fixed_structured_keys(load_event: LoadEvent) -> None:
    parsed = parse_event(load_event("terminate"))

    assert isinstance(parsed, LifecycleEvent)
    assert parsed.log_keys() == {
        "instance_id": "i-0a1b2c3d4e5f60718",
        "asg_name": "eks-workers-a",
        "lifecycle_hook_name": "drain-before-terminate",
        "event_id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
    }


@pytest.mark.parametrize(
    ("event_time", "expected"),
    [
        ("2026-11-22T02:15:30Z", datetime(2026, 11, 22, 2, 15, 30, tzinfo=UTC)),
        ("2026-11-22T02:15:30.250Z", datetime(2026, 11, 22, 2, 15, 30, 250000, tzinfo=UTC)),
        ("2026-11-22T03:15:30+01:00", datetime(2026, 11, 22, 2, 15, 30, tzinfo=UTC)),
        ("2026-11-22T02:15:30", datetime(2026, 11, 22, 2, 15, 30, tzinfo=UTC)),  # UTC
        ("Sun, 22 Nov 2026 02:15:30 GMT", None),
        ("soon", None),
    ],
)
def test_waiting_since__the_events_time__none_when_it_does_not_parse(
    load_event: LoadEvent, event_time: str, expected: datetime | None
) -> None:
    raw = load_event("terminate")
    raw["time"] = event_time
    parsed = parse_event(raw)
    assert isinstance(parsed, LifecycleEvent)

    assert parsed.waiting_since == (expected.timestamp() if expected else None)


@pytest.mark.parametrize(
    ("fixture", "reason"),
    [
        ("test-notification", "autoscaling:TEST_NOTIFICATION"),
        ("malformed-missing-instance", "field 'detail.EC2InstanceId' is missing"),
    ],
)
def test_parse_event__non_terminate_fixture__is_skipped_with_reason(
    load_event: LoadEvent, fixture: str, reason: str
) -> None:
    parsed = parse_event(load_event(fixture))

    assert isinstance(parsed, Skip)
    assert reason in parsed.reason


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (None, "event is a NoneType, not a JSON object"),
        ([], "event is a list, not a JSON object"),
        ("terminate", "event is a str, not a JSON object"),
        ({}, "source is None"),
    ],
)
def test_parse_event__not_an_object__is_skipped(event: object, reason: str) -> None:
    parsed = parse_event(event)

    assert isinstance(parsed, Skip)
    assert reason in parsed.reason


def _mutated(event: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    """A copy of `event` with the dotted `path` set to `value` (or removed for ...)."""
    copied: dict[str, Any] = json.loads(json.dumps(event))
    *parents, last = path.split(".")
    target = copied
    for parent in parents:
        target = target[parent]
    if value is ...:
        del target[last]
    else:
        target[last] = value
    return copied


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        ("detail.LifecycleTransition", "autoscaling:TEST_NOTIFICATION", "TEST_NOTIFICATION"),
        ("detail.Event", "autoscaling:TEST_NOTIFICATION", "TEST_NOTIFICATION"),
        ("source", "aws.ec2", "source is 'aws.ec2', not 'aws.autoscaling'"),
        ("source", ..., "source is None"),
        ("detail-type", "EC2 Instance Terminate Successful", "detail-type is 'EC2 Instance"),
        ("detail-type", ..., "detail-type is None"),
        ("detail", ..., "field 'detail' is missing or not an object"),
        ("detail", "oops", "field 'detail' is missing or not an object"),
        (
            "detail.LifecycleTransition",
            "autoscaling:EC2_INSTANCE_LAUNCHING",
            "not 'autoscaling:EC2_INSTANCE_TERMINATING'",
        ),
        ("detail.LifecycleTransition", "autoscaling:EC2_INSTANCE_WARMED", "LifecycleTransition is"),
        ("detail.LifecycleTransition", ..., "detail.LifecycleTransition is None"),
        ("detail.EC2InstanceId", ..., "field 'detail.EC2InstanceId' is missing"),
        ("detail.EC2InstanceId", 42, "field 'detail.EC2InstanceId' is a int, not a string"),
        ("detail.EC2InstanceId", "  ", "field 'detail.EC2InstanceId' is empty"),
        ("detail.AutoScalingGroupName", ..., "field 'detail.AutoScalingGroupName' is missing"),
        ("detail.LifecycleHookName", None, "field 'detail.LifecycleHookName' is missing"),
        ("detail.LifecycleActionToken", ["t"], "'detail.LifecycleActionToken' is a list"),
        ("detail.NotificationMetadata", {"a": 1}, "'detail.NotificationMetadata' is a dict"),
        ("detail.Destination", 1, "'detail.Destination' is a int"),
        ("id", ..., "field 'id' is missing"),
        ("time", 1700000000, "field 'time' is a int, not a string"),
        ("region", "", "field 'region' is empty"),
        ("account", ..., "field 'account' is missing"),
        ("drainer", "handover", "field 'drainer' is a str, not an object"),
        ("drainer", {"handovers": 0, "heartbeats": 0}, "started_at must be positive"),
        ("drainer", {"started_at": "1", "handovers": 0, "heartbeats": 0}, "started_at"),
        ("drainer", {"started_at": True, "handovers": 0, "heartbeats": 0}, "started_at"),
        ("drainer", {"started_at": -5, "handovers": 0, "heartbeats": 0}, "started_at"),
        ("drainer", {"started_at": float("nan"), "handovers": 0, "heartbeats": 0}, "started_at"),
        ("drainer", {"started_at": NOW, "heartbeats": 0}, "handovers must be an integer"),
        ("drainer", {"started_at": NOW, "handovers": -1, "heartbeats": 0}, "handovers"),
        ("drainer", {"started_at": NOW, "handovers": 1.0, "heartbeats": 0}, "handovers"),
        ("drainer", {"started_at": NOW, "handovers": 1, "heartbeats": False}, "heartbeats"),
        ("drainer", {"started_at": NOW, "handovers": 1}, "heartbeats must be an integer"),
    ],
)
def test_parse_event__wrong_or_missing_field__is_skipped_naming_it(
    load_event: LoadEvent, path: str, value: object, reason: str
) -> None:
    parsed = parse_event(_mutated(load_event("terminate"), path, value), now=NOW)

    assert isinstance(parsed, Skip)
    assert reason in parsed.reason


def test_parse_event__launch_fixture__a_launching_lifecycle_event(load_event: LoadEvent) -> None:
    parsed = parse_event(load_event("launch"))

    assert isinstance(parsed, LifecycleEvent)
    assert parsed.launching
    assert (parsed.instance_id, parsed.hook_name) == ("i-0f1e2d3c4b5a69788", "wait-for-node-ready")
    assert (parsed.origin, parsed.destination) == ("EC2", "AutoScalingGroup")


def test_parse_event__launch_detail_type_with_a_terminate_transition__skipped(
    load_event: LoadEvent,
) -> None:
    raw = load_event("launch")
    raw["detail"]["LifecycleTransition"] = "autoscaling:EC2_INSTANCE_TERMINATING"

    parsed = parse_event(raw)

    assert isinstance(parsed, Skip)
    assert "not 'autoscaling:EC2_INSTANCE_LAUNCHING'" in parsed.reason


def _handover(started_at: object, handovers: object = 1, heartbeats: object = 3) -> object:
    return {"started_at": started_at, "handovers": handovers, "heartbeats": heartbeats}


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        # A number too large for a float: OverflowError, uncaught, before.
        ("drainer", _handover(10**400), "started_at must be positive epoch seconds, got an"),
        ("drainer", _handover(float("inf")), "started_at must be positive epoch seconds"),
        # A start before the lifecycle event itself: a forged "started_at: 1".
        ("drainer", _handover(1), "before the event's own time"),
        ("drainer", _handover(EVENT_AT - 301), "301 s before the event's own time"),
        ("drainer", _handover(NOW + 301), "301 s in the future"),
        ("drainer", _handover(NOW, handovers=10**400), "handovers must be an integer from 0"),
        ("drainer", _handover(NOW, heartbeats=MAX_COUNT + 1), "heartbeats must be an integer"),
        ("detail.EC2InstanceId", "i-0a1b2c3d\x00", "not an EC2 instance id"),
        ("detail.EC2InstanceId", "i-xyz", "'i-xyz', not an EC2 instance id"),
        ("detail.EC2InstanceId", "i-0a1b2c3d4e5f6071", "not an EC2 instance id"),  # 16 digits
        ("detail.EC2InstanceId", "i-0A1B2C3D", "not an EC2 instance id"),
        ("detail.EC2InstanceId", " i-0a1b2c3d", "not an EC2 instance id"),
        ("detail.AutoScalingGroupName", "eks\x00workers", "which AWS does not accept"),
        ("detail.AutoScalingGroupName", "g" * 256, "more than 255 characters"),
        ("detail.LifecycleHookName", "drain\x01", "'detail.LifecycleHookName' is 'drain\\x01'"),
        ("detail.LifecycleActionToken", "\ud800", "'detail.LifecycleActionToken' is"),
    ],
    ids=[
        "started-at-huge-int",
        "started-at-infinite",
        "started-at-1",
        "started-at-before-the-event",
        "started-at-in-the-future",
        "handovers-huge",
        "heartbeats-past-the-bound",
        "instance-id-nul-byte",
        "instance-id-not-hex",
        "instance-id-16-digits",
        "instance-id-upper-case",
        "instance-id-blank-before",
        "group-nul-byte",
        "group-too-long",
        "hook-control-character",
        "token-lone-surrogate",
    ],
)
def test_parse_event__value_out_of_bounds__malformed_naming_it(
    load_event: LoadEvent, path: str, value: object, reason: str
) -> None:
    parsed = parse_event(_mutated(load_event("terminate"), path, value), now=NOW)

    assert isinstance(parsed, Skip)
    assert parsed.malformed
    assert reason in parsed.reason
    assert len(parsed.reason) < 300, "a claimed number is never printed in full"


def test_parse_event__hand_over_older_than_a_lifecycle_action_lives__malformed(
    load_event: LoadEvent,
) -> None:
    event = _mutated(load_event("terminate"), "drainer", _handover(EVENT_AT + 10))

    parsed = parse_event(event, now=EVENT_AT + 10 + 48 * 3600 + 301)

    assert isinstance(parsed, Skip) and parsed.malformed
    assert "longer than a lifecycle action lives" in parsed.reason


@pytest.mark.parametrize(
    ("started_at", "now"),
    [
        (EVENT_AT - 300, EVENT_AT),  # the writer's clock 5 minutes behind the event's
        (EVENT_AT + 300, EVENT_AT),  # or ahead of this invocation's
        (EVENT_AT + 47 * 3600, EVENT_AT + 48 * 3600),
    ],
)
def test_parse_event__hand_over_within_the_window__accepted(
    load_event: LoadEvent, started_at: float, now: float
) -> None:
    event = _mutated(load_event("terminate"), "drainer", _handover(started_at))

    parsed = parse_event(event, now=now)

    assert isinstance(parsed, LifecycleEvent)
    # A start the writer's clock put ahead of this invocation's counts from now: the
    # drain's spans (drain_seconds_total, the notice's Duration) are never negative.
    assert parsed.handover == Handover(min(started_at, now), 1, 3)


def test_parse_event__unreadable_event_time__hand_over_bounded_by_now_alone(
    load_event: LoadEvent,
) -> None:
    event = _mutated(load_event("terminate"), "time", "yesterday")
    event["drainer"] = _handover(NOW - 3600)

    parsed = parse_event(event, now=NOW)

    assert isinstance(parsed, LifecycleEvent)
    assert parsed.handover == Handover(NOW - 3600, 1, 3)


def test_parse_event__eight_digit_instance_id__accepted(load_event: LoadEvent) -> None:
    parsed = parse_event(_mutated(load_event("terminate"), "detail.EC2InstanceId", "i-12c6146b"))

    assert isinstance(parsed, LifecycleEvent)
    assert parsed.instance_id == "i-12c6146b"


def test_parse_event__integer_started_at__is_accepted_as_float(load_event: LoadEvent) -> None:
    event = _mutated(
        load_event("terminate"),
        "drainer",
        {"started_at": int(NOW), "handovers": 0, "heartbeats": 0},
    )

    parsed = parse_event(event, now=NOW)

    assert isinstance(parsed, LifecycleEvent)
    assert parsed.handover == Handover(float(int(NOW)), 0, 0)
    assert isinstance(parsed.handover.started_at, float)


def test_parse_event__warm_pool_destination__is_still_drained(load_event: LoadEvent) -> None:
    parsed = parse_event(_mutated(load_event("terminate"), "detail.Destination", "WarmPool"))

    assert isinstance(parsed, LifecycleEvent)
    assert parsed.destination == "WarmPool"


def test_with_handover__adds_drainer_key_and_leaves_original_alone(
    load_event: LoadEvent,
) -> None:
    original = load_event("terminate")
    snapshot = json.loads(json.dumps(original))

    payload = with_handover(original, Handover(1700000000.5, 1, 12))

    assert original == snapshot
    assert payload["drainer"] == {"started_at": 1700000000.5, "handovers": 1, "heartbeats": 12}
    assert {k: v for k, v in payload.items() if k != "drainer"} == original
    payload["detail"]["EC2InstanceId"] = "changed"
    assert original["detail"]["EC2InstanceId"] == "i-0a1b2c3d4e5f60718"


def test_with_handover__round_trips_through_json_and_parse(load_event: LoadEvent) -> None:
    handover = Handover(started_at=NOW - 0.5, handovers=3, heartbeats=99)

    payload = json.loads(json.dumps(with_handover(load_event("terminate"), handover)))
    parsed = parse_event(payload, now=NOW)

    assert isinstance(parsed, LifecycleEvent)
    assert parsed.handover == handover


def test_with_handover__replaces_an_earlier_handover(load_event: LoadEvent) -> None:
    payload = with_handover(load_event("terminate-handover"), Handover(1795400130.25, 3, 60))

    parsed = parse_event(payload, now=NOW)

    assert isinstance(parsed, LifecycleEvent)
    assert parsed.handover == Handover(1795400130.25, 3, 60)


def test_handover__handed_on__counts_one_more_handover_and_adds_beats() -> None:
    assert Handover(100.0, 2, 10).handed_on(heartbeats=5) == Handover(100.0, 3, 15)


# --- hook syncs: the schedule, Auto Scaling API calls, make deploy ------------------------


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("schedule", HookSyncEvent("schedule")),
        ("api-create-or-update-tags", HookSyncEvent("api:CreateOrUpdateTags")),
        (
            "api-create-auto-scaling-group",
            HookSyncEvent("api:CreateAutoScalingGroup", "eks-workers-c"),
        ),
    ],
)
def test_parse_event__schedule_and_api_call_fixtures__are_hook_syncs(
    load_event: LoadEvent, fixture: str, expected: HookSyncEvent
) -> None:
    assert parse_event(load_event(fixture)) == expected


def test_parse_event__deploys_payload__is_a_hook_sync() -> None:
    assert parse_event({"sync_hooks": {}}) == HookSyncEvent("deploy")


def test_parse_event__delete_lifecycle_hook_call__is_a_hook_sync(load_event: LoadEvent) -> None:
    event = load_event("api-create-or-update-tags")
    event["detail"]["eventName"] = "DeleteLifecycleHook"
    event["detail"]["requestParameters"] = {
        "autoScalingGroupName": "eks-workers-a",
        "lifecycleHookName": "eks-node-drainer",
    }

    assert parse_event(event) == HookSyncEvent("api:DeleteLifecycleHook", "eks-workers-a")


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        ("detail.eventName", "SetDesiredCapacity", "detail-type is 'AWS API Call via CloudTrail'"),
        ("detail.eventSource", "ec2.amazonaws.com", "detail-type is 'AWS API Call via CloudTrail'"),
        ("detail", "not an object", "detail-type is 'AWS API Call via CloudTrail'"),
        ("source", "aws.ec2", "source is 'aws.ec2'"),
    ],
)
def test_parse_event__other_api_calls__still_skipped(
    load_event: LoadEvent, path: str, value: object, reason: str
) -> None:
    parsed = parse_event(_mutated(load_event("api-create-or-update-tags"), path, value))

    assert isinstance(parsed, Skip)
    assert reason in parsed.reason


def test_parse_event__other_events_source__still_skipped(load_event: LoadEvent) -> None:
    parsed = parse_event(_mutated(load_event("schedule"), "detail-type", "Something Else"))

    assert isinstance(parsed, Skip)
    assert "source is 'aws.events'" in parsed.reason
