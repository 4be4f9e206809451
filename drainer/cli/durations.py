"""Times on the command line as kubectl takes them: Go's time.ParseDuration syntax
(`90s`, `5m`, `1h30m`, `500ms`: numbers, each with a unit, added up), and plain
numbers, which mean seconds as they always did here. Exact arithmetic (fractions):
`0.1h` is 360 s, not 359.99999999999994."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from fractions import Fraction

_UNITS = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),  # U+00B5, as Go accepts it
    "μs": Fraction(1, 10**6),  # U+03BC
    "ms": Fraction(1, 1000),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
}
_COMPONENT = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
FORMS = (
    "a positive, finite number of seconds (90, 0.5) or a duration as kubectl takes it "
    "(90s, 5m, 1h30m, 500ms; units h, m, s, ms, us, ns)"
)


def parse_duration(text: str) -> Fraction | None:
    """Seconds in `text` (a Go duration or a plain number); None when it is neither.
    A negative or zero time is returned as it is: the caller says what it takes."""
    try:
        number = float(text)
    except ValueError:
        pass
    else:  # a plain number, as before: seconds (nan and inf are not times)
        return Fraction(number) if math.isfinite(number) else None
    sign, body = (-1, text[1:]) if text[:1] == "-" else (1, text.removeprefix("+"))
    total, at = Fraction(0), 0
    for match in _COMPONENT.finditer(body):
        if match.start() != at:
            return None
        total += Fraction(match.group(1)) * _UNITS[match.group(2)]
        at = match.end()
    if not body or at != len(body):
        return None
    return sign * total


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
        if value is None or value.denominator != 1 or not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not an integer from {minimum} to {maximum} (seconds, or a "
                "duration as kubectl takes it: 90s, 5m, 1h)"
            )
        return int(value)

    return parse
