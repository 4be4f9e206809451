"""Load balancer targets: the instance leaves its target groups before it dies.

The Auto Scaling group deregisters an instance from the target groups attached to
the group itself, but not from those it does not manage: the ones the AWS Load
Balancer Controller creates in instance mode, or target groups of NodePort
services that someone registers nodes in. An instance that dies while still a
target there drops the requests in flight. So, after the pods are gone and before
CONTINUE: find the target groups where the instance is a target (the cluster's,
by the controller's `elbv2.k8s.aws/cluster` tag, plus TARGET_GROUP_ARNS),
deregister it where it is still registered, and wait, bounded, until no group
reports it as registered or draining (each group's deregistration delay).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from drainer import aws
from drainer.errors import AwsError

log = logging.getLogger(__name__)

CLUSTER_TAG = "elbv2.k8s.aws/cluster"
"""The tag the AWS Load Balancer Controller puts on the target groups it makes."""
GONE = ("unused",)
"""A target in this state is no target at all (deregistered, or never registered)."""


@dataclass(frozen=True)
class TargetWait:
    """What the wait found and did."""

    groups: list[str] = field(default_factory=list)
    """The target groups where the instance was a target."""
    deregistered: list[str] = field(default_factory=list)
    """The ones it was still registered in, and the drainer deregistered it from."""
    pending: list[str] = field(default_factory=list)
    """Still registered or draining when the wait ended."""
    seconds: float = 0.0
    error: str = ""

    def describe(self) -> str:
        if self.error:
            return f"target groups not checked: {self.error}"
        if not self.groups:
            return "the instance is a target of no target group"
        left = f"; still draining in {', '.join(self.pending)}" if self.pending else ""
        return (
            f"left {len(self.groups) - len(self.pending)} of {len(self.groups)} target "
            f"group(s) after {self.seconds:.1f} s (deregistered from "
            f"{len(self.deregistered)}){left}"
        )


def cluster_target_groups(elbv2: aws.Client, cluster: str) -> list[str]:
    """The ARNs of the target groups tagged for `cluster` by the controller."""
    tags = aws.target_group_tags(elbv2, aws.target_group_arns(elbv2))
    return [arn for arn, tagged in tags.items() if tagged.get(CLUSTER_TAG) == cluster]


def _targets(elbv2: aws.Client, group: str, instance: str) -> list[dict[str, Any]]:
    """The instance's targets in the group (one per port), with their state."""
    described = aws.target_health(elbv2, group)
    if described is None:
        log.warning("target group %s not found (deleted, or a mistyped ARN)", group)
        return []  # nothing to wait for
    return [
        d
        for d in described
        if d["Target"]["Id"] == instance and d["TargetHealth"]["State"] not in GONE
    ]


def leave_target_groups(
    elbv2: aws.Client,
    instance: str,
    cluster: str,
    extra: Iterable[str],
    *,
    until: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    poll: float = 8.0,
) -> TargetWait:
    """Deregister the instance where it is registered, in the cluster's target groups
    and `extra`; wait until every group lets it go, or `until`, looking again after
    1, 2, 4 s and then every `poll` s. An AWS error ends the wait with `error` set: the
    drain is done, and the log says what was not checked."""
    started = clock()
    try:
        groups = dict.fromkeys([*cluster_target_groups(elbv2, cluster), *extra])
        holding = {g: targets for g in groups if (targets := _targets(elbv2, g, instance))}
        deregistered = [g for g, targets in holding.items() if _deregister(elbv2, g, targets)]
        pending = list(holding)
        looks = 0
        while pending and clock() < until:
            sleep(min(poll, 2.0**looks, max(0.0, until - clock())))
            looks += 1
            pending = [g for g in pending if _targets(elbv2, g, instance)]
    except AwsError as e:
        log.warning("could not take %s out of its target groups: %s", instance, e)
        return TargetWait(seconds=clock() - started, error=str(e)[:300])
    return TargetWait(list(holding), deregistered, pending, clock() - started)


def _deregister(elbv2: aws.Client, group: str, targets: list[dict[str, Any]]) -> bool:
    """Deregister the targets still registered (not already draining); True if any."""
    registered = [t["Target"] for t in targets if t["TargetHealth"]["State"] != "draining"]
    if registered:
        aws.deregister_targets(elbv2, group, registered)
    return bool(registered)
