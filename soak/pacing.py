"""The pacing limit: a lower bound on how long an instance refresh can take, from
what the budgets and the pods' own start and stop times force, whatever the drainer.

Per batch (the nodes drained at once):
- the pods of one budget on the batch's nodes leave at most `allowed` at a time
  (the disruptions the budget allows when every pod is Ready), and each wave waits
  until its replacements are Ready: a Deployment's replacement is made when the
  eviction begins (a wave lasts the pod's startup), a StatefulSet's only when the
  old pod has exited (shutdown + startup, the same name cannot exist twice);
- the last wave ends when the old pods have exited and the replacements are Ready;
- on each node, the critical tier (DNS) starts only when that node's ordinary pods
  are gone.
The refresh's limit is the sum over its batches (they run one after the other).
Scheduling, API round trips, volume detach and the drainer's own work are left
out, so a real refresh always takes longer: the ratio says by how much.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class Replaced(StrEnum):
    AT_EVICTION = "at_eviction"  # Deployment: the ReplicaSet makes a new pod at once
    AFTER_EXIT = "after_exit"  # StatefulSet: the same name, once the old pod is gone
    NEVER = "never"  # a bare pod: nothing replaces it


@dataclass(frozen=True)
class Pace:
    """What one service's pods force: seconds to start (to Ready) and to stop after
    their eviction, how many may be disrupted at once (None: no budget), how they
    are replaced and whether they are in the critical tier."""

    startup: float
    shutdown: float
    allowed: int | None
    replaced: Replaced = Replaced.AT_EVICTION
    critical: bool = False

    def __post_init__(self) -> None:
        if self.allowed is not None and self.allowed < 1:
            raise ValueError(f"a budget that allows {self.allowed} disruptions never paces")

    def waves(self, pods: int) -> int:
        if pods <= 0:
            return 0
        return 1 if self.allowed is None else math.ceil(pods / self.allowed)

    @property
    def wave_seconds(self) -> float:
        """From one wave's evictions to the budget's room for the next."""
        if self.replaced == Replaced.AFTER_EXIT:
            return self.shutdown + self.startup
        if self.replaced == Replaced.AT_EVICTION:
            return self.startup
        return self.shutdown

    def gone_seconds(self, pods: int) -> float:
        """Until the last of `pods` has exited (the node's part of the drain)."""
        waves = self.waves(pods)
        return 0.0 if waves == 0 else (waves - 1) * self.wave_seconds + self.shutdown

    def settled_seconds(self, pods: int) -> float:
        """Until the last of `pods` has exited and its replacement is Ready."""
        waves = self.waves(pods)
        if waves == 0:
            return 0.0
        last = {
            Replaced.AFTER_EXIT: self.shutdown + self.startup,
            Replaced.AT_EVICTION: max(self.shutdown, self.startup),
            Replaced.NEVER: self.shutdown,
        }[self.replaced]
        return (waves - 1) * self.wave_seconds + last


Placement = Mapping[str, Mapping[str, int]]
"""node -> service -> pods of that service the drain will evict from the node."""


def batch_limit(placement: Placement, paces: Mapping[str, Pace]) -> float:
    """The least time one batch can take: the slowest budget over all the batch's
    nodes, or the slowest node's ordinary tier followed by its critical tier."""
    totals: dict[str, int] = {}
    for pods in placement.values():
        for service, count in pods.items():
            totals[service] = totals.get(service, 0) + count
    limit = max((paces[s].settled_seconds(n) for s, n in totals.items()), default=0.0)
    for pods in placement.values():
        ordinary = max(
            (paces[s].gone_seconds(n) for s, n in pods.items() if not paces[s].critical),
            default=0.0,
        )
        critical = max(
            (paces[s].settled_seconds(n) for s, n in pods.items() if paces[s].critical),
            default=0.0,
        )
        if critical:
            limit = max(limit, ordinary + critical)
    return limit
