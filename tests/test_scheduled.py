"""drainer/lifecycle/scheduled.py: a scheduled change's drain asked for before its
window, against moto's EventBridge Scheduler. AWS Health sends a change more than
once; EventBridge may deliver any update late, twice or out of order."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

import boto3
import pytest
from support.clock import FakeClock

from awssim.world import create_node_group
from drainer import aws
from drainer.k8s.kube import Kube
from drainer.lifecycle import scheduled
from drainer.lifecycle.events import parse_event
from drainer.lifecycle.events_ec2 import ChangeClosed, Ec2Event
from drainer.lifecycle.events_fields import Skip
from drainer.lifecycle.job import Tools
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.window import Invocation

LoadEvent = Callable[[str], dict[str, Any]]
REGION = "us-east-1"
INSTANCE = "i-0a1b2c3d4e5f60718"
RETIRES_AT = datetime(2026, 11, 24, 9, 0, 0, tzinfo=UTC).timestamp()
"""The window's start in tests/events/health-scheduled-change.json."""
HEALTH_SENT_AT = datetime(2026, 11, 22, 2, 10, 0, tzinfo=UTC).timestamp()


@pytest.fixture
def clients(moto_aws: None) -> aws.AwsClients:
    return aws.make_clients(boto3.Session(region_name=REGION))


def _spot_event(raw: dict[str, Any]) -> Ec2Event:
    parsed = parse_event(raw)
    assert isinstance(parsed, Ec2Event), parsed
    return parsed


def _no_kube(*args: Any) -> Kube:
    raise AssertionError("unexpected Kubernetes client")


# --- a scheduled change drained a set time before its window ------------------------------

ROLE = "arn:aws:iam::123456789012:role/eks-node-drainer-SchedulerRole-ABC123"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:eks-node-drainer"


def _lead_tools(clients: aws.AwsClients, now: float, lead: int, role: str = ROLE) -> Tools:
    settings = Settings(scheduled_change_lead_seconds=lead, scheduler_role_arn=role)
    return Tools(settings, clients, _no_kube, clock=FakeClock(now))


def _invocation(arn: str = FUNCTION_ARN) -> Invocation:
    return Invocation(remaining_seconds=lambda: 900.0, function_arn=arn)


def test_later__window_days_away__one_schedule_at_its_start_less_the_lead__event_as_input(
    clients: aws.AwsClients, load_event: LoadEvent
) -> None:
    raw = load_event("health-scheduled-change")
    found = _spot_event(raw)
    tools = _lead_tools(clients, HEALTH_SENT_AT, lead=3600)

    first = scheduled.later(found, tools, _invocation(), raw)
    # Health's update of the same change: a new event id, the same eventArn.
    update = {**raw, "id": "0f0e0d0c-0000-4000-8000-000000000001"}
    again = scheduled.later(found, tools, _invocation(), update)

    assert first is not None and first == again
    assert first["result"] == "scheduled"
    assert first["drain_at"] == "2026-11-24T08:00:00Z", "an hour before the 09:00 window"
    name = first["schedule"]
    assert name.startswith(f"eks-node-drainer-{INSTANCE}-") and len(name) <= 64
    schedule = clients.scheduler.get_schedule(Name=name)
    assert schedule["ScheduleExpression"] == "at(2026-11-24T08:00:00)"
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["ActionAfterCompletion"] == "DELETE"
    assert schedule["Target"]["Arn"] == FUNCTION_ARN
    assert schedule["Target"]["RoleArn"] == ROLE
    assert json.loads(schedule["Target"]["Input"]) == {**raw, "drainer_schedule": name}
    listed = clients.scheduler.list_schedules()["Schedules"]
    assert [s["Name"] for s in listed] == [name], "one schedule, however often it came"


def _moved(raw: dict[str, Any], start: str, updated: str, event_id: str) -> dict[str, Any]:
    """AWS Health's update of the same change (its eventArn), its window at `start`."""
    moved = json.loads(json.dumps(raw))
    moved["id"] = event_id
    moved["detail"].update(startTime=start, lastUpdatedTime=updated)
    return moved


def test_later__health_moves_the_window__the_schedule_moves__an_older_update_never_back(
    clients: aws.AwsClients, load_event: LoadEvent
) -> None:
    """The schedule is named after the change, so an update of it found the schedule
    there and kept it: its old time and its old event. A window moved a day earlier
    was drained after EC2 acted (the log said the new time); one moved later was
    drained early, forced at the old start on a running instance."""
    raw = load_event("health-scheduled-change")  # window 2026-11-24T09:00Z
    tools = _lead_tools(clients, HEALTH_SENT_AT, lead=3600)
    first = scheduled.later(_spot_event(raw), tools, _invocation(), raw)
    assert first is not None
    earlier = _moved(
        raw, "Mon, 23 Nov 2026 09:00:00 GMT", "Sun, 22 Nov 2026 03:00:00 GMT",
        "0f0e0d0c-0000-4000-8000-000000000002",
    )  # fmt: skip

    again = scheduled.later(_spot_event(earlier), tools, _invocation(), earlier)

    assert again is not None and again["drain_at"] == "2026-11-23T08:00:00Z"
    schedule = clients.scheduler.get_schedule(Name=again["schedule"])
    assert again["schedule"] == first["schedule"]
    assert schedule["ScheduleExpression"] == "at(2026-11-23T08:00:00)", "the old time kept"
    assert json.loads(schedule["Target"]["Input"])["id"] == earlier["id"], "the old event kept"
    # The first update, delivered again after the second (EventBridge retries, out of
    # order): older, so the schedule stays where the newer one put it.
    scheduled.later(_spot_event(raw), tools, _invocation(), raw)
    schedule = clients.scheduler.get_schedule(Name=again["schedule"])
    assert schedule["ScheduleExpression"] == "at(2026-11-23T08:00:00)"
    assert json.loads(schedule["Target"]["Input"])["id"] == earlier["id"]


def test_later__the_schedule_cannot_be_read_for_good__kept_where_it_is__not_drained_now(
    clients: aws.AwsClients, load_event: LoadEvent
) -> None:
    """A role without GetSchedule yet (a stack updated from before schedules moved, IAM
    still propagating): an update of the change keeps its schedule, as before; the
    refusal never makes the drain run now, days early."""
    from botocore.exceptions import ClientError

    raw = load_event("health-scheduled-change")
    tools = _lead_tools(clients, HEALTH_SENT_AT, lead=3600)
    first = scheduled.later(_spot_event(raw), tools, _invocation(), raw)
    assert first is not None

    def refuse(**_: Any) -> None:
        error = {"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}
        raise ClientError({**error, "ResponseMetadata": {"HTTPStatusCode": 403}}, "GetSchedule")

    clients.scheduler.meta.events.register("before-parameter-build.scheduler.GetSchedule", refuse)
    earlier = _moved(
        raw, "Mon, 23 Nov 2026 09:00:00 GMT", "Sun, 22 Nov 2026 03:00:00 GMT",
        "0f0e0d0c-0000-4000-8000-000000000003",
    )  # fmt: skip

    again = scheduled.later(_spot_event(earlier), tools, _invocation(), earlier)

    assert again is not None and again["result"] == "scheduled", "drained now, days early"
    clients.scheduler.meta.events.unregister("before-parameter-build.scheduler.GetSchedule", refuse)
    kept = clients.scheduler.get_schedule(Name=first["schedule"])
    assert kept["ScheduleExpression"] == "at(2026-11-24T08:00:00)"


def test_later__cannot_schedule_for_good__drains_now_saying_why(
    clients: aws.AwsClients, load_event: LoadEvent, caplog: pytest.LogCaptureFixture
) -> None:
    raw = load_event("health-scheduled-change")
    raw["detail"]["eventDescription"][0]["latestDescription"] = "x" * 9000  # over the input limit
    found = _spot_event(raw)

    later = scheduled.later(found, _lead_tools(clients, HEALTH_SENT_AT, 3600), _invocation(), raw)

    assert later is None
    assert "the drain cannot be scheduled" in caplog.text and "draining now" in caplog.text


def test_later__the_schedules_own_invocation__drains_whenever_it_comes(
    clients: aws.AwsClients, load_event: LoadEvent
) -> None:
    """A schedule may fire late, or a little early: its event drains, never schedules
    itself again (that name exists until the invocation ends)."""
    raw = load_event("health-scheduled-change")
    raw["drainer_schedule"] = f"eks-node-drainer-{INSTANCE}-0123456789"
    found = _spot_event(raw)

    for now in (RETIRES_AT - 3600 - 90, RETIRES_AT - 3600 + 300):
        assert scheduled.later(found, _lead_tools(clients, now, 3600), _invocation(), raw) is None
    assert clients.scheduler.list_schedules()["Schedules"] == []


@pytest.mark.parametrize(
    ("now", "lead", "role", "arn"),
    [
        (RETIRES_AT - 3600 - 30, 3600, ROLE, FUNCTION_ARN),  # due within the slack: drain now
        (HEALTH_SENT_AT, 0, ROLE, FUNCTION_ARN),  # no lead: at once
        (HEALTH_SENT_AT, 3600, "", FUNCTION_ARN),  # no role to schedule with
        (HEALTH_SENT_AT, 3600, ROLE, ""),  # no function to invoke (the CLI)
    ],
    ids=["due", "no-lead", "no-role", "no-function"],
)
def test_later__drains_now_when_due_or_when_it_cannot_schedule(
    clients: aws.AwsClients,
    load_event: LoadEvent,
    caplog: pytest.LogCaptureFixture,
    now: float,
    lead: int,
    role: str,
    arn: str,
) -> None:
    raw = load_event("health-scheduled-change")
    found = _spot_event(raw)

    later = scheduled.later(found, _lead_tools(clients, now, lead, role), _invocation(arn), raw)

    assert later is None
    if not role or not arn:
        assert "draining now" in caplog.text
    assert clients.scheduler.list_schedules()["Schedules"] == []


# --- an update that comes due now, late, or the change closed -----------------------------

WITHIN_LEAD = "Sun, 22 Nov 2026 02:40:00 GMT"
"""A window 30 minutes after HEALTH_SENT_AT: within a lead of an hour."""


def _held(clients: aws.AwsClients, name: str) -> tuple[str, dict[str, Any]]:
    """A schedule's time and the event it delivers."""
    schedule = clients.scheduler.get_schedule(Name=name)
    return schedule["ScheduleExpression"], json.loads(schedule["Target"]["Input"])


def test_later__an_update_brings_the_drain_due_now__drains_now__old_schedule_drains_nothing(
    clients: aws.AwsClients, load_event: LoadEvent
) -> None:
    """Health moves the window to within the lead: the drain runs now. The schedule the
    first update made stayed, and days later drained the node again, maybe after the
    operator had released it."""
    raw = load_event("health-scheduled-change")
    tools = _lead_tools(clients, HEALTH_SENT_AT, lead=3600)
    first = scheduled.later(_spot_event(raw), tools, _invocation(), raw)
    assert first is not None
    soon = _moved(raw, WITHIN_LEAD, "Sun, 22 Nov 2026 02:09:59 GMT", "0f0e-soon")

    now = scheduled.later(_spot_event(soon), tools, _invocation(), soon)

    assert now is None, "due now: drained at once"
    at, payload = _held(clients, first["schedule"])
    assert at == "at(2026-11-24T08:00:00)", "its time kept"
    delivered = parse_event(payload)
    assert isinstance(delivered, Skip), "the old schedule would drain the node again"
    assert "drained at 2026-11-22T02:10:00Z on an update of the change" in delivered.reason
    # That drain failed for now: Lambda delivers the same update again. It drains.
    assert scheduled.later(_spot_event(soon), tools, _invocation(), soon) is None
    # The first update delivered again now (out of order) moves nothing back.
    assert scheduled.later(_spot_event(raw), tools, _invocation(), raw) == first
    assert isinstance(parse_event(_held(clients, first["schedule"])[1]), Skip)


def test_later__an_older_update_comes_due_while_the_schedule_holds_a_newer__not_drained_now(
    clients: aws.AwsClients, load_event: LoadEvent, caplog: pytest.LogCaptureFixture
) -> None:
    """Health moved the window days later; the update before it, delivered late, names
    the old window within the lead. It drained the node at once, days early."""
    first = load_event("health-scheduled-change")
    older = _moved(first, WITHIN_LEAD, "Sun, 22 Nov 2026 01:00:00 GMT", "0f0e-older")
    tools = _lead_tools(clients, HEALTH_SENT_AT, lead=3600)
    made = scheduled.later(_spot_event(first), tools, _invocation(), first)
    assert made is not None

    late = scheduled.later(_spot_event(older), tools, _invocation(), older)

    assert late is not None and late["result"] == "scheduled" and late["superseded"]
    assert late["schedule"] == made["schedule"]
    assert _held(clients, made["schedule"]) == (
        "at(2026-11-24T08:00:00)",
        {**first, "drainer_schedule": made["schedule"]},
    )
    assert "is older than the one its schedule" in caplog.text


def test_later__due_now__the_schedule_cannot_be_read_for_good__drains_now_saying_why(
    clients: aws.AwsClients, load_event: LoadEvent, caplog: pytest.LogCaptureFixture
) -> None:
    from botocore.exceptions import ClientError

    raw = load_event("health-scheduled-change")
    soon = _moved(raw, WITHIN_LEAD, "Sun, 22 Nov 2026 02:09:59 GMT", "0f0e-soon")

    def refuse(**_: Any) -> None:
        error = {"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}
        raise ClientError({**error, "ResponseMetadata": {"HTTPStatusCode": 403}}, "GetSchedule")

    clients.scheduler.meta.events.register("before-parameter-build.scheduler.GetSchedule", refuse)
    tools = _lead_tools(clients, HEALTH_SENT_AT, lead=3600)

    assert scheduled.later(_spot_event(soon), tools, _invocation(), soon) is None
    assert "is left as it is" in caplog.text and "GetSchedule" in caplog.text


def test_later__due_now__scheduler_fails_for_now__drains_all_the_same(
    clients: aws.AwsClients, load_event: LoadEvent, caplog: pytest.LogCaptureFixture
) -> None:
    """The window starts within the lead: the drain never waits on EventBridge
    Scheduler, whose throttling raised for Lambda to retry, minutes before the window."""
    from botocore.exceptions import ClientError

    raw = load_event("health-scheduled-change")
    soon = _moved(raw, WITHIN_LEAD, "Sun, 22 Nov 2026 02:09:59 GMT", "0f0e-soon")

    def throttle(**_: Any) -> None:
        error = {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}
        raise ClientError({**error, "ResponseMetadata": {"HTTPStatusCode": 400}}, "GetSchedule")

    clients.scheduler.meta.events.register("before-parameter-build.scheduler.GetSchedule", throttle)
    tools = _lead_tools(clients, HEALTH_SENT_AT, lead=3600)

    assert scheduled.later(_spot_event(soon), tools, _invocation(), soon) is None
    assert "draining now" in caplog.text


def _closing(raw: dict[str, Any], updated: str = "Wed, 25 Nov 2026 10:00:00 GMT") -> ChangeClosed:
    closed = json.loads(json.dumps(raw))
    closed["id"] = "0f0e-closed"
    closed["detail"].update(statusCode="closed", lastUpdatedTime=updated)
    parsed = parse_event(closed)
    assert isinstance(parsed, ChangeClosed), parsed
    return parsed


def test_closed__a_cancelled_change__its_schedule_drains_nothing__an_older_update_after_neither(
    clients: aws.AwsClients, load_event: LoadEvent, caplog: pytest.LogCaptureFixture
) -> None:
    """A change cancelled before its window: Health closes it. The closed event was
    skipped, and the schedule of its first update drained the node for nothing, left
    cordoned until released."""
    caplog.set_level(logging.INFO)
    raw = load_event("health-scheduled-change")
    tools = _lead_tools(clients, HEALTH_SENT_AT, lead=3600)
    made = scheduled.later(_spot_event(raw), tools, _invocation(), raw)
    assert made is not None
    closing = _closing(raw)

    settled = scheduled.settle_closed(closing, tools, _invocation())

    assert settled == [INSTANCE]
    at, payload = _held(clients, made["schedule"])
    assert at == "at(2026-11-24T08:00:00)"
    assert isinstance(parse_event(payload), Skip), "its invocation drains nothing"
    assert "will do nothing" in caplog.text
    # The first update again, after the close (out of order): the schedule stays closed.
    late = scheduled.later(_spot_event(raw), tools, _invocation(), raw)
    assert late is not None and late["result"] == "skipped" and late["schedule"] == made["schedule"]
    assert "AWS Health closed the change" in late["reason"]
    assert isinstance(parse_event(_held(clients, made["schedule"])[1]), Skip)
    # The close again: nothing newer to settle.
    assert scheduled.settle_closed(closing, tools, _invocation()) == []


def test_closed__several_instances__each_schedule_settled_with_its_own_instance(
    clients: aws.AwsClients, load_event: LoadEvent
) -> None:
    raw = load_event("health-scheduled-change")
    other = "i-0fedcba9876543210"
    raw["detail"]["affectedEntities"].append({"entityValue": other})
    tools = _lead_tools(clients, HEALTH_SENT_AT, lead=3600)
    for instance in (INSTANCE, other):
        one = json.loads(json.dumps(raw))
        one["detail"]["affectedEntities"] = [{"entityValue": instance}]
        assert scheduled.later(_spot_event(one), tools, _invocation(), one) is not None

    settled = scheduled.settle_closed(_closing(raw), tools, _invocation())

    assert settled == [INSTANCE, other]
    listed = clients.scheduler.list_schedules()["Schedules"]
    assert len(listed) == 2
    for schedule in listed:
        payload = _held(clients, schedule["Name"])[1]
        assert payload["drainer_schedule"] == schedule["Name"]
        assert isinstance(parse_event(payload), Skip)


@pytest.mark.parametrize(
    ("lead", "role", "arn"),
    [(0, ROLE, FUNCTION_ARN), (3600, "", FUNCTION_ARN), (3600, ROLE, "")],
    ids=["no-lead", "no-role", "no-function"],
)
def test_closed__nothing_is_ever_scheduled__nothing_asked_of_aws(
    load_event: LoadEvent, lead: int, role: str, arn: str
) -> None:
    from test_ec2_events import NO_AWS

    tools = Tools(
        Settings(scheduled_change_lead_seconds=lead, scheduler_role_arn=role),
        NO_AWS,
        _no_kube,
        clock=FakeClock(HEALTH_SENT_AT),
    )

    closing = _closing(load_event("health-scheduled-change"))

    assert scheduled.settle_closed(closing, tools, _invocation(arn)) == []


# --- the change closed before any schedule of it: a late update drains nothing -----------

CLOSED_UPDATED = "Sun, 22 Nov 2026 03:00:00 GMT"
"""The close's lastUpdatedTime: after the first update's (02:09:58)."""
CLOSED_AT = datetime(2026, 11, 22, 3, 0, 5, tzinfo=UTC).timestamp()
"""When the close is delivered."""
MARKER_AT = "at(2026-11-24T03:00:05)"
"""CLOSED_AT + 48 hours: the marker outlives EventBridge's and Lambda's retries."""


def _late(raw: dict[str, Any], which: str) -> dict[str, Any]:
    """An update of the change, delivered after its close: one whose drain is days
    away, one due now (its window within the lead), one as new as the close."""
    if which == "days-away":
        return raw
    if which == "due-now":
        return _moved(raw, "Sun, 22 Nov 2026 03:30:00 GMT", "Sun, 22 Nov 2026 02:30:00 GMT", "0f")
    return _moved(raw, "Tue, 24 Nov 2026 09:00:00 GMT", CLOSED_UPDATED, "0f0e-as-new")


@pytest.mark.parametrize("which", ["days-away", "due-now", "as-new-as-the-close"])
def test_closed__before_any_schedule__an_update_delivered_after_it_drains_nothing(
    clients: aws.AwsClients, load_event: LoadEvent, caplog: pytest.LogCaptureFixture, which: str
) -> None:
    """EventBridge delivers out of order, its retries hours late: an update of a change
    AWS Health had closed already (carried out, cancelled), with no schedule made
    before the close, scheduled a drain, or drained at once, for nothing: the node
    was left cordoned."""
    raw = load_event("health-scheduled-change")
    tools = _lead_tools(clients, CLOSED_AT, lead=3600)
    closing = _closing(raw, updated=CLOSED_UPDATED)

    assert scheduled.settle_closed(closing, tools, _invocation()) == []

    late = _late(raw, which)
    result = scheduled.later(_spot_event(late), tools, _invocation(), late)

    assert result is not None, "drained now"
    assert result["result"] == "skipped", result
    assert "AWS Health closed the change" in result["reason"]
    assert "already closed" in caplog.text
    name = result["schedule"]
    assert name == scheduled.schedule_name(FUNCTION_ARN, closing.first.change_id, INSTANCE)
    at, payload = _held(clients, name)
    assert at == MARKER_AT, "the marker stays as the close left it"
    assert isinstance(parse_event(payload), Skip), "the marker's own invocation drains nothing"
    assert payload["detail"]["statusCode"] == "closed"
    schedule = clients.scheduler.get_schedule(Name=name)
    assert schedule["ActionAfterCompletion"] == "DELETE"
    assert schedule["Target"]["Arn"] == FUNCTION_ARN
    assert "closed" in schedule["Description"], "the console tells it from a drain's"


def test_closed__before_any_schedule__a_newer_update_is_scheduled_as_ever(
    clients: aws.AwsClients, load_event: LoadEvent
) -> None:
    """The marker orders by lastUpdatedTime, as a schedule does: an update newer than
    the close (Health reopened the change) is the change's latest word."""
    raw = load_event("health-scheduled-change")
    tools = _lead_tools(clients, CLOSED_AT, lead=3600)
    scheduled.settle_closed(_closing(raw, updated=CLOSED_UPDATED), tools, _invocation())
    newer = _moved(raw, "Tue, 24 Nov 2026 09:00:00 GMT", "Sun, 22 Nov 2026 03:00:01 GMT", "0f")

    result = scheduled.later(_spot_event(newer), tools, _invocation(), newer)

    assert result is not None and result["result"] == "scheduled", result
    assert _held(clients, result["schedule"]) == (
        "at(2026-11-24T08:00:00)",
        {**newer, "drainer_schedule": result["schedule"]},
    )


def test_closed__delivered_twice_before_any_schedule__one_marker_where_the_first_put_it(
    clients: aws.AwsClients, load_event: LoadEvent
) -> None:
    raw = load_event("health-scheduled-change")
    closing = _closing(raw, updated=CLOSED_UPDATED)
    scheduled.settle_closed(closing, _lead_tools(clients, CLOSED_AT, 3600), _invocation())

    again = _lead_tools(clients, CLOSED_AT + 7200, 3600)  # Lambda's retry, two hours on

    assert scheduled.settle_closed(closing, again, _invocation()) == []
    listed = clients.scheduler.list_schedules()["Schedules"]
    assert len(listed) == 1
    at, payload = _held(clients, listed[0]["Name"])
    assert at == MARKER_AT
    assert isinstance(parse_event(payload), Skip)


def test_closed__scheduler_refuses_the_marker__said_in_the_log__the_close_goes_on(
    clients: aws.AwsClients, load_event: LoadEvent, caplog: pytest.LogCaptureFixture
) -> None:
    """A role without CreateSchedule (a stack updated from before schedules): the close
    still settles and releases; the log says a late update may yet drain."""
    from botocore.exceptions import ClientError

    from drainer.lifecycle import closed

    def refuse(**_: Any) -> None:
        error = {"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}
        raise ClientError({**error, "ResponseMetadata": {"HTTPStatusCode": 403}}, "CreateSchedule")

    clients.scheduler.meta.events.register(
        "before-parameter-build.scheduler.CreateSchedule", refuse
    )
    ours = _our_instance(clients)
    settings = Settings(
        cluster_name="prod", scheduled_change_lead_seconds=3600, scheduler_role_arn=ROLE
    )
    tools = Tools(settings, clients, _no_kube, clock=FakeClock(CLOSED_AT))
    raw = json.loads(json.dumps(load_event("health-scheduled-change")).replace(INSTANCE, ours))
    closing = _closing(raw, updated=CLOSED_UPDATED)

    result = closed.handle(closing, tools, _invocation())

    assert result["result"] == "closed"
    assert "not marked closed" in caplog.text and "CreateSchedule" in caplog.text
    assert clients.scheduler.list_schedules()["Schedules"] == []
    assert ours in result["kept"], "the release went on (the EKS cluster is not there)"


def _our_instance(clients: aws.AwsClients) -> str:
    """An instance of a group tagged for the cluster "prod": the function's."""
    group = create_node_group(
        clients.ec2, clients.autoscaling, asg_name="eks-workers", size=1, cluster_name="prod"
    )
    return str(group.instance_ids[0])


def test_closed__an_instance_not_the_functions__no_marker_is_made(
    clients: aws.AwsClients, load_event: LoadEvent
) -> None:
    """Review of da731a1: the rule delivers every EC2 scheduled change of the account
    to each stack's function, and later() schedules only for an instance it admits
    (ec2_events.target). A close of a change of an instance that is not the
    function's (another cluster's, no cluster's) left a 48 h schedule, and a Lambda
    invocation at its end, per instance and per stack, guarding nothing."""
    from drainer.lifecycle import closed

    settings = Settings(
        cluster_name="prod",
        scheduled_change_lead_seconds=3600,
        scheduler_role_arn=ROLE,
    )
    tools = Tools(settings, clients, _no_kube, clock=FakeClock(CLOSED_AT))
    closing = _closing(load_event("health-scheduled-change"), updated=CLOSED_UPDATED)

    closed.handle(closing, tools, _invocation())  # EC2 knows no such instance here

    assert clients.scheduler.list_schedules()["Schedules"] == [], "a marker for no node of ours"


def test_closed__an_instance_of_ours_in_the_warm_pool__still_marked_closed(
    clients: aws.AwsClients, load_event: LoadEvent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of 8dbe3a8: admission is of the moment, the mark is for 48 h. An instance
    of the function's group that sits in the warm pool when its change closes is not
    admitted (ec2_events.target: "in the warm pool ... left alone"), so no mark is
    made; once it comes back into service (hours later), an update of the change
    delivered late (EventBridge and Lambda retry for up to a day) is admitted and, with
    no mark to find, schedules or runs a drain for a change AWS already closed: the
    very case da731a1's mark exists for."""
    from drainer.lifecycle import closed, ec2_events

    monkeypatch.setattr(ec2_events, "_lifecycle_state", lambda *_: "Warmed:Stopped")
    ours = _our_instance(clients)
    settings = Settings(
        cluster_name="prod", scheduled_change_lead_seconds=3600, scheduler_role_arn=ROLE
    )
    tools = Tools(settings, clients, _no_kube, clock=FakeClock(CLOSED_AT))
    raw = json.loads(json.dumps(load_event("health-scheduled-change")).replace(INSTANCE, ours))
    closing = _closing(raw, updated=CLOSED_UPDATED)

    closed.handle(closing, tools, _invocation())

    listed = clients.scheduler.list_schedules()["Schedules"]
    assert len(listed) == 1, "no mark: a late update drains the node once it is back in service"


def test_closed__another_clusters_instance_in_its_warm_pool__no_marker_is_made(
    clients: aws.AwsClients,
    load_event: LoadEvent,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With neither ALLOWED_ASGS nor ASG_TAG (any group admitted), another cluster's
    instance in its group's warm pool was counted the function's (the warm pool was
    looked at before the cluster): the close made it a 48 h mark, guarding nothing."""
    from drainer.lifecycle import closed, ec2_events

    monkeypatch.setattr(ec2_events, "_lifecycle_state", lambda *_: "Warmed:Stopped")
    group = create_node_group(
        clients.ec2, clients.autoscaling, asg_name="staging-workers", size=1,
        cluster_name="staging",
    )  # fmt: skip
    theirs = str(group.instance_ids[0])
    settings = Settings(
        cluster_name="prod", scheduled_change_lead_seconds=3600, scheduler_role_arn=ROLE
    )
    tools = Tools(settings, clients, _no_kube, clock=FakeClock(CLOSED_AT))
    raw = json.loads(json.dumps(load_event("health-scheduled-change")).replace(INSTANCE, theirs))
    closing = _closing(raw, updated=CLOSED_UPDATED)

    closed.handle(closing, tools, _invocation())

    assert clients.scheduler.list_schedules()["Schedules"] == [], (
        "a 48 h marker for another cluster's instance (in its warm pool)"
    )


@pytest.mark.parametrize(
    "answer",
    [
        {"result": "skipped", "message": "the change is closed: nothing to drain"},
        {"result": "scheduled", "schedule": "s", "message": "superseded"},  # no drain_at
    ],
)
def test_mid_chain__an_answer_that_schedules_nothing__as_it_is__no_notice(
    answer: dict[str, Any],
) -> None:
    """A chain's step that later() answers otherwise than with a new schedule (the
    change closed, an update superseded) is not told as "drain resumes at None"."""
    nothing = cast(Any, None)  # neither the event nor the tools are read

    assert scheduled.mid_chain(dict(answer), nothing, nothing) == answer
