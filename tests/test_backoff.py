"""The one retry pacing (drainer/backoff.py), as properties over every attempt,
base, cap, jitter and Retry-After: exponential, capped, jittered downwards only,
and never sooner than the server asked."""

from __future__ import annotations

import random

import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from drainer.backoff import Backoff

FAST = hypothesis.settings(max_examples=100, deadline=None)

seconds = st.floats(min_value=0.001, max_value=3600.0, allow_nan=False)
jitters = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
attempts = st.integers(min_value=-3, max_value=200)
seeds = st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def backoffs(draw: st.DrawFn) -> Backoff:
    first = draw(seconds)
    cap = draw(st.floats(min_value=first, max_value=7200.0, allow_nan=False))
    return Backoff(first=first, cap=cap, jitter=draw(jitters))


@pytest.mark.parametrize(
    ("attempt", "base"),
    [(0, 0.25), (1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 4.0), (60, 4.0), (-1, 0.25)],
)
def test_base__doubles_from_first_until_the_cap(attempt: int, base: float) -> None:
    assert Backoff(first=0.25, cap=4.0).base(attempt) == base


@FAST
@given(backoffs(), attempts)
def test_base__never_past_the_cap_and_never_shrinks_with_another_failure(
    backoff: Backoff, attempt: int
) -> None:
    assert backoff.first <= backoff.base(attempt) <= backoff.cap
    assert backoff.base(attempt + 1) >= backoff.base(attempt)


@FAST
@given(backoffs(), attempts, seeds)
def test_delay__without_retry_after__within_the_jitter_below_the_base(
    backoff: Backoff, attempt: int, seed: int
) -> None:
    pause = backoff.delay(attempt, random.Random(seed))

    base = backoff.base(attempt)
    assert (1.0 - backoff.jitter) * base - 1e-9 <= pause <= base + 1e-9


@FAST
@given(backoffs(), attempts, seeds, seconds)
def test_delay__with_retry_after__never_sooner_than_the_server_asked(
    backoff: Backoff, attempt: int, seed: int, retry_after: float
) -> None:
    pause = backoff.delay(attempt, random.Random(seed), retry_after)

    assert pause >= retry_after
    assert pause <= max(retry_after, backoff.base(attempt)) + 1e-9


@FAST
@given(backoffs(), attempts, seeds)
def test_delay__same_random_source__same_pause(backoff: Backoff, attempt: int, seed: int) -> None:
    assert backoff.delay(attempt, random.Random(seed)) == backoff.delay(
        attempt, random.Random(seed)
    )


def test_delay__no_jitter__exactly_the_base() -> None:
    backoff = Backoff(first=1.0, cap=30.0, jitter=0.0)

    assert [backoff.delay(a, random.Random(0)) for a in range(7)] == [1, 2, 4, 8, 16, 30, 30]
