"""EC2: from an instance id to what identifies its Kubernetes node."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from botocore.exceptions import ClientError

from drainer.aws.errors import AWS_FAILURES, error_code, translate
from drainer.aws.session import Client
from drainer.aws.tags import ASG_NAME_TAG, tag_map
from drainer.errors import InstanceNotFound


@dataclass(frozen=True)
class NodeIdentity:
    """What EC2 says about an instance that can identify its Kubernetes node."""

    instance_id: str
    private_dns_name: str
    """EC2's PrivateDnsName, e.g. ip-10-0-1-23.eu-west-1.compute.internal; "" once terminated."""
    availability_zone: str
    tags: Mapping[str, str] = field(default_factory=dict)
    """The instance's tags (an Auto Scaling group's instances carry
    aws:autoscaling:groupName, and the group's tags marked PropagateAtLaunch)."""
    state: str = ""
    """EC2's state of the instance now (pending, running, stopping, ...); "" unknown."""
    launched_at: float | None = None
    """EC2's LaunchTime in epoch seconds: the instance's last start (a stop and a start
    move it); None when EC2 does not say."""

    @property
    def asg_name(self) -> str:
        """The Auto Scaling group the instance belongs to; "" when none."""
        return self.tags.get(ASG_NAME_TAG, "")

    @property
    def hostname_candidates(self) -> tuple[str, ...]:
        """Values a node's kubernetes.io/hostname label may have: (fqdn, short name)."""
        if not self.private_dns_name:
            return ()
        short = self.private_dns_name.split(".", 1)[0]
        if short == self.private_dns_name:
            return (self.private_dns_name,)
        return (self.private_dns_name, short)

    @property
    def provider_id_suffix(self) -> str:
        """A node's spec.providerID ends with this: aws:///<az>/<instance-id>."""
        return "/" + self.instance_id


def describe_instance(ec2: Client, instance_id: str) -> NodeIdentity:
    """The instance's DNS name and zone. InstanceNotFound when EC2 does not know it."""
    what = f"DescribeInstances {instance_id}"
    try:
        response = ec2.describe_instances(InstanceIds=[instance_id])
    except ClientError as e:
        if error_code(e) == "InvalidInstanceID.NotFound":
            raise InstanceNotFound(
                f"EC2 does not know instance {instance_id} in {ec2.meta.region_name} "
                "(already gone, or the function runs in another account or region)"
            ) from e
        raise translate(e, "ec2:DescribeInstances", what) from e
    except AWS_FAILURES as e:
        raise translate(e, "ec2:DescribeInstances", what) from e
    instances = [i for r in response.get("Reservations", []) for i in r.get("Instances", [])]
    if not instances:
        raise InstanceNotFound(
            f"EC2 returned no instance {instance_id} in {ec2.meta.region_name} "
            "(already gone, or the function runs in another account or region)"
        )
    instance = instances[0]
    return NodeIdentity(
        instance_id=instance_id,
        private_dns_name=instance.get("PrivateDnsName", "") or "",
        availability_zone=instance.get("Placement", {}).get("AvailabilityZone", ""),
        tags=tag_map(instance.get("Tags", [])),
        state=str(instance.get("State", {}).get("Name", "")),
        launched_at=_epoch(instance.get("LaunchTime")),
    )


def _epoch(moment: object) -> float | None:
    """botocore's LaunchTime (an aware datetime) in epoch seconds."""
    return moment.timestamp() if isinstance(moment, datetime) else None


EVENT_DONE = ("[Completed]", "[Canceled]")
"""How EC2 begins the description of a scheduled event that is over."""


def scheduled_events(ec2: Client, instance_id: str) -> list[tuple[str, float | None, bool]]:
    """EC2's scheduled events for the instance, as DescribeInstanceStatus lists them:
    each one's code, the moment it may begin (epoch seconds; None when EC2 does not
    say) and whether it is over (completed or canceled)."""
    what = f"DescribeInstanceStatus {instance_id}"
    try:
        response = ec2.describe_instance_status(InstanceIds=[instance_id], IncludeAllInstances=True)
    except AWS_FAILURES as e:
        raise translate(e, "ec2:DescribeInstanceStatus", what) from e
    return [
        (
            str(event.get("Code", "an event")),
            _epoch(event.get("NotBefore")),
            str(event.get("Description", "")).startswith(EVENT_DONE),
        )
        for status in response.get("InstanceStatuses", [])
        for event in status.get("Events") or []
    ]
