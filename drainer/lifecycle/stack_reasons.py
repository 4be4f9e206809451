"""The reasons the stack's custom resource (stack_hooks.py) answers CloudFormation
with, and how they fit its limit.

CloudFormation shows a reason in the stack's events and refuses an answer over 4 KiB:
a reason is cut to REASON_LIMIT characters. A reason has two parts. What was done
(the hooks put, the hooks deleted: hundreds of groups' names) is cut first, at a
name, saying so; the function's log has every list. What the operator must act on
(a hook not deleted and the command to delete it by hand, the groups not looked at,
a named group gone or not covered) comes last and is kept: each of its lists is
shortened to its first names and a count, so that together they fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from drainer.lifecycle import hooks
from drainer.lifecycle.hooks_removal import HookRemoval

REASON_LIMIT = 1500
WORK_SECONDS = 180.0
"""How long after a request's start the hooks may be read, put (Create, Update) and
deleted (Delete, an Update's stale ones): the resource's ServiceTimeout is 300 s, the
answer's own retries take up to some 80 s, and a call in flight at the deadline ends
first. What is left is named: a Create's or an Update's groups are left to the hook
sync (every 10 minutes), a Delete's hooks fail it (deleting the stack again goes on
where it stopped)."""
_CUT = " ... (cut; the function's log has every list)"
_NAMES_ROOM = 300
"""Characters for a list of names the operator must act on, before 'and N more'."""
_COMMANDS_ROOM = 450
"""Characters for the by-hand commands (about four), before 'and N more'."""


@dataclass(frozen=True)
class Told:
    """A reason in two parts: `done`, cut when too long, and `todo`, kept."""

    done: str = ""
    todo: str = ""

    def __add__(self, other: Told) -> Told:
        return Told(self.done + other.done, self.todo + other.todo)

    def text(self) -> str:
        return fitted(self.done, self.todo)


def fitted(head: str, tail: str) -> str:
    """`head` then `tail` within REASON_LIMIT: the head cut at a list's separator,
    saying so, to leave the tail whole (itself cut only past the limit)."""
    room = REASON_LIMIT - len(tail)
    if len(head) <= room:
        return head + tail
    keep = max(0, room - len(_CUT))
    cut = head[:keep]
    at = max(cut.rfind(", "), cut.rfind("; "))
    if at > keep // 2:
        cut = cut[:at]
    return cut + _CUT + tail if room > len(_CUT) else tail[:REASON_LIMIT]


def listed(items: Sequence[str], room: int = _NAMES_ROOM, sep: str = ", ", *, most: int = 0) -> str:
    """The items joined, as many as fit in `room` characters (the first always) and
    at most `most` (0: any number), then 'and N more'."""
    shown: list[str] = []
    used = 0
    for item in items:
        used += len(item) + (len(sep) if shown else 0)
        if shown and (used > room or len(shown) == most):
            break
        shown.append(item)
    rest = len(items) - len(shown)
    return sep.join(shown) + (f"{sep}and {rest} more" if rest else "")


def named(hooks_: Iterable[hooks.Hook]) -> str:
    return ", ".join(f"{group}/{name}" for group, name in sorted(hooks_))


def removed(removal: HookRemoval) -> str:
    text = f"deleted {len(removal.removed)} hook(s): {named(removal.removed) or 'none'}"
    if removal.left:
        text += f"; left to their owners: {named(removal.left)}"
    return text


def failed_removal(removal: HookRemoval) -> str:
    """A removal's failures, for a FAILED answer: each with its error, as many as fit;
    or, when time ran out first, what was not reached (deleting the stack again goes
    on where this Delete stopped)."""
    if removal.unreached and not removal.failed:
        done = removed(removal) if removal.removed else ""
        return fitted(
            done,
            f"{'; ' if done else ''}not reached in the request's {WORK_SECONDS:.0f} s (a "
            "throttled account): "
            f"{listed([f'{g}/{n}' for g, n in removal.unreached])}. Delete the stack "
            "again: the Delete goes on where this one stopped",
        )
    failures = listed(
        [f"{g}/{n}: {error}" for (g, n), error in sorted(removal.failed.items())],
        REASON_LIMIT - 200,
        "; ",
    )
    if set(removal.failed) <= set(removal.waiting):  # nothing broken: instances wait
        return f"{failures}. Delete the stack again once no instance waits on them"
    return (
        f"{failures}. Delete these hooks by hand (aws autoscaling delete-lifecycle-hook; "
        "the log names each), then delete the stack again, retaining this resource"
    )


def not_deleted(failed: Mapping[hooks.Hook, str], waiting: Iterable[hooks.Hook] = ()) -> str:
    """The hooks an Update could not delete, each with its error, as many as fit; those
    kept while instances wait on them (`waiting`) said apart."""
    kept = set(waiting)
    failed = {hook: why for hook, why in failed.items() if hook not in kept}
    if not failed:
        return kept_waited_on(kept)
    each = [f"{g}/{n}: {e}" for (g, n), e in sorted(failed.items())]
    return (
        kept_waited_on(kept)
        + "; not deleted (delete by hand, aws autoscaling delete-lifecycle-hook): "
        + (listed(each, _NAMES_ROOM + _COMMANDS_ROOM, "; "))
    )


def kept_waited_on(waiting: Iterable[hooks.Hook]) -> str:
    """The hooks kept because instances wait on them, with what to do."""
    names = [f"{group}/{name}" for group, name in sorted(waiting)]
    if not names:
        return ""
    return (
        f"; kept while instances wait on them (deleting a hook ends each wait at once): "
        f"{listed(names)}; delete them once none waits (the log names the instances)"
    )


def by_hand(failed: Mapping[hooks.Hook, str], waiting: Iterable[hooks.Hook] = ()) -> str:
    """The hooks the role could not delete, each with the command (the log has why),
    as many as fit: the first names and commands, and how many more; those kept while
    instances wait on them (`waiting`) said apart."""
    kept = set(waiting)
    failed = {hook: why for hook, why in failed.items() if hook not in kept}
    if not failed:
        return kept_waited_on(kept)
    commands = [
        f"aws autoscaling delete-lifecycle-hook --auto-scaling-group-name {group} "
        f"--lifecycle-hook-name {name}"
        for group, name in sorted(failed)
    ]
    names = [f"{group}/{name}" for group, name in sorted(failed)]
    return kept_waited_on(kept) + (
        "; not deleted (the role's policy lets it delete only on the groups named or "
        f"still tagged; the log has each error): {listed(names)}; delete by hand: "
        f"{listed(commands, _COMMANDS_ROOM, '; ')}"
    )


def unlooked(groups: tuple[str, ...], what: str) -> str:
    """The groups not looked at for this stack's hooks, with the command to."""
    if not groups:
        return ""
    return (
        f"; {len(groups)} {what} not looked at for this stack's hooks (out of time, or "
        f"unreadable: the log says): {listed(groups, most=10)}; look with aws autoscaling "
        "describe-lifecycle-hooks --auto-scaling-group-name GROUP"
    )


def late_groups(groups: tuple[str, ...]) -> str:
    """The covered groups a Create or an Update had no time to put the hooks on."""
    if not groups:
        return ""
    return (
        f"; out of time before {len(groups)} group(s), left to the hook sync (every 10 "
        f"minutes; its log line says when it put theirs): {listed(groups, most=10)}"
    )
