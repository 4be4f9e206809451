"""`plan --asg NAME`: the group's InService instances mapped to their nodes as the
function maps them (EC2's identity of the instance, then drainer/k8s/nodes.py's
lookup: the --instance-id path), in the order a refresh would replace them (the
instances Auto Scaling reports unhealthy first, then by instance id), and the
refresh's batch size and warm-up from its flags."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from drainer.errors import DrainerError
from drainer.k8s.kube import Kube
from drainer.k8s.nodes import find_node_object
from drainer.plan.refresh import DEFAULT_MIN_HEALTHY_PERCENTAGE, batch_size


class NoGroup(DrainerError):
    """No Auto Scaling group of that name in the region."""


@dataclass(frozen=True)
class RefreshNodes:
    asg: str
    nodes: list[str]
    """The nodes to plan, in the refresh's order."""
    without_node: list[str]
    """InService instances that no node maps to: replaced without a drain."""
    batch: int
    warmup: float


def refresh_nodes(kube: Kube, args: argparse.Namespace) -> RefreshNodes:
    from drainer import aws
    from drainer.cli.main import _aws_session

    clients = aws.make_clients(_aws_session())
    group = aws.describe_group(clients.autoscaling, args.asg)
    if group is None:
        raise NoGroup(
            f"no Auto Scaling group {args.asg} in {clients.autoscaling.meta.region_name} "
            "(set AWS_REGION to the group's region)"
        )
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
    healthy = args.min_healthy_percentage
    if healthy is None:
        healthy = DEFAULT_MIN_HEALTHY_PERCENTAGE
    size = batch_size(group.desired, batch=args.batch, min_healthy_percentage=healthy)
    warmup = group.grace_period if args.instance_warmup is None else args.instance_warmup
    return RefreshNodes(args.asg, nodes, without, size, float(warmup))
