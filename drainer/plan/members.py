"""A node group's nodes: its InService instances mapped to their nodes as the
function maps them (EC2's identity of the instance, then drainer/k8s/nodes.py's
lookup), in the order a refresh would replace them (the instances Auto Scaling
reports unhealthy first, then by instance id). `plan --asg` (drainer/cli/refresh.py)
and the function's self-check (drainer/plan/groups.py) both ask here."""

from __future__ import annotations

from dataclasses import dataclass

from drainer import aws
from drainer.k8s.kube import Kube
from drainer.k8s.nodes import find_node_object


@dataclass(frozen=True)
class GroupNodes:
    group: aws.GroupShape
    nodes: list[str]
    """The nodes of its InService instances, in the refresh's order."""
    without_node: list[str]
    """InService instances that no node maps to: replaced without a drain."""


def group_nodes(kube: Kube, clients: aws.AwsClients, asg: str) -> GroupNodes | None:
    """The group's nodes (None: no group of that name in the clients' region).
    Raises AwsError (DescribeAutoScalingGroups, DescribeInstances) or KubeError."""
    group = aws.describe_group(clients.autoscaling, asg)
    if group is None:
        return None
    serving = sorted(
        (i for i in group.instances if i.lifecycle_state == "InService"),
        key=lambda i: (i.healthy, i.instance_id),
    )
    nodes, without = [], []
    for instance in serving:
        identity = aws.describe_instance(clients.ec2, instance.instance_id)
        found = find_node_object(
            kube,
            identity.private_dns_name,
            identity.hostname_candidates,
            identity.provider_id_suffix,
        )
        if found is None:
            without.append(instance.instance_id)
        else:
            nodes.append(str(found["metadata"]["name"]))
    return GroupNodes(group, nodes, without)
