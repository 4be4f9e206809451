"""The stack owns its hooks: the custom resource `Custom::LifecycleHooks` of
template.yaml, served by the function.

CloudFormation sends Create when the stack is created, Update when a property
changes (the properties are the parameters that decide the hooks: groups, tag,
names, heartbeat, the launch hook), Delete when the stack (or the resource) goes.
The function then acts on its own settings (its environment, already updated: the
resource depends on the function) and answers at the request's ResponseURL:

- Create: put the hooks on every covered group (hooks.sync_hooks). FAILED, with the
  reason, when a group named in AsgNames does not exist or an AWS call fails: the
  stack rolls back instead of leaving a group without its hook.
- Update: the same, then delete the hooks of ours no longer wanted: a hook renamed,
  the launch hook turned off, a group no longer named, a group only the old AsgTag
  covered, an EKS managed node group left alone once AllowManagedNodeGroups is
  false. One the policy no longer lets it delete (the new tag's) is named in the
  reason with the command, not a failure. A named group deleted since is not a
  failure (a rollback must not fail on it).
- Delete: delete this stack's hooks (hooks.remove_hooks: by name and
  NotificationMetadata, as `make undeploy` decides), on the covered groups still
  there; a hook of the same name that another tool made stays. A deleted group is
  nothing to do. Only an AWS call on those that fails (access denied) answers
  FAILED, naming the hooks to delete by hand. Then it looks for this stack's hooks on
  every other group of the region (one untagged by hand, a managed node group left
  alone), but those tagged for another cluster, one DescribeLifecycleHooks a group
  within LOOK_SECONDS: those found are deleted where the policy lets it, else named
  with the command (the tagged groups' policy holds only while the tag does); never
  a failure, which would block the stack's deletion.

Every answer is sent, a failure included: CloudFormation would otherwise wait an
hour. The schedule and the API-call rule stay as the safety net, and depend on
this resource: they are created after it and deleted before it, so neither puts a
hook back once the Delete has removed them.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from drainer import aws, logs
from drainer.errors import AwsError, DrainerError
from drainer.lifecycle import hooks, managed
from drainer.lifecycle.events import StackRequest
from drainer.lifecycle.settings import Settings

log = logging.getLogger(__name__)

SUCCESS, FAILED = "SUCCESS", "FAILED"
_REASON_LIMIT = 1500
_CREATE_GOES_ON = frozenset({"CREATE_IN_PROGRESS", "UPDATE_IN_PROGRESS"})
"""The stack's states in which a Create of this resource is still awaited (the stack
created, or updated with the resource added)."""
LOOK_SECONDS = 150.0
"""How long after a request's start a Delete, or an Update's look at the groups it
now leaves alone, may go on looking for this stack's hooks, one DescribeLifecycleHooks
a group (hundreds of groups: tens of seconds): the resource's ServiceTimeout is 300 s."""


def physical_id(request: StackRequest) -> str:
    """The resource's id, the same in every answer for the stack's life: a changed id
    would make CloudFormation replace the resource and send a Delete for the old one."""
    return f"{request.stack_name}-lifecycle-hooks"


def reply(
    request: StackRequest, status: str, reason: str, data: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The body CloudFormation reads at the ResponseURL."""
    return {
        "Status": status,
        "Reason": reason[:_REASON_LIMIT],
        "PhysicalResourceId": request.physical_id or physical_id(request),
        "StackId": request.stack_id,
        "RequestId": request.request_id,
        "LogicalResourceId": request.logical_id,
        "Data": dict(data or {}),
    }


def serve(
    request: StackRequest, settings: Settings, connect: Callable[[], aws.AwsClients]
) -> dict[str, Any]:
    """The handler's entry: the clients built, then handle; answered whatever fails."""
    try:
        clients = connect()
    except Exception as e:
        return send(request, unexpected(request, e))
    return handle(request, clients.autoscaling, settings, clients.cloudformation)


def handle(
    request: StackRequest,
    autoscaling: aws.Client,
    settings: Settings,
    cloudformation: aws.Client | None = None,
) -> dict[str, Any]:
    """Act on the request, answer CloudFormation, and return the answer. Every request
    is answered, whatever the exception: CloudFormation would otherwise wait for the
    resource's ServiceTimeout."""
    # The hook sync's cause, under the log key `trigger` that it has always had.
    logs.bind(trigger=f"cloudformation-{request.kind.lower()}")
    try:
        answer = _act(request, autoscaling, settings, cloudformation)
    except DrainerError as e:
        answer = reply(request, FAILED, f"{request.kind} of the lifecycle hooks failed: {e}")
    except Exception as e:
        answer = unexpected(request, e)
    return send(request, answer)


def unexpected(request: StackRequest, error: Exception) -> dict[str, Any]:
    """FAILED with the exception's text, its traceback in the log."""
    log.exception("custom resource %s: unexpected error", request.kind)
    why = f"{type(error).__name__}: {error}"
    return reply(
        request,
        FAILED,
        f"{request.kind} of the lifecycle hooks failed on an unexpected error ({why}); "
        "the function's log has its traceback",
    )


def unreadable(request: StackRequest, error: Exception) -> dict[str, Any]:
    """The function's settings do not read: Create and Update fail with the reason;
    a Delete succeeds (nothing can be known to be ours, and the stack must go)."""
    if request.kind == "Delete":
        why = f"settings unreadable ({error}); no hook deleted: check the groups by hand"
        return send(request, reply(request, SUCCESS, why))
    return send(request, reply(request, FAILED, f"the function's settings are invalid: {error}"))


def send(request: StackRequest, answer: dict[str, Any]) -> dict[str, Any]:
    level = logging.INFO if answer["Status"] == SUCCESS else logging.ERROR
    log.log(
        level,
        f"custom resource {request.kind}: {answer['Status']} {answer['Reason']}",
        extra=logs.safe_fields({"event": "stack_hooks", "answer": answer}),
    )
    aws.answer_custom_resource(request.response_url, answer)
    return {"result": "stack_hooks", "request": request.kind, **answer}


def _act(
    request: StackRequest,
    autoscaling: aws.Client,
    settings: Settings,
    cloudformation: aws.Client | None,
) -> dict[str, Any]:
    looks_until = time.monotonic() + LOOK_SECONDS  # from the request's start
    refused = _not_this_stack(request, settings)
    if refused is not None:
        return refused
    if request.kind == "Delete":  # whatever CREATE_LIFECYCLE_HOOKS says now: the resource
        # existed, so it may have put hooks (an Update turning the setting off deletes
        # it with the setting already off); only those naming this stack go
        return _delete(request, autoscaling, settings, looks_until)
    if not settings.create_lifecycle_hooks:
        return reply(request, SUCCESS, "CREATE_LIFECYCLE_HOOKS is false: the hooks are yours")
    covered, skipped = hooks.covered_groups(autoscaling, settings)
    missing = sorted(g for g, why in skipped.items() if why == hooks.NO_SUCH_GROUP)
    if request.kind == "Create" and missing:  # a group named wrong fails before any change
        why = f"no Auto Scaling group named {', '.join(missing)} (check AsgNames)"
        return reply(request, FAILED, f"{why}; no hook was put")
    refused_managed = managed.named_refused(settings, skipped)
    if request.kind == "Create" and refused_managed:
        return reply(request, FAILED, f"{refused_managed}; no hook was put")
    others = hooks.others_hooks(autoscaling, settings, covered)
    adopt = _adoptable(request, settings, others)
    taken = {hook: hooks.whose(found) for hook, found in others.items() if hook not in adopt}
    if taken:
        return reply(request, FAILED, _not_ours(taken))
    answer = _put(
        request, autoscaling, settings, (covered, skipped), adopt, looks_until=looks_until
    )
    if answer["Status"] == SUCCESS:  # named groups gone; an Update's named, not drained
        gone = f"; gone: {', '.join(missing)}" if missing else ""
        _with_tail(answer, gone + (f"; not covered: {refused_managed}" if refused_managed else ""))
    if answer["Status"] == SUCCESS and request.kind == "Create":
        moved_on = _stack_moved_on(request, cloudformation)
        if moved_on is not None:
            return _undone(request, autoscaling, settings, covered, moved_on)
    return answer


def _with_tail(answer: dict[str, Any], tail: str) -> None:
    """`tail` added to the answer's reason, the head cut so that both fit the limit."""
    if tail:
        head = answer["Reason"][: max(0, _REASON_LIMIT - len(tail))]
        answer["Reason"] = (head + tail)[:_REASON_LIMIT]


def _put(
    request: StackRequest,
    autoscaling: aws.Client,
    settings: Settings,
    groups: tuple[list[str], dict[str, str]],
    adopt: set[hooks.Hook],
    *,
    looks_until: float,
) -> dict[str, Any]:
    """Put the hooks (adopting `adopt`); on an Update, delete this stack's that it
    made unwanted, looking for them until `looks_until` (time.monotonic)."""
    cause = f"cloudformation-{request.kind.lower()}"
    sync = hooks.sync_hooks(autoscaling, settings, cause, groups, adopt)
    if sync.failed or sync.not_ours:  # not_ours: one put by someone else since we looked
        failures = {
            **sync.failed,
            **{g: f"not this stack's: {w}" for g, w in sync.not_ours.items()},
        }
        return reply(request, FAILED, "; ".join(f"{g}: {e}" for g, e in sorted(failures.items())))
    reason = f"hooks on {len(sync.covered)} group(s): {', '.join(sync.covered) or 'none yet'}"
    if adopt:
        reason += f"; adopted from 0.1.0: {_named(adopt)}"
    if request.kind == "Update":
        stale = _stale(request, autoscaling, settings, sync.covered)
        removal = hooks.remove_hooks(autoscaling, settings, stale)
        if removal.failed:
            return reply(request, FAILED, _failed_removal(removal))
        if removal.removed:
            reason += f"; {_removed(removal)}"
        reason += _untagged(request, autoscaling, settings, sync.covered)
        reason += _left_alone(request, autoscaling, settings, groups[1], looks_until)
    return reply(request, SUCCESS, reason, {"Groups": str(len(sync.covered))})


def _not_this_stack(request: StackRequest, settings: Settings) -> dict[str, Any] | None:
    """The answer to a request from another stack than the function's own (STACK_ID);
    None when it is its own. Without STACK_ID (a function deployed outside this
    template) the function cannot tell, and its hooks name no stack."""
    if not settings.stack_id:
        log.warning("STACK_ID is empty: the custom resource cannot check the request's stack")
        return None
    if request.stack_id != settings.stack_id:
        return reply(
            request,
            FAILED,
            f"refused: the request is from the stack {request.stack_id}, not this "
            f"function's ({settings.stack_id}); nothing done",
        )
    return None


def _delete(
    request: StackRequest, autoscaling: aws.Client, settings: Settings, deadline: float
) -> dict[str, Any]:
    """Delete this stack's hooks on the covered groups, then on any other group
    (_elsewhere), looking until `deadline`. A Delete of another id than the stack's
    own is a replaced resource's cleanup: its hooks are the new one's."""
    if request.physical_id and request.physical_id != physical_id(request):
        why = (
            f"{request.physical_id} is not this stack's resource ({physical_id(request)}): "
            "a replaced resource's cleanup; no hook deleted"
        )
        return reply(request, SUCCESS, why)
    covered, _ = hooks.covered_groups(autoscaling, settings)
    names = (settings.lifecycle_hook_name, settings.launch_hook_name)
    removal = hooks.remove_hooks(autoscaling, settings, itertools.product(covered, names))
    if removal.failed:
        return reply(request, FAILED, _failed_removal(removal))
    tail, more = _elsewhere(autoscaling, settings, set(covered), deadline)
    count = str(len(removal.removed) + more)
    return reply(request, SUCCESS, _removed(removal) + tail, {"Removed": count})


def _elsewhere(
    autoscaling: aws.Client, settings: Settings, covered: set[str], deadline: float
) -> tuple[str, int]:
    """Delete this stack's hooks on the region's other groups (untagged by hand, a
    managed node group left alone, an Update's deletion refused), but those tagged
    for another cluster, which ASG_TAG does not admit: (the reason's tail, how many
    deleted). The tagged groups' policy refuses a deletion once the tag is gone:
    named with the command, not a failure."""
    try:
        search = hooks.find_ours_elsewhere(autoscaling, settings, covered, deadline)
    except AwsError as e:
        log.error("the other groups could not be listed: %s", e)
        return (
            f"; the other groups could not be listed ({e}): a hook of this stack's on a "
            "group it no longer covers stays (aws autoscaling describe-lifecycle-hooks)",
            0,
        )
    tail = _unlooked(search.unlooked, "other group(s)")
    if not search.ours:
        return tail, 0
    removal = hooks.remove_hooks(autoscaling, settings, search.ours)
    done = f": {_removed(removal)}" if removal.removed else ""
    found = f"; this stack's hooks on groups it does not cover{done}{_by_hand(removal.failed)}"
    return found + tail, len(removal.removed)


def _named_before(request: StackRequest) -> set[str]:
    """The groups the old properties named (AsgNames)."""
    return {g.strip() for g in str(request.old_properties.get("AsgNames") or "").split(",")} - {""}


def _adoptable(
    request: StackRequest, settings: Settings, others: Mapping[hooks.Hook, Mapping[str, Any]]
) -> set[hooks.Hook]:
    """The hooks an Update takes over: 0.1.0's (its metadata named the cluster and no
    stack), on a group the stack covered before (named in the old AsgNames, or any
    covered group when it had an AsgTag). A Create adopts nothing."""
    if request.kind != "Update":
        return set()
    named_before = _named_before(request)
    tagged_before = bool(str(request.old_properties.get("AsgTag") or "").strip())
    specs = {spec.name: spec for spec in hooks.HookSpec.all_from_settings(settings)}
    return {
        (group, name)
        for (group, name), found in others.items()
        if (group in named_before or tagged_before) and specs[name].from_0_1_0(found)
    }


def _not_ours(taken: Mapping[hooks.Hook, str]) -> str:
    each = "; ".join(
        f"{group} already has a lifecycle hook {name} that this stack did not put ({why})"
        for (group, name), why in sorted(taken.items())
    )
    return (
        f"{each}. No hook was put or changed: delete that hook, or leave its group out "
        "of AsgNames and AsgTag"
    )


def _stack_moved_on(request: StackRequest, cloudformation: aws.Client | None) -> str | None:
    """The stack's state when CloudFormation no longer awaits this Create (it cancelled
    it, rolled back, deleted the stack: its Delete may have run before our puts); None
    while it does, or when it cannot be told (then the answer is as if it did)."""
    if cloudformation is None:
        return None
    try:
        status = aws.stack_status(cloudformation, request.stack_id)
    except DrainerError as e:
        log.warning("cannot tell whether the stack still awaits this Create: %s", e)
        return None
    return None if status is None or status in _CREATE_GOES_ON else status


def _undone(
    request: StackRequest,
    autoscaling: aws.Client,
    settings: Settings,
    covered: Iterable[str],
    status: str,
) -> dict[str, Any]:
    names = (settings.lifecycle_hook_name, settings.launch_hook_name)
    removal = hooks.remove_hooks(autoscaling, settings, itertools.product(covered, names))
    done = _failed_removal(removal) if removal.failed else _removed(removal)
    return reply(
        request,
        FAILED,
        f"the stack is {status}: CloudFormation gave up on this Create while it ran; "
        f"the hooks it put are removed again: {done}",
    )


def _stale(
    request: StackRequest, autoscaling: aws.Client, settings: Settings, covered: tuple[str, ...]
) -> list[hooks.Hook]:
    """The hooks an update may have made unwanted: on the covered groups, a former
    name or the launch hook turned off; every name on a group no longer named (and
    still there). remove_hooks deletes those that are ours."""
    wanted = {spec.name for spec in hooks.HookSpec.all_from_settings(settings)}
    every = _every_name(request, settings)
    dropped = _named_before(request) - set(covered)
    still_there = aws.existing_groups(autoscaling, sorted(dropped)) if dropped else set()
    return [
        *itertools.product(covered, every - wanted),
        *itertools.product(still_there, every),
    ]


def _every_name(request: StackRequest, settings: Settings) -> set[str]:
    """Every name a hook of this stack's may have: the old properties' and today's."""
    old = request.old_properties
    former = {str(old.get("LifecycleHookName") or ""), str(old.get("LaunchHookName") or "")}
    wanted = {spec.name for spec in hooks.HookSpec.all_from_settings(settings)}
    return (former | wanted | {settings.launch_hook_name}) - {""}


def _untagged(
    request: StackRequest, autoscaling: aws.Client, settings: Settings, covered: tuple[str, ...]
) -> str:
    """Delete this stack's hooks on the groups only the old AsgTag covered (an Update
    dropping or changing it): left, their actions would wait HeartbeatTimeout, refused
    as no group of ours. What cannot be deleted (the tag's policy names the new tag
    already) is said, never a failure: a rollback would not help. The reason's tail."""
    old_tag = str(request.old_properties.get("AsgTag") or "").strip()
    key, sep, value = old_tag.partition("=")
    if not sep or old_tag == settings.asg_tag:
        return ""
    try:
        left = sorted(set(aws.groups_with_tag(autoscaling, key, value)) - set(covered))
    except AwsError as e:
        log.error("the groups tagged %s could not be listed: %s", old_tag, e)
        return f"; the groups tagged {old_tag} could not be listed ({e}): their hooks stay"
    candidates = itertools.product(left, sorted(_every_name(request, settings)))
    removal = hooks.remove_hooks(autoscaling, settings, candidates)
    tail = f"; no longer tagged {old_tag}: {_removed(removal)}" if removal.removed else ""
    if removal.failed:
        tail += "; not deleted (delete by hand, aws autoscaling delete-lifecycle-hook): " + (
            "; ".join(f"{g}/{n}: {e}" for (g, n), e in sorted(removal.failed.items()))
        )
    return tail


def _left_alone(
    request: StackRequest,
    autoscaling: aws.Client,
    settings: Settings,
    skipped: Mapping[str, str],
    deadline: float,
) -> str:
    """Delete this stack's hooks on the EKS managed node groups the Update leaves alone
    now, AllowManagedNodeGroups being false (a named one is a dropped name: _stale).
    Left, their actions would wait HeartbeatTimeout, refused. What the policy refuses
    is named with the command, never a failure. The reason's tail."""
    named_before = _named_before(request)
    groups = [
        g
        for g, why in skipped.items()
        if why.startswith(managed.REFUSED_PREFIX) and g not in named_before
    ]
    if not groups:
        return ""
    names = _every_name(request, settings)
    search = hooks.find_ours(autoscaling, settings, groups, names, deadline)
    tail = _unlooked(search.unlooked, "group(s) left alone")
    if not search.ours:
        return tail
    removal = hooks.remove_hooks(autoscaling, settings, search.ours)
    why = ", ".join(f"{g}: {skipped[g].split(':')[0]}" for g in sorted({g for g, _ in search.ours}))
    done = f": {_removed(removal)}" if removal.removed else ""
    return f"; left alone now ({why}){done}{_by_hand(removal.failed)}{tail}"


def _by_hand(failed: Mapping[hooks.Hook, str]) -> str:
    """The hooks the role could not delete, each with the command (the log has why)."""
    if not failed:
        return ""
    commands = "; ".join(
        f"aws autoscaling delete-lifecycle-hook --auto-scaling-group-name {group} "
        f"--lifecycle-hook-name {name}"
        for group, name in sorted(failed)
    )
    return (
        "; not deleted (the role's policy lets it delete only on the groups named or "
        f"still tagged; the log has each error): {_named(failed)}; delete by hand: {commands}"
    )


def _unlooked(groups: tuple[str, ...], what: str) -> str:
    """The groups not looked at for this stack's hooks, with the command to."""
    if not groups:
        return ""
    shown = ", ".join(groups[:10]) + (", ..." if len(groups) > 10 else "")
    return (
        f"; {len(groups)} {what} not looked at for this stack's hooks (out of time, or "
        f"unreadable: the log says): {shown}; look with aws autoscaling "
        "describe-lifecycle-hooks --auto-scaling-group-name GROUP"
    )


def _named(hooks_: Iterable[hooks.Hook]) -> str:
    return ", ".join(f"{group}/{name}" for group, name in sorted(hooks_))


def _removed(removal: hooks.HookRemoval) -> str:
    text = f"deleted {len(removal.removed)} hook(s): {_named(removal.removed) or 'none'}"
    if removal.left:
        text += f"; left to their owners: {_named(removal.left)}"
    return text


def _failed_removal(removal: hooks.HookRemoval) -> str:
    failures = "; ".join(
        f"{group}/{name}: {error}" for (group, name), error in sorted(removal.failed.items())
    )
    return (
        f"{failures}. Delete these hooks by hand (aws autoscaling delete-lifecycle-hook), "
        "then delete the stack again, retaining this resource"
    )
