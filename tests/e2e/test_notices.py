"""Drain notices: a message for people on an SNS topic (moto's, read back through
an SQS subscription) when a drain starts, ends or times out; a notice that cannot
be sent never fails the drain."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from testbed import World
from testbed import workloads as w
from testbed.world import place_on

from .conftest import Invoke, LogCapture, place_guarded
from .test_faults import nearly_timed_out


@dataclass
class Inbox:
    topic: str
    queue: str
    sqs: Any

    def notices(self) -> list[dict[str, Any]]:
        found = []
        while True:
            batch = self.sqs.receive_message(QueueUrl=self.queue, MaxNumberOfMessages=10)
            messages = batch.get("Messages", [])
            if not messages:
                return found
            for message in messages:
                found.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=self.queue, ReceiptHandle=message["ReceiptHandle"])


@pytest.fixture
def inbox(world: World) -> Inbox:
    sns = boto3.client("sns", region_name=world.region)
    sqs = boto3.client("sqs", region_name=world.region)
    topic = sns.create_topic(Name="drains")["TopicArn"]
    queue = sqs.create_queue(QueueName="drains-inbox")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    return Inbox(topic, queue, sqs)


def _attributes(notice: dict[str, Any]) -> dict[str, str]:
    return {k: v["Value"] for k, v in notice.get("MessageAttributes", {}).items()}


def test_drained__start_and_end_notices__result_and_counts(
    world: World, invoke: Invoke, inbox: Inbox
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2)])

    summary = invoke(
        world.terminate(instance), NOTIFICATION_TOPIC_ARN=inbox.topic, NOTIFY_ON_START="true"
    )

    assert summary["result"] == "drained"
    start, end = inbox.notices()
    assert start["Subject"] == f"eks-node-drainer: draining {instance} ({world.group.asg_name})"
    assert _attributes(start)["result"] == "started"
    assert end["Subject"] == f"eks-node-drainer: {node} drained"
    assert f"Instance {instance} of {world.group.asg_name}, node {node}" in end["Message"]
    assert "Lifecycle action: CONTINUE." in end["Message"]
    assert "Pods evicted: 2." in end["Message"]
    assert _attributes(end) == {
        "result": "drained",
        "cluster": world.cluster_name,
        "asg_name": world.group.asg_name,
        "instance_id": instance,
    }


def test_timed_out__notice_names_the_budget_and_the_pods_left(
    world: World, invoke: Invoke, inbox: Inbox
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_guarded(world, 1)
    event = nearly_timed_out(world.terminate(instance), seconds_left=6.0)

    summary = invoke(
        event,
        NOTIFICATION_TOPIC_ARN=inbox.topic,
        TIMEOUT_POLICY="continue",
        DRAIN_TIMEOUT_SECONDS=60,
    )

    assert summary["result"] == "timed_out"
    (notice,) = inbox.notices()
    assert notice["Subject"] == f"eks-node-drainer: {node} drain TIMED OUT"
    assert "Budgets that held pods back: default/guard." in notice["Message"]
    assert "Left on the node:\n  default/guarded-" in notice["Message"]
    assert "PodDisruptionBudget default/guard allows no disruption" in notice["Message"]
    assert _attributes(notice)["result"] == "timed_out"


def test_topic_gone__drain_still_drained__log_says_so(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    missing = f"arn:aws:sns:{world.region}:123456789012:deleted-topic"

    summary = invoke(world.terminate(world.instance_ids[0]), NOTIFICATION_TOPIC_ARN=missing)

    assert summary["result"] == "drained"
    assert summary["lifecycle_result"] == "CONTINUE"
    assert any(
        f"could not send the drain notice to {missing}" in m for m in drainer_logs.messages()
    )
