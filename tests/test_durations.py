"""Times on the command line as kubectl takes them (drainer/cli/durations.py): Go's
time.ParseDuration syntax (`90s`, `5m`, `1h30m`, `500ms`), plain numbers still seconds."""

from __future__ import annotations

import argparse
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drainer.cli.durations import seconds, whole_seconds

UNITS = {"ns": Fraction(1, 10**9), "us": Fraction(1, 10**6), "µs": Fraction(1, 10**6),
         "μs": Fraction(1, 10**6), "ms": Fraction(1, 1000), "s": Fraction(1), "m": Fraction(60),
         "h": Fraction(3600)}  # fmt: skip
parse = seconds(maximum=10**12)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90", 90.0), ("0.5", 0.5), ("90s", 90.0), ("5m", 300.0), ("1h", 3600.0),
        ("1h30m", 5400.0), ("500ms", 0.5), ("1.5h", 5400.0), ("2m30.5s", 150.5),
        ("+10s", 10.0), (".5s", 0.5), ("1h0m0s", 3600.0), ("1m1ms", 60.001),
    ],
)  # fmt: skip
def test_kubectl_durations_and_plain_seconds__accepted(text: str, expected: float) -> None:
    assert parse(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    "text",
    ["-5", "-5m", "0", "0s", "nan", "inf", "", "5x", "1h30", "h", "1.h.s", "5 m", "m5", "--5s",
     "1e3s", "five"],
)  # fmt: skip
def test_negative_zero_or_garbage__refused_naming_the_accepted_forms(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        parse(text)

    message = str(refused.value)
    assert repr(text) in message
    assert "positive, finite number of seconds" in message
    assert "90s, 5m, 1h30m, 500ms" in message


def test_above_the_maximum__refused_naming_it() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="'49h' is more than 172800 seconds"):
        seconds(maximum=172_800, why=" (48 hours)")("49h")


_component = st.tuples(st.integers(0, 10**6), st.sampled_from(sorted(UNITS)))


@given(st.lists(_component, min_size=1, max_size=5))
def test_components_add_up(components: list[tuple[int, str]]) -> None:
    text = "".join(f"{n}{unit}" for n, unit in components)
    total = sum(n * UNITS[unit] for n, unit in components)
    if total == 0:
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)
    else:
        assert parse(text) == pytest.approx(float(total), rel=1e-12)


@given(st.integers(0, 10**6), st.integers(0, 999), st.sampled_from(["s", "m", "h"]))
def test_a_decimal_fraction_is_the_fraction_of_its_unit(whole: int, part: int, unit: str) -> None:
    expected = (whole + Fraction(part, 1000)) * UNITS[unit]
    text = f"{whole}.{part:03d}{unit}"
    if expected == 0:
        return
    assert parse(text) == pytest.approx(float(expected), rel=1e-12)


@given(st.integers(1, 10**6))
def test_hours_minutes_seconds_agree(n: int) -> None:
    assert parse(f"{n}h") == parse(f"{n * 60}m") == parse(f"{n * 3600}s") == parse(str(n * 3600))


def test_whole_seconds__durations_and_numbers_within_the_range() -> None:
    parse_whole = whole_seconds(0, 86_400)

    assert [parse_whole(t) for t in ("0", "90", "5m", "1h", "24h")] == [0, 90, 300, 3600, 86400]
    for text in ("86401", "25h", "1.5s", "-1", "soon"):
        with pytest.raises(argparse.ArgumentTypeError, match="from 0 to 86400"):
            parse_whole(text)
