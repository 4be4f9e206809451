"""The drain told in Kubernetes Events (drainer/k8s/events.py): what an operator
sees in `kubectl describe node` and `kubectl get events` without AWS access.

On the node: the drain started (and what began it), the cordon, a do-not-disrupt
annotation it does not honour, and its end (drained, timed out or failed, with what
the Auto Scaling group is told). On each
pod: evicted, refused by a budget (once, not per retry), refused by an admission
policy, held by its do-not-disrupt annotation, deleted at the deadline, stuck
terminating, left on the node. Every other step is in the log only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from drainer.engine.pods import opted_out
from drainer.engine.report import DrainEvent, DrainReport, Kind
from drainer.k8s.events import EventPoster, Regarding
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER
from drainer.outcome import Outcome

log = logging.getLogger(__name__)

# Kind -> (reason, action, warning): the pod events.
_POD_EVENTS: dict[Kind, tuple[str, str, bool]] = {
    Kind.EVICTED: ("Evicted", "Evict", False),
    Kind.REFUSED: ("EvictionRefusedByBudget", "Evict", True),
    Kind.DENIED: ("EvictionDenied", "Evict", True),
    Kind.HELD: ("EvictionHeld", "Evict", False),
    Kind.FORCED: ("DeletedAtDeadline", "Delete", True),
    Kind.STUCK: ("StuckTerminating", "Drain", True),
    Kind.LEFT: ("LeftOnNode", "Drain", True),
}


class DrainStory:
    """An on_event callback that tells the drain in Events, and its ending."""

    def __init__(
        self,
        poster: EventPoster,
        node: str,
        node_uid: str,
        trigger: str,
        evicted_before: int = 0,
        *,
        by: str = "",
    ) -> None:
        """`by`: who runs the drain, for the start Event (the CLI's kubeconfig user and
        host); the trigger says it of the Lambda's. `evicted_before`: the pods the
        invocations before this one evicted, when the drain was handed over (the end
        Event counts the drain's evictions, not only this invocation's)."""
        self.poster = poster
        self.evicted_before = evicted_before
        self.node = Regarding("Node", node, uid=node_uid)
        self.trigger = trigger
        self.begun_by = f"{trigger}, {by}" if by else trigger

    def __call__(self, event: DrainEvent) -> None:
        if event.kind is Kind.STARTED:
            details = event.details
            self.poster.post(
                self.node,
                "DrainStarted",
                "Drain",
                f"eks-node-drainer drains the node (begun by {self.begun_by}): "
                f"{details.get('ordinary', 0)} pods, then {details.get('critical', 0)} "
                f"critical, by {details.get('deadline', '?')} "
                f"({details.get('deadline_source', '')}){_eta(event)}",
            )
        elif event.kind is Kind.CORDONED:
            self.poster.post(self.node, "Cordoned", "Cordon", "marked unschedulable")
        elif event.kind is Kind.RECORDONED:
            self.poster.post(
                self.node,
                "Recordoned",
                "Cordon",
                "someone uncordoned the node mid-drain; cordoned again",
                warning=True,
            )
        elif event.kind in _POD_EVENTS and event.pod:
            reason, action, warning = _POD_EVENTS[event.kind]
            namespace, _, name = event.pod.partition("/")
            self.poster.post(
                Regarding("Pod", name, namespace, event.uid),
                reason,
                action,
                self._pod_note(event),
                warning=warning,
            )

    def opt_out_ignored(self, note: str) -> None:
        """The node's do-not-disrupt annotation, which this drain does not honour."""
        self.poster.post(self.node, "DoNotDisruptIgnored", "Drain", note, warning=True)

    def _pod_note(self, event: DrainEvent) -> str:
        on = f"draining node {self.node.name}"
        if event.kind is Kind.EVICTED:
            after = f" after {event.refusals} budget refusals" if event.refusals else ""
            return f"evicted by eks-node-drainer {on}{after}"
        if event.kind is Kind.REFUSED:
            return (
                f"PodDisruptionBudget {event.budget} allows no disruption now; "
                f"eks-node-drainer retries ({on})"
            )
        if event.kind is Kind.FORCED:
            return (
                f"deleted with {event.seconds or 0:.0f} s of grace before the node's deadline "
                f"({on}); held by {event.reason}"
            )
        return f"{event.reason} ({on})"

    def ended(self, report: DrainReport, lifecycle: Callable[[Outcome], str | None]) -> None:
        """The drain's end on the node; `lifecycle` says what the group is told. It is
        never dropped, and says how many pod Events the poster's bound folded."""
        ending = _ENDINGS.get(report.outcome)
        if ending is None:
            return
        reason, warning = ending
        if report.outcome is Outcome.DRAINED:
            note = f"every pod is gone: {report.evicted + self.evicted_before} evicted"
            if self.evicted_before:
                note += f" ({self.evicted_before} before a hand-over)"
        elif report.outcome is Outcome.TIMED_OUT:
            note = report.timeout_message()
        else:
            note = report.stopped_by or "; ".join(report.errors)
        told = lifecycle(report.outcome)
        if told:
            note += f"; the Auto Scaling group is told {told}"
        folded = self.poster.folded
        if folded:
            note += (
                f"; {folded} pod Events not recorded "
                f"({self.poster.limit} per drain: the log has each)"
            )
        self.poster.post(self.node, reason, "Drain", note, warning=warning)


def _eta(event: DrainEvent) -> str:
    """The start Event's ETA and what paces it, when the drain has one."""
    if event.eta_seconds is None:
        return ""
    return f"; ETA ~{event.eta_seconds:.0f} s, paced by {event.paced_by}"


# Outcome -> (reason, warning): the node's end Event.
_ENDINGS: dict[Outcome, tuple[str, bool]] = {
    Outcome.DRAINED: ("Drained", False),
    Outcome.TIMED_OUT: ("DrainTimedOut", True),
    Outcome.FAILED: ("DrainFailed", True),
    Outcome.INTERRUPTED: ("DrainFailed", True),
    Outcome.RELEASED: ("DrainReleased", False),
}


def say_opt_out_ignored(node: dict[str, Any], trigger: str, story: DrainStory | None) -> None:
    """A node annotated do-not-disrupt (Karpenter's annotation, which Karpenter honours
    on a node too) is drained all the same, and says so: once per drain, as its start
    notice (runner._told_to: only once its own cordon took, not by a delivery that
    lost the race to it, nor again on a hand-over or a retry: begun_already)."""
    annotation = opted_out(node)
    if not annotation:
        return
    who = (
        "the Auto Scaling group terminates the instance"
        if trigger == TERMINATE_HOOK_TRIGGER
        else f"EC2 takes the instance ({trigger})"
    )
    note = (
        f"node {node['metadata']['name']} is annotated {annotation}=true, which Karpenter "
        f"honours only against its own voluntary disruption (consolidation, drift): {who} "
        "regardless, so the drain goes on (instance scale-in protection is what keeps an "
        "instance through a scale-in)"
    )
    log.warning("%s", note, extra={"annotation": annotation})
    if story is not None:
        story.opt_out_ignored(note)
