"""`plan --asg NAME`: the group's InService instances mapped to their nodes as the
function maps them (drainer/plan/members.py), in the order a refresh would replace
them, and the refresh's batch size and warm-up from its flags."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from drainer.errors import DrainerError
from drainer.k8s.kube import Kube
from drainer.plan.members import group_nodes
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
    members = group_nodes(kube, clients, args.asg)
    if members is None:
        raise NoGroup(
            f"no Auto Scaling group {args.asg} in {clients.autoscaling.meta.region_name} "
            "(set AWS_REGION to the group's region)"
        )
    group = members.group
    healthy = args.min_healthy_percentage
    if healthy is None:  # as StartInstanceRefresh takes it: the group's policy, else 90
        healthy = group.min_healthy_percentage
    if healthy is None:
        healthy = DEFAULT_MIN_HEALTHY_PERCENTAGE
    size = batch_size(group.desired, batch=args.batch, min_healthy_percentage=healthy)
    warmup = group.warmup if args.instance_warmup is None else args.instance_warmup
    return RefreshNodes(args.asg, members.nodes, members.without_node, size, float(warmup))
