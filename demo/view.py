"""What the demo prints: event lines, and on a terminal a live status line.

Every line is `<seconds since the demo started>  <source>  <text>`, where the
source says who saw it: `demo` (the demo's own steps), `k8s` (the demo's watch on
the cluster), `lambda` (a log line of the function) or `aws` (the Auto Scaling
calls awssim received).

On a terminal the lines are coloured and a status line at the bottom shows the
node, the budgets and the volume as they are now; it is redrawn in place with
plain ANSI escapes (carriage return, erase line), so nothing beyond a VT100 is
needed. Elsewhere (a pipe, a file, CI) the same lines come out plain, one per
event, and nothing is redrawn.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

RESET = "\033[0m"
STYLES = {
    "step": "\033[1m",  # bold
    "ok": "\033[32m",  # green
    "info": "",
    "warn": "\033[33m",  # yellow
    "error": "\033[1;31m",  # bold red
    "dim": "\033[2m",
}
SOURCES = ("demo", "k8s", "lambda", "aws")


def wants_color(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    return stream.isatty()


class View:
    """Thread-safe printer of event lines, with an optional live status line."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        color: bool = False,
        live: bool = False,
        clock: float | None = None,
    ) -> None:
        self.stream = stream or sys.stdout
        self.color = color
        self.live = live
        self.started = clock if clock is not None else time.monotonic()
        self._lock = threading.RLock()
        self._status = ""
        self._status_shown = False

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _paint(self, text: str, style: str) -> str:
        code = STYLES.get(style, "")
        return f"{code}{text}{RESET}" if self.color and code else text

    def _clear_status(self) -> None:
        if self._status_shown:
            self.stream.write("\r\033[2K")
            self._status_shown = False

    def _draw_status(self) -> None:
        if self.live and self._status:
            width = max(20, shutil.get_terminal_size((100, 24)).columns - 1)
            text = self._status if len(self._status) <= width else self._status[: width - 3] + "..."
            self.stream.write(self._paint(text, "dim"))
            self._status_shown = True
        self.stream.flush()

    def line(self, source: str, text: str, style: str = "info") -> None:
        """One event line: `  12.3s  k8s     text`."""
        stamp = f"{self.elapsed():6.1f}s"
        prefix = f"{stamp}  {source:<6} "
        with self._lock:
            self._clear_status()
            self.stream.write(self._paint(prefix, "dim") + self._paint(text, style) + "\n")
            self._draw_status()

    def text(self, text: str = "", style: str = "info") -> None:
        """A line without time or source (headers, the summary)."""
        with self._lock:
            self._clear_status()
            self.stream.write(self._paint(text, style) + "\n")
            self._draw_status()

    def status(self, text: str) -> None:
        """Replace the live status line (ignored when not live)."""
        if not self.live:
            return
        with self._lock:
            self._status = text
            self._clear_status()
            self._draw_status()

    def close(self) -> None:
        with self._lock:
            self._status = ""
            self._clear_status()
            self.stream.flush()


def make_view(stream: TextIO, *, plain: bool, no_color: bool) -> View:
    """Plain lines when asked or not on a terminal; colour and a live line otherwise."""
    terminal = stream.isatty() and not plain
    return View(
        stream,
        color=terminal and not no_color and wants_color(stream),
        live=terminal and os.environ.get("TERM") != "dumb",
    )


def shown_path(path: Path) -> str:
    """A path as the user would type it: relative when under the current directory."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
