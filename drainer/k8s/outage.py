"""The API server not answering mid-drain, said once: the first retry of a spell
of failures as a warning, the others at debug, and the end of the spell once.

A drain runs for minutes or hours through one client, from a dozen threads (the
evictions, the watches): each of their retries saying the same outage would bury
the one line that matters. Before the server has answered once (start-up), every
retry is said: a person waiting for the first answer sees each attempt.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("drainer.k8s.client")


class Outage:
    """One client's spells of failing calls (5xx, unreachable): when the current one
    began, and whether the server has ever answered."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._answered = False
        self._since: float | None = None
        self._retries = 0

    def retry_level(self) -> int:
        """The level of a retry's line: WARNING for the first of a spell (and for
        every one before the server ever answered), DEBUG for the others."""
        with self._lock:
            if not self._answered:
                return logging.WARNING
            self._retries += 1
            if self._since is None:
                self._since = self._clock()
                return logging.WARNING
            return logging.DEBUG

    @property
    def said(self) -> bool:
        """A spell of failures is under way and was said: a caller that retries a
        call failed meanwhile says it at debug (KubeError.said)."""
        with self._lock:
            return self._answered and self._since is not None

    def answered(self) -> None:
        """A call got its answer: a spell of failures, if any, is over (said once)."""
        with self._lock:
            self._answered = True
            if self._since is None:
                return
            lasted, retries = self._clock() - self._since, self._retries
            self._since, self._retries = None, 0
        log.warning(
            "the API server answers again, after %.0f s of failing calls (%d retries)",
            lasted,
            retries,
        )
