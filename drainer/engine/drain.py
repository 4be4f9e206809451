"""The drain engine: cordon, evict, watch the node until nothing is left, volumes.

It knows nothing of AWS: it gets a Kube client, a node name, the node's record
(how the node records a drain, given by whoever runs it) and two deadlines (the
drain's own, and the moment this invocation must hand over), and answers with a
DrainReport. Every step is safe to repeat, because events are delivered at least
once and a drain may span several Lambda invocations.

One loop decides, a small pool sends. The loop wakes on every change the watches
see (pods on the node, the node itself, budgets) and on an eviction's answer, asks
the schedule (drainer/engine/schedule.py) which pods to send now, and hands them to the
pool; a pod waiting for its budget holds no thread. An answer that comes while the
loop waits with nothing to do has its worker take the loop's turn instead, and send
the next pod itself when that is all the turn decides (relay.py). The drain owns the
node until the end: an uncordon is undone, pods that land on it are evicted like the
others, and "drained" means a fresh list shows nothing left to evict.

Each concern owns its state, and all share one DrainContext (context.py): the node
(guard.py: its cordon, its record, an uncordon undone, a replacement under the same
name), the pods followed (following.py), one eviction and what its answer means
(evictions.py), TIMEOUT_POLICY=force (force.py), and the volumes (volumes.py).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime

from drainer.engine import filters, pods
from drainer.engine.context import (
    MAX_WAIT,
    DrainContext,
    NodeRecord,
    Pace,
    PaceFrom,
    RealWaits,
    Waits,
    heap_frozen,
)
from drainer.engine.dryrun import dry_run
from drainer.engine.evictions import Evictions
from drainer.engine.filters import Action
from drainer.engine.following import Following
from drainer.engine.force import ForcePolicy
from drainer.engine.guard import NodeGuard
from drainer.engine.options import DrainOptions
from drainer.engine.pods import Pod
from drainer.engine.relay import Relay, Step
from drainer.engine.report import DrainEvent, DrainReport, Kind, PodAddress
from drainer.engine.schedule import Entry, Schedule
from drainer.engine.volumes import Volumes
from drainer.engine.watchers import BudgetTracker
from drainer.errors import FatalKubeError
from drainer.k8s.kube import Kube
from drainer.outcome import Outcome

__all__ = ["MAX_WAIT", "Drain", "NodeRecord", "RealWaits", "Waits"]

log = logging.getLogger(__name__)

IN_FLIGHT_WAIT = 5.0
"""How long a drain that ends early (a fatal error, an interruption, the hand-over
moment) waits for the answers to eviction requests already sent."""


@dataclass
class _Parts:
    """What a drain builds once it runs: the budget watch, the schedule, and the
    concerns that work on it."""

    budgets: BudgetTracker
    schedule: Schedule
    following: Following
    evictions: Evictions
    force: ForcePolicy


class Drain:
    """One drain of one node: the loop, over the concerns that own their state."""

    def __init__(
        self,
        kube: Kube,
        node: str,
        options: DrainOptions | None = None,
        *,
        record: NodeRecord,
        waits: Waits | None = None,
        on_event: Callable[[DrainEvent], None] | None = None,
        rng: random.Random | None = None,
        node_uid: str = "",
        pace: Pace | None = None,
        pace_from: PaceFrom | None = None,
    ) -> None:
        """`record`: how the node records the drain (the caller's: the engine writes
        the patches it gives). `waits`: the clock the drain reads and waits on (real
        time by default). `node_uid`: the node object the caller found (empty: the
        one cordon() reads). The drain is of that object: a node registered later
        under the same name is another machine, never cordoned, drained or recorded
        on by this drain. `pace`: the caller's current ETA for the drain's lines
        (drainer/engine/pace.py's Eta.fields), when it has one; `pace_from`: the
        caller's ETA made from what the drain lists as it begins (pace.Listed)."""
        self.ctx = DrainContext(
            kube,
            node,
            options or DrainOptions(),
            waits or RealWaits(),
            DrainReport(node),
            on_event,
            rng or random.Random(),  # noqa: S311 - jitter
            pace=pace,
        )
        self.report = self.ctx.report
        self._guard = NodeGuard(self.ctx, record, node_uid)
        self._volumes = Volumes(self.ctx)
        self._parts: _Parts | None = None  # once it runs
        self._relay = Relay(self.ctx.cond)
        self._pace_from = pace_from

    # -- public ---------------------------------------------------------------

    def run(
        self, deadline: float, stop_at: float | None = None, *, deadline_source: str = ""
    ) -> DrainReport:
        """Drain until done, until `deadline` (the drain's own, epoch seconds) or until
        `stop_at` (this invocation's hand-over moment). A fatal error (RBAC, TLS, a
        refused token) ends it at once with outcome FAILED and `stopped_by`; other
        API errors before the first eviction (cordon, list) are raised, to retry, and
        so is the record's refusal to begin (NodeRecord.begin), nothing written."""
        ctx, report = self.ctx, self.report
        started = ctx.clock()
        requests_before = ctx.kube.requests
        limit = min(deadline, stop_at) if stop_at is not None else deadline
        try:
            with heap_frozen():
                self._run(deadline, limit, deadline_source)
        except FatalKubeError as e:
            ctx.fail(e)
        finally:
            self._stop_watches()
            report.seconds = ctx.clock() - started
            report.requests = ctx.kube.requests - requests_before
            report.addresses = {
                e.name: PodAddress(address, pods.grace_period(e.pod))
                for e in (self._parts.schedule if self._parts else ())
                if (address := pods.ip(e.pod))
            }
        if ctx.fatal is not None:
            report.outcome = Outcome.FAILED
            report.stopped_by = str(ctx.fatal)
            ctx.emit(Kind.STOPPED, reason=str(ctx.fatal))
            if report.cordoned:
                self._guard.record_end(Outcome.FAILED)  # may be refused too: a log line says so
        return report

    def cordon(self, deadline: float) -> bool:
        """Cordon, exclude from load balancers and record the drain begun on the node
        (through the caller's record); False if the node is gone."""
        return self._guard.cordon(deadline)

    def interrupt(self, reason: str) -> None:
        """Stop at once, from any thread or a signal handler (a person's Ctrl-C): no
        new eviction is sent, and run() returns with outcome INTERRUPTED and the pods
        left. The node stays cordoned; `release` undoes that.

        It takes no lock: a signal handler runs in the main thread, which may hold a
        lock (a display's, a log handler's) that a thread holding the drain's lock is
        waiting for. The loop sees the flag within MAX_WAIT."""
        if not self.ctx.interrupted:
            self.ctx.interrupted = reason

    def waiting(self) -> dict[str, str]:
        """The pods the drain still waits for, and why, now (for a status display)."""
        with self.ctx.cond:
            return self._parts.schedule.left() if self._parts is not None else {}

    def _stop_watches(self) -> None:
        if self._parts is not None:
            self._parts.following.tracker.stop()
            self._parts.budgets.stop()
        self._guard.stop()

    # -- the drain ------------------------------------------------------------

    def _run(self, deadline: float, limit: float, deadline_source: str) -> None:
        ctx = self.ctx
        if not self.cordon(deadline):
            self.report.outcome = Outcome.NO_NODE
            return
        pod_list, version = ctx.kube.list_pods_on_node(ctx.node, ctx.options.pod_selector)
        if ctx.options.dry_run:
            dry_run(ctx.kube, pod_list, ctx.options, self.report, ctx.emit)
            return
        parts = self._start(pod_list, version, deadline, deadline_source)
        if not self._evict_all(parts, limit):
            if ctx.replaced or ctx.released:
                self._left_behind(parts)
            elif ctx.fatal is None:
                self._not_drained(parts, deadline)
            return
        if self._volumes.wait(limit, parts.following.tracker.pods):  # the pods left stay
            self.report.outcome = Outcome.HANDED_OVER  # a volume attached at the hand-over
            return
        if ctx.interrupted:
            self._not_drained(parts, deadline)
            return
        if self.report.forced or self.ctx.options.forced_before:  # the policy deleted them
            self.report.outcome = Outcome.TIMED_OUT
            self._guard.record_end(Outcome.TIMED_OUT)
            return
        self._guard.record_end(Outcome.DRAINED)

    def _start(self, pod_list: list[Pod], version: str, deadline: float, source: str) -> _Parts:
        """Start the watches (budgets, the pods from the first list, the node), build
        the concerns, and take the listed pods in."""
        ctx = self.ctx
        ctx.deadline = deadline
        budgets = BudgetTracker(
            ctx.kube, watch_timeout=ctx.options.watch_timeout_seconds, cond=ctx.cond
        )
        # before the watches start: run() stops them
        self._parts = _parts(ctx, budgets, self._relay.next_send)
        listed_budgets, version_read = ctx.kube.list_budgets()
        budgets.start(listed_budgets, version_read)
        if self._pace_from is not None:  # the forecast, from what was listed: no reads again
            ctx.pace = self._pace_from(pod_list, listed_budgets) or ctx.pace
        parts = self._parts
        parts.following.tracker.start(pod_list, version)
        self._guard.watch()
        decisions = [filters.decide(p, ctx.options.filters) for p in pod_list]
        acting = [d.pod for d in decisions if d.action != Action.SKIP]
        self._volumes.note(acting)  # before the first eviction
        _say_started(ctx, len(decisions), acting, source)
        now = ctx.clock()
        with ctx.cond:
            for decision in decisions:
                parts.following.admit(decision, now, appeared=False)
        parts.following.warn(decisions)
        return parts

    # -- the loop -------------------------------------------------------------

    def _evict_all(self, parts: _Parts, limit: float) -> bool:
        """Evict until every pod is gone or stuck and a fresh list agrees (True), the
        limit passes or the drain fails (False)."""
        workers = max(1, self.ctx.options.concurrency)
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evict")
        sent: list[Future[None]] = []
        try:
            while True:
                step = self._step(parts, limit)
                if step.over:
                    return False
                if step.recordon:
                    self._guard.recordon()
                if step.check_name:
                    parts.following.admit_unchecked(self._guard.name_taken)
                if step.force:
                    parts.force.early(step.force)
                if step.verify and parts.following.verify():
                    return True
                if step.verify and self.ctx.clock() >= limit:
                    return False
                sent = [f for f in sent if not f.done()]
                sent.extend(pool.submit(parts.evictions.send, entry) for entry in step.send)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            # Requests already sent get their answers (bounded) before the drain ends:
            # an eviction accepted meanwhile counts in the report and the node's record,
            # and no line about it comes after the verdict.
            wait(sent, timeout=IN_FLIGHT_WAIT)

    def _step(self, parts: _Parts, limit: float) -> Step:
        """One turn: take in what changed, then decide what to send, or wait. While it
        waits with an eviction in flight, the loop lends its turn to the worker whose
        answer comes first (relay.py): what that turn decided comes first here."""
        ctx, guard, relay = self.ctx, self._guard, self._relay

        def turn() -> Step | None:
            return _turn(ctx, guard, parts, limit)

        with ctx.cond:
            try:
                while (step := relay.take() or turn()) is None:
                    relay.waiting(turn if parts.schedule.in_flight() else None)
                    self._idle(parts, limit)
                    relay.waiting(None)
                return step
            finally:
                relay.waiting(None)  # the loop is gone: no worker takes its turn

    def _idle(self, parts: _Parts, limit: float) -> None:
        """Wait for a change, or the next timer (hold the lock)."""

        def wake() -> float:
            now = self.ctx.clock()
            timers = [parts.schedule.next_wake(now), parts.following.next_wake(now)]
            timers += [parts.force.next_at(), self._guard.next_recordon()]
            return min([limit, *(t for t in timers if t is not None)])

        busy = bool(parts.schedule.in_flight())
        self.ctx.waits.wait(self.ctx.cond, wake, busy)

    # -- the end --------------------------------------------------------------

    def _not_drained(self, parts: _Parts, deadline: float) -> None:
        """The limit passed with pods on the node: hand over, or time out and say why."""
        ctx, report = self.ctx, self.report
        with ctx.cond:
            left = parts.schedule.left()
            still = parts.schedule.open()
        report.remaining = sorted(left)
        report.left = left
        if ctx.interrupted:
            report.outcome = Outcome.INTERRUPTED
            report.stopped_by = ctx.interrupted
            self._guard.record_end(Outcome.INTERRUPTED)
            return
        if ctx.clock() < deadline:
            report.outcome = Outcome.HANDED_OVER
            return
        report.outcome = Outcome.TIMED_OUT
        _say_left(ctx, still, left)
        # INFO: whoever ran the drain says the timeout, with what it does about it (the
        # Lambda's end, with TIMEOUT_POLICY; the CLI's verdict), once, as a warning.
        log.info("drain of %s timed out: %s", ctx.node, report.timeout_message())
        if ctx.options.force_on_timeout:
            self._force_left(parts, still)
        self._guard.record_end(Outcome.TIMED_OUT)

    def _force_left(self, parts: _Parts, still: list[Entry]) -> None:
        """TIMEOUT_POLICY=force at the deadline: delete what is left, bypassing budgets
        (force.py); then wait, briefly, for the deleted pods to go."""
        ctx = self.ctx
        if not parts.force.at_deadline(still):
            return  # a fatal error
        until = ctx.clock() + ctx.options.force_grace_period_seconds + 5
        with ctx.cond:
            while not ctx.over() and parts.schedule.open() and ctx.clock() < until:
                _absorb(ctx, self._guard, parts, ctx.clock())
                self._idle(parts, until)
            left = parts.schedule.left()
        self.report.remaining = sorted(left)  # `left` keeps what the deadline found

    def _left_behind(self, parts: _Parts) -> None:
        """The node was replaced or released mid-drain: what this drain had not seen
        go, it leaves (the old machine's pods went with its node object)."""
        with self.ctx.cond:
            left = parts.schedule.left()
        self.report.remaining = sorted(left)
        self.report.left = left


def _parts(ctx: DrainContext, budgets: BudgetTracker, then: Callable[[], Entry | None]) -> _Parts:
    schedule = Schedule(
        budgets, deadline=ctx.deadline, reserve=ctx.options.critical_reserve_seconds
    )
    following = Following(ctx, schedule, budgets)
    return _Parts(
        budgets=budgets,
        schedule=schedule,
        following=following,
        evictions=Evictions(ctx, schedule, budgets, following.tracker, following.mark, then),
        force=ForcePolicy(ctx, schedule, look_again=following.mark),
    )


def _turn(ctx: DrainContext, guard: NodeGuard, parts: _Parts, limit: float) -> Step | None:
    """Take in what changed, then decide what to send (hold the lock); None when
    there is nothing to do until a change or a timer."""
    schedule = parts.schedule
    if ctx.over():
        return Step(over=True)
    now = ctx.clock()
    recordon = _absorb(ctx, guard, parts, now)
    if ctx.over():
        return Step(over=True)
    if parts.following.unchecked:
        return Step(check_name=True, recordon=recordon)
    if parts.following.list_due(now):
        return Step(verify=True, recordon=recordon)
    if now >= limit:
        return Step(over=True)
    forcing = parts.force.due(now)
    if forcing:
        return Step(force=forcing, recordon=recordon)
    why = schedule.start_critical(now)
    if why:
        ctx.emit(Kind.CRITICAL_TIER, tier="critical", reason=why)
    send = schedule.pick(now, ctx.options.concurrency - schedule.in_flight())
    for entry in send:
        if entry.attempts == 1:
            ctx.emit(Kind.EVICTING, pod=entry.name, tier=entry.tier)
    if send or recordon:
        return Step(send=send, recordon=recordon)
    return None


def _absorb(ctx: DrainContext, guard: NodeGuard, parts: _Parts, now: float) -> bool:
    """Bring the drain up to date with the watches (hold the lock): a fatal watch
    error, the node replaced, then the pods (following.py). True when the node
    needs cordoning again."""
    for tracker in (parts.following.tracker, parts.budgets, guard.tracker):
        if tracker is not None and isinstance(tracker.error, FatalKubeError):
            ctx.fail(tracker.error)
    # before the pods: those on a new node are not ours, and a released node is let be
    if guard.replacement() or guard.released():
        return False
    parts.following.absorb(now)
    return guard.uncordoned()


def _say_started(ctx: DrainContext, listed: int, acting: list[Pod], source: str) -> None:
    critical = sum(1 for p in acting if pods.is_critical(p))
    ctx.emit(
        Kind.STARTED,
        details={
            "node": ctx.node,
            "deadline": datetime.fromtimestamp(ctx.deadline, UTC).isoformat(timespec="seconds"),
            "deadline_source": source or "drain timeout",
            "ordinary": len(acting) - critical,
            "critical": critical,
            "skipped": listed - len(acting),
        },
    )


def _say_left(ctx: DrainContext, still: list[Entry], left: dict[str, str]) -> None:
    """The deadline passed: each pod left, and why."""
    for entry in still:
        ctx.emit(
            Kind.LEFT,
            pod=entry.name,
            uid=entry.uid,
            budget=entry.budget,
            reason=left[entry.name],
            refusals=entry.refusals,
            tier=entry.tier,
        )
