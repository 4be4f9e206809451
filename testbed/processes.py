"""What the test servers started as processes share: a free port on 127.0.0.1, and
a child that dies with the test worker that started it."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def die_with_parent() -> None:
    """preexec_fn: PR_SET_PDEATHSIG, so a child left behind by a killed test worker
    dies with it."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
