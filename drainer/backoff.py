"""One retry pacing for every loop that waits after a failure: exponential from
`first` to `cap`, with jitter so many waiters do not come back in step, and never
before the server's Retry-After."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    first: float
    """The pause after the first failure, before jitter."""
    cap: float
    """No pause grows past this, before jitter."""
    jitter: float = 0.5
    """Each pause is drawn from [(1 - jitter) x base, base]."""

    def base(self, attempt: int) -> float:
        return min(self.cap, self.first * 2.0 ** max(0, attempt))

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
        """The pause before try number `attempt + 1` (0 after the first failure);
        at least `retry_after` when the server asked for one."""
        pause = self.base(attempt) * rng.uniform(1.0 - self.jitter, 1.0)
        if retry_after:
            pause = max(pause, retry_after)
        return pause
