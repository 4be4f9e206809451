"""Whether an instance is the function's to drain, and of which cluster: the rules
every trigger applies before it acts (ALLOWED_ASGS, ASG_TAG, the cluster's name)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from drainer import aws
from drainer.lifecycle.events_hook import LifecycleEvent
from drainer.lifecycle.settings import Settings

Tags = Callable[[], Mapping[str, str]]

STACK_KEY = "stack_id"
"""The key of a hook's NotificationMetadata that names the stack (its ARN) that put it."""


def group_tags(autoscaling: aws.Client, asg_name: str) -> Tags:
    """The group's tags, read on first use and at most once (one invocation's view:
    the group check, the cluster and the spot path share the one call)."""
    return functools.cache(lambda: aws.asg_tags(autoscaling, asg_name))


def group_refused(
    settings: Settings, autoscaling: aws.Client, asg_name: str, *, tags: Tags | None = None
) -> str:
    """Why the function may not act on this Auto Scaling group's instances; "" when
    it may: named in ALLOWED_ASGS, or carrying ASG_TAG and not tagged for another
    cluster, or neither setting set (any group)."""
    if settings.allows_group(asg_name):
        return ""
    named = ", ".join(sorted(settings.allowed_asgs)) or "none"
    why = f"Auto Scaling group {asg_name} is not in ALLOWED_ASGS ({named})"
    if settings.asg_tag:
        read = tags or group_tags(autoscaling, asg_name)
        admitted, reason = tag_admits(read(), settings)
        if admitted:
            return ""
        why += f" and ASG_TAG {settings.asg_tag} does not admit it ({reason})"
    return why


def tag_admits(tags: Mapping[str, str], settings: Settings) -> tuple[bool, str]:
    """Does ASG_TAG admit a group with these tags? (admitted, why not). A group
    tagged for another cluster than CLUSTER_NAME is not admitted."""
    pair = settings.asg_tag_pair
    if pair is None:
        return False, "ASG_TAG is not set"
    key, value = pair
    if tags.get(key) != value:
        return False, f"not tagged {key}={value}"
    owner = other_cluster(tags, settings)
    if owner:
        return False, f"tagged for cluster {owner}, not {settings.cluster_name}"
    return True, ""


def other_cluster(tags: Mapping[str, str], settings: Settings) -> str:
    """The other clusters than CLUSTER_NAME the group's tags name, when they name
    clusters and CLUSTER_NAME is not among them (a group tagged for staging and dev
    is neither's to take for prod); "" when they name none, or CLUSTER_NAME, or
    CLUSTER_NAME is not set."""
    owners = aws.tagged_clusters(tags)
    if not settings.cluster_name or not owners or settings.cluster_name in owners:
        return ""
    return ", ".join(owners)


def resolve_cluster(
    event: LifecycleEvent, hook: aws.HookInfo, settings: Settings, tags: Tags
) -> str | None:
    """The instance's EKS cluster: the hook's metadata first, then the group's tags
    (read only when the metadata names none), then CLUSTER_NAME."""
    metadata = hook.notification_metadata or event.notification_metadata
    from_metadata = aws.cluster_name_for(metadata, {}, "")
    if from_metadata:
        return from_metadata
    return aws.cluster_name_for(metadata, tags(), settings.cluster_name)


def metadata_fields(metadata: str) -> dict[str, Any]:
    """A hook's NotificationMetadata as JSON fields; empty when it is not a JSON object
    (a plain cluster name, another tool's text)."""
    try:
        parsed = json.loads(metadata) if metadata.strip().startswith("{") else None
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def hook_refused(settings: Settings, event: LifecycleEvent, hook: aws.HookInfo) -> str:
    """Why the action's hook is not the function's to answer; "" when it is. A hook
    whose metadata names another stack (STACK_ID) or another cluster (CLUSTER_NAME;
    as resolve_cluster reads it) is another deployment's, on a group both admit (a
    shared ASG_TAG): that one drains the node and answers the action. A hook that
    names neither is the function's when its group is."""
    metadata = hook.notification_metadata or event.notification_metadata
    owner = metadata_fields(metadata).get(STACK_KEY)
    if settings.stack_id and isinstance(owner, str) and owner and owner != settings.stack_id:
        return (
            f"the hook {hook.name} of {event.asg_name} was put by the stack {owner}, not this one"
        )
    # Read as resolve_cluster reads it (JSON's cluster_name, or a plain name), so that
    # a hook this check admits is never drained against another cluster.
    cluster = aws.cluster_name_for(metadata, {}, "")
    if settings.cluster_name and cluster and cluster != settings.cluster_name:
        return (
            f"the hook {hook.name} of {event.asg_name} names the cluster {cluster}, not "
            f"{settings.cluster_name} (CLUSTER_NAME)"
        )
    return ""
