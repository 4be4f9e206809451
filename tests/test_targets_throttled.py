"""drainer/lifecycle/targets.py when ELB throttles the wait's looks beyond
botocore's retries: the wait goes on (the instance is still draining), it does not
end at once with CONTINUE while connections are in flight."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from support.clock import FakeClock

from awssim import elbv2 as elb_sim
from drainer.lifecycle.targets import CLUSTER_TAG, leave_target_groups

INSTANCE = "i-0000000000000005"


@pytest.fixture
def elbv2(moto_aws: None) -> Iterator[Any]:
    elb_sim.reset()
    yield boto3.client("elbv2", region_name="us-east-1")
    elb_sim.reset()


def _group(elbv2: Any, delay: int) -> str:
    vpc = boto3.client("ec2", region_name="us-east-1").create_vpc(CidrBlock="10.0.0.0/16")
    arn = str(
        elbv2.create_target_group(
            Name="k8s-web",
            Protocol="HTTP",
            Port=80,
            VpcId=vpc["Vpc"]["VpcId"],
            Tags=[{"Key": CLUSTER_TAG, "Value": "prod"}],
        )["TargetGroups"][0]["TargetGroupArn"]
    )
    elbv2.register_targets(TargetGroupArn=arn, Targets=[{"Id": INSTANCE}])
    elbv2.modify_target_group_attributes(
        TargetGroupArn=arn,
        Attributes=[{"Key": "deregistration_delay.timeout_seconds", "Value": str(delay)}],
    )
    return arn


def _throttle_looks(elbv2: Any, looks: set[int]) -> list[int]:
    """DescribeTargetHealth answered Throttling (as after botocore's retries) on the
    calls numbered in `looks` (1: the first); every call's number."""
    calls: list[int] = []

    def throttled(model: Any, **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if model.name != "DescribeTargetHealth":
            return None
        calls.append(len(calls) + 1)
        if calls[-1] not in looks:
            return None
        error = {"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}
        return AWSResponse("https://elasticloadbalancing", 400, {}, None), error

    elbv2.meta.events.register("before-call.*", throttled)
    return calls


def test_throttled_while_waiting__the_wait_goes_on_until_the_instance_has_drained(
    elbv2: Any,
) -> None:
    arn = _group(elbv2, delay=20)
    calls = _throttle_looks(elbv2, {2, 3})  # the first two looks after deregistering
    clock = FakeClock(1000.0)
    elb_sim.set_clock(clock)
    try:
        found = leave_target_groups(
            elbv2, INSTANCE, "prod", [], until=clock() + 60, clock=clock, sleep=clock.sleep
        )
    finally:
        elb_sim.set_clock(time.time)

    assert found.error == ""
    assert (found.groups, found.deregistered, found.pending) == ([arn], [arn], [])
    assert 20 <= found.seconds < 30, "waited until the instance had drained"
    assert len(calls) > 3


def test_throttled_forever__the_wait_ends_at_its_limit__not_a_round_of_retries_later(
    elbv2: Any,
) -> None:
    """Each look ELB throttles costs botocore's retries (seconds each): the round went
    on through every group, so eight groups ended the wait a minute past its limit,
    past the invocation's hand-over point. A round now ends at the first throttle."""
    vpc = boto3.client("ec2", region_name="us-east-1").create_vpc(CidrBlock="10.1.0.0/16")
    groups = []
    for n in range(8):
        arn = elbv2.create_target_group(
            Name=f"k8s-web-{n}", Protocol="HTTP", Port=80, VpcId=vpc["Vpc"]["VpcId"],
            Tags=[{"Key": CLUSTER_TAG, "Value": "prod"}],
        )["TargetGroups"][0]["TargetGroupArn"]  # fmt: skip
        elbv2.register_targets(TargetGroupArn=arn, Targets=[{"Id": INSTANCE}])
        groups.append(arn)
    clock = FakeClock(1000.0)
    calls: list[str] = []

    def slow_throttle(model: Any, **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if model.name != "DescribeTargetHealth":
            return None
        calls.append(model.name)
        if len(calls) <= len(groups):  # the first look at each, before deregistering
            return None
        clock.sleep(15.0)  # botocore's retries of a throttled call
        error = {"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}
        return AWSResponse("https://elasticloadbalancing", 400, {}, None), error

    elbv2.meta.events.register("before-call.*", slow_throttle)

    found = leave_target_groups(
        elbv2, INSTANCE, "prod", [], until=clock() + 60, clock=clock, sleep=clock.sleep
    )

    assert found.error == ""
    assert sorted(found.pending) == sorted(groups), "still draining, as far as anyone knows"
    assert found.seconds <= 60 + 15, f"the wait ended {found.seconds - 60:.0f} s past its limit"


def test_throttled_before_the_wait__tried_again__the_instance_deregistered(
    elbv2: Any,
) -> None:
    """The first look at a group (before deregistering) throttled beyond botocore's
    retries ended the step at once: CONTINUE, the instance still registered and
    taking requests when it went."""
    arn = _group(elbv2, delay=20)
    calls = _throttle_looks(elbv2, {1})
    clock = FakeClock(1000.0)
    elb_sim.set_clock(clock)
    try:
        found = leave_target_groups(
            elbv2, INSTANCE, "prod", [], until=clock() + 60, clock=clock, sleep=clock.sleep
        )
    finally:
        elb_sim.set_clock(time.time)

    assert found.error == "", found.error
    assert (found.groups, found.deregistered, found.pending) == ([arn], [arn], [])
    assert len(calls) >= 2


def test_the_last_look_at_the_limit_is_taken__a_target_drained_just_in_time_is_left(
    elbv2: Any,
) -> None:
    """The wait sleeps until its limit, then looks once more: a target that finished
    draining in the last seconds was reported still draining, unlooked at."""
    arn = _group(elbv2, delay=58)
    clock = FakeClock(1000.0)
    elb_sim.set_clock(clock)
    try:
        found = leave_target_groups(
            elbv2, INSTANCE, "prod", [], until=clock() + 60, clock=clock, sleep=clock.sleep
        )
    finally:
        elb_sim.set_clock(time.time)

    assert (found.groups, found.pending) == ([arn], []), found.describe()
    assert found.seconds == 60
