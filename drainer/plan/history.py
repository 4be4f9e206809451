"""How long a refresh's batch waits for new nodes, from the group's own history: its
recent launches (Auto Scaling's scaling activities: each launch's StartTime, and its
EndTime when the instance went InService) and their nodes (the node whose
providerID names the instance: its Ready condition's lastTransitionTime, and its
creationTimestamp).

A launch's wait is from its StartTime to the later of InService and its node's Ready:
pods land on a Ready node whether or not Auto Scaling counts the instance InService
yet, and a launch lifecycle hook that waits for the node (the drainer's own launch
hook) ends after the node is Ready. Not the sum of the two spans: with such a hook
the node's time is inside the launch's. A launch whose node is gone (its instance
replaced since) is timed to InService only, and said so. The wait is the median of
the last LAST_LAUNCHES launches; with none, the plan says so and counts a bound
given by its caller, named as a bound."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from drainer.engine import pods

LAST_LAUNCHES = 5
"""The launches the median is taken over: recent enough to be today's launch
template and AMI, several so that one slow launch does not set the figure."""


class Launched(Protocol):
    """A launch, as drainer.aws.Launch has it (epoch seconds)."""

    @property
    def instance_id(self) -> str: ...

    @property
    def start(self) -> float: ...

    @property
    def end(self) -> float: ...


@dataclass(frozen=True)
class NewNodes:
    """The wait for a batch's new nodes."""

    seconds: float
    basis: str
    """"observed": the median of the group's launches; "bound": none to time."""
    launches: int
    """The launches timed (0 with a bound)."""
    detail: str

    @property
    def short(self) -> str:
        if self.basis == "bound":
            return f"up to {self.seconds:.0f} s, a bound: no launch to time"
        return f"~{self.seconds:.0f} s, the median of the group's last {self.launches} launch(es)"

    def doc(self) -> dict[str, object]:
        return {
            "wait_seconds": round(self.seconds, 1),
            "basis": self.basis,
            "launches": self.launches,
            "detail": self.detail,
        }


def _ready_at(node: dict[str, Any]) -> float | None:
    """When the node's Ready condition last turned True (None: not Ready)."""
    if not pods.is_ready(node):
        return None
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("lastTransitionTime"):
            return pods.parse_time(str(condition["lastTransitionTime"]))
    return None


def _by_instance(nodes: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The nodes by the instance their providerID names (aws:///zone/i-...)."""
    found = {}
    for node in nodes:
        provider = str((node.get("spec") or {}).get("providerID") or "")
        if provider.startswith("aws://"):
            found[provider.rsplit("/", 1)[-1]] = node
    return found


def new_node_wait(
    launches: Sequence[Launched], nodes: Iterable[dict[str, Any]], *, bound: float, bound_why: str
) -> NewNodes:
    """The wait for new nodes from the group's launches, the most recent first; with
    none, `bound` (seconds), whose justification `bound_why` names."""
    recent = list(launches)[:LAST_LAUNCHES]
    if not recent:
        return NewNodes(bound, "bound", 0, bound_why)
    node_of = _by_instance(nodes)
    waits, in_service, to_ready = [], [], []
    for launch in recent:
        in_service.append(launch.end - launch.start)
        node = node_of.get(launch.instance_id)
        ready = None if node is None else _ready_at(node)
        if node is None or ready is None:
            waits.append(launch.end - launch.start)
            continue
        waits.append(max(launch.end, ready) - launch.start)
        to_ready.append(ready - pods.parse_time(str(node["metadata"]["creationTimestamp"])))
    median = statistics.median(waits)
    detail = (
        f"~{median:.0f} s from a launch to its node Ready: the median of the group's last "
        f"{len(recent)} launch(es) (InService in ~{statistics.median(in_service):.0f} s"
    )
    if to_ready:
        detail += f"; their nodes Ready ~{statistics.median(to_ready):.0f} s after registering"
    gone = len(recent) - len(to_ready)
    if gone:
        detail += f"; {gone} timed to InService only: no Ready node of theirs left to time"
    return NewNodes(median, "observed", len(recent), detail + ")")
