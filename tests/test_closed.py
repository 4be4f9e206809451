"""drainer/lifecycle/closed.py: an AWS Health scheduled change that is over releases
the node its drain left cordoned, only where the instance runs, EC2 has nothing else
scheduled for it, and the node's record is of that drain. The release itself, through
the real handler on both backends, is in tests/e2e/test_ec2_events.py."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from awssim import ec2_events as health
from awssim.instances import schedule_events
from awssim.world import create_node_group
from drainer import aws
from drainer.k8s.cordon import PROGRESS_ANNOTATION
from drainer.k8s.kube import Kube
from drainer.lifecycle import closed
from drainer.lifecycle.events import parse_event
from drainer.lifecycle.events_ec2 import ChangeClosed
from drainer.lifecycle.job import Tools
from drainer.lifecycle.settings import Settings

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's
CLUSTER = "prod"


@pytest.fixture
def clients(moto_aws: None) -> aws.AwsClients:
    return aws.make_clients(boto3.Session(region_name=REGION))


def _no_kube(*args: Any) -> Kube:
    raise AssertionError("the node was looked at: it should have been left before")


def _instance(clients: aws.AwsClients) -> str:
    group = create_node_group(
        clients.ec2, clients.autoscaling, asg_name="eks-workers", size=1, cluster_name=CLUSTER
    )
    return group.instance_ids[0]


def _closing(instance_id: str) -> ChangeClosed:
    raw = health.scheduled_change(ACCOUNT, REGION, [instance_id], starts_in=-3600)
    raw["detail"]["statusCode"] = "closed"
    parsed = parse_event(json.loads(json.dumps(raw)))
    assert isinstance(parsed, ChangeClosed), parsed
    return parsed


def _tools(clients: aws.AwsClients, **settings: Any) -> Tools:
    return Tools(Settings(cluster_name=CLUSTER, **settings), clients, _no_kube)


def test_closed__ec2_has_another_event_scheduled__node_left_cordoned_for_it(
    clients: aws.AwsClients,
) -> None:
    """A node drained ahead of a second change (a stop next week) stays cordoned when
    the first closes: released, its pods came back and went down with the second."""
    instance = _instance(clients)
    schedule_events(
        ACCOUNT,
        REGION,
        instance,
        [
            {"Code": "system-reboot", "Description": "[Completed] reboot done"},
            {"Code": "instance-stop", "Description": "[Canceled] not needed"},
            {
                "Code": "instance-retirement",
                "Description": "The instance is running on degraded hardware",
                "NotBefore": datetime(2026, 12, 3, 9, 0, tzinfo=UTC),
            },
        ],
    )

    result = closed.handle(_closing(instance), _tools(clients), None)

    assert result["released"] == []
    assert result["kept"][instance] == (
        f"EC2 still has instance-retirement at 2026-12-03T09:00:00Z scheduled for "
        f"instance {instance}: its node stays cordoned for it"
    )


class LookedAt(Exception):
    """The release went on to the cluster."""


def _looked_at(*args: Any) -> Kube:
    raise LookedAt


def test_closed__ec2s_own_event_for_this_change_not_yet_marked_over__not_counted(
    clients: aws.AwsClients,
) -> None:
    """EC2 may not have marked its event for the closing change completed yet: that
    event, beginning at the change's start, is not a second change to wait for."""
    instance = _instance(clients)
    closing = _closing(instance)
    starts = closing.first.acts_at
    assert starts is not None
    schedule_events(
        ACCOUNT,
        REGION,
        instance,
        [{"Code": "system-reboot", "Description": "scheduled reboot",
          "NotBefore": datetime.fromtimestamp(starts, UTC)}],
    )  # fmt: skip
    tools = Tools(Settings(cluster_name=CLUSTER), clients, _looked_at)

    clients.eks.create_cluster(
        name=CLUSTER, roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks", resourcesVpcConfig={}
    )

    with pytest.raises(LookedAt):
        closed.handle(closing, tools, None)


def test_closed__instance_in_standby__its_node_stays_cordoned(clients: aws.AwsClients) -> None:
    """Not in service in its group (standby; terminating, whose drain may not have
    written its record yet): released, pods were placed on an instance on its way out."""
    instance = _instance(clients)
    clients.autoscaling.enter_standby(
        InstanceIds=[instance], AutoScalingGroupName="eks-workers",
        ShouldDecrementDesiredCapacity=True,
    )  # fmt: skip

    result = closed.handle(_closing(instance), _tools(clients), None)

    assert result["released"] == []
    assert "is Standby in eks-workers, not InService" in result["kept"][instance]


def test_closed__instance_not_running__nothing_to_release(clients: aws.AwsClients) -> None:
    instance = _instance(clients)
    clients.ec2.stop_instances(InstanceIds=[instance])

    result = closed.handle(_closing(instance), _tools(clients), None)

    assert result["kept"] == {instance: f"instance {instance} is stopped: nothing to release"}


def test_closed__scheduled_change_drain_off__nothing_asked_of_aws_or_the_cluster() -> None:
    from test_ec2_events import NO_AWS

    tools = Tools(Settings(scheduled_change_drain=False), NO_AWS, _no_kube)

    result = closed.handle(_closing("i-0a1b2c3d4e5f60718"), tools, None)

    assert result == {
        "result": "closed",
        "reason": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED: closed, the change is over",
        "settled": [],
        "released": [],
        "kept": {},
    }


def _node(record: dict[str, Any] | None) -> dict[str, Any]:
    annotations = {PROGRESS_ANNOTATION: json.dumps(record)} if record is not None else {}
    return {"metadata": {"name": "n1", "annotations": annotations}, "spec": {}}


CLOSED_AT = 1_800_000_000.0


CHANGE = "arn:aws:health:us-east-1::event/EC2/X/X_1"
OTHER = "arn:aws:health:us-east-1::event/EC2/Y/Y_2"


@pytest.mark.parametrize(
    ("record", "why"),
    [
        (None, "no eks-node-drainer record"),
        ({"phase": "drained", "trigger": "terminate-hook", "added": ["cordon"]}, "terminate-hook"),
        ({"phase": "drained", "added": ["cordon"]}, "the command line or an earlier version"),
        ({"phase": "drained", "trigger": "scheduled-change"}, "another drain (scheduled-change)"),
        ({"phase": "drained", "trigger": "scheduled-change", "change": OTHER}, "another drain"),
        ({"phase": "draining", "trigger": "scheduled-change", "change": CHANGE}, ""),
        (
            {"phase": "drained", "trigger": "scheduled-change", "change": CHANGE,
             "at": CLOSED_AT + 5},
            "ended after the change closed",
        ),
        ({"phase": "drained", "trigger": "scheduled-change", "change": CHANGE,
          "at": CLOSED_AT - 5}, ""),
        ({"phase": "timed_out", "trigger": "scheduled-change", "change": CHANGE,
          "at": CLOSED_AT - 5}, ""),
    ],
    ids=["none", "terminate-hook", "no-trigger", "no-change", "another-change", "draining",
         "after", "drained", "timed-out"],
)  # fmt: skip
def test_closed__only_the_record_of_this_changes_ended_drain_is_released(
    record: dict[str, Any] | None, why: str
) -> None:
    """A node drained for a second change still to come (its record names that
    change) was released by the first one's close."""
    event = _closing("i-0a1b2c3d4e5f60718").first
    event = dataclasses.replace(event, event_time="2027-01-15T08:00:00Z", change_id=CHANGE)
    assert event.issued_at == CLOSED_AT

    said = closed._not_its_drain(_node(record), event)

    assert (why in said) if why else said == ""
