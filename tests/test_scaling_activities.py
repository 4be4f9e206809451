"""A group's launches: awssim's DescribeScalingActivities (moto answers an empty list
whatever the group did) and drainer.aws.recent_launches, which reads the successful
launches out of it for the refresh plan's wait for new nodes."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config

from awssim import AwsSim
from awssim.client import AwsSimClient
from awssim.server import AwsSimServer
from awssim.world import create_node_group
from drainer import aws
from drainer.errors import DrainerError

REGION = "us-east-1"
T0 = 1_800_000_000.0


@pytest.fixture
def autoscaling(moto_aws: None) -> Any:
    ec2 = boto3.client("ec2", region_name=REGION)
    client = boto3.client(
        "autoscaling", region_name=REGION, config=Config(retries={"max_attempts": 1})
    )
    create_node_group(ec2, client, asg_name="workers", size=1)
    create_node_group(ec2, client, asg_name="others", size=1)
    return client


def test_describe_scaling_activities__the_groups_launches_most_recent_first(
    autoscaling: Any,
) -> None:
    sim = AwsSim(region=REGION)
    sim.add_launch_activity("workers", "i-0000000000000000a", T0, T0 + 50)
    sim.add_launch_activity("workers", "i-0000000000000000b", T0 + 100, T0 + 160)
    sim.add_launch_activity("others", "i-0000000000000000c", T0 + 200, T0 + 230)

    answer = autoscaling.describe_scaling_activities(AutoScalingGroupName="workers")

    activities = answer["Activities"]
    assert [a["Description"] for a in activities] == [
        "Launching a new EC2 instance: i-0000000000000000b",
        "Launching a new EC2 instance: i-0000000000000000a",
    ]
    newest = activities[0]
    assert (newest["StatusCode"], newest["AutoScalingGroupName"]) == ("Successful", "workers")
    assert (newest["EndTime"] - newest["StartTime"]).total_seconds() == 60
    assert sim.activity_calls() == [
        {"AutoScalingGroupName": "workers", "MaxRecords": None, "NextToken": None}
    ]


def test_describe_scaling_activities__pages_of_max_records(autoscaling: Any) -> None:
    sim = AwsSim(region=REGION)
    for n in range(3):
        sim.add_launch_activity("workers", f"i-000000000000000{n}", T0 + n, T0 + n + 1)
    first = autoscaling.describe_scaling_activities(AutoScalingGroupName="workers", MaxRecords=2)
    rest = autoscaling.describe_scaling_activities(
        AutoScalingGroupName="workers", MaxRecords=2, NextToken=first["NextToken"]
    )
    assert [len(first["Activities"]), len(rest["Activities"])] == [2, 1]
    assert "NextToken" not in rest


def test_recent_launches__successful_launches_only_the_most_recent_first(
    autoscaling: Any,
) -> None:
    from awssim.activities import ledger

    sim = AwsSim(region=REGION)
    sim.add_launch_activity("workers", "i-0000000000000000a", T0, T0 + 50)
    sim.add_launch_activity("workers", "i-0000000000000000b", T0 + 100, T0 + 160)
    book = ledger(sim.account_id, REGION)
    book.add_launch("workers", "i-0000000000000000c", T0 + 200, None)  # in progress
    book.add_launch("workers", "i-0000000000000000d", T0 + 300, T0 + 301, status="Failed")

    launches = aws.recent_launches(autoscaling, "workers")

    assert launches == [
        aws.Launch("i-0000000000000000b", T0 + 100, T0 + 160),
        aws.Launch("i-0000000000000000a", T0, T0 + 50),
    ]


def test_recent_launches__a_refusal_names_the_permission(autoscaling: Any) -> None:
    AwsSim(region=REGION).fail_action("autoscaling", "DescribeScalingActivities", "AccessDenied")
    with pytest.raises(DrainerError, match="autoscaling:DescribeScalingActivities"):
        aws.recent_launches(autoscaling, "workers")


def test_served__the_admin_api_gives_a_group_its_launches(
    fake_aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with AwsSimServer() as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
        clients = aws.make_clients(boto3.Session(region_name=REGION))
        create_node_group(clients.ec2, clients.autoscaling, asg_name="workers", size=1)
        admin = AwsSimClient(server.url)

        admin.add_launch_activity("workers", "i-0000000000000000a", T0, T0 + 50)

        launches = aws.recent_launches(clients.autoscaling, "workers")
        assert launches == [aws.Launch("i-0000000000000000a", T0, T0 + 50)]
        assert [c["AutoScalingGroupName"] for c in admin.activity_calls()] == ["workers"]
