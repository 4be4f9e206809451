"""The terminal a CLI run writes to, and the signals that stop it: the first Ctrl-C,
SIGTERM or SIGHUP interrupts a drain (no new evictions, the node's record says so),
a second one quits at once."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import threading
from typing import TYPE_CHECKING

from drainer.cli.streams import SafeStream

if TYPE_CHECKING:
    from drainer.cli.display import Progress
    from drainer.engine.drain import Drain


class TerminalLog(logging.Filter):
    """The log lines a person at a terminal sees. Not the drain's event lines and its
    warnings: they are the Lambda's, and the progress lines and the closing warnings
    already say them. Nothing once the verdict is given (`quiet`): an eviction still
    in flight when the drain ended is not heard of after it."""

    def __init__(self) -> None:
        super().__init__()
        self.quiet = False

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.quiet or hasattr(record, "event") or hasattr(record, "in_report"))


TERMINAL_LOG = TerminalLog()
"""One, as the logging it filters is the process's: the handler basicConfig installs
with it stays for later main() calls in the same process, each of which unmutes it."""


@dataclasses.dataclass(frozen=True)
class Terminal:
    """Where the CLI writes: `out` (stdout; stderr once stdout is gone), `err`
    (stderr; nowhere once it is gone) and the log lines."""

    out: SafeStream
    err: SafeStream
    log: TerminalLog = TERMINAL_LOG

    def drain_over(self, progress: Progress) -> None:
        """Before the verdict: nothing more about the drain is printed after it."""
        progress.close()
        self.log.quiet = True


_SIGNAL_NAMES: dict[int, str] = {
    signal.SIGINT: "Ctrl-C",
    signal.SIGTERM: "SIGTERM",
    signal.SIGHUP: "SIGHUP",
}
"""The signals that stop a drain: a person's Ctrl-C, a CI job's timeout or `kill`, a
closed terminal. The exit status is 128 + the signal's number, as a shell reports it."""


class Signalled(KeyboardInterrupt):
    """SIGTERM or SIGHUP outside a drain: handled as Python handles Ctrl-C there."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """The shell's exit code for a run a signal stopped: 128 + its number."""
    return 128 + (interrupt.signum if isinstance(interrupt, Signalled) else signal.SIGINT)


class signals_interrupt:
    """SIGTERM and SIGHUP raise Signalled, as SIGINT raises KeyboardInterrupt (only
    the main thread can set a handler: elsewhere, as they were)."""

    def __init__(self) -> None:
        self.previous: dict[int, object] = {}

    @staticmethod
    def _raise(signum: int, frame: object) -> None:
        raise Signalled(signum)

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGHUP):
                self.previous[signum] = signal.signal(signum, self._raise)

    def __exit__(self, *_: object) -> None:
        for signum, previous in self.previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]


def _say(text: str) -> None:
    """To stderr from a signal handler: unbuffered, and silent when stderr is gone."""
    with contextlib.suppress(OSError):
        os.write(2, text.encode())


class Interruptible:
    """While a drain runs, the first Ctrl-C, SIGTERM or SIGHUP interrupts it (new
    evictions stop, run() returns with what is left, the node's record says
    interrupted) and a second one quits at once. Once the drain is `over`, a first
    one lets the verdict be printed."""

    def __init__(self, drain: Drain) -> None:
        self.drain = drain
        self.signum = 0  # the first signal's number
        self.over = False
        self.previous: dict[int, object] = {}
        self.installed = threading.current_thread() is threading.main_thread()

    @property
    def exit_code(self) -> int:
        """An interrupted drain's exit status: 128 + the signal's number."""
        return 128 + (self.signum or signal.SIGINT)

    def _on_signal(self, signum: int, frame: object) -> None:
        # No lock, no print: a signal handler may run inside a print of the main
        # thread, or while it holds a lock another thread waits for.
        name = _SIGNAL_NAMES.get(signum, f"signal {signum}")
        if self.signum:
            _say(f"\n{name} again: quitting at once\n")
            os._exit(128 + signum)
        self.signum = signum
        if self.over:
            return
        _say(f"\ninterrupted by {name}: no new evictions ({name} again to quit at once)\n")
        self.drain.interrupt(f"interrupted by {name}")

    def __enter__(self) -> Interruptible:
        if self.installed:
            for signum in _SIGNAL_NAMES:
                self.previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *_: object) -> None:
        for signum, previous in self.previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]
