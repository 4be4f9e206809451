"""How long a workload's replacement takes to become Ready, observed from its
current pods: each Ready pod's Ready condition's lastTransitionTime less its
creationTimestamp (the first time it became Ready, when its readiness never
flapped since), the median per workload (a Deployment's over all its ReplicaSets).
From the cluster's own pods only: no emulator's annotations, no constants."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from drainer.engine import pods
from drainer.engine.pods import Pod

Owner = tuple[str, str, str]
"""namespace, controller kind, controller name: a Deployment's pods under its own
name, whichever of its ReplicaSets made them (drainer/engine/pods.py's workload)."""


def owner(pod: Pod) -> Owner | None:
    """The workload the pod's times count for: a Deployment rolled out midway has
    pods under two ReplicaSets, one workload."""
    return pods.workload(pod)


def time_to_ready(pod: Pod) -> float | None:
    """Seconds from the pod's creation to its Ready condition turning True (None:
    not Ready, or a pod whose containers restarted: its readiness may have flapped,
    so the transition is not its first)."""
    if not pods.is_ready(pod) or pods.is_terminating(pod):
        return None
    status = pod.get("status") or {}
    if any(c.get("restartCount") for c in status.get("containerStatuses") or []):
        return None
    created = pod["metadata"].get("creationTimestamp")
    ready = next(
        (c.get("lastTransitionTime") for c in status.get("conditions") or []
         if c.get("type") == "Ready"),
        None,
    )  # fmt: skip
    if not created or not ready:
        return None
    return max(0.0, pods.parse_time(str(ready)) - pods.parse_time(str(created)))


@dataclass(frozen=True)
class Startup:
    """One workload's observed time to Ready."""

    median: float
    longest: float
    observed: int
    """How many of its pods were measured (0: no pod of its own; the cluster's median)."""


def startups(cluster_pods: Iterable[Pod]) -> dict[Owner, Startup]:
    """Each workload's time to Ready, from its pods now in the cluster; the key
    None-free. The cluster-wide figure is under ("", "", "")."""
    seen: dict[Owner, list[float]] = defaultdict(list)
    for pod in cluster_pods:
        key, took = owner(pod), time_to_ready(pod)
        if key is not None and took is not None:
            seen[key].append(took)
            seen[ALL].append(took)
    return {
        key: Startup(statistics.median(times), max(times), len(times))
        for key, times in seen.items()
    }


ALL: Owner = ("", "", "")


class Startups(Mapping[Owner, Startup]):
    """`startups` as a forecast asks for it: worked out (`reckon`) the first time it is
    asked. A replacement's time to Ready counts only in a budget, so a drain whose pods
    no budget holds never asks, and never reads every pod of the namespaces' times (on
    a large node, a fifth of what its forecast did)."""

    def __init__(self, reckon: Callable[[], Mapping[Owner, Startup]]) -> None:
        self._reckon = reckon
        self._known: Mapping[Owner, Startup] | None = None

    def _all(self) -> Mapping[Owner, Startup]:
        if self._known is None:
            self._known = self._reckon()
        return self._known

    def __getitem__(self, key: Owner) -> Startup:
        return self._all()[key]

    # Mapping's own `in` and `get` catch a KeyError from __getitem__: one raised while
    # the times are worked out (a read, a pod without its metadata) would pass for an
    # owner not known, the times never worked out and the forecast's failure unsaid.
    def __contains__(self, key: object) -> bool:
        return key in self._all()

    def get(self, key: Owner, default: Any = None) -> Any:
        return self._all().get(key, default)

    def __iter__(self) -> Iterator[Owner]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def startup_of(pod: Pod, known: Mapping[Owner, Startup]) -> Startup | None:
    """The pod's workload's time to Ready; the cluster's when its own has no
    measured pod (flagged by `observed` 0); None when nothing was measured at all."""
    key = owner(pod)
    if key is not None and key in known:
        return known[key]
    fallback = known.get(ALL)
    return None if fallback is None else Startup(fallback.median, fallback.longest, 0)
