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

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drainer import aws, logs
from drainer.errors import DrainerError
from drainer.lifecycle import hooks
from drainer.lifecycle.settings import Settings

log = logging.getLogger(__name__)

RESOURCE_TYPE = "Custom::LifecycleHooks"
SUCCESS, FAILED = "SUCCESS", "FAILED"
_KINDS = ("Create", "Update", "Delete")
_REASON_LIMIT = 1500


@dataclass(frozen=True)
class StackRequest:
    """A custom resource request of CloudFormation, the fields the answer needs."""

    kind: str
    response_url: str
    stack_id: str
    request_id: str
    logical_id: str
    physical_id: str = ""
    properties: Mapping[str, Any] = field(default_factory=dict)
    old_properties: Mapping[str, Any] = field(default_factory=dict)

    @property
    def stack_name(self) -> str:
        """arn:aws:cloudformation:region:account:stack/NAME/id -> NAME."""
        parts = self.stack_id.split("/")
        return parts[1] if len(parts) > 2 else self.stack_id

    def answer(
        self, status: str, reason: str, data: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        return {
            "Status": status,
            "Reason": reason[:_REASON_LIMIT],
            "PhysicalResourceId": self.physical_id or f"{self.stack_name}-lifecycle-hooks",
            "StackId": self.stack_id,
            "RequestId": self.request_id,
            "LogicalResourceId": self.logical_id,
            "Data": dict(data or {}),
        }


def request_of(event: object) -> StackRequest | None:
    """The custom resource request in an invocation event, or None when it is not one."""
    if not isinstance(event, dict) or event.get("RequestType") not in _KINDS:
        return None
    if not isinstance(event.get("ResponseURL"), str) or not isinstance(event.get("StackId"), str):
        return None
    properties = event.get("ResourceProperties")
    old = event.get("OldResourceProperties")
    return StackRequest(
        kind=str(event["RequestType"]),
        response_url=str(event["ResponseURL"]),
        stack_id=str(event["StackId"]),
        request_id=str(event.get("RequestId", "")),
        logical_id=str(event.get("LogicalResourceId", "")),
        physical_id=str(event.get("PhysicalResourceId", "")),
        properties=properties if isinstance(properties, dict) else {},
        old_properties=old if isinstance(old, dict) else {},
    )


def handle(request: StackRequest, autoscaling: aws.Client, settings: Settings) -> dict[str, Any]:
    """Act on the request, answer CloudFormation, and return the answer."""
    logs.bind(trigger=f"cloudformation-{request.kind.lower()}")
    try:
        answer = _act(request, autoscaling, settings)
    except DrainerError as e:
        answer = request.answer(FAILED, f"{request.kind} of the lifecycle hooks failed: {e}")
    return send(request, answer)


def unreadable(request: StackRequest, error: Exception) -> dict[str, Any]:
    """The function's settings do not read: Create and Update fail with the reason;
    a Delete succeeds (nothing can be known to be ours, and the stack must go)."""
    if request.kind == "Delete":
        why = f"settings unreadable ({error}); no hook deleted: check the groups by hand"
        return send(request, request.answer(SUCCESS, why))
    return send(request, request.answer(FAILED, f"the function's settings are invalid: {error}"))


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
        return request.answer(SUCCESS, "CREATE_LIFECYCLE_HOOKS is false: the hooks are yours")
    if request.kind == "Delete":
        names = {settings.lifecycle_hook_name, settings.launch_hook_name}
        removal = hooks.remove_hooks(autoscaling, settings, names)
        if removal.failed:
            return request.answer(FAILED, _failed_removal(removal))
        return request.answer(SUCCESS, _removed(removal), {"Removed": str(len(removal.removed))})
    if request.kind == "Create":  # a group named wrong fails the stack before any change
        _, skipped = hooks.covered_groups(autoscaling, settings)
        missing = sorted(g for g, why in skipped.items() if why == hooks.NO_SUCH_GROUP)
        if missing:
            why = f"no Auto Scaling group named {', '.join(missing)} (check AsgNames)"
            return request.answer(FAILED, f"{why}; no hook was put")
    sync = hooks.sync_hooks(autoscaling, settings, f"cloudformation-{request.kind.lower()}")
    missing = sorted(g for g, why in sync.skipped.items() if why == hooks.NO_SUCH_GROUP)
    if sync.failed:
        failures = "; ".join(f"{what}: {error}" for what, error in sorted(sync.failed.items()))
        return request.answer(FAILED, failures)
    reason = f"hooks on {len(sync.covered)} group(s): {', '.join(sync.covered) or 'none yet'}"
    if missing:
        reason += f"; gone: {', '.join(missing)}"
    if request.kind == "Update":
        removal = _remove_stale(request, autoscaling, settings, sync.covered)
        if removal.failed:
            return request.answer(FAILED, _failed_removal(removal))
        if removal.removed:
            reason += f"; {_removed(removal)}"
    return request.answer(SUCCESS, reason, {"Groups": str(len(sync.covered))})


def _remove_stale(
    request: StackRequest, autoscaling: aws.Client, settings: Settings, covered: tuple[str, ...]
) -> hooks.HookRemoval:
    """Hooks of ours the update made unwanted: a former name, the launch hook turned
    off, and every hook of ours on a group no longer named."""
    old = request.old_properties
    wanted = {spec.name for spec in hooks.HookSpec.all_from_settings(settings)}
    former = {str(old.get("LifecycleHookName") or ""), str(old.get("LaunchHookName") or "")}
    names = (former | {settings.launch_hook_name}) - wanted - {""}
    removal = hooks.remove_hooks(autoscaling, settings, names, covered) if names else None
    dropped = {g.strip() for g in str(old.get("AsgNames") or "").split(",")} - set(covered) - {""}
    if dropped:  # of those, the groups still there
        dropped = aws.existing_groups(autoscaling, sorted(dropped))
    everything = former | wanted | {settings.launch_hook_name}
    dropped_removal = (
        hooks.remove_hooks(autoscaling, settings, everything - {""}, dropped) if dropped else None
    )
    parts = [r for r in (removal, dropped_removal) if r is not None]
    return hooks.HookRemoval(
        removed=tuple(x for r in parts for x in r.removed),
        left={k: v for r in parts for k, v in r.left.items()},
        failed={k: v for r in parts for k, v in r.failed.items()},
    )


def _removed(removal: hooks.HookRemoval) -> str:
    names = ", ".join(f"{group}/{hook}" for group, hook in removal.removed)
    text = f"deleted {len(removal.removed)} hook(s): {names or 'none'}"
    if removal.left:
        text += f"; left to their owners: {', '.join(sorted(removal.left))}"
    return text


def _failed_removal(removal: hooks.HookRemoval) -> str:
    failures = "; ".join(f"{what}: {error}" for what, error in sorted(removal.failed.items()))
    return (
        f"{failures}. Delete these hooks by hand (aws autoscaling delete-lifecycle-hook), "
        "then delete the stack again, retaining this resource"
    )
