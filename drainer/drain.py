"""The drain engine: cordon, evict in priority tiers, wait until gone, volumes.

It knows nothing of AWS: it gets a Kube client, a node name and two deadlines (the
drain's own timeout and the moment this invocation must hand over), and answers
with a DrainReport. Every step is safe to repeat, because events are delivered at
least once and a drain may span several Lambda invocations.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from drainer import filters, pods
from drainer.errors import (
    EvictionBlocked,
    KubeConflict,
    KubeError,
    KubeForbidden,
    KubeNotFound,
    KubeTooManyRequests,
    MultipleBudgets,
    NamespaceTerminating,
    TlsVerificationError,
)
from drainer.filters import Action, Decision, FilterOptions
from drainer.kube import Kube
from drainer.pods import Pod
from drainer.watchers import AttachmentTracker, BudgetTracker, PodTracker

log = logging.getLogger(__name__)

EXCLUDE_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
PROGRESS_ANNOTATION = "eks-node-drainer/progress"


class Outcome(StrEnum):
    DRAINED = "drained"
    NODE_GONE = "node_gone"
    TIMED_OUT = "timed_out"  # the drain's own timeout passed with pods still there
    OUT_OF_TIME = "out_of_time"  # this invocation must hand over; the drain goes on
    DRY_RUN = "dry_run"


@dataclass(frozen=True)
class DrainOptions:
    filters: FilterOptions = field(default_factory=FilterOptions)
    concurrency: int = 32
    grace_period_seconds: int | None = None
    """None: each pod's own terminationGracePeriodSeconds."""
    stuck_pod_seconds: float = 60.0
    """A pod still terminating this long after its deletion deadline stops blocking."""
    volume_detach_timeout: float = 120.0
    dry_run: bool = False
    force_on_timeout: bool = False
    force_grace_period_seconds: int = 30
    retry_min: float = 0.25
    """Fallback pacing of retries after a budget refusal, doubled up to retry_max;
    a change of the budget wakes the retry earlier."""
    retry_max: float = 4.0
    retry_max_watched: float = 30.0
    """The fallback while the budget watch is healthy: a change wakes the retry
    anyway, so a budget that never allows costs one request per pod every ~20 s."""
    watch_timeout_seconds: int = 240
    budget_list_timeout: float = 5.0
    """How long to wait for the first list of budgets before naming those that select
    a pod refused for having more than one (the server's message does not name them)."""


@dataclass(frozen=True)
class DrainEvent:
    """One step of the drain, for progress displays (the CLI, the demo)."""

    kind: str
    """cordoned, skipped, evicting, evicted, blocked, gone, stuck, forced, volume_detached,
    would_evict, namespace_terminating."""
    pod: str = ""
    message: str = ""
    budget: str = ""


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
    # pods not evicted because their namespace is being deleted: they go with it
    going_with_namespace: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)  # pods still on the node at the end
    stuck: list[str] = field(default_factory=list)  # terminating past the threshold
    forced: int = 0
    volumes_detached: int = 0
    volumes_pending: list[str] = field(default_factory=list)
    warnings: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    would_evict: list[str] = field(default_factory=list)  # dry run
    held_at_timeout: str = ""  # what still held the node when the drain timed out
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
            "going_with_namespace": len(self.going_with_namespace),
            "multiple_budgets": {
                pod: ", ".join(names) for pod, names in sorted(self.multiple_budgets.items())
            },
            "errors": list(self.errors),
            "remaining": len(self.remaining),
            "stuck": len(self.stuck),
            "forced": self.forced,
            "volumes_detached": self.volumes_detached,
            "volumes_pending": len(self.volumes_pending),
            "api_requests": self.requests,
            "seconds": round(self.seconds, 3),
        }

    def timeout_message(self) -> str:
        """What is still on the node and what holds it, for the timeout log line."""
        parts = []
        remaining = set(self.remaining)
        for budget, held in sorted(self.blocked_by.items()):
            still = sorted(set(held) & remaining)
            if still:
                parts.append(f"PodDisruptionBudget {budget} holds {', '.join(still)}")
        for pod, budgets in sorted(self.multiple_budgets.items()):
            if pod in remaining:
                parts.append(
                    f"more than one PodDisruptionBudget selects {pod} "
                    f"({', '.join(budgets) or 'names unknown'})"
                )
        going = sorted(set(self.going_with_namespace) & remaining)
        if going:
            parts.append(f"going with their terminating namespace: {', '.join(going)}")
        held_pods = {p for held in self.blocked_by.values() for p in held}
        held_pods |= self.multiple_budgets.keys() | set(self.going_with_namespace)
        others = sorted(remaining - held_pods)
        if others:
            parts.append(f"still terminating or not yet evicted: {', '.join(others)}")
        return "; ".join(parts) or "nothing left on the node"


class Drain:
    def __init__(
        self,
        kube: Kube,
        node: str,
        options: DrainOptions | None = None,
        *,
        clock: Callable[[], float] = time.time,
        on_event: Callable[[DrainEvent], None] | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        """`clock` and `sleep` go together: tests hand in a clock that `sleep`
        advances. The default sleep waits on the drain's abort, so a fatal error in
        one eviction ends every other one's pause at once."""
        self.kube = kube
        self.node = node
        self.options = options or DrainOptions()
        self.clock = clock
        self._on_event = on_event
        self._rng = rng or random.Random()  # noqa: S311 - jitter
        self._lock = threading.Lock()
        self._abort = threading.Event()
        self._sleep = sleep or self._abort.wait
        self._fatal: KubeError | None = None
        self._budgets: BudgetTracker | None = None
        self._tracker: PodTracker | None = None
        self.report = DrainReport(node)

    # -- public ---------------------------------------------------------------

    def run(self, deadline: float, stop_at: float | None = None) -> DrainReport:
        """Drain until done, until `deadline` (the drain's timeout, epoch seconds) or
        until `stop_at` (this invocation's hand-over moment). Raises KubeForbidden,
        TlsVerificationError and other unrecoverable KubeErrors."""
        started = self.clock()
        requests_before = self.kube.requests
        limit = min(deadline, stop_at) if stop_at is not None else deadline
        try:
            self._run(deadline, limit)
        finally:
            for follower in (self._tracker, self._budgets):
                if follower is not None:
                    follower.stop()
            self.report.seconds = self.clock() - started
            self.report.requests = self.kube.requests - requests_before
        if self._fatal is not None:
            raise self._fatal
        return self.report

    # -- steps ----------------------------------------------------------------

    def _emit(self, kind: str, pod: str = "", message: str = "", budget: str = "") -> None:
        if self._on_event is not None:
            try:
                self._on_event(DrainEvent(kind, pod, message, budget))
            except Exception:  # a broken display must not break a drain
                log.exception("progress callback failed")

    def _run(self, deadline: float, limit: float) -> None:
        report = self.report
        if not self.cordon():
            report.outcome = Outcome.NODE_GONE
            return
        pod_list, version = self.kube.list_pods_on_node(self.node)
        decisions = [filters.decide(p, self.options.filters) for p in pod_list]
        report.warnings = filters.warnings_by_message(decisions)
        for message, names in report.warnings.items():
            log.warning("%s: %s", message, ", ".join(names))
        for decision in decisions:
            if decision.action == Action.SKIP:
                report.skipped[decision.name] = decision.reason
                self._emit("skipped", decision.name, decision.reason)
        if self.options.dry_run:
            self._dry_run([d for d in decisions if d.action == Action.EVICT])
            return
        self._tracker = PodTracker(
            self.kube, self.node, watch_timeout=self.options.watch_timeout_seconds
        )
        self._tracker.start(pod_list, version)
        acting = [d for d in decisions if d.action != Action.SKIP]
        tiers = [
            [d for d in acting if not pods.is_critical(d.pod)],
            [d for d in acting if pods.is_critical(d.pod)],
        ]
        for number, tier in enumerate(tiers):
            if not tier:
                continue
            log.info(
                "tier %d: %d pods (%s)", number + 1, len(tier), "critical" if number else "ordinary"
            )
            self._evict_tier(tier, limit)
            if self._fatal is not None:
                return
            if not self._wait_gone([d.pod for d in tier], limit):
                break
        remaining = self._still_there([d.pod for d in acting])
        if remaining:
            report.remaining = sorted(pods.name(p) for p in remaining)
            if self.clock() >= deadline:
                report.outcome = Outcome.TIMED_OUT
                report.held_at_timeout = report.timeout_message()
                log.warning("drain of %s timed out: %s", self.node, report.held_at_timeout)
                if self.options.force_on_timeout:
                    self._force(remaining)
            else:
                report.outcome = Outcome.OUT_OF_TIME
            return
        self._wait_for_volume_detach([d.pod for d in acting], limit)
        self._mark_done()

    def cordon(self) -> bool:
        """Cordon, exclude from load balancers, record progress; False if the node is gone."""
        patch = {
            "metadata": {
                "labels": {EXCLUDE_LB_LABEL: "true"},
                "annotations": {
                    PROGRESS_ANNOTATION: json.dumps(
                        {"phase": "draining", "since": int(self.clock())}
                    )
                },
            },
            "spec": {"unschedulable": True},
        }
        try:
            self.kube.patch_node(self.node, patch, dry_run=self.options.dry_run)
        except KubeNotFound:
            log.info("node %s is gone; nothing to drain", self.node)
            return False
        self._emit("cordoned", message=self.node)
        return True

    def _mark_done(self) -> None:
        try:
            self.kube.patch_node(
                self.node,
                {
                    "metadata": {
                        "annotations": {
                            PROGRESS_ANNOTATION: json.dumps(
                                {
                                    "phase": "drained",
                                    "at": int(self.clock()),
                                    "evicted": self.report.evicted,
                                }
                            )
                        }
                    }
                },
            )
        except KubeNotFound:
            pass
        except KubeError as e:  # the drain is done; a failed annotation is only a log line
            log.warning("could not record the drained state on node %s: %s", self.node, e)

    def _dry_run(self, decisions: list[Decision]) -> None:
        report = self.report
        report.outcome = Outcome.DRY_RUN
        for decision in decisions:
            try:
                self.kube.evict(
                    decision.pod,
                    grace_period_seconds=self.options.grace_period_seconds,
                    dry_run=True,
                )
                report.would_evict.append(decision.name)
                self._emit("would_evict", decision.name)
            except EvictionBlocked as e:
                report.blocked_by.setdefault(e.budget, []).append(decision.name)
                report.would_evict.append(decision.name)
                self._emit("blocked", decision.name, str(e), e.budget)
            except MultipleBudgets:
                # Not a pod the drain could evict: say so, and which budgets to fix.
                self._several_budgets(decision.pod, self.options.budget_list_timeout)
            except NamespaceTerminating as e:
                self._going_with_namespace(decision.pod, e)
            except (KubeNotFound, KubeConflict):
                pass

    # -- eviction ---------------------------------------------------------------

    def _evict_tier(self, tier: list[Decision], limit: float) -> None:
        to_evict = [d for d in tier if d.action == Action.EVICT]
        waiting = [d for d in tier if d.action == Action.WAIT]
        self.report.already_terminating += len(waiting)
        if not to_evict:
            return
        workers = max(1, min(self.options.concurrency, len(to_evict)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evict") as pool:
            for future in [pool.submit(self._evict_until_accepted, d.pod, limit) for d in to_evict]:
                future.result()

    def _evict_until_accepted(self, pod: Pod, limit: float) -> None:
        """Evict one pod, retrying until the API accepts, the pod is gone, the time
        is up or the drain aborts. Never gives up on a pod for an unexpected error."""
        name = pods.name(pod)
        tracker = self._tracker
        assert tracker is not None
        attempt = 0
        self._emit("evicting", name)
        while not self._abort.is_set():
            with tracker.cond:
                if tracker.gone(pod):
                    self._emit("gone", name)
                    return
            if self.clock() >= limit:
                return
            try:
                self.kube.evict(pod, grace_period_seconds=self.options.grace_period_seconds)
            except (KubeNotFound, KubeConflict):
                # 404: already gone; 409: the name now belongs to a new pod, so ours is gone.
                self._emit("gone", name)
                return
            except EvictionBlocked as e:
                self._blocked(pod, e, attempt, limit)
                attempt += 1
                continue
            except MultipleBudgets:
                self._several_budgets(
                    pod, min(self.options.budget_list_timeout, limit - self.clock())
                )
                # Retry slowly until the limit: someone may fix the budgets meanwhile.
                self._pause(self.options.retry_max * 2, limit)
                attempt += 1
                continue
            except NamespaceTerminating as e:
                # Not an RBAC denial: the namespace controller deletes the pod; wait
                # for it to be gone like an evicted pod.
                self._going_with_namespace(pod, e)
                return
            except (KubeForbidden, TlsVerificationError) as e:
                self._fail(e)
                return
            except KubeError as e:
                # The client already retried; keep the pod and try again later, never
                # before a throttling answer's Retry-After.
                delay = self._backoff(attempt)
                if isinstance(e, KubeTooManyRequests) and e.retry_after:
                    delay = max(delay, e.retry_after)
                log.warning("evicting %s failed (%s); retrying in %.1f s", name, e, delay)
                attempt += 1
                self._pause(delay, limit)
                continue
            with self._lock:
                self.report.evicted += 1
            self._emit("evicted", name)
            return

    def _blocked(self, pod: Pod, error: EvictionBlocked, attempt: int, limit: float) -> None:
        name = pods.name(pod)
        namespace = pod["metadata"]["namespace"]
        budget = f"{namespace}/{error.budget}" if error.budget else f"{namespace}/?"
        with self._lock:
            self.report.refusals += 1
            held = self.report.blocked_by.setdefault(budget, [])
            if name not in held:
                held.append(name)
        if attempt == 0:
            log.info("eviction of %s refused by PodDisruptionBudget %s: %s", name, budget, error)
        self._emit("blocked", name, str(error), budget)
        if error.retry_after:
            # The server said when to come back (10 s while the budget's status lags
            # its spec). Nothing brings the retry forward, not even a change of the
            # budget; past the drain's limit there is no retry at all.
            if attempt == 0 or error.retry_after > self.options.retry_max:
                log.info(
                    "retrying the eviction of %s in %.0f s, as the API server asked",
                    name,
                    error.retry_after,
                )
            self._pause(error.retry_after, limit)
            return
        budgets = self._budget_tracker()
        if isinstance(budgets.error, KubeForbidden):
            self._fail(budgets.error)
            return
        seen = budgets.seen(namespace, error.budget)
        if budgets.synced:
            # The watch wakes this retry when the budget allows; the timer is only a
            # safety net against a missed event.
            delay = self.options.retry_max_watched * self._rng.uniform(0.5, 1.0)
        else:
            delay = self._backoff(attempt)
        budgets.wait_for_room(
            namespace, error.budget, seen, min(delay, max(0.0, limit - self.clock()))
        )
        if isinstance(budgets.error, KubeForbidden):
            self._fail(budgets.error)

    def _several_budgets(self, pod: Pod, list_timeout: float) -> None:
        """Report a pod the eviction API refuses because more than one budget selects
        it. The server does not name them: the budget tracker, which follows every
        budget, does (after waiting up to `list_timeout` for its first list)."""
        name = pods.name(pod)
        budgets = self._budget_tracker()
        budgets.wait_listed(max(0.0, list_timeout))
        names = budgets.matching(pod)
        message = (
            f"cannot evict {name}: more than one PodDisruptionBudget selects it "
            f"({', '.join(names) or 'names unknown'}); the eviction API supports only one. "
            "Delete or narrow all but one of them."
        )
        with self._lock:
            if self.report.multiple_budgets.get(name) != names or message not in self.report.errors:
                # One message per pod, naming the budgets as they are now.
                prefix = f"cannot evict {name}: more than one"
                self.report.errors = [e for e in self.report.errors if not e.startswith(prefix)]
                self.report.errors.append(message)
                self.report.multiple_budgets[name] = names
                log.error(message)
        self._emit("blocked", name, message, ",".join(names))

    def _going_with_namespace(self, pod: Pod, error: NamespaceTerminating) -> None:
        name = pods.name(pod)
        namespace = error.namespace or pod["metadata"].get("namespace", "")
        with self._lock:
            if name in self.report.going_with_namespace:
                return
            self.report.going_with_namespace.append(name)
        message = (
            f"not evicting {name}: its namespace {namespace} is being deleted and the pod "
            "goes with it (403 NamespaceTerminating, not an RBAC denial)"
        )
        log.warning("%s; waiting for it to be gone", message)
        self._emit("namespace_terminating", name, message)

    def _budget_tracker(self) -> BudgetTracker:
        with self._lock:
            if self._budgets is None:
                self._budgets = BudgetTracker(
                    self.kube, watch_timeout=self.options.watch_timeout_seconds
                )
                self._budgets.start()
            return self._budgets

    def _backoff(self, attempt: int) -> float:
        base = min(self.options.retry_max, self.options.retry_min * 2.0**attempt)
        return base * self._rng.uniform(0.5, 1.0)

    def _pause(self, seconds: float, limit: float) -> None:
        self._sleep(max(0.0, min(seconds, limit - self.clock())))

    def _fail(self, error: KubeError) -> None:
        with self._lock:
            if self._fatal is None:
                self._fatal = error
                log.error("drain of %s stopped: %s", self.node, error)
        self._abort.set()

    # -- waiting ----------------------------------------------------------------

    def _still_there(self, candidates: list[Pod]) -> list[Pod]:
        tracker = self._tracker
        if tracker is None:
            return []
        stuck = set(self.report.stuck)
        with tracker.cond:
            return [p for p in candidates if not tracker.gone(p) and pods.name(p) not in stuck]

    def _wait_gone(self, targets: list[Pod], limit: float) -> bool:
        """Wait until every target is gone or stuck; False when time ran out."""
        tracker = self._tracker
        assert tracker is not None
        announced: set[str] = set()
        with tracker.cond:
            while True:
                if isinstance(tracker.error, KubeForbidden):
                    self._fail(tracker.error)
                    return False
                now = self.clock()
                blocking = []
                next_check = limit
                for pod in targets:
                    name = pods.name(pod)
                    if name in self.report.stuck:
                        continue
                    if tracker.gone(pod):
                        if name not in announced:
                            announced.add(name)
                            self._emit("gone", name)
                        continue
                    current = tracker.current(pod) or pod
                    due = pods.deletion_deadline(current)
                    if due is not None:
                        stuck_at = due + self.options.stuck_pod_seconds
                        if now >= stuck_at:
                            self.report.stuck.append(name)
                            log.warning(
                                "pod %s is still terminating %.0f s after its grace period "
                                "(finalizers %s); no longer waiting for it",
                                name,
                                now - due,
                                current["metadata"].get("finalizers") or [],
                            )
                            self._emit("stuck", name)
                            continue
                        next_check = min(next_check, stuck_at)
                    blocking.append(pod)
                if not blocking:
                    return True
                if now >= limit:
                    return False
                tracker.cond.wait(max(0.01, min(next_check - now, 5.0)))

    def _force(self, remaining: list[Pod]) -> None:
        """The `force` timeout policy: delete what is left, bypassing budgets."""
        grace = self.options.force_grace_period_seconds
        deleted = []
        for pod in remaining:
            current = (self._tracker.current(pod) if self._tracker else None) or pod
            try:
                self.kube.delete_pod(current, grace_period_seconds=grace)
            except (KubeNotFound, KubeConflict):
                continue
            except (KubeForbidden, TlsVerificationError) as e:
                self._fail(e)
                return
            except KubeError as e:
                log.error("force-deleting %s failed: %s", pods.name(pod), e)
                continue
            deleted.append(pod)
            self.report.forced += 1
            self._emit("forced", pods.name(pod))
        if deleted:
            # Give the forced pods their (bounded) grace period to stop.
            self._wait_gone(deleted, self.clock() + grace + 5)
        self.report.remaining = sorted(pods.name(p) for p in self._still_there(remaining))

    # -- volumes ----------------------------------------------------------------

    def _wait_for_volume_detach(self, drained: list[Pod], limit: float) -> None:
        """Wait, bounded, until the evicted pods' volumes are detached from the node,
        so their EBS volumes are not yanked from a live instance."""
        claims = {(p["metadata"]["namespace"], c) for p in drained for c in pods.claim_names(p)}
        if not claims or self.options.volume_detach_timeout <= 0:
            return
        volumes = set()
        for namespace, claim_name in sorted(claims):
            claim = self.kube.get_claim(namespace, claim_name)
            if claim and (claim.get("spec") or {}).get("volumeName"):
                volumes.add(claim["spec"]["volumeName"])
        if not volumes:
            return
        until = min(limit, self.clock() + self.options.volume_detach_timeout)
        attachments = AttachmentTracker(self.kube, watch_timeout=self.options.watch_timeout_seconds)
        attachments.start(*self.kube.list_volume_attachments())
        try:
            with attachments.cond:
                pending = attachments.attached(self.node, volumes)
                initial = len(pending)
                while pending and self.clock() < until:
                    if isinstance(attachments.error, KubeForbidden):
                        self._fail(attachments.error)
                        return
                    attachments.cond.wait(max(0.01, min(until - self.clock(), 5.0)))
                    still = attachments.attached(self.node, volumes)
                    for name in pending.keys() - still.keys():
                        self._emit("volume_detached", message=name)
                    pending = still
        finally:
            attachments.stop()
        self.report.volumes_detached = initial - len(pending)
        if pending:
            self.report.volumes_pending = sorted(pending.values())
            log.warning(
                "volumes still attached to %s after %.0f s: %s",
                self.node,
                self.options.volume_detach_timeout,
                ", ".join(self.report.volumes_pending),
            )
