"""The function keeps the terminate lifecycle hooks of its node groups.

Which groups: those named in ALLOWED_ASGS, and every group carrying the ASG_TAG
tag, as many as there are, except a tagged group whose cluster tags
(eks:cluster-name, kubernetes.io/cluster/<name>) name another cluster than
CLUSTER_NAME: several stacks, one per cluster, may share an account and a tag.

What: a hook named LIFECYCLE_HOOK_NAME on autoscaling:EC2_INSTANCE_TERMINATING,
HeartbeatTimeout HEARTBEAT_TIMEOUT, DefaultResult CONTINUE, NotificationMetadata
{"cluster_name": CLUSTER_NAME, "stack_id": STACK_ID}; with LAUNCH_HOOK, a second
one named LAUNCH_HOOK_NAME on autoscaling:EC2_INSTANCE_LAUNCHING, the same otherwise
(drainer/lifecycle/launch.py). A hook is put only when it is missing or differs, so
a sync with nothing to do writes nothing.

Whose: the metadata's stack_id names the stack that put the hook (the drain reads
only its cluster_name). A hook of the name that this stack did not put (another
stack's, 0.1.0's, which named no stack, another tool's) is never changed by a sync
nor deleted by remove_hooks: it is left, and said so. Without STACK_ID (a function
deployed outside the stack) the metadata names no stack, and a hook is ours when its
metadata is exactly what the function writes.

When: on a schedule (the safety net), on the Auto Scaling API events CloudTrail
sees (a group created or tagged gets its hook within seconds) and once at deploy,
all only with CREATE_LIFECYCLE_HOOKS. One group's AWS error never stops the others;
the sync ends with one summary line.

Why here and not in CloudFormation: a template names a fixed number of hook
resources; a tag covers groups created after the stack, without a limit.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from drainer import aws, logs
from drainer.errors import AwsError
from drainer.lifecycle import hooks_stack, managed
from drainer.lifecycle.admission import STACK_KEY, metadata_fields, other_cluster, tag_admits
from drainer.lifecycle.events_hook import LAUNCHING, TERMINATING
from drainer.lifecycle.hooks_removal import HookRemoval, logged, waiting_on
from drainer.lifecycle.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_RESULT = "CONTINUE"


def owner_of(found: Mapping[str, Any]) -> str:
    """The stack ARN a described hook's metadata names; "" when none."""
    owner = metadata_fields(str(found.get("NotificationMetadata") or "")).get(STACK_KEY)
    return owner if isinstance(owner, str) else ""


def whose(found: Mapping[str, Any]) -> str:
    """Who put a described hook, in words, for the reasons and the log."""
    owner = owner_of(found)
    if owner:
        parts = owner.split("/")
        return f"its NotificationMetadata names the stack {parts[1] if len(parts) > 2 else owner}"
    metadata = str(found.get("NotificationMetadata") or "")
    cluster = aws.cluster_name_for(metadata, {}, "")
    return f"its NotificationMetadata names {cluster or 'no cluster'} and no stack"


@dataclass(frozen=True)
class HookSpec:
    """A hook every covered group should have."""

    name: str
    heartbeat_timeout: int
    notification_metadata: str
    transition: str = TERMINATING
    owner: str = ""
    """The stack ARN (STACK_ID) the metadata names; "" none."""

    @classmethod
    def from_settings(cls, settings: Settings) -> HookSpec:
        fields = {"cluster_name": settings.cluster_name, STACK_KEY: settings.stack_id}
        present = {key: value for key, value in fields.items() if value}
        metadata = json.dumps(present) if present else ""
        return cls(
            settings.lifecycle_hook_name,
            settings.heartbeat_timeout,
            metadata,
            owner=settings.stack_id,
        )

    @classmethod
    def all_from_settings(cls, settings: Settings) -> list[HookSpec]:
        """The terminate hook, and the launch hook with LAUNCH_HOOK."""
        terminate = cls.from_settings(settings)
        if not settings.launch_hook:
            return [terminate]
        return [terminate, replace(terminate, name=settings.launch_hook_name, transition=LAUNCHING)]

    def differences(self, found: Mapping[str, Any]) -> list[str]:
        """What in the described hook differs from this spec (empty: nothing)."""
        wanted: dict[str, object] = {
            "LifecycleTransition": self.transition,
            "HeartbeatTimeout": self.heartbeat_timeout,
            "DefaultResult": DEFAULT_RESULT,
            "NotificationMetadata": self.notification_metadata,
        }
        return [key for key, value in wanted.items() if str(found.get(key) or "") != str(value)]

    def made(self, found: Mapping[str, Any]) -> bool:
        """Is the described hook one this stack put (its metadata names this stack)?
        Without a stack: is its metadata exactly what the function writes? Another
        stack's, 0.1.0's or another tool's hook of the name is not."""
        if self.owner:
            return owner_of(found) == self.owner
        return str(found.get("NotificationMetadata") or "") == self.notification_metadata

    def from_0_1_0(self, found: Mapping[str, Any]) -> bool:
        """Does the described hook carry the metadata 0.1.0 wrote for this cluster
        ({"cluster_name": ...}, no stack)? Only an Update of the stack adopts it."""
        fields = metadata_fields(str(found.get("NotificationMetadata") or ""))
        ours = metadata_fields(self.notification_metadata)
        ours.pop(STACK_KEY, None)
        return bool(fields) and STACK_KEY not in fields and fields == ours


@dataclass(frozen=True)
class HookSync:
    """What one sync found and did."""

    cause: str
    """What asked for the sync (the summary line's `trigger`, a key kept as it was)."""
    covered: tuple[str, ...] = ()
    """Every group that should have the hook (named or tagged, not skipped)."""
    created: tuple[str, ...] = ()
    updated: dict[str, list[str]] = field(default_factory=dict)
    """Group -> the fields of its hook that were corrected."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Group -> why it is left alone."""
    failed: dict[str, str] = field(default_factory=dict)
    """Group (or "(listing)") -> the AWS error; the other groups went on."""
    not_ours: dict[str, str] = field(default_factory=dict)
    """Group -> whose hook of the name it has: left as it is."""
    enabled: bool = True
    unreached: tuple[str, ...] = ()
    """Covered groups not looked at: the sync's deadline had passed."""
    made: tuple[Hook, ...] = ()
    """The hooks `created` names, as (group, hook name)."""
    withdrawn: str = ""
    """The stack's status when the hooks created were deleted again (hooks_stack)."""

    def result(self) -> dict[str, Any]:
        """The invocation's answer and the summary line's fields."""
        return (
            {
                "result": "hooks_synced" if self.enabled else "hooks_not_managed",
                "trigger": self.cause,
                "groups": len(self.covered),
                "covered": list(self.covered),
                "hooks_created": list(self.created),
                "hooks_updated": dict(self.updated),
                "skipped": dict(self.skipped),
                "failed": dict(self.failed),
                "not_ours": dict(self.not_ours),
            }
            | ({"unreached": list(self.unreached)} if self.unreached else {})
            | ({"withdrawn": self.withdrawn} if self.withdrawn else {})
        )


def tagged_groups(autoscaling: aws.Client, settings: Settings) -> tuple[list[str], dict[str, str]]:
    """Groups carrying ASG_TAG: (admitted, {skipped group: why}). All pages."""
    pair = settings.asg_tag_pair
    if pair is None:
        return [], {}
    admitted: list[str] = []
    skipped: dict[str, str] = {}
    for name, tags in aws.groups_with_tag(autoscaling, *pair).items():
        ok, why = tag_admits(tags, settings)
        if ok:
            admitted.append(name)
        else:
            skipped[name] = why
    return admitted, skipped


NO_SUCH_GROUP = "no such Auto Scaling group"


def covered_groups(autoscaling: aws.Client, settings: Settings) -> tuple[list[str], dict[str, str]]:
    """The groups that should have the hook, named or tagged, sorted; and those left
    alone, with why (a tagged group of another cluster, a named group that does not
    exist: deleted, or a typo in ASG names, an EKS managed node group: managed.py)."""
    tagged, skipped = tagged_groups(autoscaling, settings)
    named = sorted(set(settings.allowed_asgs) - set(tagged))
    if named:
        existing = aws.existing_groups(autoscaling, named)
        skipped.update({name: NO_SUCH_GROUP for name in named if name not in existing})
        named = [name for name in named if name in existing]
    return managed.leave_out(autoscaling, settings, sorted(set(named) | set(tagged)), skipped)


def _put_hook(autoscaling: aws.Client, asg_name: str, spec: HookSpec) -> None:
    aws.put_lifecycle_hook(
        autoscaling,
        asg_name,
        spec.name,
        transition=spec.transition,
        heartbeat_timeout=spec.heartbeat_timeout,
        default_result=DEFAULT_RESULT,
        notification_metadata=spec.notification_metadata,
    )


def sync_hooks(
    autoscaling: aws.Client,
    settings: Settings,
    cause: str = "",
    groups: tuple[list[str], dict[str, str]] | None = None,
    adopt: Collection[Hook] = (),
    *,
    deadline: float | None = None,
    own_stack: bool = True,
    cloudformation: hooks_stack.CloudFormation | None = None,
) -> HookSync:
    """Give every covered group the hook; log one summary line; return what happened.
    `groups`: covered_groups' answer, when the caller has it already. A hook of the
    name that this stack did not put is left as it is (`not_ours`), unless it is in
    `adopt` (an Update taking over 0.1.0's hooks): then it is rewritten as ours. The
    groups left when time.monotonic() passes `deadline` are `unreached`. Hooks created
    with STACK_ID are deleted again when the stack is going (hooks_stack), asked with
    `cloudformation` (None: a client built); not with `own_stack` False (the stack's
    custom resource, which asks itself)."""
    if not settings.create_lifecycle_hooks:
        sync = HookSync(cause, enabled=False)
        log.info("hook sync: CREATE_LIFECYCLE_HOOKS is false, the hooks are not ours; nothing done")
        return sync
    failed: dict[str, str] = {}
    try:
        covered, skipped = groups or covered_groups(autoscaling, settings)
    except AwsError as e:
        # Without the listing a named group cannot be told from an EKS managed node
        # group or a group that is gone: nothing is put, the next sync does the work.
        covered, skipped = [], {}
        failed["(listing)"] = str(e)
    kept = _keep_hooks(autoscaling, covered, HookSpec.all_from_settings(settings), adopt, deadline)
    if own_stack and settings.stack_id and kept.made:
        kept = _unless_going(autoscaling, settings, kept, cloudformation)
    sync = replace(
        kept, cause=cause, covered=tuple(covered), skipped=skipped, failed=failed | kept.failed
    )
    level = logging.ERROR if sync.failed else logging.WARNING if sync.not_ours else logging.INFO
    log.log(
        level, _summary(sync), extra=logs.safe_fields({"event": "hooks_synced", **sync.result()})
    )
    return sync


def _summary(sync: HookSync) -> str:
    """The sync's summary line."""
    late = f", {len(sync.unreached)} out of time" if sync.unreached else ""
    if sync.withdrawn:
        late += f"; the stack is {sync.withdrawn}: the hooks created deleted again"
    return (
        f"hook sync ({sync.cause or 'direct'}): {len(sync.covered)} group(s) covered, "
        f"{len(sync.created)} hook(s) created, {len(sync.updated)} updated, "
        f"{len(sync.skipped)} skipped, {len(sync.not_ours)} not ours, "
        f"{len(sync.failed)} failed{late}"
    )


def _unless_going(
    autoscaling: aws.Client,
    settings: Settings,
    kept: HookSync,
    cloudformation: hooks_stack.CloudFormation | None,
) -> HookSync:
    """`kept`, its created hooks deleted again when the stack is being deleted."""
    region = str(getattr(getattr(autoscaling, "meta", None), "region_name", "") or "")
    status = hooks_stack.going(settings.stack_id, region, cloudformation)
    if not status:
        return kept
    removal = remove_hooks(autoscaling, settings, kept.made)
    failed = {
        f"{g}/{n}": f"the stack is {status}; not deleted: {e}"
        for (g, n), e in removal.failed.items()
    }
    return replace(kept, withdrawn=status, failed=kept.failed | failed)


def _keep_hooks(
    autoscaling: aws.Client,
    covered: list[str],
    specs: list[HookSpec],
    adopt: Collection[Hook],
    deadline: float | None = None,
) -> HookSync:
    """Put each spec's hook on each group where it is missing, or ours and differs,
    until `deadline` (time.monotonic; None: none): the groups left are `unreached`."""
    created: list[str] = []
    made: list[Hook] = []
    updated: dict[str, list[str]] = {}
    not_ours: dict[str, str] = {}
    failed: dict[str, str] = {}
    unreached: tuple[str, ...] = ()
    for at, asg_name in enumerate(covered):
        if deadline is not None and time.monotonic() >= deadline:
            unreached = tuple(covered[at:])
            break
        for spec in specs:
            # The launch hook is named after its group and hook in what the sync says.
            what = asg_name if spec.transition == TERMINATING else f"{asg_name}/{spec.name}"
            try:
                found = aws.describe_hook(autoscaling, asg_name, spec.name)
                ours = found is None or spec.made(found) or (asg_name, spec.name) in adopt
                if found is not None and not ours:
                    not_ours[what] = whose(found)
                    continue
                differs = spec.differences(found) if found is not None else []
                if found is not None and not differs:
                    continue
                _put_hook(autoscaling, asg_name, spec)
            except AwsError as e:
                failed[what] = str(e)
                break
            if found is None:
                created.append(what)
                made.append((asg_name, spec.name))
            else:
                updated[what] = differs
    return HookSync(
        "",
        created=tuple(created),
        updated=updated,
        not_ours=not_ours,
        failed=failed,
        unreached=unreached,
        made=tuple(made),
    )


def others_hooks(
    autoscaling: aws.Client,
    settings: Settings,
    groups: Iterable[str],
    deadline: float | None = None,
) -> dict[Hook, dict[str, Any]]:
    """The hooks of this stack's names on `groups` that it did not put, as described:
    (group, name) -> the hook; one DescribeLifecycleHooks a group, until `deadline`
    (time.monotonic; the groups left are not looked at). Raises AwsError when one
    cannot be read."""
    found_by_hook: dict[Hook, dict[str, Any]] = {}
    specs = {spec.name: spec for spec in HookSpec.all_from_settings(settings)}
    for group in groups:
        if deadline is not None and time.monotonic() >= deadline:
            break
        for found in aws.describe_hooks(autoscaling, group, sorted(specs)):
            spec = specs[str(found["LifecycleHookName"])]
            if not spec.made(found):
                found_by_hook[(group, spec.name)] = found
    return found_by_hook


Hook = tuple[str, str]
"""(group, hook name)."""


@dataclass(frozen=True)
class HookSearch:
    """What a look for this stack's hooks on groups it does not cover found."""

    ours: tuple[Hook, ...] = ()
    """The hooks whose metadata names this stack (HookSpec.made, as remove_hooks)."""
    unlooked: tuple[str, ...] = ()
    """Groups not looked at: out of time, or their hooks could not be read (logged)."""


def find_ours(
    autoscaling: aws.Client,
    settings: Settings,
    groups: Iterable[str],
    names: Collection[str],
    deadline: float,
) -> HookSearch:
    """This stack's hooks of `names` on `groups`: one DescribeLifecycleHooks per group,
    every name at once; the groups left when time.monotonic() passes `deadline` are
    not looked at. A group whose hooks cannot be read is not looked at either."""
    spec = HookSpec.from_settings(settings)
    wanted = sorted(names)
    ours: list[Hook] = []
    unlooked: list[str] = []
    for group in sorted(groups):
        if time.monotonic() >= deadline:
            unlooked.append(group)
            continue
        try:
            found = aws.describe_hooks(autoscaling, group, wanted)
        except AwsError as e:
            log.error("the hooks of %s could not be read: %s", group, e)
            unlooked.append(group)
            continue
        ours += [(group, str(h["LifecycleHookName"])) for h in found if spec.made(h)]
    return HookSearch(tuple(ours), tuple(unlooked))


def find_ours_elsewhere(
    autoscaling: aws.Client,
    settings: Settings,
    covered: Collection[str],
    deadline: float,
    names: Collection[str] = (),
) -> HookSearch:
    """This stack's hooks (either name, or any of `names`) on the region's groups but
    `covered` (one
    untagged by hand, a managed node group left alone, a group of the cluster the
    stack covered before an Update of ClusterName): find_ours until `deadline`. A
    hook naming this stack is ours on any group; only to save the calls are the
    groups tagged for another cluster left out when they do not carry ASG_TAG's key
    (the stack's tag never covered them, whatever its cluster). The custom
    resource's Delete and `make undeploy` look the same way. AwsError when the
    groups cannot be listed."""
    key = (settings.asg_tag_pair or ("", ""))[0]
    every = aws.every_group(autoscaling)
    others = [
        g
        for g, tags in every.items()
        if g not in covered and (not other_cluster(tags, settings) or (key and key in tags))
    ]
    wanted = {settings.lifecycle_hook_name, settings.launch_hook_name, *names}
    return find_ours(autoscaling, settings, others, wanted, deadline)


def remove_hooks(
    autoscaling: aws.Client,
    settings: Settings,
    candidates: Iterable[Hook],
    *,
    dry_run: bool = False,
    deadline: float | None = None,
) -> HookRemoval:
    """Delete those of the `candidates` that this stack put (with `dry_run`, only say
    which). Ours: its NotificationMetadata names this stack (HookSpec.made); another
    stack's, 0.1.0's or another tool's hook of the name stays, and so does one an
    instance waits on (hooks_removal.waiting_on: deleting it would end the wait). A
    group or hook already gone is nothing to do. Those left when time.monotonic()
    passes `deadline` (None: none) are `unreached`."""
    spec = HookSpec.from_settings(settings)
    removed: list[Hook] = []
    left: dict[Hook, str] = {}
    failed: dict[Hook, str] = {}
    waiting: list[Hook] = []
    todo, unreached = sorted(set(candidates)), []
    for at, (group, name) in enumerate(todo):
        if deadline is not None and time.monotonic() >= deadline:
            unreached = todo[at:]
            break
        try:
            found = aws.describe_hook(autoscaling, group, name)
            if found is None:
                continue
            if not spec.made(found):
                left[(group, name)] = whose(found)
            elif why := waiting_on(autoscaling, group, found):
                failed[(group, name)] = why
                waiting.append((group, name))
            elif dry_run or aws.delete_lifecycle_hook(autoscaling, group, name):
                removed.append((group, name))
        except AwsError as e:
            failed[(group, name)] = str(e)
    done = HookRemoval(tuple(removed), left, failed, tuple(unreached), tuple(waiting))
    return logged(done, dry_run)
