"""This stack's hooks on groups it no longer covers, for its custom resource
(stack_hooks.py): those an Update leaves behind (a former name, a group no longer
named, a group only the old AsgTag covered or the old ClusterName's, an EKS managed
node group left alone now), and those a Delete finds on the region's other groups.

Left, each such hook names the stack and holds every termination of its group for
its HeartbeatTimeout, undrained: the function refuses a group it does not cover.
Ours is decided as everywhere (hooks.remove_hooks: the metadata names this stack).
What the role's policy refuses to delete is named with the command, never a failure
(a rollback would not help; a failed Delete would block the stack's deletion). Each
answers a stack_reasons.Told: what was done, and what the operator must act on.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Collection, Mapping
from dataclasses import replace

from drainer import aws
from drainer.errors import AwsError
from drainer.lifecycle import hooks, managed
from drainer.lifecycle.admission import other_cluster
from drainer.lifecycle.events import StackRequest
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.stack_reasons import Told, by_hand, listed, not_deleted, removed, unlooked

log = logging.getLogger(__name__)


def named_before(request: StackRequest) -> set[str]:
    """The groups the old properties named (AsgNames)."""
    return {g.strip() for g in str(request.old_properties.get("AsgNames") or "").split(",")} - {""}


def tagged_before(request: StackRequest, autoscaling: aws.Client, settings: Settings) -> set[str]:
    """The groups the old AsgTag admits (they carry it, and are of the old cluster, or
    of none); none when it had none. AwsError when they cannot be listed: the Update
    fails saying so, rather than call another stack's a hook it may have put."""
    key, sep, value = str(request.old_properties.get("AsgTag") or "").strip().partition("=")
    if not sep:
        return set()
    old_cluster = str(request.old_properties.get("ClusterName") or "") or settings.cluster_name
    before = replace(settings, cluster_name=old_cluster)
    tagged = aws.groups_with_tag(autoscaling, key, value)
    return {group for group, tags in tagged.items() if not other_cluster(tags, before)}


def every_name(request: StackRequest, settings: Settings) -> set[str]:
    """Every name a hook of this stack's may have: the old properties', the request's
    own (a Delete's are those the resource was last given, which the settings may no
    longer say: an Update that renamed the hooks as it turned them off) and today's."""
    given = (request.old_properties, request.properties)
    former = {
        str(p.get(key) or "") for p in given for key in ("LifecycleHookName", "LaunchHookName")
    }
    wanted = {spec.name for spec in hooks.HookSpec.all_from_settings(settings)}
    return (former | wanted | {settings.launch_hook_name}) - {""}


def stale(
    request: StackRequest, autoscaling: aws.Client, settings: Settings, covered: tuple[str, ...]
) -> list[hooks.Hook]:
    """The hooks an update may have made unwanted: on the covered groups, a former
    name or the launch hook turned off; every name on a group no longer named (and
    still there). remove_hooks deletes those that are ours."""
    wanted = {spec.name for spec in hooks.HookSpec.all_from_settings(settings)}
    every = every_name(request, settings)
    dropped = named_before(request) - set(covered)
    still_there = aws.existing_groups(autoscaling, sorted(dropped)) if dropped else set()
    return [
        *itertools.product(covered, every - wanted),
        *itertools.product(still_there, every),
    ]


def untagged(
    request: StackRequest, autoscaling: aws.Client, settings: Settings, covered: tuple[str, ...]
) -> Told:
    """Delete this stack's hooks on the groups the old AsgTag admitted and the Update
    no longer covers: it dropped or changed the tag, or moved the stack to another
    cluster (ClusterName; the old cluster's tagged groups are another cluster's now).
    Left, their actions would wait HeartbeatTimeout, refused as no group of ours.
    What cannot be deleted (the tag's policy names the new tag already) is said, never
    a failure: a rollback would not help."""
    old_tag = str(request.old_properties.get("AsgTag") or "").strip()
    old_cluster = str(request.old_properties.get("ClusterName") or "") or settings.cluster_name
    key, sep, value = old_tag.partition("=")
    if not sep or (old_tag == settings.asg_tag and old_cluster == settings.cluster_name):
        return Told()
    before = replace(settings, cluster_name=old_cluster)  # a group the old tag admitted
    try:
        tagged = aws.groups_with_tag(autoscaling, key, value)
    except AwsError as e:
        log.error("the groups tagged %s could not be listed: %s", old_tag, e)
        return Told(
            todo=f"; the groups tagged {old_tag} could not be listed ({e}): their hooks stay"
        )
    left = sorted(g for g, t in tagged.items() if g not in covered and not other_cluster(t, before))
    candidates = itertools.product(left, sorted(every_name(request, settings)))
    removal = hooks.remove_hooks(autoscaling, settings, candidates)
    what = f"tagged {old_tag}" if old_tag != settings.asg_tag else f"of cluster {old_cluster}"
    done = f"; no longer {what}: {removed(removal)}" if removal.removed else ""
    return Told(done, not_deleted(removal.failed, removal.waiting))


def left_alone(
    request: StackRequest,
    autoscaling: aws.Client,
    settings: Settings,
    skipped: Mapping[str, str],
    deadline: float,
) -> Told:
    """Delete this stack's hooks on the EKS managed node groups the Update leaves alone
    now, AllowManagedNodeGroups being false (a named one is a dropped name: stale),
    looking until `deadline` (time.monotonic). Left, their actions would wait
    HeartbeatTimeout, refused. What the policy refuses is named with the command."""
    before = named_before(request)
    groups = [
        g
        for g, why in skipped.items()
        if why.startswith(managed.REFUSED_PREFIX) and g not in before
    ]
    if not groups:
        return Told()
    names = every_name(request, settings)
    search = hooks.find_ours(autoscaling, settings, groups, names, deadline)
    missed = unlooked(search.unlooked, "group(s) left alone")
    if not search.ours:
        return Told(todo=missed)
    removal = hooks.remove_hooks(autoscaling, settings, search.ours)
    why = listed([f"{g}: {skipped[g].split(':')[0]}" for g in sorted({g for g, _ in search.ours})])
    done = f": {removed(removal)}" if removal.removed else ""
    return Told(
        f"; left alone now ({why}){done}", by_hand(removal.failed, removal.waiting) + missed
    )


def elsewhere(
    autoscaling: aws.Client,
    settings: Settings,
    covered: set[str],
    deadline: float,
    names: Collection[str],
) -> tuple[Told, int]:
    """Delete this stack's hooks of `names` on the region's other groups (untagged by hand, a
    managed node group left alone, an Update's deletion refused, a group of the
    cluster the stack covered before), but those tagged for another cluster without
    ASG_TAG's key (hooks.find_ours_elsewhere): (the reason, how many deleted). The
    tagged groups' policy refuses a deletion once the tag is gone: named with the
    command, not a failure."""
    try:
        search = hooks.find_ours_elsewhere(autoscaling, settings, covered, deadline, names)
    except AwsError as e:
        log.error("the other groups could not be listed: %s", e)
        why = (
            f"; the other groups could not be listed ({e}): a hook of this stack's on a "
            "group it no longer covers stays (aws autoscaling describe-lifecycle-hooks)"
        )
        return Told(todo=why), 0
    missed = unlooked(search.unlooked, "other group(s)")
    if not search.ours:
        return Told(todo=missed), 0
    removal = hooks.remove_hooks(autoscaling, settings, search.ours)
    done = f": {removed(removal)}" if removal.removed else ""
    found = f"; this stack's hooks on groups it does not cover{done}"
    return Told(found, by_hand(removal.failed, removal.waiting) + missed), len(removal.removed)
