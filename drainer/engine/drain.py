"""The drain engine: cordon, evict, watch the node until nothing is left, volumes.

It knows nothing of AWS: it gets a Kube client, a node name and two deadlines (the
drain's own, and the moment this invocation must hand over), and answers with a
DrainReport. Every step is safe to repeat, because events are delivered at least
once and a drain may span several Lambda invocations.

One loop decides, a small pool sends. The loop wakes on every change the watches
see (pods on the node, the node itself, budgets) and on every eviction answer, asks
the schedule (drainer/engine/schedule.py) which pods to send now, and hands them to the
pool; a pod waiting for its budget holds no thread. The drain owns the node until
the end: an uncordon is undone, pods that land on it are evicted like the others,
and "drained" means a fresh list shows nothing left to evict.

Beside it: one eviction and what its answer means (drainer/engine/evictions.py),
TIMEOUT_POLICY=force's deletion of the pods left (force.py), and the wait for the
volumes to detach (volumes.py).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from drainer import logs
from drainer.engine import filters, pods
from drainer.engine.dryrun import dry_run
from drainer.engine.evictions import Evictions
from drainer.engine.filters import Action, Decision
from drainer.engine.force import delete_left
from drainer.engine.options import DrainOptions
from drainer.engine.pods import Pod
from drainer.engine.report import DrainEvent, DrainReport, Kind, PodAddress, describe
from drainer.engine.schedule import OPEN, Entry, Schedule, State
from drainer.engine.volumes import attachments_on, volumes_of, wait_for_detach
from drainer.engine.watchers import BudgetTracker, NodeTracker, PodTracker
from drainer.errors import FatalKubeError, KubeError, KubeNotFound
from drainer.k8s.cordon import PROGRESS_ANNOTATION, cordon_patch, progress_value
from drainer.k8s.kube import Kube
from drainer.outcome import Outcome

log = logging.getLogger(__name__)

MAX_WAIT = 0.25
"""The longest the loop waits in one go. A Python signal handler (the CLI's Ctrl-C)
runs when the main thread's wait ends, and the kernel may hand SIGINT to any thread:
without a short wait, Ctrl-C would be seen only at the next timer."""

IN_FLIGHT_WAIT = 5.0
"""How long a drain that ends early (a fatal error, an interruption, the hand-over
moment) waits for the answers to eviction requests already sent."""


class Waits(Protocol):
    """How the drain waits, injected: for real (RealWaits), or on a test's clock."""

    def now(self) -> float:
        """Epoch seconds."""
        ...

    def wait(
        self, cond: threading.Condition, until: Callable[[], float], busy: bool = False
    ) -> None:
        """Wait on `cond` (held) for a change, or until the time `until()` gives;
        `busy`: requests are in flight, whose answers will come."""
        ...


@dataclass(frozen=True)
class RealWaits:
    """Waits in real time on `clock`, never longer than MAX_WAIT in one go."""

    clock: Callable[[], float] = time.time

    def now(self) -> float:
        return self.clock()

    def wait(
        self, cond: threading.Condition, until: Callable[[], float], busy: bool = False
    ) -> None:
        cond.wait(max(0.01, min(until() - self.clock(), MAX_WAIT)))


FORCE_REQUEST_SECONDS = 1.0
"""TIMEOUT_POLICY=force deletes a held pod this long before its grace would have to
start, so that the whole grace fits before the deadline."""
FORCE_RETRY_SECONDS = 2.0
"""After an early deletion failed (not fatally): the pause before it is tried again."""


@dataclass
class _Step:
    """What one turn of the loop decided, to be done outside the lock."""

    send: list[Entry] = field(default_factory=list)
    force: list[Entry] = field(default_factory=list)
    """TIMEOUT_POLICY=force: pods whose time to be deleted with their grace has come."""
    recordon: bool = False
    verify: bool = False
    over: bool = False
    check_name: bool = False
    """Pods new to the drain wait for one GET of the node (outside the lock): whose is
    the node's name now?"""


class Drain:
    def __init__(
        self,
        kube: Kube,
        node: str,
        options: DrainOptions | None = None,
        *,
        waits: Waits | None = None,
        on_event: Callable[[DrainEvent], None] | None = None,
        rng: random.Random | None = None,
        node_uid: str = "",
    ) -> None:
        """`waits`: the clock the drain reads and waits on (real time by default).
        `node_uid`: the node object the caller found (empty: the one cordon() reads).
        The drain is of that object: a node registered later under the same name is
        another machine, never cordoned, drained or recorded on by this drain."""
        self.kube = kube
        self.node = node
        self.node_uid = node_uid
        self.replaced_by = ""  # the UID of the node that took this one's name mid-drain
        self.options = options or DrainOptions()
        self._waits = waits or RealWaits()
        self.clock = self._waits.now
        self._on_event = on_event
        self._rng = rng or random.Random()  # noqa: S311 - jitter
        self._cond = threading.Condition()
        self._fatal: FatalKubeError | None = None
        self.interrupted = ""  # why interrupt() stopped the drain
        self._added: frozenset[str] = frozenset()  # what cordon() changed on the node
        self._pods: PodTracker | None = None
        self._budgets: BudgetTracker | None = None
        self._node: NodeTracker | None = None
        self._schedule: Schedule | None = None
        self._attached_before: dict[str, str] = {}  # VolumeAttachments on the node at the start
        self._evictions: Evictions | None = None  # sends the evictions, takes their answers
        self._listed_gone: set[tuple[str, str, str]] = set()
        self._decided: set[tuple[str, str, str]] = set()  # every pod taken in, skipped ones too
        self._recordoned_at = ""  # the node version an uncordon was last undone from
        self._dirty: set[tuple[str, str]] = set()  # pods to look at again, beyond the watch's
        # Pods new to the drain, admitted once a GET says the node's name is still ours.
        self._unchecked: dict[tuple[str, str, str], Pod] = {}
        self._cordoned: dict[str, Any] | None = None  # the node as the cordon left it
        self._stuck_check_at = float("inf")  # when the next terminating pod may be stuck
        self._deadline = float("inf")  # the drain's deadline, once it runs
        self.report = DrainReport(node)

    # -- public ---------------------------------------------------------------

    def run(
        self, deadline: float, stop_at: float | None = None, *, deadline_source: str = ""
    ) -> DrainReport:
        """Drain until done, until `deadline` (the drain's own, epoch seconds) or until
        `stop_at` (this invocation's hand-over moment). A fatal error (RBAC, TLS, a
        refused token) ends it at once with outcome FAILED and `stopped_by`; other
        API errors before the first eviction (cordon, list) are raised, to retry."""
        started = self.clock()
        requests_before = self.kube.requests
        limit = min(deadline, stop_at) if stop_at is not None else deadline
        try:
            self._run(deadline, limit, deadline_source)
        except FatalKubeError as e:
            self._fail(e)
        finally:
            for follower in (self._pods, self._budgets, self._node):
                if follower is not None:
                    follower.stop()
            self.report.seconds = self.clock() - started
            self.report.requests = self.kube.requests - requests_before
            self.report.addresses = {
                e.name: PodAddress(address, pods.grace_period(e.pod))
                for e in self._schedule or ()
                if (address := pods.ip(e.pod))
            }
        if self._fatal is not None:
            self.report.outcome = Outcome.FAILED
            self.report.stopped_by = str(self._fatal)
            self._emit(Kind.STOPPED, reason=str(self._fatal))
            if self.report.cordoned:
                self._record(Outcome.FAILED)  # may be refused too: then a log line says so
        return self.report

    def cordon(self, deadline: float | None = None) -> bool:
        """Cordon, exclude from load balancers, record progress and what the drainer
        added (for `release`), and for a drain begun by a spot event what began it and
        its deadline; False if the node is gone."""
        trigger = self.options.trigger
        try:
            node = self.kube.get_node(self.node)
            if node is None:
                raise KubeNotFound(f"node {self.node} not found", 404)
            uid = str(node["metadata"].get("uid") or "")
            if self.node_uid and uid != self.node_uid:
                self._replaced(uid)
                return False
            self.node_uid = uid
            until = deadline if trigger else None
            patch, self._added = cordon_patch(node, self.clock(), trigger=trigger, until=until)
            if self.options.dry_run and not self.options.dry_run_server:
                self._cordoned = node  # a dry run on the client sends no write
            else:
                self._cordoned = self._patch_node(patch, dry_run=self.options.dry_run)
        except KubeNotFound:
            log.info("node %s is gone; nothing to drain", self.node)
            return False
        self.report.cordoned = not self.options.dry_run
        self._emit(Kind.CORDONED, reason="dry run" if self.options.dry_run else "")
        return True

    def interrupt(self, reason: str) -> None:
        """Stop at once, from any thread or a signal handler (a person's Ctrl-C): no
        new eviction is sent, and run() returns with outcome INTERRUPTED and the pods
        left. The node stays cordoned; `release` undoes that.

        It takes no lock: a signal handler runs in the main thread, which may hold a
        lock (a display's, a log handler's) that a thread holding the drain's lock is
        waiting for. The loop sees the flag within MAX_WAIT."""
        if not self.interrupted:
            self.interrupted = reason

    def waiting(self) -> dict[str, str]:
        """The pods the drain still waits for, and why, now (for a status display)."""
        with self._cond:
            return self._schedule.left() if self._schedule is not None else {}

    def _over(self) -> bool:
        return self._fatal is not None or bool(self.interrupted) or bool(self.replaced_by)

    def _patch_node(self, patch: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """Write to the node this drain is of, and to no other: the patch carries the
        node's UID, which the API server refuses to change (a node of the same name
        registered since answers 409 or 422, never takes the write)."""
        if self.node_uid:
            patch = {**patch, "metadata": {**patch.get("metadata", {}), "uid": self.node_uid}}
        try:
            return self.kube.patch_node(self.node, patch, dry_run=dry_run)
        except KubeError as e:
            if e.status in (409, 422) and self._name_taken():
                raise KubeNotFound(f"node {self.node} was replaced", 404) from e
            raise

    def _name_taken(self) -> bool:
        """Whether the node's name now belongs to another node object (one GET)."""
        try:
            current = self.kube.get_node(self.node)
        except KubeError:
            return False
        uid = str(((current or {}).get("metadata") or {}).get("uid") or "")
        if current is not None and uid and uid != self.node_uid:
            self._replaced(uid)
            return True
        return False

    def _replaced(self, uid: str) -> None:
        """Another node object took this node's name: this drain ends, touching it not."""
        if self.replaced_by:
            return
        self.replaced_by = uid
        self.report.outcome = Outcome.NO_NODE
        self.report.stopped_by = (
            f"node {self.node} was replaced: a new node object of the same name "
            f"(uid {uid}) registered in place of the one being drained "
            f"(uid {self.node_uid or 'unknown'}); it is another machine, left alone"
        )
        self._emit(Kind.STOPPED, reason=self.report.stopped_by)

    # -- the drain ------------------------------------------------------------

    def _run(self, deadline: float, limit: float, deadline_source: str) -> None:
        if not self.cordon(deadline):
            self.report.outcome = Outcome.NO_NODE
            return
        pod_list, version = self.kube.list_pods_on_node(self.node, self.options.pod_selector)
        if self.options.dry_run:
            dry_run(self.kube, pod_list, self.options, self.report, self._emit)
            return
        self._start(pod_list, version, deadline, deadline_source)
        if not self._evict_all(limit):
            if self.replaced_by:
                self._left_behind()
            elif self._fatal is None:
                self._not_drained(deadline)
            return
        self._wait_for_volume_detach(limit)
        if self.interrupted:
            self._not_drained(deadline)
            return
        if self.report.forced:  # gone because the deadline's policy deleted them
            self.report.outcome = Outcome.TIMED_OUT
            self._record(Outcome.TIMED_OUT)
            return
        self._record(Outcome.DRAINED)

    def _start(self, pod_list: list[Pod], version: str, deadline: float, source: str) -> None:
        self._deadline = deadline
        self._watch(pod_list, version)
        assert self._budgets is not None
        self._schedule = Schedule(
            self._budgets, deadline=deadline, reserve=self.options.critical_reserve_seconds
        )
        self._evictions = Evictions(
            kube=self.kube,
            schedule=self._schedule,
            budgets=self._budgets,
            report=self.report,
            cond=self._cond,
            emit=self._emit,
            options=self.options,
            clock=self.clock,
            rng=self._rng,
            deadline=deadline,
            stopped=self._over,
            fail=self._fail,
        )
        decisions = [filters.decide(p, self.options.filters) for p in pod_list]
        acting = [d.pod for d in decisions if d.action != Action.SKIP]
        critical = sum(1 for p in acting if pods.is_critical(p))
        if self.options.volume_detach_timeout > 0 and any(pods.claim_names(p) for p in acting):
            try:  # before the first eviction: a volume may detach before the wait for it
                self._attached_before = attachments_on(self.kube, self.node)
            except KubeError as e:  # then only what detaches during the wait is counted
                log.debug("could not list the volume attachments of %s: %s", self.node, e)
        self._emit(
            Kind.STARTED,
            details={
                "node": self.node,
                "deadline": datetime.fromtimestamp(deadline, UTC).isoformat(timespec="seconds"),
                "deadline_source": source or "drain timeout",
                "ordinary": len(acting) - critical,
                "critical": critical,
                "skipped": len(decisions) - len(acting),
            },
        )
        now = self.clock()
        with self._cond:
            for decision in decisions:
                self._admit(decision, now, appeared=False)
        self._warn(decisions)

    def _watch(self, pod_list: list[Pod], version: str) -> None:
        """Start the watches: budgets, the pods on the node (from the first list), the node."""
        timeout = self.options.watch_timeout_seconds
        self._budgets = BudgetTracker(self.kube, watch_timeout=timeout, cond=self._cond)
        self._budgets.start(*self.kube.list_budgets())
        self._pods = PodTracker(
            self.kube,
            self.node,
            self.options.pod_selector,
            watch_timeout=timeout,
            cond=self._cond,
        )
        self._pods.start(pod_list, version)
        self._node = NodeTracker(self.kube, self.node, watch_timeout=timeout, cond=self._cond)
        if self._cordoned:  # from the node the cordon wrote: replaced() knows it at once
            version = str(self._cordoned.get("metadata", {}).get("resourceVersion", ""))
            self._node.start([self._cordoned], version)
        else:
            self._node.start()

    def _admit(self, decision: Decision, now: float, *, appeared: bool) -> None:
        """Take a listed pod into the drain: skip it, wait for it, or evict it (hold the lock)."""
        assert self._schedule is not None and self._budgets is not None
        name = decision.name
        self._decided.add((*pods.key(decision.pod), pods.uid(decision.pod)))
        if decision.action == Action.SKIP:
            if name not in self.report.skipped:
                self.report.skipped[name] = decision.reason
                self._emit(Kind.SKIPPED, pod=name, reason=decision.reason)
            return
        if appeared and decision.action == Action.EVICT and _comes_back(decision.pod):
            # The scheduler put it here despite the cordon, and its controller would
            # put the next one here too: evicting it starts a storm of evictions,
            # each leaving the workload a replica short, and never ends.
            self.report.tolerating.append(name)
            self._emit(
                Kind.TOLERATING,
                pod=name,
                reason="it tolerates the cordon (node.kubernetes.io/unschedulable) and its "
                "controller would put a replacement right back; it goes with the node",
            )
            return
        terminating = decision.action == Action.WAIT
        entry = self._schedule.add(
            decision.pod,
            budgets=self._budgets.matching(decision.pod),
            terminating=terminating,
            now=now,
        )
        self.report.already_terminating += terminating
        if not terminating:
            self._hold_if_opted_out(entry)
        if appeared:
            self.report.appeared.append(name)
            self._emit(Kind.APPEARED, pod=name, tier=entry.tier, reason=decision.reason)

    def _hold_if_opted_out(self, entry: Entry) -> None:
        """A pod annotated not to be disrupted waits for the deadline (or for its
        annotation to go), unless the options say to ignore the annotation."""
        annotation = pods.opted_out(entry.pod) if self.options.honor_do_not_disrupt else ""
        if entry.opted_out and not annotation:
            self._schedule_of().release(entry, self.clock())
            self._emit(
                Kind.RELEASED, pod=entry.name, reason="its do-not-disrupt annotation is gone"
            )
        elif annotation and not entry.opted_out and entry.state is State.TODO:
            why = f"annotated {annotation}=true: not evicted while there is time"
            self._schedule_of().hold(entry, why)
            self.report.do_not_disrupt[entry.name] = annotation
            self._emit(Kind.HELD, pod=entry.name, uid=entry.uid, reason=why, tier=entry.tier)

    def _schedule_of(self) -> Schedule:
        assert self._schedule is not None
        return self._schedule

    def _warn(self, decisions: list[Decision]) -> None:
        for message, names in filters.warnings_by_message(decisions).items():
            known = self.report.warnings.setdefault(message, [])
            new = [n for n in names if n not in known]
            if new:
                known.extend(new)
                # `in_report`: a display that prints report.warnings need not print this too.
                log.warning("%s: %s", message, ", ".join(new), extra={"in_report": True})

    # -- the loop -------------------------------------------------------------

    def _evict_all(self, limit: float) -> bool:
        """Evict until every pod is gone or stuck and a fresh list agrees (True), the
        limit passes or the drain fails (False)."""
        workers = max(1, self.options.concurrency)
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evict")
        sent: list[Future[None]] = []
        try:
            while True:
                step = self._step(limit)
                if step.over:
                    return False
                if step.recordon:
                    self._recordon()
                if step.check_name:
                    self._admit_unchecked()
                if step.force:
                    self._force_early(step.force)
                if step.verify and self._verify():
                    return True
                sent = [f for f in sent if not f.done()]
                sent.extend(pool.submit(self._send, entry) for entry in step.send)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            # Requests already sent get their answers (bounded) before the drain ends:
            # an eviction accepted meanwhile counts in the report and the node's record,
            # and no line about it comes after the verdict.
            wait(sent, timeout=IN_FLIGHT_WAIT)

    def _step(self, limit: float) -> _Step:
        """One turn: take in what changed, then decide what to send, or wait."""
        schedule = self._schedule
        assert schedule is not None
        with self._cond:
            while True:
                if self._over():
                    return _Step(over=True)
                now = self.clock()
                recordon = self._absorb(now)
                if self._over():
                    return _Step(over=True)
                if self._unchecked:
                    return _Step(check_name=True, recordon=recordon)
                if schedule.settled():
                    return _Step(verify=True, recordon=recordon)
                if now >= limit:
                    return _Step(over=True)
                forcing = self._due_for_force(now)
                if forcing:
                    return _Step(force=forcing, recordon=recordon)
                why = schedule.start_critical(now)
                if why:
                    self.report.critical_early = "deadline" in why
                    self._emit(Kind.CRITICAL_TIER, tier="critical", reason=why)
                send = schedule.pick(now, self.options.concurrency - schedule.in_flight())
                for entry in send:
                    if entry.attempts == 1:
                        self._emit(Kind.EVICTING, pod=entry.name, tier=entry.tier)
                if send or recordon:
                    return _Step(send=send, recordon=recordon)
                self._idle(now, limit)

    def _idle(self, now: float, limit: float) -> None:
        """Wait for a change, or the next timer (hold the lock)."""
        busy = bool(self._schedule_in_flight())
        self._waits.wait(self._cond, lambda: self._wake_time(self.clock(), limit), busy)

    def _schedule_in_flight(self) -> int:
        return self._schedule.in_flight() if self._schedule is not None else 0

    def _wake_time(self, now: float, limit: float) -> float:
        assert self._schedule is not None
        timers = [self._schedule.next_wake(now), self._next_stuck(), self._next_force()]
        return min([limit, *(t for t in timers if t is not None)])

    def _absorb(self, now: float) -> bool:
        """Bring the schedule up to date with the watches (hold the lock): pods gone,
        stuck, deleted by someone else, or new on the node. Only the pods that changed
        are looked at, and the terminating ones when one may have become stuck. True
        when the node needs cordoning again."""
        assert self._pods is not None and self._node is not None and self._schedule is not None
        for tracker in (self._pods, self._budgets, self._node):
            if tracker is not None and isinstance(tracker.error, FatalKubeError):
                self._fail(tracker.error)
        replacement = self._node.replaced(self.node_uid)
        if replacement:  # before the pods: those on the new node are not this drain's
            self._replaced(replacement)
            return False
        changed = self._pods.take_changed() | self._dirty
        self._dirty = set()
        if now >= self._stuck_check_at:
            self._stuck_check_at = float("inf")
            changed |= {pods.key(e.pod) for e in self._schedule.open() if e.due is not None}
        for key in changed:
            for entry in self._schedule.named(key):
                if entry.state in OPEN and entry.state is not State.IN_FLIGHT:
                    self._follow(entry, now)  # in flight: its answer tells first
            pod = self._pods.get(key)
            if pod is not None:
                self._take_in([pod])
        node = self._node.node or {}
        version = str(node.get("metadata", {}).get("resourceVersion", ""))
        return self._node.uncordoned() and version != self._recordoned_at

    def _take_in(self, listed: list[Pod]) -> None:
        """Note the pods of `listed` the drain has not seen yet, to admit (hold the lock)."""
        if self.replaced_by:
            return
        for pod in listed:
            key = (*pods.key(pod), pods.uid(pod))
            if key not in self._decided:
                # A pod bound after the drain began may be a new node's of the same
                # name (the node watch can lag the pod watch): it waits for one GET
                # of the node, made outside the lock (_admit_unchecked).
                self._unchecked[key] = pod

    def _admit_unchecked(self) -> None:
        """Admit the pods new to the drain once the node's name is still its own."""
        if self._name_taken():
            return  # replaced: the loop ends the drain at its next turn
        with self._cond:
            decisions = [filters.decide(p, self.options.filters) for p in self._unchecked.values()]
            self._unchecked.clear()
            now = self.clock()
            for decision in decisions:
                self._admit(decision, now, appeared=True)
                self._dirty.add(pods.key(decision.pod))  # gone meanwhile? look again
            self._warn(decisions)

    def _follow(self, entry: Entry, now: float) -> None:
        assert self._pods is not None and self._schedule is not None
        pod_key = (*pods.key(entry.pod), pods.uid(entry.pod))
        if self._pods.gone(entry.pod) or pod_key in self._listed_gone:
            self._schedule.gone(entry)
            seconds = now - entry.since if entry.since is not None else None
            self._emit(Kind.GONE, pod=entry.name, seconds=seconds, tier=entry.tier)
            return
        current = self._pods.current(entry.pod)
        if current is not None and current is not entry.pod:
            entry.pod = current
            deadline = pods.deletion_deadline(current)
            if deadline is None:  # not going (yet): an evicted pod keeps the due time
                self._hold_if_opted_out(entry)  # its eviction gave it (Schedule.accepted)
            else:
                entry.due = deadline
        due = entry.due
        if due is None:
            return
        if entry.state is State.TODO:  # deleted by someone else: wait for it like ours
            self._schedule.going(entry, now, "deleted by someone else")
        stuck_at = due + self.options.stuck_pod_seconds
        if now < stuck_at:
            self._stuck_check_at = min(self._stuck_check_at, stuck_at)
        elif entry.state in (State.EVICTED, State.TERMINATING):
            self._schedule.stuck(entry)
            self.report.stuck.append(entry.name)
            finalizers = entry.pod["metadata"].get("finalizers") or []
            self._emit(
                Kind.STUCK,
                pod=entry.name,
                uid=entry.uid,
                seconds=now - due,
                reason=f"still terminating {now - due:.0f} s past its grace period"
                + (f" (finalizers {', '.join(finalizers)})" if finalizers else ""),
                tier=entry.tier,
            )

    def _next_stuck(self) -> float | None:
        """When the next terminating pod would be stuck (hold the lock)."""
        return self._stuck_check_at if self._stuck_check_at != float("inf") else None

    def _verify(self) -> bool:
        """Every pod is gone or stuck: a fresh list must agree before "drained"."""
        pod_list, _ = self.kube.list_pods_on_node(self.node, self.options.pod_selector)
        with self._cond:
            assert self._schedule is not None and self._pods is not None
            listed = {(*pods.key(p), pods.uid(p)) for p in pod_list}
            for entry in self._schedule.open():
                key = (*pods.key(entry.pod), pods.uid(entry.pod))
                if key not in listed:
                    self._listed_gone.add(key)  # the list is newer than the watch
                    self._dirty.add(pods.key(entry.pod))
            self._take_in(pod_list)
            return not self._unchecked and self._schedule.settled()

    def _recordon(self) -> None:
        """Someone uncordoned the node mid-drain: cordon it again, and say who did it."""
        with self._cond:
            node = dict(self._node.node or {}) if self._node is not None else {}
            self._recordoned_at = str(node.get("metadata", {}).get("resourceVersion", ""))
        who = _last_writer(node)
        self.report.recordons += 1
        try:
            self._patch_node({"spec": {"unschedulable": True}})
        except KubeNotFound:
            return
        except FatalKubeError as e:
            self._fail(e)
            return
        except KubeError as e:
            log.warning(
                "could not cordon %s again (%s); retrying when the watch sees it", self.node, e
            )
            return
        self._emit(
            Kind.RECORDONED,
            reason=f"the node was uncordoned mid-drain ({who}); cordoned again",
        )

    # -- one eviction ---------------------------------------------------------

    def _send(self, entry: Entry) -> None:
        """One eviction request, and what its answer means for the pod (evictions.py);
        then the loop looks at the pod again (the watch may have seen it change
        meanwhile)."""
        assert self._evictions is not None
        try:
            self._evictions.evict(entry)
        finally:
            with self._cond:
                self._dirty.add(pods.key(entry.pod))
                self._cond.notify_all()

    def _fail(self, error: FatalKubeError) -> None:
        with self._cond:
            if self._fatal is None:
                self._fatal = error  # run() says so, once the watches are stopped
            self._cond.notify_all()

    # -- the end --------------------------------------------------------------

    def _not_drained(self, deadline: float) -> None:
        """The limit passed with pods on the node: hand over, or time out and say why."""
        assert self._schedule is not None
        with self._cond:
            left = self._schedule.left()
            still = self._schedule.open()
        self.report.remaining = sorted(left)
        self.report.left = left
        if self.interrupted:
            self.report.outcome = Outcome.INTERRUPTED
            self.report.stopped_by = self.interrupted
            self._record(Outcome.INTERRUPTED)
            return
        if self.clock() < deadline:
            self.report.outcome = Outcome.HANDED_OVER
            return
        self.report.outcome = Outcome.TIMED_OUT
        for entry in still:
            self._emit(
                Kind.LEFT,
                pod=entry.name,
                uid=entry.uid,
                budget=entry.budget,
                reason=left[entry.name],
                refusals=entry.refusals,
                tier=entry.tier,
            )
        # INFO: whoever ran the drain says the timeout, with what it does about it (the
        # Lambda's end, with TIMEOUT_POLICY; the CLI's verdict), once, as a warning.
        log.info("drain of %s timed out: %s", self.node, self.report.timeout_message())
        if self.options.force_on_timeout:
            self._force(still)
        self._record(Outcome.TIMED_OUT)

    # -- TIMEOUT_POLICY=force: every pod gets its SIGTERM and grace before the deadline --

    def _force_at(self, entry: Entry) -> float:
        """When a pod still held must be deleted so that its grace period ends by the
        deadline: the deadline less its own grace, at most FORCE_GRACE_PERIOD_SECONDS,
        and a second for the request (a grace of 0 is the deadline's own deletion)."""
        grace = self._force_grace(entry)
        at = self._deadline - grace - (FORCE_REQUEST_SECONDS if grace else 0.0)
        return max(at, entry.force_after)

    def _force_grace(self, entry: Entry) -> int:
        own = self.options.grace_period_seconds
        if own is None:
            own = pods.grace_period(entry.pod)
        return max(0, min(own, self.options.force_grace_period_seconds))

    def _forceable(self) -> list[Entry]:
        """The held pods TIMEOUT_POLICY=force may delete: those refused (or parked
        behind a refusal of their budget, or opted out), not one never asked for (its
        budget may allow it after all)."""
        if not self.options.force_on_timeout or self._schedule is None:
            return []
        if self.clock() >= self._deadline:
            return []  # the deadline's own deletion (_force) takes what is left
        return [
            e
            for e in self._schedule.open()
            if e.state is State.TODO and not e.forcing and (e.attempts or e.held)
        ]

    def _due_for_force(self, now: float) -> list[Entry]:
        """The held pods whose deletion cannot wait any longer (hold the lock)."""
        due = [e for e in self._forceable() if self._force_at(e) <= now]
        for entry in due:
            entry.forcing = True
        return due

    def _next_force(self) -> float | None:
        return min((self._force_at(e) for e in self._forceable()), default=None)

    def _force_early(self, entries: list[Entry]) -> None:
        """Delete the pods whose budgets (or opt-out, or a policy) still hold them when
        only their grace period is left before the deadline: each gets SIGTERM and
        that grace, cut to the time left, before the node goes (force.py)."""

        def grace(entry: Entry) -> int:
            left = int(self._deadline - self.clock())
            return max(1, min(self._force_grace(entry), left))

        try:
            deleted = delete_left(self.kube, entries, grace, report=self.report, emit=self._emit)
        except FatalKubeError as e:
            self._fail(e)
            return
        with self._cond:
            assert self._schedule is not None
            for entry in entries:
                if entry not in deleted:  # a failure: tried again shortly, gone or not
                    entry.forcing, entry.force_after = False, self.clock() + FORCE_RETRY_SECONDS
            for entry in deleted:
                why = f"deleted {self._deadline - self.clock():.0f} s before the deadline"
                self._schedule.going(entry, self.clock(), why)
                self._dirty.add(pods.key(entry.pod))

    def _left_behind(self) -> None:
        """The node was replaced mid-drain: what this drain had not seen go, it
        leaves (the old machine's pods went with its node object)."""
        assert self._schedule is not None
        with self._cond:
            left = self._schedule.left()
        self.report.remaining = sorted(left)
        self.report.left = left

    def _force(self, remaining: list[Entry]) -> None:
        """The `force` timeout policy (force.py): delete what is left, bypassing
        budgets; then wait, briefly, for the deleted pods to go."""
        grace = self.options.force_grace_period_seconds
        remaining = [e for e in remaining if not e.forcing]  # deleted early already
        try:
            deleted = delete_left(self.kube, remaining, grace, report=self.report, emit=self._emit)
        except FatalKubeError as e:
            self._fail(e)
            return
        until = self.clock() + grace + 5
        with self._cond:
            assert self._schedule is not None
            for entry in deleted:
                self._schedule.going(entry, self.clock(), "force-deleted")
                self._dirty.add(pods.key(entry.pod))
            while not self._over() and self._schedule.open() and self.clock() < until:
                self._absorb(self.clock())
                self._idle(self.clock(), until)
            left = self._schedule.left()
        self.report.remaining = sorted(left)  # `left` keeps what the deadline found

    def _record(self, phase: Outcome) -> None:
        """The drain's end in the node's progress annotation ("drained", "interrupted",
        "timed_out"), with what it added: `release` reads both."""
        progress = progress_value(
            phase,
            self._added,
            destination=self.options.destination,
            at=self.clock(),
            evicted=self.report.evicted,
        )
        patch = {"metadata": {"annotations": {PROGRESS_ANNOTATION: progress}}}
        try:
            self._patch_node(patch)
        except KubeNotFound:
            pass
        except KubeError as e:  # the drain is over; a failed annotation is only a log line
            log.warning("could not record the %s state on node %s: %s", phase, self.node, e)

    # -- volumes --------------------------------------------------------------

    def _wait_for_volume_detach(self, limit: float) -> None:
        """Wait, bounded, until the evicted pods' volumes are detached from the node
        (volumes.py), and say what is still attached."""
        assert self._schedule is not None
        timeout = self.options.volume_detach_timeout
        if timeout <= 0:
            return
        volumes = volumes_of(self.kube, (e.pod for e in self._schedule))
        if not volumes:
            return
        result = wait_for_detach(
            self.kube,
            self.node,
            volumes,
            min(limit, self.clock() + timeout),
            cond=self._cond,
            clock=self.clock,
            pause=self._pause,
            stopped=self._over,
            on_detached=lambda what: self._emit(Kind.VOLUME_DETACHED, reason=what),
            watch_timeout=self.options.watch_timeout_seconds,
            attached_before=self._attached_before,
        )
        if result.error is not None:
            self._fail(result.error)
        self.report.volumes_detached = len(result.detached)
        self.report.volumes_pending = result.pending
        if result.pending:
            log.warning(
                "volumes still attached to %s after %.0f s: %s",
                self.node,
                timeout,
                ", ".join(result.pending),
            )

    def _pause(self, until: float) -> None:
        """Wait for a change or until `until` (hold the lock)."""
        self._waits.wait(self._cond, lambda: until)

    # -- events ---------------------------------------------------------------

    def _emit(self, kind: Kind, **values: Any) -> None:
        event = DrainEvent(kind, **values)
        if log.isEnabledFor(event.level):  # a terminal's drain logs warnings only
            logs.drain_event(log, describe(event, self.node), event.fields(), event.level)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:  # a broken display must not break a drain
                log.exception("progress callback failed")


def _comes_back(pod: Pod) -> bool:
    """A pod whose replacement would land on this node again: it tolerates the
    cordon's taint and a controller recreates it (the first time the drain saw the
    node, such a pod is evicted once, as kubectl drain does)."""
    return pods.tolerates_cordon(pod) and pods.controller(pod) is not None


def _last_writer(node: dict[str, Any]) -> str:
    """Who last changed the node, as far as its managedFields tell."""
    entries = [m for m in (node.get("metadata") or {}).get("managedFields") or [] if m.get("time")]
    if not entries:
        return "by whom, the API does not say"
    last = max(entries, key=lambda m: str(m["time"]))
    manager, operation = last.get("manager", "unknown"), last.get("operation", "")
    return f"last written by {manager} ({operation}) at {last['time']}"
