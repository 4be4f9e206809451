"""A scheduled change's event delivered again while its drain is under way.

EventBridge delivers an event at least once. A drain whose window lies beyond one
invocation is handed from invocation to invocation, each carrying the event marked
(drainer/lifecycle/ec2_handover.py), and each recording the event's id on the node.
Each also records its Lambda request id. A delivery of the same event again, unmarked,
in another request (Lambda's retry of an invocation keeps its request id, and the
runner's own retry runs in it: both drain on), that finds that record fresh (a drain
begun within REDELIVERY_GAP, or ended or handed over within it) is left to that drain:
without this it drained beside it, then handed over too, and two chains ran to the
window, each with its invocations and its end notice. An AWS Health update of the
change is another event (its own id) and is acted on as before; a record older than
the gap is of a chain that stopped, and the delivery drains. Two deliveries that both
read the node before either cordons it still drain side by side (nothing locks the
node between the read and the cordon).
"""

from __future__ import annotations

import logging

from drainer.k8s.cordon import progress_of
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


def redelivered(node: Obj, approach: Approach, now: float) -> Run | None:
    """The run that leaves the node to the drain this delivery's event began; None
    when this is no such delivery (the chain's own invocation, another event, a record
    gone stale)."""
    if not approach.delivered or not approach.event or not approach.request:
        return None
    record = progress_of(node) or {}
    held = _HELD.get(str(record.get("phase")))
    if record.get("event") != approach.event or held is None:
        return None
    request = record.get("request")
    if not isinstance(request, str) or not request or request == approach.request:
        return None  # this request's own drain (tried again), or Lambda's retry of it
    key, state = held
    at = record.get(key)
    if isinstance(at, bool) or not isinstance(at, int | float):
        return None
    if not now - REDELIVERY_GAP <= at <= now + 60:
        return None
    name = str((node.get("metadata") or {}).get("name", ""))
    message = (
        f"this event (id {approach.event}) was delivered again: the drain it began on node "
        f"{name} is {state} {max(0.0, now - at):.0f} s ago; left to that drain, nothing done"
    )
    log.info("%s", message)
    return Run(Result.REDELIVERED, message, node=name)
