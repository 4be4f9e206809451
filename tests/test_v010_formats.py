"""What 0.1.0 wrote, read by today's code: the node's progress record, the
hand-over payload and a Scheduler schedule's input, as 0.1.0's own code made them
(tests/data/v0.1.0/, made by its extract.py). A stack updated while a drain runs,
a node left drained by 0.1.0 and a schedule 0.1.0 created must all still work.
tests/e2e/test_v010_formats.py replays the same through the handler and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from support.clock import FakeClock

from drainer import aws
from drainer.k8s.cordon import (
    ADDED_CORDON,
    ADDED_LABEL,
    EXCLUDE_LB_LABEL,
    PROGRESS_ANNOTATION,
    added_by_drainer,
    cordon_patch,
    live_drain,
    release_patch,
)
from drainer.k8s.kube import Kube
from drainer.lifecycle import ec2_events, scheduled
from drainer.lifecycle.events import parse_event
from drainer.lifecycle.events_ec2 import EC2_TRIGGERS, Ec2Event, Ec2Kind
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER, LifecycleEvent
from drainer.lifecycle.handover import Handover
from drainer.lifecycle.job import Tools
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.window import Invocation

V010 = Path(__file__).parent / "data" / "v0.1.0"
NOW = 1_795_600_000.0
"""The moment extract.py wrote the records at (its NOW)."""


ROLE = "arn:aws:iam::123456789012:role/eks-node-drainer-SchedulerRole-ABC123"
FUNCTION_ARN = "arn:aws:lambda:eu-west-1:123456789012:function:eks-node-drainer"


def v010(name: str) -> Any:
    return json.loads((V010 / f"{name}.json").read_text())


def _node(record: str) -> dict[str, Any]:
    node: dict[str, Any] = v010("progress")[record]
    return node


def test_release_undoes_a_drain_0_1_0_ended__uncordon_label_and_record() -> None:
    patch, release = release_patch(_node("drained"))

    assert patch == {
        "spec": {"unschedulable": False},
        "metadata": {
            "labels": {EXCLUDE_LB_LABEL: None},
            "annotations": {PROGRESS_ANNOTATION: None},
        },
    }
    assert release.kept == [] and release.warning == ""


def test_release_of_a_0_1_0_drain_keeps_the_cordon_someone_set_before_it() -> None:
    patch, release = release_patch(_node("timed_out_cordoned_before"))

    assert "spec" not in patch, "the operator's cordon stays"
    assert patch["metadata"]["labels"] == {EXCLUDE_LB_LABEL: None}
    assert release.kept == ["cordoned before the drain: left cordoned"]


def test_a_drain_0_1_0_was_running_is_still_told_apart__and_what_it_added_is_kept() -> None:
    spot = _node("spot_draining")
    live = live_drain(spot, NOW + 10, EC2_TRIGGERS | {TERMINATE_HOOK_TRIGGER})
    assert live is not None and live.trigger == Ec2Kind.INTERRUPTION
    assert live.until == NOW + 3600

    # Today's drain taking the node over keeps 0.1.0's record of what it added: a
    # release after it still uncordons the node 0.1.0 cordoned, and only that.
    patch, added = cordon_patch(_node("draining"), NOW + 60, trigger=TERMINATE_HOOK_TRIGGER)
    assert added == {ADDED_CORDON, ADDED_LABEL}
    record = json.loads(patch["metadata"]["annotations"][PROGRESS_ANNOTATION])
    assert record["added"] == [ADDED_CORDON, ADDED_LABEL]
    assert added_by_drainer(spot) == {ADDED_CORDON}, "0.1.0's operator label stays the operator's"


def test_a_0_1_0_hand_over_payload_parses_with_its_start_and_counts() -> None:
    payload = v010("handover")
    started = payload["drainer"]["started_at"]

    event = parse_event(payload, now=started + 900)

    assert isinstance(event, LifecycleEvent), event
    assert event.handover == Handover(started_at=started, handovers=1, heartbeats=3)
    assert event.instance_id == payload["detail"]["EC2InstanceId"]


def _no_kube(*args: Any) -> Kube:
    raise AssertionError("no Kubernetes call expected")


def test_a_0_1_0_schedule_input_is_drained_now__never_scheduled_again(moto_aws: None) -> None:
    schedule = v010("schedule")
    assert schedule["input"]["drainer_schedule"] == schedule["name"]

    event = parse_event(schedule["input"])

    assert isinstance(event, Ec2Event), event
    assert event.kind is Ec2Kind.SCHEDULED_CHANGE and event.schedule == schedule["name"]
    assert event.acts_at is not None
    # The schedule fires an hour before the window, with the lead 0.1.0 had.
    clients = aws.make_clients(boto3.Session(region_name="eu-west-1"))
    settings = Settings(scheduled_change_lead_seconds=3600, scheduler_role_arn=ROLE)
    tools = Tools(settings, clients, _no_kube, clock=FakeClock(event.acts_at - 3600))
    identity = aws.NodeIdentity(
        event.instance_id, "ip-10-0-1-23.eu-west-1.compute.internal", "eu-west-1a"
    )
    found = ec2_events.Ec2Target(event, identity, "prod", "eks-workers-a")
    invocation = Invocation(remaining_seconds=lambda: 900.0, function_arn=FUNCTION_ARN)

    later = scheduled.later(found.event, tools, invocation, schedule["input"])

    assert later is None, "the schedule's own invocation drains"
    assert clients.scheduler.list_schedules()["Schedules"] == []


@pytest.mark.parametrize("record", ["draining", "drained", "timed_out_cordoned_before"])
def test_the_0_1_0_records_are_what_0_1_0_wrote(record: str) -> None:
    """The fixtures are 0.1.0's: a record of each phase, in its keys."""
    progress = json.loads(_node(record)["metadata"]["annotations"][PROGRESS_ANNOTATION])
    keys = {"draining": {"phase", "trigger", "since", "until", "added"}}
    assert set(progress) == keys.get(record, {"phase", "at", "evicted", "added"})
