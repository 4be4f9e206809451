"""Which pods a drain evicts, leaves alone, or only waits for.

Like kubectl's drain filters: an ordered list of small functions, each looking at
one pod; the first that decides wins. A pod no filter decides on is evicted.
Warnings (data that dies with the pod) are kept and grouped by message.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from drainer.engine import pods
from drainer.engine.pods import Pod


class Action(StrEnum):
    EVICT = "evict"
    SKIP = "skip"
    WAIT = "wait"  # already terminating: not evicted again, but the drain waits for it


@dataclass(frozen=True)
class FilterOptions:
    evict_unreplicated: bool = True
    evict_emptydir: bool = True
    evict_daemonset: bool = False


@dataclass(frozen=True)
class Decision:
    pod: Pod
    action: Action
    reason: str = ""
    warning: str = ""

    @property
    def name(self) -> str:
        return pods.name(self.pod)


Filter = Callable[[Pod, FilterOptions], Decision | None]


def finished(pod: Pod, options: FilterOptions) -> Decision | None:
    """As kubectl drain: a finished pod is removed, with no warning for its data or
    its lack of a controller (it holds neither any more). The eviction API deletes it
    at once without consulting budgets (it caused its disruption already)."""
    if pods.is_finished(pod):
        return Decision(pod, Action.EVICT, "finished (Succeeded or Failed)")
    return None


def mirror(pod: Pod, options: FilterOptions) -> Decision | None:
    if pods.is_mirror(pod):
        return Decision(pod, Action.SKIP, "mirror pod (static pod managed by the kubelet)")
    return None


def terminating(pod: Pod, options: FilterOptions) -> Decision | None:
    if pods.is_terminating(pod):
        return Decision(pod, Action.WAIT, "already terminating")
    return None


def daemonset(pod: Pod, options: FilterOptions) -> Decision | None:
    if not pods.is_daemonset_pod(pod):
        return None
    if options.evict_daemonset:
        return Decision(pod, Action.EVICT, "DaemonSet pod (EVICT_DAEMONSET_PODS=true)")
    return Decision(
        pod, Action.SKIP, "DaemonSet pod (its controller would recreate it on this node)"
    )


def emptydir(pod: Pod, options: FilterOptions) -> Decision | None:
    if not pods.has_emptydir(pod) or pods.is_finished(pod):
        return None
    if not options.evict_emptydir:
        return Decision(
            pod,
            Action.SKIP,
            "uses emptyDir (EVICT_EMPTYDIR_PODS=false)",
            "emptyDir data dies with the node",
        )
    return Decision(pod, Action.EVICT, "", "emptyDir data is deleted with the pod")


def unreplicated(pod: Pod, options: FilterOptions) -> Decision | None:
    if pods.controller(pod) is not None or pods.is_finished(pod):
        return None
    if not options.evict_unreplicated:
        return Decision(
            pod,
            Action.SKIP,
            "no controller (EVICT_UNREPLICATED_PODS=false)",
            "the pod dies with the node",
        )
    return Decision(pod, Action.EVICT, "", "no controller will recreate this pod")


# Order matters: the first filter with an opinion decides. Unlike kubectl, an
# emptyDir or unreplicated pod does not stop the drain: the node is going away and
# the pod dies either way, so it is evicted (gracefully) with a warning.
# A finished pod is judged by the same filters as kubectl's: a mirror or DaemonSet
# pod stays whatever its phase.
PIPELINE: tuple[Filter, ...] = (mirror, terminating, daemonset, finished, emptydir, unreplicated)


def _merge(first: Decision, later: Decision | None) -> Decision:
    if later is None or later.action != Action.EVICT or first.action != Action.EVICT:
        return first
    warning = "; ".join(w for w in (first.warning, later.warning) if w)
    return Decision(first.pod, Action.EVICT, first.reason or later.reason, warning)


def decide(pod: Pod, options: FilterOptions, pipeline: Iterable[Filter] = PIPELINE) -> Decision:
    decision: Decision | None = None
    for check in pipeline:
        verdict = check(pod, options)
        if verdict is None:
            continue
        if verdict.action != Action.EVICT:
            return verdict
        # An "evict with a warning" lets later filters still skip the pod or add warnings.
        decision = verdict if decision is None else _merge(decision, verdict)
    return decision or Decision(pod, Action.EVICT)


@dataclass(frozen=True)
class Overrides:
    """kubectl drain's override flags. A person at a terminal may be draining a node
    that stays, so without them the CLI, like kubectl, refuses pods whose data or
    whose only copy would be lost (the Lambda evicts them: its node goes away)."""

    ignore_daemonsets: bool = False
    delete_emptydir_data: bool = False
    force: bool = False


DAEMONSET_REFUSED = "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
EMPTYDIR_REFUSED = "cannot delete Pods with local storage (use --delete-emptydir-data to override)"
UNREPLICATED_REFUSED = "cannot delete Pods that declare no controller (use --force to override)"


def refusals(pod_list: Iterable[Pod], overrides: Overrides) -> dict[str, list[str]]:
    """The pods kubectl drain would refuse to start on, by kubectl's message."""
    refused: dict[str, list[str]] = defaultdict(list)
    for pod in pod_list:
        if pods.is_finished(pod) or pods.is_mirror(pod) or pods.is_terminating(pod):
            continue
        if pods.is_daemonset_pod(pod):
            if not overrides.ignore_daemonsets:
                refused[DAEMONSET_REFUSED].append(pods.name(pod))
            continue
        if pods.has_emptydir(pod) and not overrides.delete_emptydir_data:
            refused[EMPTYDIR_REFUSED].append(pods.name(pod))
        if pods.controller(pod) is None and not overrides.force:
            refused[UNREPLICATED_REFUSED].append(pods.name(pod))
    return dict(refused)


def warnings_by_message(decisions: Iterable[Decision]) -> dict[str, list[str]]:
    """Warnings grouped by message, the pods named under each (as kubectl prints them)."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for decision in decisions:
        if decision.warning:
            grouped[decision.warning].append(decision.name)
    return dict(grouped)
