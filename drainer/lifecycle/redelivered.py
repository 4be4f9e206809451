"""A scheduled change's or a terminate hook's event delivered again while its drain
is under way, or just after it ended.

EventBridge delivers an event at least once, and Lambda's queue may hand an
asynchronous invocation to the function more than once. A drain longer than one
invocation is handed from invocation to invocation, each carrying the event marked
with the hand-overs so far (drainer/lifecycle/ec2_handover.py, handover.py), and
each recording on the node which delivery runs it (k8s/cordon.py `Delivery`: the
event's id, the Lambda request, the step of the chain). A delivery of the same event
in another request, at the same step of the chain or an earlier one, that finds that
record fresh (a drain begun within REDELIVERY_GAP, or ended or handed over within
it) is left to that drain: without this it drained beside it, then handed over too,
and two chains ran to the window, each with its invocations and its end notice. A
terminate hook's second delivery also answered the lifecycle action a second time
and counted the drain twice; left to the first, it answers nothing (the first does).

Lambda's retry of a failed invocation keeps its request id, and the runner's own
retry after an API error runs in the same request: both drain on. An AWS Health
update of the change is another event (its own id, the change's eventArn): one that
keeps the window (a new description, a new status) is left to the drain under way as
well (the record `draining`), since it would drain toward the same deadline, or to
the node drained; one that finds the drain `timed_out` is acted on, since the record
cannot say whether a chain goes on from it (a drain that timed out in one invocation,
a chain that stopped, leave the update to do), and a second chain that starts so
stops at its next step, which finds the other's record `draining`. One that moves
the window is acted on (its own deadline; the old chain drains toward the time EC2
lists once EC2 moved it, late.as_ec2_lists, and is left to the update's drain then).
A record older than the gap is of a chain that stopped, and the delivery drains. Two
deliveries that both read the node before either cordons it do not both drain: the
cordon begins only on the record this decision was made on, its patch carrying the
version it read (k8s/cordon.py ProgressRecord's `judged`, engine/guard.py), so the
second finds the first's record there or has its patch refused, and the runner
decides again on the node as it is now (RecordChanged), finding this.
"""

from __future__ import annotations

import logging

from drainer.k8s.cordon import Delivery, live_drain, progress_of
from drainer.k8s.kube import Obj
from drainer.lifecycle.job import Approach, Run
from drainer.lifecycle.outcomes import Result
from drainer.outcome import DRAINING, Outcome

log = logging.getLogger(__name__)

REDELIVERY_GAP = 900.0
"""Lambda's longest invocation: a chain's invocation that recorded the drain longer
ago than this has ended, and its next would have begun."""
_HELD = {
    DRAINING: ("since", "under way, begun"),
    str(Outcome.TIMED_OUT): ("at", "handed over (or timed out)"),
    str(Outcome.DRAINED): ("at", "drained"),
}
"""The record's phases of a drain a delivery is left to: the time each says (when the
drain began, or when its invocation ended) and what it means."""


def recent(record: Obj, key: str, now: float) -> float | None:
    """How long ago the record's time `key` was (since, at), when it is a time within
    REDELIVERY_GAP (an invocation that may still run, or just ended); else None."""
    at = record.get(key)
    if isinstance(at, bool) or not isinstance(at, int | float):
        return None
    if not now - REDELIVERY_GAP <= at <= now + 60:
        return None
    return max(0.0, now - at)


def redelivered(node: Obj, approach: Approach, now: float) -> Run | None:
    """The run that leaves the node to the drain another delivery of this event, or
    of an update of its change that keeps the window, runs; None when there is none
    (no delivery to compare: the command line's drain, an EC2 event of another kind;
    the chain's next step, this request's own drain, another event, a record gone
    stale)."""
    delivery = approach.delivery
    record = progress_of(node) or {}
    held = _HELD.get(str(record.get("phase")))
    recorded = Delivery.of(record)
    if delivery is None or held is None or recorded is None:
        return None
    update = recorded.event != delivery.event
    if update and not _same_window(record, recorded, approach.change, delivery):
        return None
    if not update and (recorded.request == delivery.request or recorded.step < delivery.step):
        return None
    key, state = held
    age = recent(record, key, now)
    if age is None:
        return None
    name = str((node.get("metadata") or {}).get("name", ""))
    what = (
        f"an update of this change (event {delivery.event}), with the same window, came; "
        f"the drain of the change's event {recorded.event}"
        if update
        else f"this event (id {delivery.event}, hand-over {delivery.step}) was delivered "
        "again; the drain it runs"
    )
    message = f"{what} on node {name} is {state} {age:.0f} s ago: left to that drain, nothing done"
    log.info("%s", message)
    return Run(Result.REDELIVERED, message, node=name)


def _same_window(record: Obj, recorded: Delivery, change: str, delivery: Delivery) -> bool:
    """Whether the record is of a drain of the same change (its eventArn) toward the
    same window, running or done: an update that moves the window is acted on (its own
    deadline), and so is one that finds a drain ended short of the node drained
    (timed_out: whether a chain goes on from it, the record cannot say; a drain that
    timed out in one invocation, or a chain that stopped, has left the update to do)."""
    if record.get("phase") not in (DRAINING, str(Outcome.DRAINED)):
        return False
    if not change or record.get("change") != change:
        return False
    return None not in (recorded.window, delivery.window) and recorded.window == delivery.window


def begun_already(node: Obj, trigger: str, delivery: Delivery | None, now: float) -> bool:
    """Whether the node's record, as read before this drain's cordon, shows the drain
    begun already by the same event and not past its deadline: Lambda's retry of the
    invocation that cordoned (it sent the start notice then), or a step of its chain.
    A record naming another event (a drain before, its invocation gone) is not this
    one's; without a delivery on both sides (EC2's warnings), a live drain of the
    trigger is taken for it."""
    if live_drain(node, now, frozenset({trigger})) is None:
        return False
    recorded = Delivery.of(progress_of(node) or {})
    return delivery is None or recorded is None or recorded.event == delivery.event
