"""drainer/lifecycle/targets.py when a target group is deleted while the drainer
works through the region's groups (another cluster's Service removed, a stack torn
down): the group is skipped, the others are still left, and nothing says the target
groups were not checked."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from support.clock import FakeClock

from awssim import elbv2 as elb_sim
from drainer.engine.report import PodAddress
from drainer.lifecycle.targets import CLUSTER_TAG, leave_target_groups

INSTANCE = "i-0000000000000005"


@pytest.fixture
def elbv2(moto_aws: None) -> Iterator[Any]:
    elb_sim.reset()
    yield boto3.client("elbv2", region_name="us-east-1")
    elb_sim.reset()


def _group(elbv2: Any, name: str, cluster: str, targets: tuple[str, ...], kind: str) -> str:
    vpc = boto3.client("ec2", region_name="us-east-1").create_vpc(CidrBlock="10.0.0.0/16")
    tags = {"Tags": [{"Key": CLUSTER_TAG, "Value": cluster}]}
    arn = str(
        elbv2.create_target_group(
            Name=name, Protocol="HTTP", Port=80, VpcId=vpc["Vpc"]["VpcId"], TargetType=kind, **tags
        )["TargetGroups"][0]["TargetGroupArn"]
    )
    elbv2.register_targets(TargetGroupArn=arn, Targets=[{"Id": t} for t in targets])
    return arn


def _delete_before(elbv2: Any, operation: str, pick: Any) -> list[str]:
    """Delete a group (the one `pick(params)` names) just before the first `operation`
    call is sent, as another owner would; the ARNs deleted."""
    deleted: list[str] = []
    other = boto3.client("elbv2", region_name="us-east-1")

    def delete(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == operation and not deleted:
            deleted.append(pick(params))
            other.delete_target_group(TargetGroupArn=deleted[0])

    elbv2.meta.events.register("before-parameter-build.*", delete)
    return deleted


def _states(elbv2: Any, arn: str) -> list[str]:
    health = elbv2.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
    return [h["TargetHealth"]["State"] for h in health]


def test_group_deleted_before_its_deregistration__the_others_still_left(elbv2: Any) -> None:
    first = _group(elbv2, "k8s-a", "prod", (INSTANCE,), "instance")
    second = _group(elbv2, "k8s-b", "prod", (INSTANCE,), "instance")
    deleted = _delete_before(elbv2, "DeregisterTargets", lambda p: p["TargetGroupArn"])
    clock = FakeClock(1000.0)

    found = leave_target_groups(
        elbv2, INSTANCE, "prod", [], until=clock(), clock=clock, sleep=clock.sleep
    )

    (kept,) = {first, second} - set(deleted)
    assert found.error == ""
    assert _states(elbv2, kept) == ["draining"], "the group still there is left"
    assert found.groups == [kept] and found.deregistered == [kept]


def test_group_deleted_before_its_tags_are_read__the_clusters_groups_still_left(
    elbv2: Any,
) -> None:
    mine = _group(elbv2, "k8s-mine", "prod", (INSTANCE,), "instance")
    theirs = _group(elbv2, "k8s-theirs", "staging", ("i-0000000000000009",), "instance")
    _delete_before(elbv2, "DescribeTags", lambda _: theirs)
    clock = FakeClock(1000.0)

    found = leave_target_groups(
        elbv2, INSTANCE, "prod", [], until=clock(), clock=clock, sleep=clock.sleep
    )

    assert found.error == ""
    assert (found.groups, found.deregistered) == ([mine], [mine])
    assert _states(elbv2, mine) == ["draining"]


def test_ip_group_deleted_before_its_delay_is_read__the_wait_goes_on(elbv2: Any) -> None:
    ip_group = _group(elbv2, "k8s-web-ip", "prod", ("10.0.1.11",), "ip")
    mine = _group(elbv2, "k8s-mine", "prod", (INSTANCE,), "instance")
    _delete_before(elbv2, "DescribeTargetGroupAttributes", lambda _: ip_group)
    clock = FakeClock(1000.0)

    found = leave_target_groups(
        elbv2,
        INSTANCE,
        "prod",
        [],
        pods={"default/web-1": PodAddress("10.0.1.11", grace=30)},
        until=clock(),
        clock=clock,
        sleep=clock.sleep,
    )

    assert found.error == ""
    assert found.groups == [mine] and mine in found.pending, "the instance still waited for"
    assert found.short_grace == {}


def test_group_deleted_before_its_deregistration__iam_refuses__skipped_all_the_same(
    elbv2: Any,
) -> None:
    """The role may deregister only from groups tagged with its cluster (template.yaml,
    aws:ResourceTag): a group deleted meanwhile has no tag, so IAM answers AccessDenied
    before ELB could say TargetGroupNotFound (moto enforces no IAM: that answer is
    made here). The wait ended with "target groups not checked"."""
    first = _group(elbv2, "k8s-a", "prod", (INSTANCE,), "instance")
    second = _group(elbv2, "k8s-b", "prod", (INSTANCE,), "instance")
    deleted = _delete_before(elbv2, "DeregisterTargets", lambda p: p["TargetGroupArn"])

    asked: list[str] = []

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "DeregisterTargets":
            asked.append(params["TargetGroupArn"])

    def iam_denies(model: Any, **_: Any) -> Any:
        if model.name == "DeregisterTargets" and asked[-1] in deleted:
            from botocore.awsrequest import AWSResponse

            error = {"Error": {"Code": "AccessDenied", "Message": "not authorized"}}
            return AWSResponse("https://elasticloadbalancing", 403, {}, None), error
        return None

    elbv2.meta.events.register("before-parameter-build.*", note)
    elbv2.meta.events.register("before-call.*", iam_denies)
    clock = FakeClock(1000.0)

    found = leave_target_groups(
        elbv2, INSTANCE, "prod", [], until=clock(), clock=clock, sleep=clock.sleep
    )

    (kept,) = {first, second} - set(deleted)
    assert deleted[0] in asked, "the deleted group's deregistration was refused"
    assert found.error == "", found.error
    assert _states(elbv2, kept) == ["draining"]
    assert found.groups == [kept] and found.deregistered == [kept]
