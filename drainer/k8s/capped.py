"""An exec credential plugin run with a cap on what it prints, under
drainer.k8s.kubeconfig: subprocess.run holds all of a child's output (300 MB of a
broken plugin's output took the process to 0.9 GB). Here its stdout is read as it
comes, and the plugin is killed once it passes the limit or its time.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Mapping
from typing import IO, Any


class OutputTooLarge(ValueError):
    """The plugin printed more than the limit; it was killed."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"exec: the plugin printed more than the {limit / 2**20:g} MiB limit on a "
            "plugin's output (EXEC_OUTPUT_LIMIT_BYTES); it was stopped"
        )


def run(
    argv: list[str],
    *,
    env: Mapping[str, str],
    stdin: IO[Any] | int,
    timeout: float | None,
    limit: int,
) -> tuple[int, str]:
    """The plugin's exit status and stdout (its stderr is the terminal's). Raises
    OutputTooLarge past `limit` bytes and subprocess.TimeoutExpired past `timeout`,
    the plugin killed and waited for either way."""
    process = subprocess.Popen(argv, env=env, stdin=stdin, stdout=subprocess.PIPE)  # noqa: S603 - the kubeconfig's own plugin
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        assert process.stdout is not None  # stdout=PIPE
        out = _read(process.stdout.fileno(), limit, deadline, argv, timeout)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        code = process.wait(left)
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        if process.stdout is not None:
            process.stdout.close()
    return code, out.decode(errors="replace")


def _read(
    fd: int, limit: int, deadline: float | None, argv: list[str], timeout: float | None
) -> bytes:
    pieces: list[bytes] = []
    size = 0
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and (left <= 0 or not select.select([fd], [], [], left)[0]):
            raise subprocess.TimeoutExpired(argv, timeout or 0.0)
        piece = os.read(fd, min(1 << 16, limit + 1 - size))
        if not piece:
            return b"".join(pieces)
        size += len(piece)
        if size > limit:
            raise OutputTooLarge(limit)
        pieces.append(piece)
