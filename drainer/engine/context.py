"""What every part of one drain shares: its client, node, options, clock, report and
events, the lock its watches wake it through, and why it stops. One object, handed
to each part (the node's guard, the pods' intake, the evictions, the force policy,
the volumes) instead of a relay of a dozen fields.

The node's record is not the engine's: whoever runs the drain (the Lambda's
triggers, the CLI) hands it a NodeRecord, which says how the node records a drain
begun and ended; the engine only writes the patches it gets.
"""

from __future__ import annotations

import gc
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from drainer import logs
from drainer.engine.options import DrainOptions
from drainer.engine.pods import Pod
from drainer.engine.report import DrainEvent, DrainReport, Kind, describe
from drainer.errors import FatalKubeError
from drainer.k8s.kube import Kube
from drainer.outcome import Outcome

# The drain's logger: its name is part of every line (the CLI prints it).
log = logging.getLogger("drainer.engine.drain")

Obj = dict[str, Any]

MAX_WAIT = 0.25
"""The longest the loop waits in one go. A Python signal handler (the CLI's Ctrl-C)
runs when the main thread's wait ends, and the kernel may hand SIGINT to any thread:
without a short wait, Ctrl-C would be seen only at the next timer."""


class Waits(Protocol):
    """How the drain waits, injected: for real (RealWaits), or on a test's clock."""

    def now(self) -> float:
        """Epoch seconds."""
        ...

    def wait(
        self, cond: threading.Condition, until: Callable[[], float], busy: bool = False
    ) -> None:
        """Wait on `cond` (held) for a change, or until the time `until()` gives;
        `busy`: requests are in flight, whose answers will come."""
        ...


@dataclass(frozen=True)
class RealWaits:
    """Waits in real time on `clock`, never longer than MAX_WAIT in one go."""

    clock: Callable[[], float] = time.time

    def now(self) -> float:
        return self.clock()

    def wait(
        self, cond: threading.Condition, until: Callable[[], float], busy: bool = False
    ) -> None:
        cond.wait(max(0.01, min(until() - self.clock(), MAX_WAIT)))


class NodeRecord(Protocol):
    """The node's record of its drain (an annotation `release` reads, and the
    Lambda's invocations read from each other), given by whoever runs the drain.
    Its format and what it remembers between the two patches are its own."""

    def begin(self, node: Obj, now: float, deadline: float) -> Obj:
        """The merge patch that cordons `node` (as read now) and records the drain
        begun, with its `deadline`; or an exception when the record will not begin on
        this node (k8s/cordon.py: RecordChanged), which Drain.run raises unwritten."""
        ...

    def recordon(self) -> Obj:
        """The merge patch that records the node cordoned again by the drain (someone
        uncordoned it mid-drain): that cordon is the drain's own from then on. The
        engine adds `spec.unschedulable` to it; the record keeps nothing of it (the
        patch may be refused): the end's patch is told."""
        ...

    def released(self, node: Obj) -> bool:
        """Whether `node`, as the drain's watch sees it, was released since the drain
        began: the record its begin patch wrote is gone (`release` removes it, with what
        the drain added to the node)."""
        ...

    def end(self, outcome: Outcome, now: float, evicted: int, *, cordoned: bool = False) -> Obj:
        """The merge patch that records how the drain ended ("drained",
        "interrupted", "timed_out", "failed") and how many pods it evicted;
        `cordoned`: the cordon on the node is the drain's own (a re-cordon took)."""
        ...


Pace = Callable[[DrainEvent, float], Mapping[str, Any]]
"""What a drain's lines carry of its current ETA, given each event and the time."""
PaceFrom = Callable[[list[Pod], list[Obj]], Pace | None]
"""The ETA of a drain from what it listed as it began (the node's pods, the budgets):
its forecast, made then, lists nothing again."""


@dataclass
class DrainContext:
    """One drain's shared parts. `cond` is the one lock and condition: the watches
    and the eviction answers notify it, the loop waits on it. The stop (`fatal`,
    `interrupted`, `replaced`, `released`) is written once and read by every part."""

    kube: Kube
    node: str
    options: DrainOptions
    waits: Waits
    report: DrainReport
    on_event: Callable[[DrainEvent], None] | None = None
    rng: random.Random = field(default_factory=random.Random)
    cond: threading.Condition = field(default_factory=threading.Condition)
    deadline: float = float("inf")
    """The drain's own deadline (epoch seconds), once it runs."""
    fatal: FatalKubeError | None = None
    interrupted: str = ""
    """Why interrupt() stopped the drain."""
    replaced: str = ""
    """The UID of the node object that took this node's name mid-drain."""
    released: str = ""
    """Who released the node mid-drain (its record removed), as its managedFields say."""
    cordon_sent: bool = False
    """The cordon's patch went out (its answer may never come: an API error after it
    leaves the node maybe cordoned, which whoever runs the drain says)."""
    pace: Pace | None = None
    """Whoever runs the drain may keep its current ETA (drainer/engine/pace.py's
    Eta.fields): it sees each event first, and the event takes the fields it gives
    (eta_seconds, paced_by)."""

    def clock(self) -> float:
        return self.waits.now()

    def over(self) -> bool:
        """The drain stops: a fatal error, an interruption, its node replaced or
        released."""
        return self.fatal is not None or any((self.interrupted, self.replaced, self.released))

    def fail(self, error: FatalKubeError) -> None:
        """End the drain with a fatal error (the first one is kept); run() says so."""
        with self.cond:
            if self.fatal is None:
                self.fatal = error
            self.cond.notify_all()

    def pause(self, until: float) -> None:
        """Wait for a change or until `until` (hold the lock)."""
        self.waits.wait(self.cond, lambda: until)

    def emit(self, kind: Kind, **values: Any) -> None:
        event = DrainEvent(kind, **values)
        more = self._paced(event)
        if more:  # a second event, not dataclasses.replace: a third of the cost
            event = DrainEvent(kind, **{**values, **more})
        if log.isEnabledFor(event.level):  # a terminal's drain logs warnings only
            logs.drain_event(log, describe(event, self.node), event.fields(), event.level)
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # a broken display must not break a drain
                log.exception("progress callback failed")

    def _paced(self, event: DrainEvent) -> Mapping[str, Any]:
        """The current ETA's fields for the event (none without one). A fault in it
        ends the ETA, said once, never the drain."""
        if self.pace is None:
            return {}
        try:
            return self.pace(event, self.clock())
        except Exception:
            self.pace = None
            log.exception("the drain's ETA failed; the drain goes on without one")
            return {}


@contextmanager
def heap_frozen() -> Iterator[None]:
    """A drain's collections leave alone what lived before it: the modules, the
    clients and their models, the caches (gc.freeze). A drain allocates a pod's
    worth of objects at each answer and watch event; without this, each full
    collection it set off scanned the whole process too (some 30 ms at 400 pods,
    freeing nothing). Undone at the end (gc.unfreeze: what froze is scanned again,
    so a cycle that died meanwhile is still freed); left alone when someone else
    froze already."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
