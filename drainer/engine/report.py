"""What a drain tells the world: the events it emits as it goes (one per thing that
happens to the node or a pod) and the report it returns at the end.

The events are a contract. The Lambda writes each one as a JSON log line with the
keys of `DrainEvent.fields()`; the CLI prints them as human lines and the demo
shows them. A key or kind renamed here breaks operators' log queries: the table of
docs/reference.md and tests/test_logs.py hold it fixed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from drainer.outcome import Outcome


class Kind(StrEnum):
    """The kinds of drain events: the `event` key of the log contract."""

    STARTED = "drain_started"
    """After the cordon and the first list: node, deadline and its source, pods by tier."""
    CORDONED = "cordoned"
    RECORDONED = "recordoned"
    """Someone uncordoned the node mid-drain; the drain cordoned it again."""
    SKIPPED = "pod_skipped"
    """A pod the filters leave on the node; `reason` says which filter."""
    APPEARED = "pod_appeared"
    """A pod that landed on the node after the drain listed it; it is filtered like the others."""
    TOLERATING = "pod_tolerates_cordon"
    """A pod that landed on the node mid-drain and tolerates the cordon, with a
    controller that would put a replacement right back: not evicted, it goes with the node."""
    EVICTING = "pod_evicting"
    """The first eviction request for a pod (DEBUG level: progress displays only)."""
    EVICTED = "pod_evicted"
    """The API accepted the eviction; `refusals` counts the budget refusals before it."""
    REFUSED = "pod_refused"
    """The first refusal by a PodDisruptionBudget (`budget`); later ones only count."""
    SEVERAL_BUDGETS = "pod_under_several_budgets"
    """The eviction API refuses a pod that more than one budget selects; `budget` names them."""
    DENIED = "pod_denied"
    """The first refusal by an admission policy or webhook; `reason` is the server's
    message. The pod is retried with backoff; later refusals only count."""
    WITH_NAMESPACE = "pod_goes_with_namespace"
    """403 NamespaceTerminating: not evicted; the namespace controller deletes it."""
    GONE = "pod_gone"
    """The pod is gone (or its name has a new UID); `seconds` since its eviction."""
    HELD = "pod_held"
    """A pod annotated not to be disrupted (karpenter.sh/do-not-disrupt): not evicted
    while there is time; at the deadline the timeout policy applies to it."""
    RELEASED = "pod_released"
    """The do-not-disrupt annotation of a held pod was removed: it is evicted now."""
    STUCK = "pod_stuck"
    """Still terminating `stuck_pod_seconds` past its grace period; no longer waited for."""
    CRITICAL_TIER = "critical_tier_started"
    """The critical tier began; `reason` says whether the ordinary tier was done or the
    reserve before the deadline was reached."""
    FORCED = "pod_force_deleted"
    LEFT = "pod_left"
    """At the end of a drain that did not finish: a pod still on the node, and why."""
    VOLUME_DETACHED = "volume_detached"
    WOULD_EVICT = "pod_would_evict"
    """Dry run: the server accepted a dry-run eviction (or a budget refused it now)."""
    STOPPED = "drain_stopped"
    """A fatal error ended the drain; `reason` names it."""
    DRAIN_RELEASED = "drain_released"
    """Someone released the node mid-drain (`release`, a scheduled change's close):
    the drain stopped there, as asked; `reason` says who last wrote the node."""
    FINISHED = "drain_finished"
    """The end line, written by the handler once the lifecycle action is decided:
    result, lifecycle_result, counts, seconds, budgets_holding."""


# The level of each drain event: docs/reference.md's log contract shows the same table
# (tests/test_logs.py holds them equal). INFO is what an operator follows; WARNING
# and ERROR are what needs a look; DEBUG is for progress displays only.
EVENT_LEVELS: dict[Kind, int] = {
    Kind.STARTED: logging.INFO,
    Kind.CORDONED: logging.INFO,
    Kind.RECORDONED: logging.WARNING,
    Kind.SKIPPED: logging.INFO,
    Kind.APPEARED: logging.INFO,
    Kind.TOLERATING: logging.WARNING,
    Kind.EVICTING: logging.DEBUG,
    Kind.EVICTED: logging.INFO,
    Kind.REFUSED: logging.INFO,
    Kind.HELD: logging.INFO,
    Kind.RELEASED: logging.INFO,
    Kind.SEVERAL_BUDGETS: logging.ERROR,
    Kind.DENIED: logging.WARNING,
    Kind.WITH_NAMESPACE: logging.WARNING,
    Kind.GONE: logging.INFO,
    Kind.STUCK: logging.WARNING,
    Kind.CRITICAL_TIER: logging.INFO,
    Kind.FORCED: logging.WARNING,
    Kind.LEFT: logging.WARNING,
    Kind.VOLUME_DETACHED: logging.INFO,
    Kind.WOULD_EVICT: logging.INFO,
    Kind.STOPPED: logging.ERROR,
    Kind.DRAIN_RELEASED: logging.WARNING,
    Kind.FINISHED: logging.INFO,
}


@dataclass(frozen=True)
class DrainEvent:
    """One thing that happened in a drain. Only the fields that apply are set."""

    kind: Kind
    pod: str = ""
    """namespace/name."""
    budget: str = ""
    """namespace/name of a PodDisruptionBudget; several joined with ", "."""
    reason: str = ""
    """Why, in words: a filter's reason, the server's refusal message, the fatal error."""
    seconds: float | None = None
    """pod_gone: since the eviction was accepted (or since the drain saw it terminating)."""
    refusals: int = 0
    """pod_evicted, pod_left: budget refusals this pod met."""
    tier: str = ""
    """ordinary or critical."""
    eta_seconds: float | None = None
    """drain_started, pod_evicted, pod_gone: the drain's current ETA, when it has one
    (drainer/engine/pace.py)."""
    paced_by: str = ""
    """With eta_seconds: what paces the pods left (a budget, a pod's stop)."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """drain_started and drain_finished only: their counts, deadline and so on."""
    uid: str = ""
    """The pod's UID, for a Kubernetes Event about it (not a log key)."""

    @property
    def level(self) -> int:
        """The log level of its line."""
        return EVENT_LEVELS[self.kind]

    def fields(self) -> dict[str, Any]:
        """The log contract: `event` plus every set field, keys fixed."""
        out: dict[str, Any] = {"event": str(self.kind)}
        if self.pod:
            out["pod"] = self.pod
        if self.budget:
            out["budget"] = self.budget
        if self.reason:
            out["reason"] = self.reason
        if self.seconds is not None:
            out["seconds"] = round(self.seconds, 3)
        if self.refusals:
            out["refusals"] = self.refusals
        if self.tier:
            out["tier"] = self.tier
        if self.eta_seconds is not None:
            out["eta_seconds"] = round(self.eta_seconds, 1)
        if self.paced_by:
            out["paced_by"] = self.paced_by
        out.update(self.details)
        return out


class Emit(Protocol):
    """How a part of the drain tells of what happened: one event (the drain logs it
    and hands it to its caller's on_event)."""

    def __call__(self, kind: Kind, **values: Any) -> None: ...


@dataclass(frozen=True)
class PodAddress:
    """A pod the drain took off the node: its IP, which a load balancer's target
    group of type ip may hold as a target, and its terminationGracePeriodSeconds."""

    ip: str
    grace: int


@dataclass
class DrainReport:
    node: str
    outcome: Outcome = Outcome.DRAINED
    evicted: int = 0
    already_terminating: int = 0
    skipped: dict[str, str] = field(default_factory=dict)  # pod -> why
    refusals: int = 0  # evictions refused by a PodDisruptionBudget (429)
    blocked_by: dict[str, list[str]] = field(default_factory=dict)  # budget -> pods it held back
    # pod -> the budgets that select it: the eviction API refuses such a pod
    multiple_budgets: dict[str, list[str]] = field(default_factory=dict)
    # pod -> the message of the admission policy or webhook that refused its eviction
    denied: dict[str, str] = field(default_factory=dict)
    # pods not evicted because their namespace is being deleted: they go with it
    going_with_namespace: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)  # pods still on the node at the end
    left: dict[str, str] = field(default_factory=dict)  # pod still on the node -> why
    stuck: list[str] = field(default_factory=list)  # terminating past the threshold
    appeared: list[str] = field(default_factory=list)  # pods that landed mid-drain
    # pods that landed mid-drain, tolerate the cordon and have a controller: evicting
    # them would only bring a replacement back to the node, so they stay and go with it
    tolerating: list[str] = field(default_factory=list)
    # pods annotated not to be disrupted, held while there was time -> the annotation
    do_not_disrupt: dict[str, str] = field(default_factory=dict)
    recordons: int = 0  # times someone uncordoned the node and the drain cordoned it again
    forced: int = 0
    forced_pods: dict[str, str] = field(default_factory=dict)  # pod -> what held it
    volumes_detached: int = 0
    volumes_pending: list[str] = field(default_factory=list)
    volume_wait_began: float | None = None  # the volume wait's start (epoch s), for a hand-over
    warnings: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    would_evict: list[str] = field(default_factory=list)  # dry run
    would_wait: dict[str, str] = field(default_factory=dict)  # dry run: pod -> its turn
    # pods the drain took off the node (evicted, forced, or going already) -> IP, grace
    addresses: dict[str, PodAddress] = field(default_factory=dict)
    # pods evicted and seen gone: their pods.workload (a Deployment's by it), seconds from the
    # eviction accepted to gone (the plan's observed stops, drainer/k8s/observed.py)
    stopped: list[tuple[tuple[str, str, str], float]] = field(default_factory=list)
    stopped_by: str = ""  # FAILED: the fatal error that stopped the drain
    cordoned: bool = False  # this drain cordoned the node (not a dry run)
    requests: int = 0
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "outcome": str(self.outcome),
            "evicted": self.evicted,
            "already_terminating": self.already_terminating,
            "skipped": len(self.skipped),
            "skipped_pods": dict(sorted(self.skipped.items())),
            "pdb_refusals": self.refusals,
            "budgets_holding": self.budgets_holding(),
            "going_with_namespace": len(self.going_with_namespace),
            "admission_denied": dict(sorted(self.denied.items())),
            "multiple_budgets": {
                pod: ", ".join(names) for pod, names in sorted(self.multiple_budgets.items())
            },
            "appeared": len(self.appeared),
            "tolerating_cordon": sorted(self.tolerating),
            "do_not_disrupt": dict(sorted(self.do_not_disrupt.items())),
            "recordoned": self.recordons,
            "errors": list(self.errors),
            "stopped_by": self.stopped_by,
            "remaining": len(self.remaining),
            "left": dict(sorted(self.left.items())),
            "stuck": len(self.stuck),
            "forced": self.forced,
            "forced_pods": dict(sorted(self.forced_pods.items())),
            "volumes_detached": self.volumes_detached,
            "volumes_pending": len(self.volumes_pending),
            "api_requests": self.requests,
            "seconds": round(self.seconds, 3),
        }

    def forget_several_budgets(self, pod: str) -> None:
        """`pod` no longer waits for its budgets to be fixed: evicted after all, or gone
        another way (a person's `kubectl delete pod`). Its "cannot evict" error and its
        budgets leave the report, unless the drain force-deleted it for them (its
        reason stays)."""
        if pod in self.forced_pods:
            return
        prefix = f"cannot evict {pod}: more than one"
        self.errors = [e for e in self.errors if not e.startswith(prefix)]
        self.multiple_budgets.pop(pod, None)

    def budgets_holding(self) -> list[str]:
        """Budgets that refused at least one eviction, sorted."""
        return sorted(self.blocked_by)

    def timeout_message(self) -> str:
        """What is still on the node and why, for the timeout log line."""
        if not self.left and self.forced_pods:
            return "deleted before the deadline, each with its grace period: " + _by_reason(
                self.forced_pods
            )
        if not self.left:
            return "nothing left on the node"
        return _by_reason(self.left)


def _by_reason(pods: dict[str, str]) -> str:
    """pod -> why, as "why: pod, pod; why: pod"."""
    by_reason: dict[str, list[str]] = {}
    for pod, why in sorted(pods.items()):
        by_reason.setdefault(why, []).append(pod)
    return "; ".join(f"{why}: {', '.join(names)}" for why, names in by_reason.items())


_MESSAGES = {
    Kind.STARTED: "draining node {node}",
    Kind.CORDONED: "cordoned node {node}",
    Kind.RECORDONED: "node {node} {reason}",
    Kind.SKIPPED: "skipping {pod}: {reason}",
    Kind.APPEARED: "pod {pod} appeared on the node mid-drain",
    Kind.TOLERATING: "not evicting {pod}: {reason}",
    Kind.EVICTING: "evicting {pod}",
    Kind.EVICTED: "evicted {pod}",
    Kind.REFUSED: "eviction of {pod} refused by PodDisruptionBudget {budget}; "
    "retrying when it allows",
    Kind.HELD: "not evicting {pod}: {reason}",
    Kind.RELEASED: "evicting {pod}: {reason}",
    Kind.SEVERAL_BUDGETS: "{reason}",
    Kind.DENIED: "eviction of {pod} refused by admission: {reason}; retrying with backoff",
    Kind.WITH_NAMESPACE: "not evicting {pod}: {reason}",
    Kind.GONE: "{pod} is gone",
    Kind.STUCK: "{pod} is stuck: {reason}; no longer waiting for it",
    Kind.CRITICAL_TIER: "starting the critical tier: {reason}",
    Kind.FORCED: "force-deleted {pod}",
    Kind.LEFT: "{pod} left on the node: {reason}",
    Kind.VOLUME_DETACHED: "volume detached: {reason}",
    Kind.WOULD_EVICT: "would evict {pod}",
    Kind.STOPPED: "drain of {node} stopped: {reason}",
    Kind.DRAIN_RELEASED: "drain of {node} stopped: {reason}",
}


def describe(event: DrainEvent, node: str) -> str:
    """The event as a sentence for people (the log line's message)."""
    text = _MESSAGES.get(event.kind, str(event.kind)).format(node=node, **vars(event))
    if event.kind == Kind.GONE and event.seconds is not None:
        text += f" after {event.seconds:.1f} s"
    if event.kind == Kind.EVICTED and event.refusals:
        text += f" after {event.refusals} budget refusal(s)"
    return text


def several_budgets_message(pod: str, budgets: list[str]) -> str:
    """Why the eviction API refuses a pod, and what to do about it."""
    return (
        f"cannot evict {pod}: more than one PodDisruptionBudget selects it "
        f"({', '.join(budgets) or 'names unknown'}); the eviction API supports only one. "
        "Delete or narrow all but one of them."
    )
