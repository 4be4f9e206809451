"""A dry run's budget arithmetic: which pods a drain would send at once and which
would wait their turn. The API server judges each dry-run eviction alone against
the budget's allowance now and never lowers it (nothing is stored), so a budget
that allows one accepts all ten dry-run evictions; a drain sends them in rounds of
the allowance, each round waiting for the pods before it to stop and their
replacements to become Ready. Pure: no requests, no clock."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Turn:
    """A pod that would wait for its budget, behind `ahead` others."""

    budget: str
    """namespace/name of the PodDisruptionBudget."""
    allowed: int
    """Its disruptionsAllowed now: the size of a round."""
    ahead: int
    """Pods that go through the budget before this one."""
    rounds: int
    """Rounds before this pod's: each waits for the last to stop and be replaced."""
    stop_seconds: int
    """The grace periods of the rounds before it (each round's longest): how long the
    pods ahead may take to stop, before their replacements' time to become Ready."""

    @property
    def why(self) -> str:
        return (
            f"waits its turn: PodDisruptionBudget {self.budget} allows {self.allowed} at a "
            f"time now and {self.ahead} pods go through it first ({self.rounds} round(s): "
            f"up to {self.stop_seconds} s for them to stop, plus the time their "
            "replacements take to become Ready)"
        )


def turns(queues: dict[str, list[tuple[str, int]]], allowed: dict[str, int]) -> dict[str, Turn]:
    """The pods that would wait: `queues` holds each budget's pods (name, grace
    period in seconds) in the order a drain sends them; `allowed`, each budget's
    disruptionsAllowed now. A budget that allows none holds every pod (the server
    says so); one that allows enough holds none."""
    waiting: dict[str, Turn] = {}
    for budget, queue in queues.items():
        size = allowed.get(budget, 0)
        if size <= 0:
            continue
        longest = [
            max(grace for _, grace in queue[i : i + size]) for i in range(0, len(queue), size)
        ]
        for index, (pod, _) in enumerate(queue):
            rounds = index // size
            if rounds:
                stop = sum(longest[:rounds])
                waiting[pod] = Turn(budget, size, index, rounds, stop)
    return waiting
