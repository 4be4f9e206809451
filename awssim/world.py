"""Build the AWS side of a scale-in scenario with ordinary boto3 calls.

Works the same against in-process moto and against `python -m awssim serve`,
because it only uses the public API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# An AMI id moto knows; the instances never boot, only their metadata matters.
AMI_ID = "ami-12c6146b"


@dataclass(frozen=True)
class NodeGroup:
    """A self-managed EKS node group: an ASG with a terminate lifecycle hook."""

    asg_name: str
    hook_name: str
    cluster_name: str
    instance_ids: tuple[str, ...]


def create_node_group(
    ec2: Any,
    autoscaling: Any,
    *,
    asg_name: str = "eks-workers",
    size: int = 3,
    hook_name: str = "drain-before-terminate",
    heartbeat_timeout: int = 300,
    default_result: str = "ABANDON",
    cluster_name: str = "demo",
    notification_metadata: str | None = None,
    cluster_tag: str = "eks:cluster-name",
    instance_type: str = "m5.large",
) -> NodeGroup:
    """An ASG of `size` instances with a terminate hook, tagged for `cluster_name`.

    `cluster_tag` "eks:cluster-name" tags the group eks:cluster-name=<cluster>;
    "kubernetes.io/cluster" tags it kubernetes.io/cluster/<cluster>=owned; "" adds
    no cluster tag. `notification_metadata` goes to the hook as is.
    """
    region = autoscaling.meta.region_name
    template = f"{asg_name}-template"
    ec2.create_launch_template(
        LaunchTemplateName=template,
        LaunchTemplateData={"ImageId": AMI_ID, "InstanceType": instance_type},
    )
    tags = []
    if cluster_tag == "eks:cluster-name":
        tags.append({"Key": "eks:cluster-name", "Value": cluster_name})
    elif cluster_tag == "kubernetes.io/cluster":
        tags.append({"Key": f"kubernetes.io/cluster/{cluster_name}", "Value": "owned"})
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=asg_name,
        LaunchTemplate={"LaunchTemplateName": template, "Version": "$Latest"},
        MinSize=0,
        MaxSize=max(size * 2, 1),
        DesiredCapacity=size,
        AvailabilityZones=[f"{region}a"],
        Tags=[
            {
                "ResourceId": asg_name,
                "ResourceType": "auto-scaling-group",
                "PropagateAtLaunch": True,
                **tag,
            }
            for tag in tags
        ],
    )
    hook: dict[str, Any] = {
        "LifecycleHookName": hook_name,
        "AutoScalingGroupName": asg_name,
        "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
        "HeartbeatTimeout": heartbeat_timeout,
        "DefaultResult": default_result,
    }
    if notification_metadata is not None:
        hook["NotificationMetadata"] = notification_metadata
    autoscaling.put_lifecycle_hook(**hook)
    group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])
    instance_ids = tuple(
        i["InstanceId"] for i in group["AutoScalingGroups"][0].get("Instances", [])
    )
    return NodeGroup(asg_name, hook_name, cluster_name, instance_ids)


def create_target_group(
    elbv2: Any,
    name: str,
    *,
    vpc: str,
    instances: list[str],
    delay: int,
    cluster: str | None = None,
    port: int = 30080,
) -> str:
    """An instance-mode target group holding `instances` on a NodePort, with this
    deregistration delay; tagged elbv2.k8s.aws/cluster=<cluster> as the AWS Load
    Balancer Controller tags its own, when a cluster is given. Its ARN."""
    tags = {"Tags": [{"Key": "elbv2.k8s.aws/cluster", "Value": cluster}]} if cluster else {}
    arn = str(
        elbv2.create_target_group(
            Name=name, Protocol="HTTP", Port=port, VpcId=vpc, TargetType="instance", **tags
        )["TargetGroups"][0]["TargetGroupArn"]
    )
    elbv2.modify_target_group_attributes(
        TargetGroupArn=arn,
        Attributes=[{"Key": "deregistration_delay.timeout_seconds", "Value": str(delay)}],
    )
    elbv2.register_targets(TargetGroupArn=arn, Targets=[{"Id": i, "Port": port} for i in instances])
    return arn
