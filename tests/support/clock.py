"""The one fake clock of the tests: no test sleeps for real seconds.

The code under test takes a clock (a callable returning seconds) and a sleep; a
test hands it a `FakeClock` as the one and its `sleep` as the other, so every pause
moves the time on at once and is remembered for the test to check.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class FakeClock:
    """Time that moves only when the test moves it (`advance`, or assigning `now`)
    or the code under test sleeps (`sleep`). The drain engine reads and sleeps on it
    from several threads, so every read and move holds a lock."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self._now = now
        self.sleeps: list[float] = []
        """Every pause asked of `sleep`, in order."""
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    @property
    def now(self) -> float:
        return self()

    @now.setter
    def now(self, value: float) -> None:
        with self._lock:
            self._now = value

    def advance(self, seconds: float) -> None:
        """Move the time on, as if `seconds` passed while the test looked away."""
        with self._lock:
            self._now += seconds

    def sleep(self, seconds: float) -> None:
        """The code under test's pause: remembered, and the time moved on at once."""
        with self._lock:
            self.sleeps.append(seconds)
            self._now += seconds


class SteppedWaits:
    """The drain engine's waits (drainer.engine.drain.Waits) on a FakeClock: a short
    real wait lets answers and watch events in, then the clock jumps to the next
    timer, never past a request in flight."""

    def __init__(self, clock: FakeClock, hold: Callable[[], bool] | None = None) -> None:
        self.clock = clock
        self.hold = hold
        """While it says True, the clock does not jump: what the test knows will come
        in real time (kubesim deleting an evicted pod) comes first, however loaded
        the machine."""

    def now(self) -> float:
        return self.clock()

    def wait(
        self, cond: threading.Condition, until: Callable[[], float], busy: bool = False
    ) -> None:
        if cond.wait(0.02) or busy or (self.hold is not None and self.hold()):
            return
        self.clock.sleep(max(0.0, until() - self.clock()))
