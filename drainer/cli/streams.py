"""Text streams whose writes never raise: a terminal that hung up or a pipe whose
reader left must not turn the end of a drain (its verdict, the undo command) into a
traceback. Apart from drainer/cli/display.py, so that the CLI's first request does
not wait for the display's modules (issue 28)."""

from __future__ import annotations

import os
from typing import Protocol, TextIO


class Stream(Protocol):
    def write(self, text: str, /) -> int: ...
    def flush(self) -> None: ...


class SafeStream:
    """A text stream whose writes never raise. When `stream` fails (EIO from a terminal
    that hung up, EPIPE from a pipe whose reader left, a closed file), it is given up
    for good: what follows, and the text that failed, goes to `fallback` (stdout's is
    stderr), or nowhere. Its descriptor is pointed at /dev/null, so that the
    interpreter's own last flush of what is still buffered does not fail too (Python
    would print 'Exception ignored' and exit 120 instead of the drain's status)."""

    def __init__(self, stream: TextIO, fallback: SafeStream | None = None) -> None:
        self.stream = stream
        self.fallback = fallback
        self.lost = False

    def write(self, text: str, /) -> int:
        if not self.lost:
            try:
                self.stream.write(text)
                self.stream.flush()  # a failure is seen now, with the text that failed
                return len(text)
            except (OSError, ValueError):  # ValueError: written after close()
                self._give_up()
        if self.fallback is not None:
            return self.fallback.write(text)
        return len(text)

    def flush(self) -> None:
        if not self.lost:
            try:
                self.stream.flush()
            except (OSError, ValueError):
                self._give_up()

    def isatty(self) -> bool:
        try:
            return not self.lost and self.stream.isatty()
        except (OSError, ValueError):
            return False

    def _give_up(self) -> None:
        self.lost = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self.stream.fileno())
            finally:
                os.close(null)
        except (OSError, ValueError):  # no descriptor (a StringIO), or already closed
            pass
