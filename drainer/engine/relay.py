"""The hand-over between the drain's loop and its eviction workers.

The loop decides and a small pool sends (drain.py). When an eviction is answered
while the loop waits with nothing to do, the worker that sent it takes the loop's
next turn itself, under the drain's lock: the same turn, so the same decisions. It
keeps the pod to send next for itself only when sending is all the turn decided;
anything else (more pods, a re-cordon, a fresh list, a check of the node's name,
forced deletions, the end) it hands to the loop, and wakes it. In a flood of
evictions, most answers then cost no wake-up of the loop and none of a pool thread
(issue 39, item 10: a fifth of the drain's context switches on a real API server).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from drainer.engine.schedule import Entry


@dataclass
class Step:
    """What one turn of the loop decided, to be done outside the lock."""

    send: list[Entry] = field(default_factory=list)
    force: list[Entry] = field(default_factory=list)
    """TIMEOUT_POLICY=force: pods whose time to be deleted with their grace has come."""
    recordon: bool = False
    verify: bool = False
    over: bool = False
    check_name: bool = False
    """Pods new to the drain wait for one GET of the node (outside the lock): whose is
    the node's name now?"""

    def only_sends(self) -> bool:
        return bool(self.send) and not (
            self.force or self.recordon or self.verify or self.over or self.check_name
        )


class Relay:
    """Whether a worker may take the loop's turn, and what it handed the loop (both
    under the drain's lock)."""

    def __init__(self, cond: threading.Condition) -> None:
        self._cond = cond
        self._turn: Callable[[], Step | None] | None = None
        """The loop's turn, while the loop waits for a change, having found nothing to
        do, with an eviction in flight; else None."""
        self._handed: Step | None = None
        self._error: Exception | None = None
        """What a worker's turn raised: the loop's, as if it had taken the turn."""

    def waiting(self, turn: Callable[[], Step | None] | None) -> None:
        """The loop begins a wait with nothing to do and an eviction in flight, and
        lends its `turn`; None: it ends the wait, or begins one with nothing in flight
        (hold the lock). Only while it lends the turn may a worker take it: a wait with
        nothing in flight is one a test's clock may jump past (Waits' `busy`), which
        only a wake-up stops."""
        self._turn = turn

    def take(self) -> Step | None:
        """What a worker's turn decided for the loop, if anything (hold the lock)."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        step, self._handed = self._handed, None
        return step

    def next_send(self) -> Entry | None:
        """An eviction was answered (hold the lock): when the loop lends its turn, take
        it; the pod to send next when sending is all it decided (the rest of the pods,
        if several, go to the loop). None: the caller wakes the loop."""
        turn = self._turn
        if turn is None or self._handed is not None:
            return None
        try:
            step = turn()
        except Exception as e:  # the loop's error: it raises it at its next turn
            self._error, self._turn = e, None
            return None
        if step is None:
            return None
        pure = step.only_sends()
        mine = step.send.pop(0) if pure else None
        if step.send or not pure:
            self._handed, self._turn = step, None
            self._cond.notify_all()
        return mine
