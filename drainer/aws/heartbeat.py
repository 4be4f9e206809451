"""The heartbeat ticker: keeps a lifecycle action alive while the drain works."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable

from drainer.aws.autoscaling import LifecycleAction, record_heartbeat
from drainer.aws.errors import is_transient
from drainer.aws.session import Client
from drainer.backoff import Backoff
from drainer.errors import LifecycleActionGone

log = logging.getLogger(__name__)


LAST_BEAT_SECONDS = 10.0
"""How long a hand-over waits for its last beat (Heartbeat.beat)."""


def _wait_on(stopped: threading.Event, seconds: float) -> bool:
    return stopped.wait(seconds)


class Heartbeat:
    """Keeps a lifecycle action alive while the drain works.

    Beats at once, then every `interval` seconds (pass half the hook's
    HeartbeatTimeout), in a daemon thread, until `stop()`. Stops by itself when the
    action is gone. A failed beat (throttling, 5xx, connection error, after
    botocore's own retries) is logged and retried sooner, after
    min(interval, retry_after) seconds with jitter and no growth (a longer pause
    could let the hook time out), so one bad minute does not lose the action; it
    never kills the ticker.

    `wait(stopped, seconds)` returns True when stopped; tests inject one to see the
    delays asked for without sleeping through them.
    """

    def __init__(
        self,
        autoscaling: Client,
        action: LifecycleAction,
        interval: float,
        *,
        retry_after: float = 10.0,
        wait: Callable[[threading.Event, float], bool] = _wait_on,
        rng: random.Random | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"heartbeat interval must be positive, not {interval}")
        self._autoscaling = autoscaling
        self._action = action
        self._interval = interval
        pause = min(interval, retry_after)
        self._retry = Backoff(first=pause, cap=pause)
        self._wait = wait
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._beats = 0
        self._failures = 0
        self._gone = False
        self._thread: threading.Thread | None = None

    @property
    def beats(self) -> int:
        """Heartbeats recorded successfully so far."""
        with self._lock:
            return self._beats

    @property
    def failures(self) -> int:
        """Heartbeats that failed (and were retried)."""
        with self._lock:
            return self._failures

    @property
    def gone(self) -> bool:
        """True when the ticker stopped because the lifecycle action no longer exists."""
        with self._lock:
            return self._gone

    def start(self) -> Heartbeat:
        if self._thread is not None:
            raise RuntimeError("heartbeat already started")
        self._thread = threading.Thread(
            target=self._run, name=f"heartbeat-{self._action.instance_id}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop ticking; waits at most `timeout` seconds for a beat in flight."""
        self._stopped.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def beat(self, within: float = LAST_BEAT_SECONDS) -> None:
        """One last beat now (a hand-over's: the invocation it hands over to beats
        only after Lambda's queue and its start), waited for `within` seconds at most:
        Auto Scaling slow then (botocore's retries) must not eat the hand-over's
        margin. Counted as the ticker's are; a failure is told, never raised, and not
        retried."""
        last = threading.Thread(
            target=self._beat, args=(True,), name=f"last-beat-{self._action.instance_id}"
        )
        last.daemon = True
        last.start()
        last.join(within)
        if last.is_alive():
            log.warning(
                "the heartbeat for %s before the hand-over has no answer after %g s; "
                "handing over without it",
                self._action.instance_id,
                within,
            )

    def _run(self) -> None:
        delay = 0.0
        while not self._wait(self._stopped, delay):
            next_in = self._beat()
            if next_in is None:
                return
            delay = next_in

    def _beat(self, last: bool = False) -> float | None:
        """Record one heartbeat: the pause before the next (the interval, or a retry's
        after a failure), None once the action is gone. `last`: no next one."""
        try:
            record_heartbeat(self._autoscaling, self._action)
        except LifecycleActionGone as gone:
            with self._lock:
                self._gone = True
            log.info("heartbeat stopped: %s", gone)
            return None
        except Exception as error:
            with self._lock:
                self._failures += 1
                failures = self._failures
            level = logging.WARNING if is_transient(error) else logging.ERROR
            if last:
                log.log(
                    level,
                    "the heartbeat for %s before the hand-over failed (not retried: the next "
                    "invocation beats at its start): %s",
                    self._action.instance_id,
                    error,
                )
                return None
            delay = self._retry.delay(failures - 1, self._rng)
            log.log(
                level,
                "heartbeat for %s failed, retrying in %.1f s: %s",
                self._action.instance_id,
                delay,
                error,
            )
            return delay
        with self._lock:
            self._beats += 1
        log.debug("heartbeat %d recorded for %s", self.beats, self._action.instance_id)
        return self._interval
