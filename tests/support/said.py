"""What the drainer logs during a test, whatever ran before it in the process.

`caplog` listens where pytest puts its handler as the test begins. The Lambda
handler's first `logs.configure()` in a process (drainer/logs.py) gives the
`drainer` logger a handler of its own and stops it propagating; from then on pytest
hands its handler to that logger too, at each test's start. A test whose invocation
is its process's first (under xdist, any test may be: it depends on what its worker
ran before) has its lines go nowhere `caplog` sees. This handler sits below, on
`drainer.lifecycle` and `drainer.engine`, where every trigger's and drain's line
passes, whatever ran before."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

LOGGERS = ("drainer.lifecycle", "drainer.engine")


@pytest.fixture
def said() -> Iterator[list[str]]:
    """The messages logged at INFO and above."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    keep, loggers = Keep(logging.INFO), [logging.getLogger(name) for name in LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(keep)
        logger.setLevel(logging.INFO)  # whether or not the handler set up the package's
    yield lines
    for logger, level in zip(loggers, levels, strict=True):
        logger.removeHandler(keep)
        logger.setLevel(level)
