"""An instance refresh's arithmetic: how many instances each batch replaces, and the
refresh's total from its nodes' plans and its batches' waits for new nodes. A group
stores no refresh settings (they are given per StartInstanceRefresh), so they come
as the refresh's own flags."""

from __future__ import annotations

import math
from collections.abc import Sequence

DEFAULT_MIN_HEALTHY_PERCENTAGE = 90
"""AWS's default MinHealthyPercentage for an instance refresh."""


def batch_size(size: int, *, batch: int | None, min_healthy_percentage: int) -> int:
    """The instances replaced at a time: `batch` when given, else what the minimum
    healthy percentage leaves free of the group's size (at least one)."""
    if batch is not None:
        return max(1, batch)
    return max(1, math.floor(size * (100 - min_healthy_percentage) / 100))


def batches(items: Sequence[str], size: int) -> list[list[str]]:
    """The items in refresh order, `size` at a time."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def batch_times(
    etas: Sequence[Sequence[float]], warmup: float, waits: Sequence[float] = ()
) -> list[float]:
    """Each batch lasts as long as its slowest node's drain, then its wait for new
    nodes (`waits`, per batch: 0 when its pods fit on the nodes left), then the
    warm-up."""
    extra = list(waits) or [0.0] * len(etas)
    return [max(b, default=0.0) + wait + warmup for b, wait in zip(etas, extra, strict=True)]


def total(etas: Sequence[Sequence[float]], warmup: float, waits: Sequence[float] = ()) -> float:
    """The refresh's length: its batches' times added."""
    return sum(batch_times(etas, warmup, waits))
