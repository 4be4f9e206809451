"""Warm pools, through the real handler: a scale-in into the warm pool drains the node
like any other (its record, end line and notice saying where the instance goes);
the scale-out that takes the instance back (the launch hook, Origin WarmPool)
releases the node once it is Ready again, so that pods are scheduled on it; a cordon
someone else set stays."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from drainer.k8s.cordon import EXCLUDE_LB_LABEL, PROGRESS_ANNOTATION
from kubesim import KubeSim
from kubesim.faults import Fault
from testbed import World
from testbed import workloads as w
from testbed.world import DRAINER_USER, SHUTDOWN_TAINT, place_on, pods_on, wait_until

from .conftest import Invoke, LogCapture, invoke_meanwhile
from .test_notices import Inbox
from .test_notices import inbox as notices_inbox

inbox = notices_inbox  # the fixture: an SNS topic read back through SQS

LAUNCH = {"LAUNCH_HOOK": "true"}
HOSTNAME = "kubernetes.io/hostname"


def _into_the_pool(world: World, invoke: Invoke, **env: Any) -> tuple[str, str, Any]:
    """Scale in by one into the warm pool, the function draining the instance's node;
    the instance's id, its node and the end line."""
    world.put_warm_pool()
    (event,) = world.scale_in()
    instance = event["detail"]["EC2InstanceId"]
    assert event["detail"]["Destination"] == "WarmPool"
    node = world.nodes[instance]
    # The kubelet labels its node with its hostname: what a pod pinned to it selects.
    world.cluster.client.patch("Node", node, {"metadata": {"labels": {HOSTNAME: node}}})
    place_on(world, node, [w.deployment("web", 2)])
    summary = invoke(event, **env)
    return instance, node, summary


def _record(world: World, node: str) -> dict[str, Any] | None:
    raw = (world.cluster.get("Node", node)["metadata"].get("annotations") or {}).get(
        PROGRESS_ANNOTATION
    )
    return None if raw is None else dict(json.loads(raw))


def _back_from_the_pool(
    world: World, invoke: Invoke, drainer_logs: LogCapture, instance: str, **env: Any
) -> tuple[dict[str, Any], dict[str, Any], float]:
    """The instance stopped in the pool, then taken back: the function waits for its
    node (EC2's shutdown taint goes once the instance runs) and releases it. The end
    line, the launch event, and when the taint went."""
    world.instance_stopped(instance)
    back, event = world.scale_out_from_warm_pool()
    assert back == instance, "the pool's one instance comes back"
    # The instance boots while the function waits; the cloud controller then removes
    # the taint.
    summary, started = invoke_meanwhile(
        invoke,
        event,
        drainer_logs,
        "to lose the taint",
        lambda: world.instance_started(instance),
        **LAUNCH,
        **env,
    )
    return summary, event, started


def test_scale_in_to_the_warm_pool_and_back__drained__then_released_and_pods_scheduled_on_it(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    sns = boto3.client("sns", region_name=world.region)
    sqs = boto3.client("sqs", region_name=world.region)
    topic = sns.create_topic(Name="drains")["TopicArn"]
    queue = sqs.create_queue(QueueName="drains-inbox")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn["QueueArn"])

    instance, node, summary = _into_the_pool(world, invoke, NOTIFICATION_TOPIC_ARN=topic, **LAUNCH)

    assert summary["result"] == "drained", summary
    assert summary["destination"] == "warm-pool"
    assert summary["evicted"] == 2
    assert not pods_on(world.cluster, node), "the pods went"
    record = _record(world, node)
    assert record is not None
    assert (record["phase"], record["destination"]) == ("drained", "warm-pool")
    assert world.cluster.get("Node", node)["spec"].get("unschedulable"), "cordoned meanwhile"
    (notice,) = [json.loads(m["Body"]) for m in sqs.receive_message(QueueUrl=queue)["Messages"]]
    assert "The instance goes to the warm pool" in notice["Message"]
    ec2 = boto3.client("ec2", region_name=world.region)
    described = ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]
    assert described["State"]["Name"] == "stopped", "kept in the pool, not terminated"

    released, event, taint_gone = _back_from_the_pool(world, invoke, drainer_logs, instance)

    assert released["result"] == "joined", released
    assert released["origin"] == "warm-pool"
    assert "uncordoned" in released["released"]
    assert f"removed label {EXCLUDE_LB_LABEL}" in released["released"]
    assert released["kept"] == []
    current = world.cluster.get("Node", node)
    assert not current["spec"].get("unschedulable")
    assert EXCLUDE_LB_LABEL not in (current["metadata"].get("labels") or {})
    assert _record(world, node) is None
    (complete,) = [
        c
        for c in world.completions()
        if c["LifecycleActionToken"] == event["detail"]["LifecycleActionToken"]
    ]
    assert complete["LifecycleActionResult"] == "CONTINUE"
    assert complete["time"] >= taint_gone, "completed before the node could be used"
    states = world.autoscaling.describe_auto_scaling_instances(InstanceIds=[instance])
    assert states["AutoScalingInstances"][0]["LifecycleState"] == "InService"

    pinned = w.deployment("back", 1)
    pinned["spec"]["template"]["spec"]["nodeSelector"] = {HOSTNAME: node}
    world.cluster.apply(pinned)
    wait_until(
        lambda: any(
            p["metadata"]["name"].startswith("back-") and p["status"].get("phase") == "Running"
            for p in pods_on(world.cluster, node)
        ),
        30,
    )


def test_node_cordoned_by_someone_else__stays_cordoned_after_the_cycle__said(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    world.put_warm_pool()
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    world.cluster.client.patch("Node", node, {"spec": {"unschedulable": True}})
    (event,) = world.scale_in()
    assert event["detail"]["EC2InstanceId"] == instance

    summary = invoke(event, **LAUNCH)
    assert summary["result"] == "drained", summary
    released, _, _ = _back_from_the_pool(world, invoke, drainer_logs, instance)

    assert released["result"] == "joined", released
    assert released["kept"] == ["cordoned before the drain: left cordoned"]
    assert "uncordoned" not in released["released"]
    assert "still cordoned (not by the drainer)" in released["message"]
    assert world.cluster.get("Node", node)["spec"].get("unschedulable"), "the operator's cordon"
    assert f"node {node} back from the warm pool: cordoned before the drain" in drainer_logs.text


def test_node_registered_while_warming__left_alone_by_every_event_of_its_pool_life(
    world: World, invoke: Invoke
) -> None:
    """A warmed instance whose user data joined the cluster anyway: its launch into
    the pool, its stop there and its termination from it never touch its node."""
    world.put_warm_pool()
    instance, event = world.launch_into_warm_pool()
    node = world.add_node(instance)

    joined = invoke(event, **LAUNCH)
    assert joined["result"] == "joined"
    assert "goes to the warm pool" in joined["message"]
    (complete,) = world.completions()
    assert complete["LifecycleActionResult"] == "CONTINUE"

    stopping = invoke(world.state_change(instance, "stopping"), STATE_CHANGE_DRAIN="true")
    assert stopping["result"] == "skipped", stopping
    assert "is in the warm pool" in stopping["reason"]
    assert "(Warmed:Stopped)" in stopping["reason"]

    terminated = invoke(world.terminate(instance))
    assert terminated["result"] == "no_node", terminated
    assert "leaves the warm pool to be terminated" in terminated["message"]
    assert terminated["lifecycle_result"] == "CONTINUE"

    after = world.cluster.get("Node", node)
    assert not after["spec"].get("unschedulable"), "never cordoned"
    assert EXCLUDE_LB_LABEL not in (after["metadata"].get("labels") or {})
    assert PROGRESS_ANNOTATION not in (after["metadata"].get("annotations") or {}), "no record"


def test_launch_hook_off__the_drain_says_to_release_by_hand__a_return_never_ready_says_so(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    """Without LAUNCH_HOOK nothing will see the instance come back: the end line and
    the log say so. With it, a node that is never usable again within the launch's
    time (its shutdown taint stays) is not released, and the error line says how."""
    instance, node, summary = _into_the_pool(world, invoke)

    assert summary["result"] == "drained"
    assert summary["message"] == (
        "LAUNCH_HOOK is off: when the instance comes back from the warm pool, run "
        f"`eks-node-drainer release --node {node}` (its node stays cordoned until then)"
    )

    world.instance_stopped(instance)
    _, event = world.scale_out_from_warm_pool()
    back = invoke(
        event, timeout=8, HANDOVER_MARGIN_SECONDS=5, LAUNCH_TIMEOUT_RESULT="continue", **LAUNCH
    )

    assert (back["result"], back["lifecycle_result"]) == ("not_joined", "CONTINUE"), back
    assert f"to lose the taint {SHUTDOWN_TAINT}" in back["message"]
    assert back["released"] == []
    assert (
        f"node {node} comes back from the warm pool not released (not_joined): it stays "
        "cordoned and out of the load balancers; run "
        f"`eks-node-drainer release --node {node}` once it is Ready"
    ) in drainer_logs.text
    assert world.cluster.get("Node", node)["spec"].get("unschedulable")


@pytest.mark.kubesim_only("RBAC refusing the release's patch of the node, to the function alone")
def test_release_refused__the_node_stays_cordoned__the_notice_and_a_warning_event_say_so(
    world: World, invoke: Invoke, drainer_logs: LogCapture, sim: KubeSim, inbox: Inbox
) -> None:
    """The instance comes back from the warm pool and its node is Ready, but the
    release is refused: CONTINUE all the same, and the node stays cordoned and out of
    the load balancers. An ERROR line was the only sign; the end line said `joined`."""
    instance, node, summary = _into_the_pool(world, invoke, **LAUNCH)
    assert summary["result"] == "drained", summary
    sim.faults.add(
        Fault(kind="status", method="PATCH", path=f"/api/v1/nodes/{node}$", status=403,
              reason="Forbidden", user=DRAINER_USER,
              message=f'nodes "{node}" is forbidden: User "{DRAINER_USER}" cannot patch '
              'resource "nodes" in API group "" at the cluster scope')
    )  # fmt: skip

    back, _, _ = _back_from_the_pool(
        world, invoke, drainer_logs, instance, NOTIFICATION_TOPIC_ARN=inbox.topic
    )

    assert world.cluster.get("Node", node)["spec"].get("unschedulable")
    assert (back["result"], back["lifecycle_result"]) == ("joined", "CONTINUE"), back
    notices = [n for n in inbox.notices() if "NOT RELEASED" in n["Subject"]]
    assert len(notices) == 1, "a node left cordoned, and no notice"
    assert f"eks-node-drainer release --node {node}" in notices[0]["Message"], notices
    wait_until(lambda: _release_events(world, node), 10)
    (told,) = _release_events(world, node)
    assert told["type"] == "Warning" and "eks-node-drainer release" in told["message"], told
    assert back["not_released"] == "release_failed", back
    assert back["released"] == [], back


def _release_events(world: World, node: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.kind=Node,involvedObject.name={node}"
    found = world.cluster.client.call("GET", "/api/v1/events", query={"fieldSelector": selector})
    return [e for e in found["items"] if e.get("reason") == "ReleaseFailed"]
