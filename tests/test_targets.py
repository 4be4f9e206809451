"""drainer/lifecycle/targets.py against moto's ELBv2 (with awssim's deregistration delay):
which groups count, what is deregistered, how the wait ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from support.clock import FakeClock

from awssim import elbv2 as elb_sim
from drainer.engine.report import PodAddress
from drainer.lifecycle.targets import (
    CLUSTER_TAG,
    TargetWait,
    leave_target_groups,
)


@pytest.fixture
def elbv2(moto_aws: None) -> Iterator[Any]:
    elb_sim.reset()
    yield boto3.client("elbv2", region_name="us-east-1")
    elb_sim.reset()


def _group(elbv2: Any, name: str, cluster: str = "", targets: tuple[str, ...] = ()) -> str:
    """A target group of type ip when its targets are IPs, else of type instance."""
    vpc = boto3.client("ec2", region_name="us-east-1").create_vpc(CidrBlock="10.0.0.0/16")
    tags = {"Tags": [{"Key": CLUSTER_TAG, "Value": cluster}]} if cluster else {}
    kind = "instance" if any(t.startswith("i-") for t in targets) else "ip"
    arn = str(
        elbv2.create_target_group(
            Name=name, Protocol="HTTP", Port=80, VpcId=vpc["Vpc"]["VpcId"], TargetType=kind, **tags
        )["TargetGroups"][0]["TargetGroupArn"]
    )
    if targets:
        elbv2.register_targets(TargetGroupArn=arn, Targets=[{"Id": t} for t in targets])
    return arn


INSTANCE = "i-0000000000000005"


def test_the_clusters_groups__by_the_controllers_tag_only__others_keep_the_instance(
    elbv2: Any,
) -> None:
    two_pages = 25  # DescribeTags takes 20 groups at a time
    mine = [_group(elbv2, f"k8s-mine-{i}", "prod", (INSTANCE,)) for i in range(two_pages)]
    theirs = _group(elbv2, "k8s-theirs", "staging", (INSTANCE,))
    untagged = _group(elbv2, "untagged", targets=(INSTANCE,))
    clock = FakeClock(1000.0)

    found = leave_target_groups(
        elbv2, INSTANCE, "prod", [], until=clock(), clock=clock, sleep=clock.sleep
    )

    assert sorted(found.groups) == sorted(found.deregistered) == sorted(mine)
    for kept in (theirs, untagged):
        health = elbv2.describe_target_health(TargetGroupArn=kept)["TargetHealthDescriptions"]
        assert [h["TargetHealth"]["State"] for h in health] != ["draining"], kept


def test_no_group_holds_the_instance__nothing_deregistered__no_wait(elbv2: Any) -> None:
    _group(elbv2, "k8s-web", "prod", targets=("i-0000000000000009",))
    clock = FakeClock(1000.0)

    found = leave_target_groups(
        elbv2, INSTANCE, "prod", [], until=clock() + 60, clock=clock, sleep=clock.sleep
    )

    assert found == TargetWait()
    assert found.describe() == "the instance is a target of no target group"


def test_already_draining__not_deregistered_again__waited_for(elbv2: Any) -> None:
    arn = _group(elbv2, "k8s-web", "prod", targets=(INSTANCE,))
    elb_sim.set_speed(10.0)  # 300 s -> 30 s
    elbv2.deregister_targets(TargetGroupArn=arn, Targets=[{"Id": INSTANCE}])
    clock = FakeClock(1000.0)

    found = leave_target_groups(
        elbv2, INSTANCE, "prod", [], until=clock() + 1, clock=clock, sleep=clock.sleep
    )

    assert (found.groups, found.deregistered, found.pending) == ([arn], [], [arn])
    assert "still draining in" in found.describe()


def test_listed_group_deleted__nothing_to_wait_for(elbv2: Any) -> None:
    clock = FakeClock(1000.0)

    found = leave_target_groups(
        elbv2,
        INSTANCE,
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
            elbv2, INSTANCE, "prod", [], until=clock() + 60, clock=clock, sleep=clock.sleep
        )

    assert "AccessDenied" in found.error
    assert found.describe().startswith("target groups not checked: ")
    assert clock() == 1000.0, "no wait after an error"


@contextmanager
def _elb_clock(clock: FakeClock) -> Iterator[None]:
    """awssim's deregistration delays on the test's clock."""
    elb_sim.set_clock(clock)
    try:
        yield
    finally:
        elb_sim.set_clock(time.time)


def _delay(elbv2: Any, arn: str, seconds: int) -> None:
    elbv2.modify_target_group_attributes(
        TargetGroupArn=arn,
        Attributes=[{"Key": "deregistration_delay.timeout_seconds", "Value": str(seconds)}],
    )


def _states_by_id(elbv2: Any, arn: str) -> dict[str, str]:
    health = elbv2.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
    return {h["Target"]["Id"]: h["TargetHealth"]["State"] for h in health}


EVICTED = {
    "default/web-1": PodAddress("10.0.1.11", grace=60),
    "default/web-2": PodAddress("10.0.1.12", grace=30),
}


def test_ip_mode_group__the_evicted_pods_ips_deregistered_and_waited_for__others_untouched(
    elbv2: Any,
) -> None:
    arn = _group(elbv2, "k8s-web-ip", "prod", targets=("10.0.1.11", "10.0.1.12", "10.0.2.20"))
    _delay(elbv2, arn, 20)
    clock = FakeClock(1000.0)
    looked: list[dict[str, str]] = []

    def sleep(seconds: float) -> None:
        looked.append(_states_by_id(elbv2, arn))
        clock.sleep(seconds)

    with _elb_clock(clock):
        found = leave_target_groups(
            elbv2, "i-0abc", "prod", [], pods=EVICTED, until=clock() + 60, clock=clock, sleep=sleep
        )

    assert looked[0] == {"10.0.1.11": "draining", "10.0.1.12": "draining", "10.0.2.20": "healthy"}
    assert (found.groups, found.pod_groups, found.pending) == ([], [arn], [])
    assert 20 <= found.seconds < 30
    assert _states_by_id(elbv2, arn) == {"10.0.2.20": "healthy"}, "another node's pod stays"
    assert found.describe() == (
        "the instance is a target of no target group; the evicted pods' IPs left 1 of 1 "
        f"IP target group(s) after {found.seconds:.1f} s"
    )


def test_ip_mode_group__grace_shorter_than_the_deregistration_delay__flagged(
    elbv2: Any, caplog: pytest.LogCaptureFixture
) -> None:
    arn = _group(elbv2, "k8s-web-ip", "prod", targets=("10.0.1.11", "10.0.1.12"))
    _delay(elbv2, arn, 45)
    clock = FakeClock(1000.0)

    with _elb_clock(clock):
        found = leave_target_groups(
            elbv2,
            "i-0abc",
            "prod",
            [],
            pods=EVICTED,
            until=clock() + 1,
            clock=clock,
            sleep=clock.sleep,
        )

    assert found.short_grace == {
        "default/web-2": f"terminationGracePeriodSeconds 30 < {arn}'s deregistration delay 45 s"
    }
    (warning,) = [r for r in caplog.records if r.levelname == "WARNING"]
    assert "default/web-2" in warning.getMessage() and "default/web-1" not in warning.getMessage()
    assert found.pending == [arn]
    assert "still draining in" in found.describe()


def test_ip_mode_group__none_of_the_evicted_pods_ips__not_counted(elbv2: Any) -> None:
    _group(elbv2, "k8s-other-ip", "prod", targets=("10.0.2.20",))
    clock = FakeClock(1000.0)

    found = leave_target_groups(
        elbv2,
        "i-0abc",
        "prod",
        [],
        pods=EVICTED,
        until=clock() + 60,
        clock=clock,
        sleep=clock.sleep,
    )

    assert found == TargetWait()
