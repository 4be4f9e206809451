"""drainer/lifecycle/targets.py against moto's ELBv2 (with awssim's deregistration delay):
which groups count, what is deregistered, how the wait ends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from support.clock import FakeClock

from awssim import elbv2 as elb_sim
from drainer.lifecycle.targets import (
    CLUSTER_TAG,
    TargetWait,
    cluster_target_groups,
    leave_target_groups,
)


@pytest.fixture
def elbv2(moto_aws: None) -> Iterator[Any]:
    elb_sim.reset()
    yield boto3.client("elbv2", region_name="us-east-1")
    elb_sim.reset()


def _group(elbv2: Any, name: str, cluster: str = "", targets: tuple[str, ...] = ()) -> str:
    vpc = boto3.client("ec2", region_name="us-east-1").create_vpc(CidrBlock="10.0.0.0/16")
    tags = {"Tags": [{"Key": CLUSTER_TAG, "Value": cluster}]} if cluster else {}
    arn = str(
        elbv2.create_target_group(
            Name=name, Protocol="HTTP", Port=80, VpcId=vpc["Vpc"]["VpcId"], TargetType="ip", **tags
        )["TargetGroups"][0]["TargetGroupArn"]
    )
    if targets:
        elbv2.register_targets(TargetGroupArn=arn, Targets=[{"Id": t} for t in targets])
    return arn


def test_cluster_target_groups__by_the_controllers_tag_only(elbv2: Any) -> None:
    mine = [_group(elbv2, f"k8s-mine-{i}", "prod") for i in range(25)]  # two DescribeTags pages
    _group(elbv2, "k8s-theirs", "staging")
    _group(elbv2, "untagged")

    assert sorted(cluster_target_groups(elbv2, "prod")) == sorted(mine)


def test_no_group_holds_the_instance__nothing_deregistered__no_wait(elbv2: Any) -> None:
    _group(elbv2, "k8s-web", "prod", targets=("10.0.0.9",))
    clock = FakeClock(1000.0)

    found = leave_target_groups(
        elbv2, "10.0.0.5", "prod", [], until=clock() + 60, clock=clock, sleep=clock.sleep
    )

    assert found == TargetWait()
    assert found.describe() == "the instance is a target of no target group"


def test_already_draining__not_deregistered_again__waited_for(elbv2: Any) -> None:
    arn = _group(elbv2, "k8s-web", "prod", targets=("10.0.0.5",))
    elb_sim.set_speed(10.0)  # 300 s -> 30 s
    elbv2.deregister_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.5"}])
    clock = FakeClock(1000.0)

    found = leave_target_groups(
        elbv2, "10.0.0.5", "prod", [], until=clock() + 1, clock=clock, sleep=clock.sleep
    )

    assert (found.groups, found.deregistered, found.pending) == ([arn], [], [arn])
    assert "still draining in" in found.describe()


def test_listed_group_deleted__nothing_to_wait_for(elbv2: Any) -> None:
    clock = FakeClock(1000.0)

    found = leave_target_groups(
        elbv2,
        "10.0.0.5",
        "prod",
        ["arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/gone/0123456789abcdef"],
        until=clock() + 60,
        clock=clock,
        sleep=clock.sleep,
    )

    assert found.groups == [] and found.pending == []
    assert found.describe() == "the instance is a target of no target group"


def test_access_denied__wait_ends_at_once__said_in_words(elbv2: Any) -> None:
    from botocore.stub import Stubber

    clock = FakeClock(1000.0)
    with Stubber(elbv2) as stub:
        stub.add_client_error("describe_target_groups", "AccessDenied", "not allowed")
        found = leave_target_groups(
            elbv2, "10.0.0.5", "prod", [], until=clock() + 60, clock=clock, sleep=clock.sleep
        )

    assert "AccessDenied" in found.error
    assert found.describe().startswith("target groups not checked: ")
    assert clock() == 1000.0, "no wait after an error"
