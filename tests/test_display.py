"""What a person at a terminal sees: event lines, the status line (live on a
terminal, plain when piped) and the summary in words."""

from __future__ import annotations

import errno
import io
import os
import threading

from drainer.cli.display import Progress, SafeStream, StatusTicker, human_summary, waiting_line
from drainer.engine.report import DrainEvent, DrainReport, Kind
from drainer.outcome import Outcome


def test_waiting_line__names_three_pods_and_why__counts_the_rest() -> None:
    left = {f"shop/web-{i}": "PodDisruptionBudget shop/web allows no disruption" for i in range(5)}
    line = waiting_line(left)
    assert line.startswith("waiting for 5 pods: shop/web-0 (PodDisruptionBudget shop/web allows")
    assert line.endswith(", and 2 more")
    assert waiting_line({"a/b": "evicted, still terminating"}) == (
        "waiting for 1 pod: a/b (evicted, still terminating)"
    )


def _tick(live: bool, lines: int) -> str:
    stream = io.StringIO()
    progress = Progress(stream, "n1", live=live)
    asked = threading.Semaphore(0)

    def waiting() -> dict[str, str]:
        asked.release()
        return {"shop/web-1": "PodDisruptionBudget shop/web allows no disruption"}

    with StatusTicker(progress, waiting, interval=0.01):
        for _ in range(lines):
            assert asked.acquire(timeout=5)
        progress(DrainEvent(Kind.GONE, pod="shop/web-1", seconds=1.5))
    return stream.getvalue()


def test_status_on_a_terminal__one_line_rewritten__erased_before_event_lines() -> None:
    text = _tick(live=True, lines=3)
    assert "\n" not in text.split("gone")[0], "status updates stay on one line"
    assert text.count("\r\x1b[K") >= 3
    assert "waiting for 1 pod: shop/web-1" in text
    assert text.rstrip("\n").endswith("gone  shop/web-1 after 1.5 s")


def test_status_piped__plain_lines__no_escape_codes() -> None:
    text = _tick(live=False, lines=2)
    assert "\x1b" not in text and "\r" not in text
    assert sum("waiting for 1 pod" in line for line in text.splitlines()) >= 2


def test_status_ticker__nothing_waiting__prints_nothing() -> None:
    stream = io.StringIO()
    asked = threading.Semaphore(0)

    def waiting() -> dict[str, str]:
        asked.release()
        return {}

    with StatusTicker(Progress(stream, "n1"), waiting, interval=0.01):
        assert asked.acquire(timeout=5) and asked.acquire(timeout=5)
    assert stream.getvalue() == ""


def test_human_summary__counts_in_words__budgets_named() -> None:
    report = DrainReport(
        "n1",
        outcome=Outcome.DRAINED,
        evicted=4,
        skipped={"kube-system/agent-1": "DaemonSet pod"},
        refusals=3,
        blocked_by={"shop/web": ["shop/web-1"]},
        seconds=12.34,
    )
    assert human_summary(report) == ("4 evicted, 1 skipped, 3 budget refusals (shop/web) in 12.3 s")


def test_progress_closed__late_events_and_status__print_nothing_after_it() -> None:
    stream = io.StringIO()
    progress = Progress(stream, "n1", live=True)
    progress.status("waiting for 1 pod: shop/web-1 (evicted, still terminating)")

    progress.close()
    progress(DrainEvent(Kind.EVICTED, pod="shop/web-1"))  # an answer that came late
    progress.status("waiting for 1 pod: shop/web-1 (evicted, still terminating)")
    progress.line("late")

    text = stream.getvalue()
    assert text.endswith("waiting for 1 pod: shop/web-1 (evicted, still terminating)\r\x1b[K")
    assert "evicted  shop/web-1" not in text and "late" not in text


class _HungUp(io.StringIO):
    """A terminal that hung up: every write fails with EIO."""

    def write(self, text: str, /) -> int:
        raise OSError(errno.EIO, "Input/output error")


def test_safe_stream__terminal_hung_up__what_follows_goes_to_the_fallback() -> None:
    fallback = io.StringIO()
    stream = SafeStream(_HungUp(), fallback=SafeStream(fallback))

    print("interrupted by SIGHUP: node n1 is cordoned", file=stream)
    print("to undo: python -m drainer release --node n1", file=stream, flush=True)

    assert stream.lost
    assert not stream.isatty()
    assert fallback.getvalue() == (
        "interrupted by SIGHUP: node n1 is cordoned\nto undo: python -m drainer release --node n1\n"
    )


def test_safe_stream__no_fallback__writes_vanish_without_raising() -> None:
    stream = SafeStream(_HungUp())

    assert stream.write("to undo: ...\n") == len("to undo: ...\n")
    stream.flush()
    assert stream.lost


def test_safe_stream__pipe_reader_gone__descriptor_to_dev_null__last_flush_succeeds() -> None:
    """What stays in the dead stream's buffer is flushed at the interpreter's exit:
    to /dev/null, instead of an 'Exception ignored' and exit status 120."""
    read, write = os.pipe()
    os.close(read)
    raw = os.fdopen(write, "w")  # block-buffered, as a piped stdout is
    stream = SafeStream(raw)

    stream.write("node n1 NOT drained\n")  # EPIPE: Python ignores SIGPIPE

    assert stream.lost
    raw.write("what the interpreter still holds\n")
    raw.flush()  # would raise BrokenPipeError without the redirection
    raw.close()
