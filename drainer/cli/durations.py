"""Times on the command line as kubectl takes them: Go's time.ParseDuration syntax
(`90s`, `5m`, `1h30m`, `500ms`: numbers, each with a unit, added up), and plain
numbers, which mean seconds as they always did here. Counted in whole nanoseconds,
as Go counts them: `0.1h` is 360 s, not 359.99999999999994."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

_NANOSECONDS = {
    "ns": 1,
    "us": 10**3,
    "µs": 10**3,  # U+00B5, as Go accepts it
    "μs": 10**3,  # U+03BC
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_COMPONENT = re.compile(r"(\d*)(?:\.(\d*))?(ns|us|µs|μs|ms|s|m|h)")
FORMS = (
    "a positive, finite number of seconds (90, 0.5) or a duration as kubectl takes it "
    "(90s, 5m, 1h30m, 500ms; units h, m, s, ms, us, ns)"
)


def parse_duration(text: str) -> float | None:
    """Seconds in `text` (a Go duration or a plain number); None when it is neither.
    A negative or zero time is returned as it is: the caller says what it takes."""
    try:
        number = float(text)
    except ValueError:
        pass
    else:  # a plain number, as before: seconds (nan and inf are not times)
        return number if math.isfinite(number) else None
    sign, body = (-1, text[1:]) if text[:1] == "-" else (1, text.removeprefix("+"))
    total, at = 0, 0
    for match in _COMPONENT.finditer(body):
        whole, fraction, unit = match.group(1), match.group(2) or "", match.group(3)
        if match.start() != at or not (whole or fraction):
            return None
        scale = _NANOSECONDS[unit]  # a fraction's digits beyond a nanosecond are dropped, as in Go
        total += int(whole or 0) * scale + int(fraction or 0) * scale // 10 ** len(fraction)
        at = match.end()
    if not body or at != len(body):
        return None
    return sign * total / 10**9


def seconds(*, maximum: float, why: str = "") -> Callable[[str], float]:
    """An argparse type: a positive time, in seconds, at most `maximum` (`why` says
    where that bound comes from)."""

    def parse(text: str) -> float:
        value = parse_duration(text)
        if value is None or value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not a time: give {FORMS}")
        if value > maximum:
            raise argparse.ArgumentTypeError(
                f"{text!r} is more than {maximum:g} seconds{why}: give {FORMS}"
            )
        return float(value)

    return parse


def whole_seconds(minimum: int, maximum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of seconds from `minimum` to `maximum`, as a
    number or a duration (`5m`)."""

    def parse(text: str) -> int:
        value = parse_duration(text)
        if value is None or not value.is_integer() or not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not an integer from {minimum} to {maximum} (seconds, or a "
                "duration as kubectl takes it: 90s, 5m, 1h)"
            )
        return int(value)

    return parse
