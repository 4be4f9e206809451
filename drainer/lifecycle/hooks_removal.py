"""What one removal of this stack's hooks found and did (hooks.remove_hooks), its log
line, and the check made before each deletion: no instance waits on the hook.

Auto Scaling ends the outstanding actions of a hook it deletes, at once: a
termination's with CONTINUE (the instance goes while its drain still evicts, its
pods stopped with it) and a launch's with ABANDON (the new instance is terminated).
So a hook an instance waits on is not deleted: the removal says which instances
wait, and deleting the stack (or updating it) again once they are done goes on."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from drainer import aws, logs
from drainer.errors import AwsError
from drainer.lifecycle.events_hook import LAUNCHING, TERMINATING

log = logging.getLogger("drainer.lifecycle.hooks")

_ENDS = {
    TERMINATING: "CONTINUE (the instance goes mid-drain)",
    LAUNCHING: "ABANDON (the new instance is terminated)",
}


@dataclass(frozen=True)
class HookRemoval:
    """What one removal of this stack's hooks found and did (or, dry, would do)."""

    removed: tuple[tuple[str, str], ...] = ()
    left: dict[tuple[str, str], str] = field(default_factory=dict)
    """Hooks of the name that another tool made, and why they are not ours."""
    failed: dict[tuple[str, str], str] = field(default_factory=dict)
    """Hooks that could not be read or deleted (the AWS error), or that an instance
    waits on (`waiting`: why), kept."""
    unreached: tuple[tuple[str, str], ...] = ()
    """Candidates not looked at: the deadline came first."""
    waiting: tuple[tuple[str, str], ...] = ()
    """Those of `failed` kept because an instance waits on them."""


def waiting_on(autoscaling: aws.Client, group: str, found: dict[str, Any]) -> str:
    """Why the described hook of `group` is not deleted now: the group's instances in
    a lifecycle action of this hook (each waiting one asked: aws.waits_on_hook), and
    what deleting it would do to them; "" when none waits (or the group is gone). An
    instance that cannot be asked (throttled, an outage) may wait: it keeps the hook
    (logged); a role that may not ask may not delete either. AwsError when the group
    cannot be read."""
    name = str(found.get("LifecycleHookName") or "")
    shape = aws.describe_group(autoscaling, group)
    waiting: list[str] = []
    for instance in shape.instances if shape else ():
        if not instance.lifecycle_state.endswith(":Wait"):
            continue
        said = f"{instance.instance_id} ({instance.lifecycle_state})"
        try:
            if aws.waits_on_hook(autoscaling, group, name, instance.instance_id):
                waiting.append(said)
        except AwsError as e:  # throttled, say: it may wait, so the hook is kept
            log.warning("cannot tell whether %s waits on %s/%s: %s", said, group, name, e)
            waiting.append(f"{said}, not asked: {e.__class__.__name__}")
    if not waiting:
        return ""
    more = f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
    ends = _ENDS.get(str(found.get("LifecycleTransition") or ""), "its default result")
    return (
        f"{len(waiting)} instance(s) wait on it: {', '.join(waiting[:5])}{more}; deleting "
        f"it would end each wait at once with {ends}: kept, delete it once none waits"
    )


def logged(removal: HookRemoval, dry_run: bool) -> HookRemoval:
    """The removal, its line logged (but on a dry run)."""
    if not dry_run:
        bad = removal.failed or removal.unreached
        log.log(
            logging.ERROR if bad else logging.INFO,
            f"hook removal: {len(removal.removed)} hook(s) deleted, {len(removal.left)} left "
            f"to their owners, {len(removal.failed)} failed ({len(removal.waiting)} waited "
            f"on), {len(removal.unreached)} not reached in time",
            extra=logs.safe_fields(
                {
                    "event": "hooks_removed",
                    "removed": [f"{g}/{n}" for g, n in removal.removed],
                    "left": {f"{g}/{n}": why for (g, n), why in removal.left.items()},
                    "failed": {f"{g}/{n}": why for (g, n), why in removal.failed.items()},
                    "unreached": [f"{g}/{n}" for g, n in removal.unreached],
                }
            ),
        )
    return removal
