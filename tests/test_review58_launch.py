"""Review 58 of the launch hook and warm pools (drainer/lifecycle/launch.py and its
helpers), through launch.handle on moto and kubesim, as tests/test_launch_answered.py
runs it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from realapi import StaticToken
from support.clock import FakeClock

from awssim import AwsSim
from awssim.world import create_node_group
from drainer import aws
from drainer.k8s.client import RetryPolicy
from drainer.k8s.cordon import PROGRESS_ANNOTATION
from drainer.k8s.kube import Kube
from drainer.lifecycle import events, events_hook, launch
from drainer.lifecycle.job import Tools
from drainer.lifecycle.settings import Settings
from kubesim import KubeSim
from kubesim.faults import Fault
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
    retry: RetryPolicy | None = None

    @property
    def event(self) -> events_hook.LifecycleEvent:
        parsed = events.parse_event(self.raw_event)
        assert isinstance(parsed, events_hook.LifecycleEvent)
        return parsed

    @property
    def node(self) -> str:
        return aws.describe_instance(self.clients.ec2, self.event.instance_id).private_dns_name

    def kube(self, *_: object) -> Kube:
        client = Kube.for_cluster(
            self.kubesim.url, self.kubesim.ca_pem, StaticToken(self.kubesim.admin_token)
        )
        if self.retry is not None:
            client.retry = self.retry
        return client

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


def test_api_server_unreachable_for_the_whole_wait__not_abandoned_as_never_registered(
    launching: Launch,
) -> None:
    """The node registered and is Ready, but the function cannot reach the API server
    for the whole wait (the Lambda's VPC cannot route to a private endpoint, a
    security group, a long control-plane outage: every call a 5xx or a timeout).
    Each look's KubeError is swallowed at INFO ("failed for now") and the timeout
    reports the empty first `Look()`: `not_joined`, waiting for `registration`,
    ABANDON, and a notice saying "The node never registered: see the instance's
    kubelet, its user data...". Every healthy instance is terminated and an instance
    refresh stops, for the drainer's own outage, where "the cluster cannot be read at
    all" promises CONTINUE (`failed`): a broken drainer never stops a group from
    launching."""
    node = objects.node(launching.node, instance=launching.event.instance_id, ready=True)
    launching.kubesim.apply(node)
    launching.retry = RetryPolicy(attempts=1)  # no real back-off sleeps in the test
    launching.kubesim.faults.add(Fault(kind="status", status=503, reason="ServiceUnavailable"))

    summary = launching.handle(FakeClock(time.time()))

    assert summary.get("waiting_for") != "registration", (
        f"a node that registered reported as never registered: {summary}"
    )
    assert summary["lifecycle_result"] == "CONTINUE", (
        f"a healthy instance abandoned because the API server could not be reached: {summary}"
    )
    for notice in launching.sns.sent:
        assert "never registered" not in notice["Message"], notice["Message"]


def test_warm_pool_return_action_gone_then_not_ready_in_time__not_told_as_abandoned(
    launching: Launch,
) -> None:
    """A return from the warm pool whose action is gone (Lambda's queue held the event
    past the hook's timeout: DefaultResult CONTINUE put the instance in service) is
    waited for all the same, so that its node, cordoned by the drain into the pool,
    is released. When that node is not usable by LAUNCH_TIMEOUT_SECONDS, the launch
    ends `not_joined` with lifecycle result ABANDON (nothing is sent: the action is
    gone), and its notice says "ABANDON: Auto Scaling terminates the instance and
    launches another", with no word of the release. The instance is in fact in
    service, its node cordoned and out of the load balancers by the drain, and nothing
    ever releases it: `not_released` is empty, no ERROR line names the release
    command (as it does for the same node with LAUNCH_TIMEOUT_RESULT=continue)."""
    launching.raw_event["detail"]["Origin"] = "WarmPool"
    record = {"phase": "drained", "destination": "warm-pool", "added": ["cordon"],
              "since": time.time() - 3600, "at": time.time() - 3500}  # fmt: skip
    node = objects.node(
        launching.node, instance=launching.event.instance_id, ready=False, unschedulable=True,
        annotations={PROGRESS_ANNOTATION: json.dumps(record)},
    )  # fmt: skip
    launching.kubesim.apply(node)
    launching.sim.expire_action(launching.event.instance_id)

    # The late event: LAUNCH_TIMEOUT_SECONDS from its time has passed, one look.
    summary = launching.handle(FakeClock(time.time() + 900))

    assert summary["completed"] is not True, summary
    assert launching.kubesim.get("Node", launching.node)["spec"].get("unschedulable")
    assert summary["not_released"], f"in service, cordoned by the drain, and unsaid: {summary}"
    (notice,) = launching.sns.sent
    text = notice["Message"]
    assert "Auto Scaling terminates the instance" not in text, text
    assert f"release --node {launching.node}" in text, text
