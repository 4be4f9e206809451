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
  the launch hook turned off, a group no longer named. A named group deleted since
  is not a failure (a rollback must not fail on it).
- Delete: delete this stack's hooks (hooks.remove_hooks: by name and
  NotificationMetadata, as `make undeploy` decides), on the groups still there; a
  hook of the same name that another tool made stays. A deleted group is nothing
  to do. Only an AWS call that fails (access denied) answers FAILED, naming the
  hooks to delete by hand.

Every answer is sent, a failure included: CloudFormation would otherwise wait an
hour. The schedule and the API-call rule stay as the safety net, and depend on
this resource: they are created after it and deleted before it, so neither puts a
hook back once the Delete has removed them.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from drainer import aws, logs
from drainer.errors import DrainerError
from drainer.lifecycle import hooks, managed
from drainer.lifecycle.events import StackRequest
from drainer.lifecycle.settings import Settings

log = logging.getLogger(__name__)

SUCCESS, FAILED = "SUCCESS", "FAILED"
_REASON_LIMIT = 1500


def reply(
    request: StackRequest, status: str, reason: str, data: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The body CloudFormation reads at the ResponseURL."""
    return {
        "Status": status,
        "Reason": reason[:_REASON_LIMIT],
        "PhysicalResourceId": request.physical_id or f"{request.stack_name}-lifecycle-hooks",
        "StackId": request.stack_id,
        "RequestId": request.request_id,
        "LogicalResourceId": request.logical_id,
        "Data": dict(data or {}),
    }


def handle(request: StackRequest, autoscaling: aws.Client, settings: Settings) -> dict[str, Any]:
    """Act on the request, answer CloudFormation, and return the answer."""
    logs.bind(trigger=f"cloudformation-{request.kind.lower()}")
    try:
        answer = _act(request, autoscaling, settings)
    except DrainerError as e:
        answer = reply(request, FAILED, f"{request.kind} of the lifecycle hooks failed: {e}")
    return send(request, answer)


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


def _act(request: StackRequest, autoscaling: aws.Client, settings: Settings) -> dict[str, Any]:
    if not settings.create_lifecycle_hooks:
        return reply(request, SUCCESS, "CREATE_LIFECYCLE_HOOKS is false: the hooks are yours")
    covered, skipped = hooks.covered_groups(autoscaling, settings)
    if request.kind == "Delete":
        names = (settings.lifecycle_hook_name, settings.launch_hook_name)
        removal = hooks.remove_hooks(autoscaling, settings, itertools.product(covered, names))
        if removal.failed:
            return reply(request, FAILED, _failed_removal(removal))
        return reply(request, SUCCESS, _removed(removal), {"Removed": str(len(removal.removed))})
    missing = sorted(g for g, why in skipped.items() if why == hooks.NO_SUCH_GROUP)
    if request.kind == "Create" and missing:  # a group named wrong fails before any change
        why = f"no Auto Scaling group named {', '.join(missing)} (check AsgNames)"
        return reply(request, FAILED, f"{why}; no hook was put")
    refused_managed = managed.named_refused(settings, skipped)
    if request.kind == "Create" and refused_managed:
        return reply(request, FAILED, f"{refused_managed}; no hook was put")
    trigger = f"cloudformation-{request.kind.lower()}"
    sync = hooks.sync_hooks(autoscaling, settings, trigger, (covered, skipped))
    if sync.failed:
        failures = "; ".join(f"{what}: {error}" for what, error in sorted(sync.failed.items()))
        return reply(request, FAILED, failures)
    reason = f"hooks on {len(sync.covered)} group(s): {', '.join(sync.covered) or 'none yet'}"
    if missing:
        reason += f"; gone: {', '.join(missing)}"
    if request.kind == "Update":
        stale = _stale(request, autoscaling, settings, sync.covered)
        removal = hooks.remove_hooks(autoscaling, settings, stale)
        if removal.failed:
            return reply(request, FAILED, _failed_removal(removal))
        if removal.removed:
            reason += f"; {_removed(removal)}"
    return reply(request, SUCCESS, reason, {"Groups": str(len(sync.covered))})


def _stale(
    request: StackRequest, autoscaling: aws.Client, settings: Settings, covered: tuple[str, ...]
) -> list[hooks.Hook]:
    """The hooks an update may have made unwanted: on the covered groups, a former
    name or the launch hook turned off; every name on a group no longer named (and
    still there). remove_hooks deletes those that are ours."""
    old = request.old_properties
    wanted = {spec.name for spec in hooks.HookSpec.all_from_settings(settings)}
    former = {str(old.get("LifecycleHookName") or ""), str(old.get("LaunchHookName") or "")}
    every = (former | wanted | {settings.launch_hook_name}) - {""}
    dropped = {g.strip() for g in str(old.get("AsgNames") or "").split(",")} - set(covered) - {""}
    still_there = aws.existing_groups(autoscaling, sorted(dropped)) if dropped else set()
    return [
        *itertools.product(covered, every - wanted),
        *itertools.product(still_there, every),
    ]


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
