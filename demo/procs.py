"""Child processes that never outlive the demo.

Each child runs in its own process group (a new session), so the terminal's Ctrl-C
reaches only the demo, which then stops the children in order: SIGTERM to the whole
group, a short wait, SIGKILL. `Children.stop_all` runs from the demo's `finally`,
from atexit and from the SIGTERM handler; on Linux the servers also get SIGTERM
from the kernel if the demo itself is killed outright (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

PR_SET_PDEATHSIG = 1


class ChildError(Exception):
    """A child process failed to start or died early."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """Ask Linux to SIGTERM this child when the thread that forked it exits."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Child:
    """One process in its own process group, its stdout read line by line."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        on_line: Callable[[str], None] | None = None,
        stdin: bool = False,
        die_with_parent: bool = False,
    ) -> None:
        self.name = name
        self.log_path = log
        self._log: IO[str] = log.open("a", encoding="utf-8")
        self._on_line = on_line
        self._first_line = threading.Event()
        self._first: str | None = None
        # preexec_fn is unsafe once threads run; only servers started first use it.
        self.process = subprocess.Popen(  # noqa: S603 - argv is built by the demo
            list(argv),
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            text=True,
            bufsize=1,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,  # noqa: PLW1509
        )
        self._reader = threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        try:
            for raw in stream:
                line = raw.rstrip("\n")
                if self._first is None:
                    self._first = line
                    self._first_line.set()
                if self._on_line is not None:
                    self._on_line(line)
                else:
                    self._log.write(line + "\n")
                    self._log.flush()
        except (OSError, ValueError):
            pass
        finally:
            self._first_line.set()

    def first_line(self, timeout: float) -> str:
        """The first line the child printed (a server's URL)."""
        deadline = time.monotonic() + timeout
        while not self._first_line.wait(0.1):
            if time.monotonic() >= deadline:
                raise ChildError(f"{self.name} printed nothing within {timeout:.0f} s")
        if self._first is None:
            raise ChildError(
                f"{self.name} exited with status {self.process.wait()} before it was ready; "
                f"see {self.log_path}:\n{self.tail()}"
            )
        return self._first

    def send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text)
        self.process.stdin.close()

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status, or None if still running after `timeout`."""
        try:
            status = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(2.0)
        return status

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM the child's process group, then SIGKILL after `grace` seconds."""
        if self.process.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(grace)
        # Once reaped, its process group id may be reused: never signal it again.
        self._reader.join(1.0)
        with contextlib.suppress(OSError, ValueError):
            self._log.close()

    def _signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signum)

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class Children:
    """Every child the demo started; stopped newest first, exactly once."""

    def __init__(self) -> None:
        self._children: list[Child] = []
        self._lock = threading.Lock()
        atexit.register(self.stop_all)

    def start(self, name: str, argv: Sequence[str], **kwargs: object) -> Child:
        child = Child(name, argv, **kwargs)  # type: ignore[arg-type]
        with self._lock:
            self._children.append(child)
        return child

    def forget(self, child: Child) -> None:
        """A child that finished on its own (an invocation) and needs no stopping."""
        with self._lock:
            if child in self._children:
                self._children.remove(child)

    def pids(self) -> list[int]:
        with self._lock:
            return [c.pid for c in self._children]

    def stop_all(self) -> None:
        """Stop every child, newest first. A child leaves the list only once stopped,
        so a second Ctrl-C during this still leaves atexit something to do."""
        while True:
            with self._lock:
                if not self._children:
                    return
                child = self._children[-1]
            child.stop()
            self.forget(child)
