"""What a person at a terminal sees of a drain: a line per event, a status line
while pods wait, and a summary in words.

It reads the same events as the Lambda's log contract (drainer/engine/report.py), so the
terminal and CloudWatch tell the same story. On a terminal the status line is one
live line, rewritten in place; piped, it is a plain line every few seconds.

Writing never raises: a terminal that hung up or a pipe whose reader left must not
turn the end of a drain (its verdict, the undo command) into a traceback.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from drainer.cli.streams import SafeStream, Stream
from drainer.engine.report import DrainEvent, DrainReport, Kind
from drainer.outcome import Outcome

__all__ = ["Progress", "SafeStream", "StatusTicker", "Stream", "human_summary", "waiting_line"]

_LABELS = {
    Kind.STARTED: "started",
    Kind.CORDONED: "cordoned",
    Kind.RECORDONED: "recordoned",
    Kind.SKIPPED: "skip",
    Kind.APPEARED: "appeared",
    Kind.EVICTING: "evict",
    Kind.EVICTED: "evicted",
    Kind.REFUSED: "refused",
    Kind.SEVERAL_BUDGETS: "refused",
    Kind.HELD: "held",
    Kind.RELEASED: "released",
    Kind.WITH_NAMESPACE: "goes with ns",
    Kind.GONE: "gone",
    Kind.STUCK: "stuck",
    Kind.CRITICAL_TIER: "critical",
    Kind.FORCED: "forced",
    Kind.LEFT: "left",
    Kind.VOLUME_DETACHED: "detached",
    Kind.WOULD_EVICT: "would evict",
    Kind.STOPPED: "stopped",
    Kind.DRAIN_RELEASED: "released",
}


def _reason(event: DrainEvent) -> str:
    return f" ({event.reason})" if event.reason else ""


def _evicted(event: DrainEvent) -> str:
    return f" after {event.refusals} budget refusals" if event.refusals else ""


def _gone(event: DrainEvent) -> str:
    return f" after {event.seconds:.1f} s" if event.seconds is not None else ""


def _started(event: DrainEvent) -> str:
    details = ", ".join(f"{k}={v}" for k, v in event.details.items() if k != "node")
    return f" ({details})" if details else ""


def _eta(event: DrainEvent) -> str:
    """The drain's current ETA, when it has one: with what paces it on the first line,
    alone after that (drainer/engine/pace.py)."""
    if event.eta_seconds is None:
        return ""
    if event.kind is Kind.STARTED:
        return f"; ETA ~{event.eta_seconds:.0f} s, paced by {event.paced_by}"
    return f"; ETA ~{event.eta_seconds:.0f} s"


_DETAILS: dict[Kind, Callable[[DrainEvent], str]] = {
    Kind.STARTED: _started,
    Kind.EVICTED: _evicted,
    Kind.GONE: _gone,
    Kind.REFUSED: lambda e: f" by PodDisruptionBudget {e.budget}; retrying when it allows",
    Kind.SEVERAL_BUDGETS: lambda e: f" by more than one PodDisruptionBudget ({e.budget}): fix them",
    Kind.WITH_NAMESPACE: lambda e: " (its namespace is being deleted; not evicted, waited for)",
}


class Progress:
    """Human-readable progress lines on a terminal (or any stream): one per event, a
    budget's refusal once per pod, eviction attempts only when verbose. `live`: the
    stream is a terminal that also shows a status line, which a line first erases.
    After close(), nothing: the verdict is the last line about a drain, even when an
    eviction that was in flight when the drain ended is answered later."""

    def __init__(
        self, stream: Stream, node: str, verbose: bool = False, *, live: bool = False
    ) -> None:
        self.stream = stream
        self.node = node
        self.verbose = verbose
        self.live = live
        self.started = time.monotonic()
        self.lock = threading.Lock()  # the event lines and the status line share the stream
        self._refused: set[str] = set()
        self._status = False  # a live status line is on screen
        self._closed = False

    def __call__(self, event: DrainEvent) -> None:
        if event.kind == Kind.EVICTING and not self.verbose:
            return
        if event.kind in (Kind.REFUSED, Kind.SEVERAL_BUDGETS):
            if event.pod in self._refused:
                return
            self._refused.add(event.pod)
        label = _LABELS.get(event.kind, str(event.kind))
        subject = event.pod or self.node
        detail = _DETAILS.get(event.kind, _reason)(event) + _eta(event)
        self.line(f"{label:>11}  {subject}{detail}")

    def line(self, text: str) -> None:
        """A line that stays: erases the status line first on a terminal."""
        elapsed = time.monotonic() - self.started
        with self.lock:
            if self._closed:
                return
            erase = "\r\x1b[K" if self._status else ""
            self._status = False
            self.stream.write(f"{erase}[{elapsed:6.1f}s] {text}\n")
            self.stream.flush()

    def status(self, text: str) -> None:
        """The status line: rewritten in place on a terminal, a plain line otherwise."""
        if not self.live:
            self.line(text)
            return
        elapsed = time.monotonic() - self.started
        with self.lock:
            if self._closed:
                return
            self.stream.write(f"\r\x1b[K[{elapsed:6.1f}s] {text[:150]}")
            self.stream.flush()
            self._status = True

    def end_status(self) -> None:
        with self.lock:
            if self._status:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
                self._status = False

    def close(self) -> None:
        """The drain is over: erase the status line; print nothing more."""
        self.end_status()
        with self.lock:
            self._closed = True


def waiting_line(left: Mapping[str, str], shown: int = 3) -> str:
    """'waiting for 3 pods: shop/web-1 (PodDisruptionBudget shop/web allows ...), ...'"""
    names = sorted(left)
    parts = [f"{pod} ({left[pod]})" for pod in names[:shown]]
    more = f", and {len(names) - shown} more" if len(names) > shown else ""
    return f"waiting for {len(names)} pod{'s' if len(names) != 1 else ''}: {', '.join(parts)}{more}"


class StatusTicker:
    """Every `interval` seconds while the drain runs, the status line: which pods it
    is still waiting for, and why (a budget, a shutdown, an unanswered request)."""

    def __init__(
        self, progress: Progress, waiting: Callable[[], Mapping[str, str]], interval: float
    ) -> None:
        self.progress = progress
        self.waiting = waiting
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="status", daemon=True)

    def __enter__(self) -> StatusTicker:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=1)
        self.progress.end_status()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            left = self.waiting()
            if left:
                self.progress.status(waiting_line(left))


def human_summary(report: DrainReport) -> str:
    """The end of a drain in words: what happened to the pods, how long it took."""
    counted = (
        (len(report.skipped), "skipped"),
        (report.already_terminating, "already terminating"),
        (len(report.going_with_namespace), "went with their namespace"),
        (len(report.denied), "refused by admission"),
        (len(report.stuck), "stuck terminating"),
        (report.forced, "force-deleted"),
        (len(report.appeared), "appeared mid-drain"),
        (len(report.tolerating), "tolerate the cordon and stay"),
        (len(report.do_not_disrupt), "held by do-not-disrupt"),
    )
    parts = [f"{report.evicted} evicted", *(f"{n} {what}" for n, what in counted if n)]
    if report.refusals:
        budgets = ", ".join(report.budgets_holding())
        parts.append(f"{report.refusals} budget refusals ({budgets})")
    if report.recordons:
        parts.append(f"re-cordoned {report.recordons} time(s)")
    if report.volumes_detached or report.volumes_pending:
        parts.append(
            f"{report.volumes_detached} volumes detached, {len(report.volumes_pending)} pending"
        )
    took = f"in {report.seconds:.1f} s" if report.outcome != Outcome.DRY_RUN else ""
    return f"{', '.join(parts)} {took}".strip()
