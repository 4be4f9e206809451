"""The instance leaves its load balancers' target groups before CONTINUE: the
cluster's (by the AWS Load Balancer Controller's tag) and the listed ones, each
after its deregistration delay (awssim/elbv2.py drains targets as ELB does)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from awssim import elbv2 as elb_sim
from awssim.world import create_target_group
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on, wait_until

from .conftest import Invoke, LogCapture

SPEED = 100.0  # a 300 s deregistration delay passes in 3 s


@pytest.fixture
def elbv2(world: World) -> Iterator[Any]:
    elb_sim.reset()
    elb_sim.set_speed(SPEED)
    yield boto3.client("elbv2", region_name=world.region)
    elb_sim.reset()


def _group(elbv2: Any, world: World, name: str, delay: int, cluster: str | None) -> str:
    instance = world.instance_ids[0]
    vpc = world.ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0][
        "VpcId"
    ]
    return create_target_group(
        elbv2, name, vpc=vpc, instances=[instance], delay=delay, cluster=cluster
    )


def _states(elbv2: Any, arn: str) -> list[str]:
    health = elbv2.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
    return [h["TargetHealth"]["State"] for h in health]


def test_two_groups__continue_only_after_both_let_go__others_untouched(
    world: World, invoke: Invoke, elbv2: Any, drainer_logs: LogCapture
) -> None:
    place_on(world, world.nodes[world.instance_ids[0]], [w.deployment("web", 1)])
    controller = _group(elbv2, world, "k8s-web", 300, world.cluster_name)
    listed = _group(elbv2, world, "nodeport-api", 0, None)
    other = _group(elbv2, world, "k8s-other-cluster", 300, "another-cluster")

    summary = invoke(
        world.terminate(world.instance_ids[0]), TARGET_GROUP_ARNS=listed, DRAIN_TIMEOUT_SECONDS=120
    )

    assert summary["result"] == "drained"
    assert summary["lifecycle_result"] == "CONTINUE"
    assert summary["target_groups"] == 2
    assert summary["targets_pending"] == []
    # At least the delay; looks at 1, 2, 4 s, then every 8 s, on a loaded machine.
    assert 300 / SPEED - 0.5 <= summary["target_wait_seconds"] < 300 / SPEED + 15
    let_go = {r["target_group"]: r["time"] for r in elb_sim.released()}
    assert set(let_go) == {controller, listed}
    (complete,) = world.completions()
    assert complete["time"] >= max(let_go.values()), "CONTINUE before a group let go"
    assert _states(elbv2, other) == ["healthy"], "another cluster's group is not ours"
    assert any("left 2 of 2 target group(s) after" in m for m in drainer_logs.messages())


def test_delay_longer_than_the_wait__continue_at_the_limit__log_names_the_group(
    world: World, invoke: Invoke, elbv2: Any, drainer_logs: LogCapture
) -> None:
    elb_sim.set_speed(1.0)  # 300 s: longer than the 1 s the drain may wait
    slow = _group(elbv2, world, "k8s-slow", 300, world.cluster_name)

    summary = invoke(world.terminate(world.instance_ids[0]), TARGET_GROUP_WAIT_SECONDS=1)

    assert summary["result"] == "drained"
    assert summary["lifecycle_result"] == "CONTINUE"
    assert summary["targets_pending"] == [slow]
    assert _states(elbv2, slow) == ["draining"], "deregistered, still draining"
    assert any(f"still draining in {slow}" in m for m in drainer_logs.messages())


def test_wait_off__target_groups_not_looked_at(world: World, invoke: Invoke, elbv2: Any) -> None:
    group = _group(elbv2, world, "k8s-web", 300, world.cluster_name)

    summary = invoke(world.terminate(world.instance_ids[0]), TARGET_GROUP_WAIT_SECONDS=0)

    assert summary["result"] == "drained"
    assert "target_groups" not in summary
    assert _states(elbv2, group) == ["healthy"]


def _ip_group(elbv2: Any, world: World, name: str, ips: list[str], delay: int) -> str:
    """A target group of type ip, as the AWS Load Balancer Controller makes for a
    Service with `target-type: ip`: the pods' IPs are its targets."""
    vpc = world.ec2.describe_instances(InstanceIds=[world.instance_ids[0]])["Reservations"][0][
        "Instances"
    ][0]["VpcId"]
    arn = str(
        elbv2.create_target_group(
            Name=name,
            Protocol="HTTP",
            Port=8080,
            VpcId=vpc,
            TargetType="ip",
            Tags=[{"Key": "elbv2.k8s.aws/cluster", "Value": world.cluster_name}],
        )["TargetGroups"][0]["TargetGroupArn"]
    )
    elbv2.modify_target_group_attributes(
        TargetGroupArn=arn,
        Attributes=[{"Key": "deregistration_delay.timeout_seconds", "Value": str(delay)}],
    )
    elbv2.register_targets(TargetGroupArn=arn, Targets=[{"Id": ip, "Port": 8080} for ip in ips])
    return arn


def test_ip_mode_group__continue_only_after_the_evicted_pods_ips_let_go__short_grace_flagged(
    world: World, invoke: Invoke, elbv2: Any, drainer_logs: LogCapture
) -> None:
    node = world.nodes[world.instance_ids[0]]
    place_on(world, node, [w.deployment("web", 2, grace=30)])
    ips = {p["metadata"]["name"]: p["status"]["podIP"] for p in pods_on(world.cluster, node)}
    assert len(ips) == 2 and all(ips.values()), ips
    elsewhere = "10.99.0.7"  # a replica on another node
    group = _ip_group(elbv2, world, "k8s-web-ip", [*ips.values(), elsewhere], delay=300)

    summary = invoke(world.terminate(world.instance_ids[0]), DRAIN_TIMEOUT_SECONDS=120)

    assert summary["result"] == "drained"
    assert summary["pod_target_groups"] == 1
    assert summary["targets_pending"] == []
    let_go = elb_sim.released()
    assert sorted(r["id"] for r in let_go) == sorted(ips.values())
    (complete,) = world.completions()
    assert complete["time"] >= max(r["time"] for r in let_go), "CONTINUE before the IPs let go"
    assert _states(elbv2, group) == ["healthy"], "the other node's pod stays a target"
    assert any(
        "the evicted pods' IPs left 1 of 1 IP target group(s)" in m for m in drainer_logs.messages()
    )
    (short,) = [m for m in drainer_logs.messages() if "grace period ends before" in m]
    for name in ips:
        assert f"default/{name}: terminationGracePeriodSeconds 30 < " in short
    assert "deregistration delay 300 s" in short


def test_ip_mode_group__an_evicted_pods_ip_given_to_a_pod_elsewhere__its_target_left_registered(
    world: World, invoke: Invoke, elbv2: Any, drainer_logs: LogCapture
) -> None:
    """The VPC may give an evicted pod's IP to a pod on another node, which the
    controller registers: that target is not the drain's to take out."""
    node = world.nodes[world.instance_ids[0]]
    place_on(world, node, [w.deployment("web", 2, grace=30)])
    ips = {p["metadata"]["name"]: p["status"]["podIP"] for p in pods_on(world.cluster, node)}
    (first, given), (second, kept) = sorted(ips.items())
    other = next(n for n in world.nodes.values() if n != node)
    world.cluster.apply(w.pod("newcomer", node_name=other))
    wait_until(lambda: world.cluster.get("Pod", "newcomer", "default")["status"].get("podIP"))
    world.cluster.client.patch(
        "Pod",
        "newcomer",
        {"status": {"podIP": given, "podIPs": [{"ip": given}]}},
        "default",
        sub="status",
    )
    assert world.cluster.get("Pod", "newcomer", "default")["status"]["podIP"] == given
    group = _ip_group(elbv2, world, "k8s-web-ip", [given, kept], delay=300)

    summary = invoke(world.terminate(world.instance_ids[0]), DRAIN_TIMEOUT_SECONDS=120)

    assert summary["result"] == "drained"
    assert summary["targets_pending"] == []
    assert [r["id"] for r in elb_sim.released()] == [kept], f"{first}'s IP is the newcomer's now"
    assert _states(elbv2, group) == ["healthy"], "the newcomer stays a target"
    (said,) = [m for m in drainer_logs.messages() if "held now by pod default/newcomer" in m]
    assert given in said and f"default/{first}" in said
    assert second not in said
