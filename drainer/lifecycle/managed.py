"""EKS managed node groups: recognised, and left alone unless the operator asks.

EKS drains a managed node group's nodes itself. Its Auto Scaling group carries the
tag `eks:nodegroup-name` and EKS's own lifecycle hooks, `Terminate-LC-Hook`
(heartbeat 1800 s) and `Launch-LC-Hook`. Those hooks are EKS's: never ours to
delete, and no reason to refuse a group. Putting our terminate hook beside EKS's is
a choice (ALLOW_MANAGED_NODE_GROUPS), because both then hold the same termination:

- on a scale-in (Cluster Autoscaler, a desired capacity lowered, AZ rebalancing)
  both terminate hooks fire together: our drain, budgets respected, and EKS's own
  run at the same time on the same node;
- on a version or launch template update EKS drains and cordons the node first and
  then asks Auto Scaling to terminate it, so our drain finds the node empty;
- the instance terminates once every hook is completed; our ABANDON (a failed
  drain with FAILURE_RESULT=ABANDON, or TIMEOUT_POLICY=abandon at its end) ends the
  lifecycle action for every hook, EKS's own cut short too.

The hook sync (hooks.covered_groups), the custom resource (stack_hooks) and
`make preflight` all ask this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from drainer import aws
from drainer.lifecycle.settings import Settings

NODEGROUP_TAG = "eks:nodegroup-name"
EKS_HOOKS = ("Terminate-LC-Hook", "Launch-LC-Hook")
"""The lifecycle hooks EKS puts on a managed node group's Auto Scaling group."""

BOTH_FIRE = (
    "on a scale-in both terminate hooks fire together (our drain and EKS's run at once); "
    "on a version update EKS drains and cordons first and then asks Auto Scaling to "
    "terminate, so our drain finds the node empty; our ABANDON ends the lifecycle "
    "action for EKS's hook too, cutting its drain short"
)
OPT_IN = "ALLOW_MANAGED_NODE_GROUPS (parameter AllowManagedNodeGroups=true)"
REFUSED_PREFIX = "EKS managed node group"


def nodegroup(tags: Mapping[str, str], hook_names: Iterable[str] = ()) -> str:
    """The managed node group the Auto Scaling group belongs to: its
    eks:nodegroup-name tag, else "(unnamed)" when it carries one of EKS's hooks;
    "" when it is not a managed node group's."""
    named = tags.get(NODEGROUP_TAG, "").strip()
    if named:
        return named
    return "(unnamed)" if any(name in EKS_HOOKS for name in hook_names) else ""


def is_eks_hook(hook_name: str) -> bool:
    return hook_name in EKS_HOOKS


def refused(settings: Settings, tags: Mapping[str, str]) -> str:
    """Why the function will not put its hooks on this group; "" when it may."""
    group = nodegroup(tags)
    if not group or settings.allow_managed_node_groups:
        return ""
    return f"{REFUSED_PREFIX} {group}: EKS drains its nodes itself; {OPT_IN} puts ours beside"


def leave_out(
    autoscaling: aws.Client, settings: Settings, covered: list[str], skipped: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """covered_groups' answer without the managed node groups (unless allowed): each
    moves to `skipped` with why. One DescribeAutoScalingGroups per 50 groups."""
    if settings.allow_managed_node_groups or not covered:
        return covered, skipped
    tags = aws.groups_tags(autoscaling, covered)
    why = {name: reason for name in covered if (reason := refused(settings, tags.get(name, {})))}
    return [name for name in covered if name not in why], {**skipped, **why}


def named_refused(settings: Settings, skipped: Mapping[str, str]) -> str:
    """The managed node groups named in ALLOWED_ASGS that leave_out refused, as the
    custom resource's reason to fail (the operator named them; silence would leave
    them without the drain they expect); "" when there are none."""
    named = sorted(g for g, why in skipped.items() if g in settings.allowed_asgs and why)
    refused_ = [f"{g} ({skipped[g]})" for g in named if skipped[g].startswith(REFUSED_PREFIX)]
    if not refused_:
        return ""
    return f"{'; '.join(refused_)}: leave it out of AsgNames, or deploy with {OPT_IN}"
