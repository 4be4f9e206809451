"""An instance refresh's arithmetic (drainer/plan/refresh.py): the batch size from
--batch or --min-healthy-percentage, and the total over batches."""

from __future__ import annotations

import pytest

from drainer.plan.refresh import batch_size, batches, total


@pytest.mark.parametrize(
    ("size", "batch", "healthy", "expected"),
    [
        (3, None, 90, 1),  # floor(0.3) is 0: at least one
        (10, None, 90, 1),
        (20, None, 80, 4),
        (7, None, 0, 7),
        (7, None, 100, 1),
        (7, 3, 90, 3),  # --batch wins
    ],
)
def test_batch_size(size: int, batch: int | None, healthy: int, expected: int) -> None:
    assert batch_size(size, batch=batch, min_healthy_percentage=healthy) == expected


def test_total__each_batch_its_slowest_node_then_the_warmup() -> None:
    grouped = batches(["a", "b", "c"], 2)
    assert grouped == [["a", "b"], ["c"]]
    assert total([[5.0, 12.0], [20.0]], warmup=30) == 12 + 30 + 20 + 30
