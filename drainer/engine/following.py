"""The pods a drain follows, from the first list to their end on the node.

Each pod is taken in once (`admit`): skipped (the filters), waited for (already
terminating), held (do-not-disrupt), or put in the schedule to evict. A pod that
lands on the node mid-drain waits for one GET of the node first: the node's name
may be another node object's now. Then the pod watch tells what happens to each:
gone, deleted by someone else (waited for like ours), or stuck terminating past its
grace period. "Drained" waits for a fresh list to agree (`verify`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from drainer.engine import filters, pods
from drainer.engine.context import DrainContext
from drainer.engine.filters import Action, Decision
from drainer.engine.pods import Pod
from drainer.engine.report import Kind
from drainer.engine.schedule import OPEN, Entry, Schedule, State
from drainer.engine.watchers import BudgetTracker, PodTracker
from drainer.errors import FatalKubeError, KubeError, KubeTooManyRequests

# The drain's logger: its name is part of every line (the CLI prints it).
log = logging.getLogger("drainer.engine.drain")

_LEAVING = (OPEN - {State.TODO}) | {State.STUCK}
"""A pod's states on its way out (its eviction sent or accepted, terminating, stuck),
whose updates change nothing the loop does at once."""

PodId = tuple[str, str, str]
"""namespace, name, uid."""


def _id(pod: Pod) -> PodId:
    return (*pods.key(pod), pods.uid(pod))


class Following:
    """The pods on the node, as the drain knows them: those taken in (skipped ones
    too), those new and not yet checked, those a fresh list says are gone, those to
    look at again, and when the next terminating pod may be stuck."""

    def __init__(self, ctx: DrainContext, schedule: Schedule, budgets: BudgetTracker) -> None:
        self.ctx = ctx
        self.schedule = schedule
        self.budgets = budgets
        self.tracker = PodTracker(
            ctx.kube,
            ctx.node,
            ctx.options.pod_selector,
            leaving=self._leaving,
            watch_timeout=ctx.options.watch_timeout_seconds,
            cond=ctx.cond,
        )
        self._decided: set[PodId] = set()  # every pod taken in, skipped ones too
        self._unchecked: dict[PodId, Pod] = {}  # new pods, admitted once the node is still ours
        self._listed_gone: set[PodId] = set()
        self._dirty: set[tuple[str, str]] = set()  # pods to look at again, beyond the watch's
        self._stuck_check_at = float("inf")  # when the next terminating pod may be stuck
        self._list_failures = 0  # verifying lists failed in a row
        self._list_at = 0.0  # a verifying list failed: no list before this (Retry-After)
        self._list_wanted = False  # a list now: the watch may have lost a pod's end

    def _leaving(self, key: tuple[str, str], uid: str) -> bool:
        """The pod's eviction is sent or accepted, or it is terminating or stuck: an
        update of it can wait for the loop's next turn (hold the lock)."""
        entries = self.schedule.named(key)
        return any(e.uid == uid for e in entries) and all(e.state in _LEAVING for e in entries)

    @property
    def unchecked(self) -> bool:
        """Pods new to the drain wait for a GET of the node (hold the lock)."""
        return bool(self._unchecked)

    def mark(self, pod: Pod) -> None:
        """Look at `pod` again at the loop's next turn (hold the lock)."""
        self._dirty.add(pods.key(pod))

    def next_wake(self, now: float) -> float | None:
        """When the next terminating pod would be stuck, or a verifying list that
        failed may be made again, whichever is first (hold the lock)."""
        at = min(self._stuck_check_at, self._list_at if self._list_at > now else float("inf"))
        return at if at != float("inf") else None

    def list_due(self, now: float) -> bool:
        """A fresh list is due (`verify`): every pod is gone or stuck, or the watch may
        have lost a pod's end; and no list failed, or its pause is over (hold the lock)."""
        return (self.schedule.settled() or self._list_wanted) and now >= self._list_at

    # -- taking pods in -------------------------------------------------------

    def admit(self, decision: Decision, now: float, *, appeared: bool) -> None:
        """Take a listed pod into the drain: skip it, wait for it, or evict it (hold the lock)."""
        ctx, report, name = self.ctx, self.ctx.report, decision.name
        self._decided.add(_id(decision.pod))
        if decision.action == Action.SKIP:
            if name not in report.skipped:
                report.skipped[name] = decision.reason
                ctx.emit(Kind.SKIPPED, pod=name, reason=decision.reason)
            return
        if appeared and decision.action == Action.EVICT and _comes_back(decision.pod):
            # The scheduler put it here despite the cordon, and its controller would
            # put the next one here too: evicting it starts a storm of evictions,
            # each leaving the workload a replica short, and never ends.
            report.tolerating.append(name)
            ctx.emit(
                Kind.TOLERATING,
                pod=name,
                reason="it tolerates the cordon (node.kubernetes.io/unschedulable) and its "
                "controller would put a replacement right back; it goes with the node",
            )
            return
        terminating = decision.action == Action.WAIT
        entry = self.schedule.add(
            decision.pod,
            budgets=self.budgets.matching(decision.pod),
            terminating=terminating,
            now=now,
        )
        report.already_terminating += terminating
        if not terminating:
            self._hold_if_opted_out(entry)
        if appeared:
            report.appeared.append(name)
            ctx.emit(Kind.APPEARED, pod=name, tier=entry.tier, reason=decision.reason)

    def _hold_if_opted_out(self, entry: Entry) -> None:
        """A pod annotated not to be disrupted waits for the deadline (or for its
        annotation to go), unless the options say to ignore the annotation."""
        ctx = self.ctx
        annotation = pods.opted_out(entry.pod) if ctx.options.honor_do_not_disrupt else ""
        if entry.opted_out and not annotation:
            self.schedule.release(entry, ctx.clock())
            ctx.emit(Kind.RELEASED, pod=entry.name, reason="its do-not-disrupt annotation is gone")
        elif annotation and not entry.opted_out and entry.state is State.TODO:
            why = f"annotated {annotation}=true: not evicted while there is time"
            self.schedule.hold(entry, why)
            ctx.report.do_not_disrupt[entry.name] = annotation
            ctx.emit(Kind.HELD, pod=entry.name, uid=entry.uid, reason=why, tier=entry.tier)

    def warn(self, decisions: list[Decision]) -> None:
        """The filters' warnings, each pod named once."""
        for message, names in filters.warnings_by_message(decisions).items():
            known = self.ctx.report.warnings.setdefault(message, [])
            new = [n for n in names if n not in known]
            if new:
                known.extend(new)
                # `in_report`: a display that prints report.warnings need not print this too.
                log.warning("%s: %s", message, ", ".join(new), extra={"in_report": True})

    def take_in(self, listed: list[Pod]) -> None:
        """Note the pods of `listed` the drain has not seen yet, to admit (hold the lock)."""
        if self.ctx.replaced:
            return
        for pod in listed:
            key = _id(pod)
            if key not in self._decided:
                # A pod bound after the drain began may be a new node's of the same
                # name (the node watch can lag the pod watch): it waits for one GET
                # of the node, made outside the lock (admit_unchecked).
                self._unchecked[key] = pod

    def admit_unchecked(self, name_taken: Callable[[], bool]) -> None:
        """Admit the pods new to the drain once the node's name is still its own
        (`name_taken`: one GET, outside the lock)."""
        if name_taken():
            return  # replaced: the loop ends the drain at its next turn
        ctx = self.ctx
        with ctx.cond:
            decisions = [filters.decide(p, ctx.options.filters) for p in self._unchecked.values()]
            self._unchecked.clear()
            now = ctx.clock()
            for decision in decisions:
                self.admit(decision, now, appeared=True)
                self.mark(decision.pod)  # gone meanwhile? look again
            self.warn(decisions)

    # -- following them -------------------------------------------------------

    def absorb(self, now: float) -> None:
        """Bring the schedule up to date with the pod watch (hold the lock): pods
        gone, stuck, deleted by someone else, or new on the node. Only the pods that
        changed are looked at, and the terminating ones when one may have become stuck."""
        changed = self.tracker.take_changed() | self._dirty
        self._dirty = set()
        if now >= self._stuck_check_at:
            self._stuck_check_at = float("inf")
            changed |= {pods.key(e.pod) for e in self.schedule.open() if e.due is not None}
        for key in changed:
            for entry in self.schedule.named(key):
                if entry.state in OPEN and entry.state is not State.IN_FLIGHT:
                    self._follow(entry, now)  # in flight: its answer tells first
            pod = self.tracker.get(key)
            if pod is not None:
                self.take_in([pod])

    def _follow(self, entry: Entry, now: float) -> None:
        current = self.tracker.current(entry.pod)  # None: gone (kubectl's test, watchers.py)
        if current is None or (self._listed_gone and _id(entry.pod) in self._listed_gone):
            evicted = entry.state is State.EVICTED
            self.schedule.gone(entry)
            self.ctx.report.forget_several_budgets(entry.name)  # gone all the same
            seconds = now - entry.since if entry.since is not None else None
            if evicted and seconds is not None:
                self._stopped(entry, seconds)
            self.ctx.emit(Kind.GONE, pod=entry.name, seconds=seconds, tier=entry.tier)
            return
        if current is not entry.pod:
            entry.pod = current
            deadline = pods.deletion_deadline(current)
            if deadline is None:  # not going (yet): an evicted pod keeps the due time
                self._hold_if_opted_out(entry)  # its eviction gave it (Schedule.accepted)
            else:
                entry.due = deadline
        due = entry.due
        if due is None:
            return
        left_to_namespace = entry.with_namespace and entry.state is State.TERMINATING
        if left_to_namespace and pods.deletion_deadline(entry.pod) is None:
            self._not_deleted_yet(entry, now, due)
            return
        if entry.state is State.TODO:  # deleted by someone else: wait for it like ours
            self.schedule.going(entry, now, "deleted by someone else")
        stuck_at = due + self.ctx.options.stuck_pod_seconds
        if now < stuck_at:
            self._stuck_check_at = min(self._stuck_check_at, stuck_at)
        elif entry.state in (State.EVICTED, State.TERMINATING):
            self._stuck(entry, now - due)

    def _not_deleted_yet(self, entry: Entry, now: float, due: float) -> None:
        """A pod left to its terminating namespace with no deletionTimestamp is not
        terminating, so never stuck: at its due time it is evicted again after a few
        seconds (the 403 again: every few seconds, evictions.py), until the watch
        shows it deleted and the stuck clock runs from that. A fresh list looks first,
        should the watch have lost its end."""
        if now < due:
            self._stuck_check_at = min(self._stuck_check_at, due)
            return
        self.schedule.not_deleted_yet(entry, now + self.ctx.options.namespace_retry)
        self._list_wanted = True

    def _stopped(self, entry: Entry, seconds: float) -> None:
        """An evicted pod is gone: its stop, for its owner's observed time (the report's)."""
        owner = pods.workload(entry.pod)
        if owner is not None:
            self.ctx.report.stopped.append((owner, seconds))

    def _stuck(self, entry: Entry, late: float) -> None:
        self.schedule.stuck(entry)
        self.ctx.report.stuck.append(entry.name)
        finalizers = entry.pod["metadata"].get("finalizers") or []
        self.ctx.emit(
            Kind.STUCK,
            pod=entry.name,
            uid=entry.uid,
            seconds=late,
            reason=f"still terminating {late:.0f} s past its grace period"
            + (f" (finalizers {', '.join(finalizers)})" if finalizers else ""),
            tier=entry.tier,
        )

    def verify(self) -> bool:
        """Every pod is gone or stuck: a fresh list must agree before "drained". Made
        mid-drain too, when the watch may have lost a pod's end (`_not_deleted_yet`):
        False then, and the pods it shows gone are followed to their end. A list that
        failed through its call's retries (an outage, a 5xx, a throttling 429) is no
        verdict: False, and the loop lists again after a pause (`list_due`: the
        server's Retry-After, else a growing backoff), until its limit; a fatal error
        is raised."""
        ctx = self.ctx
        try:
            pod_list, _ = ctx.kube.list_pods_on_node(ctx.node, ctx.options.pod_selector)
        except FatalKubeError:
            raise
        except KubeError as e:
            self._list_failed(e)
            return False
        with ctx.cond:
            self._list_failures, self._list_at, self._list_wanted = 0, 0.0, False
            listed = {_id(p) for p in pod_list}
            for entry in self.schedule.open():
                if _id(entry.pod) not in listed:
                    self._listed_gone.add(_id(entry.pod))  # the list is newer than the watch
                    self.mark(entry.pod)
            for entry in self.schedule:
                if entry.state is State.STUCK and _id(entry.pod) not in listed:
                    self._gone_not_stuck(entry)
            self.take_in(pod_list)
            return not self._unchecked and self.schedule.settled()

    def _list_failed(self, error: KubeError) -> None:
        """No verifying list before the server's Retry-After, or a growing backoff."""
        ctx = self.ctx
        retry_after = error.retry_after if isinstance(error, KubeTooManyRequests) else None
        delay = ctx.options.retry.delay(self._list_failures, ctx.rng, retry_after)
        level = logging.DEBUG if error.said else logging.WARNING  # the client said it
        log.log(level, "listing the node's pods failed (%s); listing again in %.1f s", error, delay)
        with ctx.cond:
            self._list_failures += 1
            self._list_at = ctx.clock() + delay

    def _gone_not_stuck(self, entry: Entry) -> None:
        """A pod called stuck from the watch's view that a fresh list shows gone (its
        events were lost): gone, and no longer in the report's stuck pods."""
        self.schedule.gone(entry)
        self.ctx.report.forget_several_budgets(entry.name)
        if entry.name in self.ctx.report.stuck:
            self.ctx.report.stuck.remove(entry.name)
        self.ctx.emit(Kind.GONE, pod=entry.name, seconds=None, tier=entry.tier)


def _comes_back(pod: Pod) -> bool:
    """A pod whose replacement would land on this node again: it tolerates the
    cordon's taint and a controller recreates it (the first time the drain saw the
    node, such a pod is evicted once, as kubectl drain does)."""
    return pods.tolerates_cordon(pod) and pods.controller(pod) is not None
