"""The node's own state: cordon it for a drain, and release it after one.

A drain changes three things on its node: `spec.unschedulable`, the load-balancer
exclusion label and the progress annotation. The annotation records which of the
first two the drainer changed itself, so that `release` undoes those and nothing
else: a node an operator cordoned, or a label an operator set, before the drain
stays as it was. `kubectl uncordon` alone leaves the label, and the node out of
every load balancer.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from drainer.errors import RecordChanged
from drainer.k8s.kube import Kube
from drainer.outcome import DRAINING, Outcome

log = logging.getLogger(__name__)

EXCLUDE_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
PROGRESS_ANNOTATION = "eks-node-drainer/progress"

# The names the annotation's "added" list uses for what the drainer changed.
ADDED_CORDON = "cordon"
ADDED_LABEL = "exclude-from-lb-label"

Obj = dict[str, Any]


def _metadata(node: Obj, key: str) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get(key) or {})


def record_text(node: Obj) -> str:
    """The node's progress annotation as written ("" when it has none)."""
    return _metadata(node, "annotations").get(PROGRESS_ANNOTATION, "")


def progress_of(node: Obj) -> Obj | None:
    """The drainer's progress annotation on the node, parsed; None when there is none."""
    raw = _metadata(node, "annotations").get(PROGRESS_ANNOTATION)
    if raw is None:
        return None
    try:
        progress = json.loads(raw)
    except ValueError:
        progress = None
    return progress if isinstance(progress, dict) else {}


def added_by_drainer(node: Obj) -> frozenset[str]:
    """What a drain changed on this node itself, as its annotation records. A record
    from a version that did not list it (before 0.1.0: a phase, no `added`) means
    both: that version always cordoned and labelled. An annotation that is not such a
    record (empty, cut short, edited by hand, another tool's) says nothing was: an
    operator's cordon and label are never undone on its word."""
    progress = progress_of(node)
    if not progress or not isinstance(progress.get("phase"), str):
        return frozenset()
    added = progress.get("added")
    if not isinstance(added, list):
        return frozenset({ADDED_CORDON, ADDED_LABEL})
    return frozenset(str(a) for a in added)


@dataclass(frozen=True)
class Delivery:
    """Which delivery of an event runs a drain (a scheduled change's, a terminate
    hook's), as the node's record keeps it: the event's EventBridge id, the Lambda
    request (Lambda's retries of an invocation keep it) and the step of the chain of
    invocations (the hand-overs before it: 0 for the event as EventBridge delivered
    it); `window`: the start of a change's window (epoch seconds) as the event gave
    it, which an update of the change that keeps it leaves to this drain."""

    event: str
    request: str
    step: int = 0
    window: int | None = None

    def record(self) -> Obj:
        found: Obj = {"event": self.event, "request": self.request, "step": self.step}
        if self.window is not None:
            found["window"] = self.window
        return found

    @classmethod
    def of(cls, record: Obj) -> Delivery | None:
        """The delivery a record names; None when it names none (or not one that reads)."""
        found = record.get("delivery")
        if not isinstance(found, dict):
            return None
        event, request, step = found.get("event"), found.get("request"), found.get("step")
        if not (isinstance(event, str) and isinstance(request, str) and event and request):
            return None
        if type(step) is not int or step < 0:
            return None
        window = found.get("window")
        return cls(event, request, step, window if type(window) is int else None)


def cordon_patch(
    node: Obj,
    now: float,
    *,
    trigger: str = "",
    until: float | None = None,
    phase: str = DRAINING,
    change: str = "",
    delivery: Delivery | None = None,
    own_deadline: bool = False,
) -> tuple[Obj, frozenset[str]]:
    """The merge patch that cordons `node` for a drain, and what it changes that was
    not there before (added to what an earlier drain of the node recorded). A drain
    begun by an event (the terminate hook's, EC2's spot events) records its `trigger`
    and deadline (`until`), so that another event for the same instance recognises
    it (`live_drain`); `own_deadline`: EC2's event, but a deadline EC2 does not keep
    (a late warning's own 120 s), which the follower drains on past; `delivery`: the
    delivery of the event that runs it (a delivery of the event again, in another
    request, is left to this drain: drainer/lifecycle/redelivered.py)."""
    added = set(added_by_drainer(node))
    if not (node.get("spec") or {}).get("unschedulable"):
        added.add(ADDED_CORDON)
    metadata: Obj = {"annotations": {}}
    if EXCLUDE_LB_LABEL not in _metadata(node, "labels"):
        added.add(ADDED_LABEL)  # an operator's label keeps its value (any value excludes)
        metadata["labels"] = {EXCLUDE_LB_LABEL: "true"}
    recorded = frozenset(added)
    progress = progress_value(
        phase,
        recorded,
        trigger=trigger,
        change=change,
        delivery=delivery,
        own_deadline=own_deadline,
        since=now,
        until=until,
    )
    metadata["annotations"][PROGRESS_ANNOTATION] = progress
    return {"metadata": metadata, "spec": {"unschedulable": True}}, recorded


def progress_value(
    phase: str,
    added: frozenset[str],
    *,
    trigger: str = "",
    destination: str = "",
    change: str = "",
    delivery: Delivery | None = None,
    own_deadline: bool = False,
    until: float | None = None,
    **values: float | int,
) -> str:
    """The annotation's text: the phase, what began it (and, for an AWS Health
    scheduled change, which change: its eventArn), where the instance goes (when it
    is kept: "warm-pool"), its figures and what the drainer added."""
    record: Obj = {"phase": phase}
    if trigger:
        record["trigger"] = trigger
    if change:
        record["change"] = change
    if delivery is not None:
        record["delivery"] = delivery.record()
    if destination:
        record["destination"] = destination
    if own_deadline:
        record["own_deadline"] = True
    if until is not None:  # after `since`, as it always came
        values = {**values, "until": until}
    record.update({k: int(v) for k, v in values.items()})
    record["added"] = sorted(added)
    return json.dumps(record)


class ProgressRecord:
    """The progress annotation as one drain's record, the NodeRecord its caller (the
    Lambda's runner, the CLI) hands the engine (drainer/engine/context.py): the
    cordon's patch records the drain begun, what began it (`trigger`) and, for a
    drain begun by an event, its deadline; a re-cordon's (the node uncordoned
    mid-drain) records that cordon as the drainer's; the end's records the outcome,
    where the instance goes (`destination`) and what the drain added, for `release`."""

    def __init__(
        self,
        trigger: str = "",
        destination: str = "",
        change: str = "",
        *,
        delivery: Delivery | None = None,
        own_deadline: bool = False,
        judged: Obj | None = None,
    ) -> None:
        self.trigger = trigger
        self.judged = None if judged is None else record_text(judged)
        """The record as the caller read it when it decided to drain (judged: the node
        it read): the cordon begins on no other. None: not checked (the CLI's drain)."""
        self.delivery = delivery
        """The delivery of the event whose drain this is, for cordon_patch."""
        self.own_deadline = own_deadline
        """An EC2 event's drain whose deadline EC2 does not keep (LiveDrain.own_deadline)."""
        self.destination = destination
        self.change = change
        """The AWS Health change a scheduled change's drain is for: its close releases
        the node only when the record names it (drainer/lifecycle/closed.py)."""
        self.added: frozenset[str] = frozenset()
        """What the cordon changed on the node (with what earlier drains recorded)."""
        self._begun = ""
        """The record the cordon's patch wrote (the drain begun)."""

    def begin(self, node: Obj, now: float, deadline: float) -> Obj:
        """The cordon's patch; RecordChanged when the node's record is not the one the
        caller decided on (two deliveries of one event both read the node before either
        cordoned it: the second finds the first's record here, or its patch, which
        carries the version read, is refused and the node read again)."""
        found = record_text(node)
        if self.judged is not None and found != self.judged:
            raise RecordChanged(
                f"node {(node.get('metadata') or {}).get('name', '')}'s drain record "
                f"changed since it was read ({self.judged or 'none'} -> {found or 'none'})"
            )
        until = deadline if self.trigger else None
        patch, self.added = cordon_patch(
            node,
            now,
            trigger=self.trigger,
            until=until,
            change=self.change,
            delivery=self.delivery,
            own_deadline=self.own_deadline,
        )
        self._begun = patch["metadata"]["annotations"][PROGRESS_ANNOTATION]
        return patch

    @property
    def begun(self) -> str:
        """The record the cordon's patch wrote ("" before it): a node carrying it is
        this drain's, as the runner's retry after an API error finds it."""
        return self._begun

    def recordon(self) -> Obj:
        """Someone uncordoned the node mid-drain and the drain cordons it again: that
        cordon is the drainer's now, whoever's the one lifted was (an operator's, there
        before the drain), so the record names it among what the drainer added, for
        `release` to undo. The patch of the record alone: the caller adds the cordon,
        and tells `end` whether it took."""
        record = json.loads(self._begun) if self._begun else {"phase": DRAINING}
        record["added"] = sorted(self.added | {ADDED_CORDON})
        return {"metadata": {"annotations": {PROGRESS_ANNOTATION: json.dumps(record)}}}

    def released(self, node: Obj) -> bool:
        # asked at each turn of the drain's loop: the annotation's key, not its JSON
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        return bool(self._begun) and PROGRESS_ANNOTATION not in annotations

    def end(self, outcome: Outcome, now: float, evicted: int, *, cordoned: bool = False) -> Obj:
        progress = progress_value(
            outcome,
            self.added | {ADDED_CORDON} if cordoned else self.added,
            trigger=self.trigger,
            destination=self.destination,
            change=self.change,
            delivery=self.delivery,
            at=now,
            evicted=evicted,
        )
        return {"metadata": {"annotations": {PROGRESS_ANNOTATION: progress}}}


@dataclass(frozen=True)
class LiveDrain:
    """A drain under way on a node, begun by another invocation for a spot event."""

    trigger: str
    since: float
    until: float
    """Its deadline (epoch seconds): past it, the record is stale (its invocation died)."""
    own_deadline: bool = False
    """A deadline EC2 does not keep, though an EC2 event began the drain (a late
    warning's own 120 s, its instance still running): the instance may outlive it."""


def live_drain(node: Obj, now: float, triggers: frozenset[str]) -> LiveDrain | None:
    """The drain the node's record says is under way, begun by one of `triggers` and
    not past its deadline; None when there is none (or it ended, or went stale)."""
    progress = progress_of(node)
    if not progress or progress.get("phase") != DRAINING:
        return None
    trigger, since, until = progress.get("trigger"), progress.get("since"), progress.get("until")
    if trigger not in triggers or not isinstance(until, int | float) or until <= now:
        return None
    begun = float(since) if isinstance(since, int | float) else now
    return LiveDrain(str(trigger), begun, until, progress.get("own_deadline") is True)


@dataclass(frozen=True)
class Release:
    """What `release` changed on a node (or would, on a dry run), in words."""

    node: str
    changed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    """What the drainer did not add and so left alone (an operator's cordon or label)."""
    warning: str = ""


def release_patch(node: Obj) -> tuple[Obj, Release]:
    """The merge patch that undoes what the drainer added to `node`; an empty patch
    when there is nothing to undo."""
    name = str((node.get("metadata") or {}).get("name", ""))
    progress = progress_of(node)
    if progress is None:
        return {}, Release(name, kept=["no eks-node-drainer record on the node: nothing to undo"])
    added = added_by_drainer(node)
    cordoned = bool((node.get("spec") or {}).get("unschedulable"))
    labelled = EXCLUDE_LB_LABEL in _metadata(node, "labels")
    patch: Obj = {"metadata": {"annotations": {PROGRESS_ANNOTATION: None}}}
    changed, kept = [], []
    recorded = isinstance(progress.get("phase"), str)
    if not recorded and (cordoned or labelled):
        kept.append(f"{PROGRESS_ANNOTATION} is not a record the drainer wrote: nothing on its word")
    if cordoned and ADDED_CORDON in added:
        patch["spec"] = {"unschedulable": False}
        changed.append("uncordoned")
    elif cordoned and recorded:
        kept.append("cordoned before the drain: left cordoned")
    if labelled and ADDED_LABEL in added:
        patch["metadata"]["labels"] = {EXCLUDE_LB_LABEL: None}
        changed.append(f"removed label {EXCLUDE_LB_LABEL}")
    elif labelled and recorded:
        kept.append(f"label {EXCLUDE_LB_LABEL} set before the drain: kept")
    changed.append(f"removed annotation {PROGRESS_ANNOTATION}")
    warning = ""
    if progress.get("phase") == DRAINING:  # not drained, interrupted or timed out
        warning = (
            "the node's record says a drain was still under way; if it is still running "
            "(the Lambda, or another terminal) it sees the release and stops, leaving the "
            "node released"
        )
    return patch, Release(name, changed, kept, warning)


def release(kube: Kube, node: Obj, *, dry_run: bool = False) -> Release:
    """Undo what a drain added to `node` (fetched by the caller): idempotent, and a
    server-side dry run changes nothing but checks the permission."""
    patch, result = release_patch(node)
    if patch:
        kube.patch_node(result.node, patch, dry_run=dry_run)
        log.info("released node %s: %s", result.node, ", ".join(result.changed))
    return result
