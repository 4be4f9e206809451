"""Waiting for a drain another invocation began on the same node (a spot event's,
which the terminate hook's event that follows it must not start again), reading the
node's record until it ends. A drain whose deadline EC2 fixes (Approach.fixed_by_ec2)
waits only for a drain that acts by that deadline; beside any other it drains itself.
So does the terminate hook's (Approach.ends_at_deadline) beside a drain whose deadline
is after its own."""

from __future__ import annotations

import logging
from typing import Any

from drainer.k8s.cordon import LiveDrain, live_drain, progress_of
from drainer.k8s.kube import Kube
from drainer.lifecycle.events_ec2 import Ec2Kind
from drainer.lifecycle.job import Run, Tools
from drainer.lifecycle.outcomes import Result, lambda_outcome
from drainer.outcome import DRAINING, Outcome

log = logging.getLogger(__name__)

LIVE_DRAIN_POLL_SECONDS = 2.0
"""How often an invocation waiting for another's drain reads the node's record."""

# What a drain that another invocation ran means for this one, by the phase it
# recorded on the node at its end.
DRAIN_ENDINGS = frozenset({Outcome.DRAINED, Outcome.TIMED_OUT, Outcome.FAILED, Outcome.INTERRUPTED})
"""The phases a drain's record ends in; any other (a rebalance's cordon) is taken for
drained. The record removed is a release, which stops a drain where it is: the
follower drains itself."""
LIVE_DRAIN_SLACK_SECONDS = 10.0
"""How long past its deadline a live drain may take to record its end."""
ENDS_WITH_THE_INSTANCE = frozenset(
    str(kind) for kind in (Ec2Kind.INTERRUPTION, Ec2Kind.CAPACITY_RESERVATION, Ec2Kind.STATE_CHANGE)
)
"""The triggers whose drain's deadline is EC2's taking of the instance: their
timeout is the follower's too (see wait_for_live_drain)."""


def wait_for_live_drain(
    tools: Tools,
    kube: Kube,
    node: str,
    triggers: frozenset[str],
    *,
    limit: float,
    deadline: float,
    known: dict[str, Any] | None = None,
    fixed_by_ec2: bool = False,
    ends_at_deadline: bool = False,
    own: str = "",
) -> Run | dict[str, Any]:
    """When the node's record shows a live drain begun by one of `triggers` (another
    invocation, for a spot event of the same instance), wait for it to end, reading
    the record, and take its result: the same drain is not started twice. Or the node
    as last read, to drain on (its record is the one the cordon judges:
    ProgressRecord.judged): there is no such drain, it went stale (its invocation
    died) or it was released (its record removed: it stopped where it was), or it
    timed out before this drain's own deadline (`deadline`) and the instance may
    outlive it (`_drains_on`: a rebalance's drain, cut to its one invocation, or a
    scheduled change's). `known`: the node as the caller just read it. `fixed_by_ec2`,
    `ends_at_deadline`: see Approach. `own`: this drain's trigger; waiting for a drain
    another trigger began starts this one (`tools.on_started`, the start notice), where
    waiting for one its own began (the same event again) does not."""
    current = (known if known is not None else kube.get_node(node)) or {}
    live = live_drain(current, tools.clock(), triggers)
    held = fixed_by_ec2 or ends_at_deadline  # the instance goes at this deadline
    if live is None or (held and _beside(live, node, deadline, own_too=fixed_by_ec2)):
        return current
    _waiting(tools, live.trigger, node, own)
    until = min(live.until + LIVE_DRAIN_SLACK_SECONDS, limit)
    ended, current = _wait_for_end(tools, kube, node, current, trigger=live.trigger, until=until)
    if ended is not None:
        return current if _drains_on(ended, live, node, deadline) else ended
    if until < live.until + LIVE_DRAIN_SLACK_SECONDS:  # this drain's own time ran out first
        result = Result.HANDED_OVER if limit < deadline else Result.TIMED_OUT
        return Run(
            result,
            f"still waiting for the drain begun by the {live.trigger} event on node {node}",
            node=node,
        )
    log.warning(
        "the drain begun by the %s event on node %s is past its deadline without an end "
        "(its invocation stopped); draining it here",
        live.trigger,
        node,
    )
    return current


def _beside(live: LiveDrain, node: str, deadline: float, *, own_too: bool) -> bool:
    """Whether a drain at whose deadline the instance goes (`deadline`: EC2's, or the
    terminate hook's) drains the node itself beside the live one rather than wait for
    it: the live drain's deadline is later than this one's, or (`own_too`: a deadline
    EC2 fixes) its own (it deletes no pod its budget holds, nor fits a grace to EC2's
    moment). Both then run: this one records itself on the node (the record
    names it, so that a later event waits for it) and ends at its deadline with its
    own end line; the other goes on to its own end, evicting what is left (a pod both
    evict goes once), and its end, which may come after, is recorded over this one's
    and has its own end line."""
    own = own_too and live.own_deadline
    if not own and live.until <= deadline:
        return False
    why = "its own deadline" if own else "a later deadline"
    log.warning(
        "a drain begun by the %s event is under way on node %s, to %s (%+.0f s from "
        "this drain's, when the instance goes): it will not act by then as this drain must; "
        "draining "
        "here beside it, until this drain's deadline (the other goes on to its own end, "
        "with its own end line)",
        live.trigger,
        node,
        why,
        live.until - deadline,
    )
    return True


def _drains_on(ended: Run, live: LiveDrain, node: str, deadline: float) -> bool:
    """Whether this drain goes on where the followed one timed out: its deadline came
    before this drain's own, and the instance may outlive it. A rebalance's drain
    (REBALANCE_ACTION=drain) is cut to its one invocation, a scheduled change's to
    DRAIN_TIMEOUT_SECONDS from its start when the window is further away: the pods
    their budgets held may still go by this drain's deadline (a scheduled change's
    deadline at its window's start is EC2's, but draining on then is harmless, and
    the record does not tell the two apart). A spot warning's (a capacity
    reservation's, a state change's) deadline is always EC2's: the instance is
    reclaimed then, whatever this drain's deadline says, so draining on would be
    harmless but pointless, and its timeout is taken as this drain's too; unless its
    record says EC2 does not keep it (a late warning's own 120 s, the instance still
    running when it came: the instance may outlive it). A drain released mid-way
    stopped where it was: this one drains."""
    if ended.result == Result.RELEASED:
        return True
    if ended.result != Result.TIMED_OUT:
        return False
    if live.trigger in ENDS_WITH_THE_INSTANCE and not live.own_deadline:
        return False
    if live.until >= deadline:
        return False
    log.info(
        "the drain begun by the %s event on node %s timed out at its own deadline, %.0f s "
        "before this drain's; draining here until this drain's deadline",
        live.trigger,
        node,
        deadline - live.until,
        extra={"followed_trigger": live.trigger},
    )
    return True


def _waiting(tools: Tools, trigger: str, node: str, own: str) -> None:
    """Say that this drain waits for the live one `trigger` began; when another trigger
    began it, this one's drain starts so (its start notice)."""
    log.info(
        "a drain begun by the %s event is under way on node %s; waiting for it instead "
        "of starting another",
        trigger,
        node,
        extra={"followed_trigger": trigger},
    )
    if tools.on_started is not None and trigger != own:
        tools.on_started()


def _wait_for_end(
    tools: Tools,
    kube: Kube,
    node: str,
    current: dict[str, Any] | None,
    *,
    trigger: str,
    until: float,
) -> tuple[Run | None, dict[str, Any]]:
    """Read the node's record until the live drain ends (its result) or `until`
    passes (None), with the node as last read."""
    while True:
        if current is None:
            gone = Run(Result.NO_NODE, f"node {node} went away during the {trigger} drain")
            return gone, {}
        progress = progress_of(current)
        if progress is None:  # released: the drain followed stopped where it was
            log.info("the drain begun by the %s event on node %s was released (its record "
                     "removed): it stopped, pods left; draining here", trigger, node)  # fmt: skip
            return Run(Result.RELEASED, f"the {trigger} drain was released", node=node), current
        phase = str(progress.get("phase", ""))
        if phase != DRAINING:
            ended = Outcome(phase) if phase in DRAIN_ENDINGS else Outcome.DRAINED
            told = f"the drain begun by the {trigger} event ended: {phase or 'record removed'}"
            return Run(lambda_outcome(ended), told, node=node), current
        if tools.clock() >= until:
            return None, current
        tools.sleep(min(LIVE_DRAIN_POLL_SECONDS, max(0.0, until - tools.clock())))
        current = kube.get_node(node)
