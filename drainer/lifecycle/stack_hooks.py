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
  covered or the old ClusterName's (a tagged group of the cluster the stack moved
  from), an EKS managed node group left alone once AllowManagedNodeGroups is
  false. One the policy no longer lets it delete (the new tag's) is named in the
  reason with the command, not a failure. A named group deleted since is not a
  failure (a rollback must not fail on it).
- Delete: delete this stack's hooks (hooks.remove_hooks: by name and
  NotificationMetadata, as `make undeploy` decides), on the covered groups still
  there; a hook of the same name that another tool made stays. A deleted group is
  nothing to do. Only an AWS call on those that fails (access denied) answers
  FAILED, naming the hooks to delete by hand. Then it looks for this stack's hooks on
  every other group of the region (one untagged by hand, a managed node group left
  alone, a group of a cluster the stack covered before), but those tagged for
  another cluster without ASG_TAG's key, one DescribeLifecycleHooks a group within
  LOOK_SECONDS: those found are deleted where the policy lets it, else named with
  the command (the tagged groups' policy holds only while the tag does); never a
  failure, which would block the stack's deletion. The same for a rollback's Delete
  of a Create CloudFormation gave up on (cancelled, or past its ServiceTimeout),
  which carries an id CloudFormation made up, not the stack's: only while the stack
  is UPDATE_COMPLETE_CLEANUP_IN_PROGRESS is a Delete of another id a replaced
  resource's cleanup (that of such a Create, retried by the update), and deletes
  nothing; nor does it when the status cannot be read (DescribeStacks), saying how
  to find the hooks.

A reason that would pass the limit is cut in what was done, never in what the
operator must act on (stack_reasons.py).

Every answer is sent, a failure included: CloudFormation would otherwise wait an
hour. The schedule and the API-call rule stay as the safety net, and depend on
this resource: they are created after it and deleted before it, so neither starts
a sync after the Delete; a sync already running that puts a hook back deletes it
again once it reads the stack being deleted (hooks_stack.py). A Create or an Update
puts hooks for WORK_SECONDS at most, naming the groups left to the hook sync.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from drainer import aws, logs
from drainer.errors import DrainerError
from drainer.lifecycle import hooks, managed, stack_reasons
from drainer.lifecycle import stack_leftovers as leftovers
from drainer.lifecycle.events import StackRequest
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.stack_reasons import (
    Told,
    failed_removal,
    late_groups,
    named,
    not_deleted,
    removed,
)

log = logging.getLogger(__name__)

SUCCESS, FAILED = "SUCCESS", "FAILED"
_REASON_LIMIT = stack_reasons.REASON_LIMIT
_CREATE_GOES_ON = frozenset({"CREATE_IN_PROGRESS", "UPDATE_IN_PROGRESS"})
"""The stack's states in which a Create of this resource is still awaited (the stack
created, or updated with the resource added)."""
_REPLACED = "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS"
"""The stack's state while CloudFormation deletes the resources an update replaced."""
WORK_SECONDS = stack_reasons.WORK_SECONDS
_LATE = "late"
"""_put's answer's key for what it had no time for: popped before the answer goes."""
LOOK_SECONDS = 150.0
"""How long after a request's start a Delete, or an Update's look at the groups it
now leaves alone, may go on looking for this stack's hooks, one DescribeLifecycleHooks
a group (hundreds of groups: tens of seconds): the resource's ServiceTimeout is 300 s."""


def physical_id(request: StackRequest) -> str:
    """The resource's id, the same in every answer for the stack's life: a changed id
    would make CloudFormation replace the resource and send a Delete for the old one.
    It has never changed (f96ab73 on: an Update answers the id it was sent, a Create
    this one), so a Delete of another id has CloudFormation's: that of a Create it
    got no answer from (_delete)."""
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
    started = time.monotonic()  # the request's start
    looks_until, until = started + LOOK_SECONDS, started + WORK_SECONDS
    refused = _not_this_stack(request, settings)
    if refused is not None:
        return refused
    if request.kind == "Delete":  # whatever CREATE_LIFECYCLE_HOOKS says now: the resource
        # existed, so it may have put hooks (an Update turning the setting off deletes
        # it with the setting already off); only those naming this stack go
        return _delete(request, autoscaling, settings, (looks_until, until), cloudformation)
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
    others = hooks.others_hooks(autoscaling, settings, covered, until)
    adopt = _adoptable(request, autoscaling, settings, others)
    taken = {hook: hooks.whose(found) for hook, found in others.items() if hook not in adopt}
    if taken:
        return reply(request, FAILED, _not_ours(taken))
    answer = _put(request, autoscaling, settings, (covered, skipped), adopt, until=until)
    if answer["Status"] != SUCCESS:
        return answer
    told = Told(answer["Reason"], answer.pop(_LATE, ""))
    if request.kind == "Update":
        tidied = _tidy(request, autoscaling, settings, (tuple(covered), skipped), looks_until)
        if not isinstance(tidied, Told):
            return tidied
        told += tidied
    # Named groups gone, an Update's named and not drained: said whatever the length.
    gone = f"; gone: {', '.join(missing)}" if missing else ""
    told += Told(todo=gone + (f"; not covered: {refused_managed}" if refused_managed else ""))
    answer["Reason"] = told.text()
    if request.kind == "Create":
        moved_on = _stack_moved_on(request, cloudformation)
        if moved_on is not None:
            return _undone(request, autoscaling, settings, covered, moved_on)
    return answer


def _put(
    request: StackRequest,
    autoscaling: aws.Client,
    settings: Settings,
    groups: tuple[list[str], dict[str, str]],
    adopt: set[hooks.Hook],
    *,
    until: float | None = None,
) -> dict[str, Any]:
    """Put the hooks (adopting `adopt`) until `until` (time.monotonic): the answer,
    under _LATE the groups not reached in time (left to the hook sync)."""
    cause = f"cloudformation-{request.kind.lower()}"
    sync = hooks.sync_hooks(
        autoscaling, settings, cause, groups, adopt, deadline=until, own_stack=False
    )
    if sync.failed or sync.not_ours:  # not_ours: one put by someone else since we looked
        failures = {
            **sync.failed,
            **{g: f"not this stack's: {w}" for g, w in sync.not_ours.items()},
        }
        each = "; ".join(f"{g}: {e}" for g, e in sorted(failures.items()))
        return reply(request, FAILED, each)
    done = [g for g in sync.covered if g not in sync.unreached]
    reason = f"hooks on {len(done)} group(s): {', '.join(done) or 'none yet'}"
    if adopt:
        reason += f"; adopted from 0.1.0: {named(adopt)}"
    answer = reply(request, SUCCESS, reason, {"Groups": str(len(done))})
    return answer | ({_LATE: late_groups(sync.unreached)} if sync.unreached else {})


def _tidy(
    request: StackRequest,
    autoscaling: aws.Client,
    settings: Settings,
    groups: tuple[tuple[str, ...], dict[str, str]],
    deadline: float,
) -> Told | dict[str, Any]:
    """After an Update's put: delete this stack's hooks that it made unwanted
    (stack_leftovers), looking for them until `deadline` (time.monotonic). What was
    done and what the operator must do; the FAILED answer when a stale hook on a
    group it still covers could not be deleted. On a group it no longer covers (a
    name AsgNames dropped) the role, updated before this resource, may no longer
    delete: said with the command, never a failure (a rollback would not help)."""
    covered, skipped = groups
    stale = leftovers.stale(request, autoscaling, settings, covered)
    removal = hooks.remove_hooks(autoscaling, settings, stale)
    dropped = {hook: e for hook, e in removal.failed.items() if hook[0] not in covered}
    if len(dropped) < len(removal.failed):
        return reply(request, FAILED, failed_removal(removal))
    told = Told(
        f"; {removed(removal)}" if removal.removed else "", not_deleted(dropped, removal.waiting)
    )
    told += leftovers.untagged(request, autoscaling, settings, covered)
    return told + leftovers.left_alone(request, autoscaling, settings, skipped, deadline)


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
    request: StackRequest,
    autoscaling: aws.Client,
    settings: Settings,
    deadlines: tuple[float, float],
    cloudformation: aws.Client | None = None,
) -> dict[str, Any]:
    """Delete this stack's hooks on the covered groups until the second of
    `deadlines` (the hooks left then fail the Delete, which deleting the stack again
    takes up), then on any other group (stack_leftovers.elsewhere), looking until the
    first. A Delete of another id than the stack's own is a rollback's, of a Create
    CloudFormation gave up on (its hooks go too), but while the stack replaces
    resources (_replaced)."""
    rollback = ""
    if request.physical_id and request.physical_id != physical_id(request):
        status, kept = _replaced(request, cloudformation)
        if kept:
            return reply(request, SUCCESS, kept)
        rollback = f"{request.physical_id} is CloudFormation's id, the stack {status}: "
    covered, _ = hooks.covered_groups(autoscaling, settings)
    names = sorted(leftovers.every_name(request, settings))  # the resource's, the settings'
    candidates = itertools.product(covered, names)
    removal = hooks.remove_hooks(autoscaling, settings, candidates, deadline=deadlines[1])
    if removal.failed or removal.unreached:
        return reply(request, FAILED, failed_removal(removal))
    told, more = leftovers.elsewhere(autoscaling, settings, set(covered), deadlines[0], names)
    told = Told(rollback + removed(removal)) + told
    count = str(len(removal.removed) + more)
    return reply(request, SUCCESS, told.text(), {"Removed": count})


def _replaced(request: StackRequest, cloudformation: aws.Client | None) -> tuple[str, str]:
    """A Delete of another id than the stack's: (the stack's status, why it deletes
    nothing; "" when it deletes this stack's hooks). The id never changes: another is
    CloudFormation's own, given to a Create that it got no answer from (cancelled
    when another resource failed, or past its ServiceTimeout), whose hooks its
    rollback must delete. Only in an update's cleanup (_REPLACED) is it a replaced
    resource's (such a Create, retried by the update, which put the hooks again).
    When the stack's status cannot be read, nothing is deleted, and said so."""
    why = f"{request.physical_id} is not this stack's resource id ({physical_id(request)})"
    try:
        status = aws.stack_status(cloudformation, request.stack_id) if cloudformation else None
    except DrainerError as e:
        log.warning("cannot tell what the stack does with this Delete: %s", e)
        status, why = None, f"{why}, and the stack's status could not be read ({e})"
    if status == _REPLACED:
        return status, f"{why}: a replaced resource's cleanup ({status}); no hook deleted"
    if status is None:
        return "", (
            f"{why}: taken for a replaced resource's cleanup; no hook deleted. If the "
            "stack is rolling back or being deleted, its hooks stay: delete those whose "
            "NotificationMetadata names it (aws autoscaling describe-lifecycle-hooks, "
            "delete-lifecycle-hook)"
        )
    return status, ""


def _adoptable(
    request: StackRequest,
    autoscaling: aws.Client,
    settings: Settings,
    others: Mapping[hooks.Hook, Mapping[str, Any]],
) -> set[hooks.Hook]:
    """The hooks an Update takes over: 0.1.0's (its metadata named the cluster and no
    stack), on a group the stack covered before (named in the old AsgNames, or
    carrying the old AsgTag: leftovers.tagged_before). A Create adopts nothing."""
    if request.kind != "Update":
        return set()
    specs = {spec.name: spec for spec in hooks.HookSpec.all_from_settings(settings)}
    found_0_1_0 = {hook for hook, found in others.items() if specs[hook[1]].from_0_1_0(found)}
    named = leftovers.named_before(request)
    if all(group in named for group, _ in found_0_1_0):
        return found_0_1_0
    before = named | leftovers.tagged_before(request, autoscaling, settings)
    return {(group, name) for group, name in found_0_1_0 if group in before}


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
    done = failed_removal(removal) if removal.failed else removed(removal)
    return reply(
        request,
        FAILED,
        f"the stack is {status}: CloudFormation gave up on this Create while it ran; "
        f"the hooks it put are removed again: {done}",
    )
