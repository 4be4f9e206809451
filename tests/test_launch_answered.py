"""The launch hook through launch.handle, on moto and kubesim: a duplicate (or late)
delivery of a launch event whose lifecycle action was answered already, and the
advice a notice gives for a node cordoned by someone else, fresh or back from the
warm pool."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from realapi import StaticToken
from support.clock import FakeClock
from support.metrics import emf_lines

from awssim import AwsSim
from awssim.world import create_node_group
from drainer import aws
from drainer.k8s.cordon import PROGRESS_ANNOTATION
from drainer.k8s.kube import Kube
from drainer.lifecycle import events, events_hook, launch
from drainer.lifecycle.job import Tools
from drainer.lifecycle.settings import Settings
from kubesim import KubeSim
from testbed import workloads as objects

REGION = "us-east-1"
CLUSTER = "prod"
HOOK = "eks-node-drainer-launch"
TOPIC = "arn:aws:sns:us-east-1:123456789012:drains"


class RecordingSns:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def publish(self, **request: Any) -> dict[str, str]:
        self.sent.append(request)
        return {"MessageId": "1"}


@dataclass
class Launch:
    """A new instance in Pending:Wait on the launch hook (moto), its cluster
    (kubesim), and what the function publishes."""

    sim: AwsSim
    kubesim: KubeSim
    clients: aws.AwsClients
    sns: RecordingSns
    raw_event: dict[str, Any]

    @property
    def event(self) -> events_hook.LifecycleEvent:
        parsed = events.parse_event(self.raw_event)
        assert isinstance(parsed, events_hook.LifecycleEvent)
        return parsed

    @property
    def node(self) -> str:
        return aws.describe_instance(self.clients.ec2, self.event.instance_id).private_dns_name

    def kube(self, *_: object) -> Kube:
        return Kube.for_cluster(
            self.kubesim.url, self.kubesim.ca_pem, StaticToken(self.kubesim.admin_token)
        )

    def register(self, *, cordoned: bool = False) -> None:
        """The instance's node registers, Ready (cordoned: by someone, not the drainer)."""
        node = objects.node(
            self.node, instance=self.event.instance_id, ready=True, unschedulable=cordoned
        )
        self.kubesim.apply(node)

    def handle(self, clock: FakeClock, **settings: Any) -> dict[str, Any]:
        chosen = Settings(
            launch_hook=True,
            cluster_name=CLUSTER,
            notification_topic_arn=TOPIC,
            launch_wait_daemonsets=False,
            **settings,
        )
        tools = Tools(chosen, self.clients, self.kube, clock, clock.sleep)
        return launch.handle(self.event, tools, None)


@pytest.fixture
def kubesim() -> Iterator[KubeSim]:
    with KubeSim() as running:
        yield running


@pytest.fixture
def launching(moto_aws: None, kubesim: KubeSim) -> Launch:
    made = aws.make_clients(boto3.Session(region_name=REGION))
    sns = RecordingSns()
    clients = aws.AwsClients(made.ec2, made.autoscaling, made.eks, lambda: None, sns=lambda: sns)
    group = create_node_group(
        clients.ec2, clients.autoscaling, asg_name="eks-workers", size=1, hook_name="drain",
        cluster_name=CLUSTER,
    )  # fmt: skip
    clients.autoscaling.put_lifecycle_hook(
        AutoScalingGroupName="eks-workers",
        LifecycleHookName=HOOK,
        LifecycleTransition="autoscaling:EC2_INSTANCE_LAUNCHING",
        HeartbeatTimeout=600,
        DefaultResult="CONTINUE",
    )
    sim = AwsSim(region=REGION)
    sim.point_cluster_at(CLUSTER, kubesim.url, kubesim.ca_data)
    token = sim.begin_launch("eks-workers", group.instance_ids[0], HOOK)
    return Launch(sim, kubesim, clients, sns, sim.event_for(token))


def _launch_counts(out: str) -> list[list[int]]:
    (metrics,) = emf_lines(out)
    return [metrics[name] for name in ("LaunchJoined", "LaunchNotJoined", "LaunchFailed")]


def test_duplicate_of_an_abandoned_launch__stale__no_wait_no_answer_no_notice(
    launching: Launch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """EventBridge delivers at least once: the first delivery waited, its node never
    came, it answered ABANDON and said so. The second finds no action (the first
    heartbeat says so): it waits for nothing, answers nothing, tells no one the node
    did not join, and counts no launch."""
    first = launching.handle(FakeClock(time.time()))
    assert (first["result"], first["lifecycle_result"]) == ("not_joined", "ABANDON"), first
    assert len(launching.sns.sent) == 1 and len(launching.sim.calls("complete")) == 1
    assert _launch_counts(capsys.readouterr().out) == [[0], [1], [0]]

    clock = FakeClock(time.time())
    caplog.clear()
    with caplog.at_level(logging.INFO):
        again = launching.handle(clock)

    assert again["result"] == "stale", again
    assert (again["lifecycle_result"], again["completed"]) == ("none", None)
    assert "already answered" in again["message"], again["message"]
    assert "duplicate or late" in again["message"]
    said = [r.getMessage() for r in caplog.records if "already answered" in r.getMessage()]
    assert said, "no log line says why nothing was waited for"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "a warning"
    assert clock.sleeps == [], "it waited for the node of an action already answered"
    assert len(launching.sim.calls("complete")) == 1, "answered again"
    assert len(launching.sns.sent) == 1, f"a second notice: {launching.sns.sent[-1]}"
    assert _launch_counts(capsys.readouterr().out) == [[0], [0], [0]]


def test_duplicate_of_a_launch_that_joined__stale__the_node_told_once(
    launching: Launch,
) -> None:
    """The first delivery answered CONTINUE once the node could take pods; a second
    delivery of the same event says nothing more about it (no second Event, no
    second answer)."""
    launching.register()
    first = launching.handle(FakeClock(time.time()))
    assert (first["result"], first["completed"], first["heartbeats"]) == ("joined", True, 1)

    again = launching.handle(FakeClock(time.time()))

    assert again["result"] == "stale", again
    assert len(launching.sim.calls("complete")) == 1
    assert launching.sns.sent == []
    told = [
        e
        for e in launching.kubesim.list("Event", "default")
        if e.get("involvedObject", {}).get("name") == launching.node
    ]
    assert len(told) == 1, told


def test_late_launch_event__action_timed_out__stale_not_not_joined(
    launching: Launch,
) -> None:
    """Lambda's queue may hold an event until after its action timed out
    (DefaultResult applied): no "did not join" for a launch nobody waits on."""
    launching.sim.expire_action(launching.event.instance_id)

    summary = launching.handle(FakeClock(time.time()))

    assert summary["result"] == "stale", summary
    assert summary["heartbeats"] == 0
    assert launching.sns.sent == []
    assert launching.sim.calls("complete") == []


@pytest.mark.parametrize(
    ("origin", "said", "not_said"),
    [
        ("EC2", ["LAUNCH_WAIT_FOR_UNCORDON", "kubectl uncordon"], []),
        (
            "WarmPool",
            ["before it went into the warm pool", "release --node", "kubectl uncordon"],
            ["LAUNCH_WAIT_FOR_UNCORDON"],
        ),
    ],
)
def test_joined_cordoned__the_notice_advises_what_applies(
    launching: Launch, origin: str, said: list[str], not_said: list[str]
) -> None:
    """A node Ready but cordoned by someone else: a fresh one was cordoned at
    registration (LAUNCH_WAIT_FOR_UNCORDON would wait for the uncordon); one back from
    the warm pool was cordoned before it went there, with no record of the drainer's
    to release (LAUNCH_WAIT_FOR_UNCORDON does nothing for it)."""
    launching.raw_event["detail"]["Origin"] = origin
    launching.register(cordoned=True)

    summary = launching.handle(FakeClock(time.time()))

    assert (summary["result"], summary["cordoned"]) == ("joined", True), summary
    (notice,) = launching.sns.sent
    text = notice["Message"]
    for words in said:
        assert words in text, text
    for words in not_said:
        assert words not in text, text
    assert launching.node in text


def test_back_from_the_warm_pool_never_untainted__the_notice_advises_what_it_lacked(
    launching: Launch,
) -> None:
    """Back from the warm pool, still cordoned by the drain that sent it there (the
    release undoes that once it is Ready) and keeping EC2's shutdown taint past the
    timeout: the notice is about the taint, whose owner is the cloud controller."""
    launching.raw_event["detail"]["Origin"] = "WarmPool"
    record = {"phase": "drained", "destination": "warm-pool", "added": ["cordon"]}
    node = objects.node(
        launching.node,
        instance=launching.event.instance_id,
        ready=True,
        unschedulable=True,
        taints=[{"key": launch.SHUTDOWN_TAINT, "effect": "NoSchedule"}],
        annotations={PROGRESS_ANNOTATION: json.dumps(record)},
    )
    launching.kubesim.apply(node)

    summary = launching.handle(FakeClock(time.time()))

    assert summary["result"] == "not_joined", summary
    (notice,) = launching.sns.sent
    text = notice["Message"]
    assert f"taint {launch.SHUTDOWN_TAINT}" in text
    assert "cloud controller" in text and "runs again" in text, text
    for wrong in ("LAUNCH_WAIT_FOR_UNCORDON", "LAUNCH_STARTUP_TAINTS", "not by eks-node-drainer"):
        assert wrong not in text, text
