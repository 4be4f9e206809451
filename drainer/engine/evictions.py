"""One eviction: the request, and what its answer means for the pod.

The drain's loop (drainer/engine/drain.py) decides which pods to send; each is sent
from a worker thread of its pool, here. An answer changes the pod's entry in the
schedule, the report and the events, under the drain's lock, and wakes the loop (or
the worker takes the loop's turn, relay.py): accepted, already gone, refused by a
budget (retry when the budget has room), refused because several budgets select it,
going with its terminating namespace, denied by an admission policy, or failing
(retry with backoff). A fatal answer (RBAC, TLS, a refused token) ends the drain.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from drainer.engine import pods
from drainer.engine.context import DrainContext
from drainer.engine.pods import Pod
from drainer.engine.report import Kind, several_budgets_message
from drainer.engine.schedule import Entry, Schedule, State
from drainer.engine.watchers import BudgetTracker, PodTracker
from drainer.errors import (
    AdmissionDenied,
    EvictionBlocked,
    FatalKubeError,
    KubeConflict,
    KubeError,
    KubeNotFound,
    KubeTooManyRequests,
    MultipleBudgets,
    NamespaceTerminating,
)

# The drain's logger: its name is part of every line (the CLI prints it).
log = logging.getLogger("drainer.engine.drain")


@dataclass(frozen=True)
class Evictions:
    """Sends a drain's evictions and takes their answers, on its pool's threads.

    It shares the drain's context (its lock, report and events), schedule and
    budgets: every answer is written under the lock and wakes the loop. Once the
    drain is over (`DrainContext.over`) nothing more is sent; a fatal answer ends it."""

    ctx: DrainContext
    schedule: Schedule
    budgets: BudgetTracker
    pods: PodTracker
    """The node's pods as the watch has them: whether a pod answered 404 is gone."""
    look_again: Callable[[Pod], None]
    """Has the loop look at a pod again at its next turn (hold the lock)."""
    then: Callable[[], Entry | None]
    """On an answer (hold the lock): the pod this worker sends next itself, when the
    loop lends it its turn and sending is all the turn decides (relay.py); None: the
    loop is woken. It never raises: an error in the turn is the loop's."""
    conflicts_said: set[str] = field(default_factory=set)
    """The pods whose 409 was warned of (once each: the pod is tried again while the
    watch catches up with one replaced under its name)."""

    def send(self, entry: Entry) -> None:
        """Evictions from a worker thread: the request, what its answer means for the
        pod, then the loop looks at the pod again (the watch may have seen it change
        meanwhile) and wakes, once; or this worker takes the loop's turn and sends the
        pod it decides on next (`then`)."""
        sending: Entry | None = entry
        while sending is not None:
            after: Entry | None = None
            answered = False
            try:
                self.evict(sending)
                answered = True
            finally:
                with self.ctx.cond:
                    self.look_again(sending.pod)
                    # a pod picked here is in flight: only when it will be sent
                    after = self.then() if answered else None
                    if after is None:  # the loop takes its turn itself
                        self.ctx.cond.notify_all()
            sending = after

    def evict(self, entry: Entry) -> None:
        """Send `entry`'s eviction and act on the answer."""
        if self.ctx.over():
            return
        try:
            self.ctx.kube.evict(entry.pod, grace_period_seconds=self._grace_period(entry.pod))
        except KubeNotFound as e:  # gone, or a route or gateway that is not there
            self._not_found(entry, e)
        except KubeConflict as e:
            # Not a sign the pod is gone: the API server also answers 409 for a pod it
            # left untouched (a budget's status update that kept conflicting, a pod
            # modified since the handler read it). Tried again later; a pod replaced
            # under its name (the UID precondition) is gone from the watch meanwhile.
            self._failed(entry, e)
        except EvictionBlocked as e:
            self._refused(entry, e)
        except MultipleBudgets:
            self._several_budgets(entry)
        except NamespaceTerminating as e:
            self._going_with_namespace(entry, e)
        except AdmissionDenied as e:
            self._denied(entry, e)
        except FatalKubeError as e:
            self.ctx.fail(e)
        except Exception as e:  # never drop a pod and then wait for it
            self._failed(entry, e)
        else:
            self._accepted(entry)

    def _grace_period(self, pod: Pod) -> int | None:
        """The eviction's grace period: the setting's (None: the pod's own), cut to
        the time left before the deadline when the node goes then whatever happens."""
        grace = self.ctx.options.grace_period_seconds
        if not self.ctx.options.fit_grace_to_deadline:
            return grace
        own = grace if grace is not None else pods.grace_period(pod)
        return max(1, min(own, int(self.ctx.deadline - self.ctx.clock())))

    def _accepted(self, entry: Entry) -> None:
        with self.ctx.cond:
            if entry.state is State.IN_FLIGHT:
                self.schedule.accepted(entry, self.ctx.clock())
                self.ctx.report.evicted += 1
                self.ctx.report.denied.pop(entry.name, None)  # the policy let it go after all
                self.ctx.report.forget_several_budgets(entry.name)  # all but one budget went
                self.ctx.emit(
                    Kind.EVICTED,
                    pod=entry.name,
                    uid=entry.uid,
                    refusals=entry.refusals,
                    tier=entry.tier,
                )

    def _not_found(self, entry: Entry, error: KubeNotFound) -> None:
        """A 404 is no proof the pod is gone: a missing eviction route, a gateway's
        "404 page not found" answer it too, the pod still running. Gone when the pod
        watch agrees (deleted between the list and the eviction); else tried again
        after a backoff, and the watch's DELETED event, when it comes, ends it then."""
        with self.ctx.cond:
            gone = entry.state is State.IN_FLIGHT and self.pods.gone(entry.pod)
            if gone:
                self.schedule.gone(entry)
                self.ctx.report.forget_several_budgets(entry.name)
                self.ctx.emit(Kind.GONE, pod=entry.name, tier=entry.tier)
        if not gone:  # the drain's loop looks at the pod again after this (send)
            self._failed(entry, error)

    def _refused(self, entry: Entry, error: EvictionBlocked) -> None:
        namespace = entry.pod["metadata"].get("namespace", "")
        budget = f"{namespace}/{error.budget}" if error.budget else entry.budget
        with self.ctx.cond:
            first = entry.refusals == 0
            synced = self.budgets.synced
            self.schedule.refused(
                entry,
                budget,
                self.ctx.clock(),
                retry_after=error.retry_after,
                fallback=lambda: self._fallback(synced, entry.refusals),
            )
            self.ctx.report.refusals += 1
            held = self.ctx.report.blocked_by.setdefault(budget or f"{namespace}/?", [])
            if entry.name not in held:
                held.append(entry.name)
            if first:
                self.ctx.emit(
                    Kind.REFUSED,
                    pod=entry.name,
                    uid=entry.uid,
                    budget=budget,
                    reason=str(error),
                    tier=entry.tier,
                )

    def _fallback(self, synced: bool, attempt: int) -> float:
        if synced:  # the watch wakes the pod; the timer only covers a missed event
            return self.ctx.options.retry_watched * self.ctx.rng.uniform(0.5, 1.0)
        return self.ctx.options.retry.delay(attempt, self.ctx.rng)

    def _several_budgets(self, entry: Entry) -> None:
        """The eviction API refuses a pod that more than one budget selects; the
        server does not name them, the budget watch does."""
        names = self.budgets.matching(entry.pod)
        message = several_budgets_message(entry.name, names)
        with self.ctx.cond:
            until = self.ctx.clock() + self.ctx.options.several_budgets_retry
            self.schedule.wait(
                entry, until, f"more than one PodDisruptionBudget selects it ({', '.join(names)})"
            )
            if self.ctx.report.multiple_budgets.get(entry.name) != names:
                self.ctx.report.forget_several_budgets(entry.name)
                self.ctx.report.errors.append(message)
                self.ctx.report.multiple_budgets[entry.name] = names
                self.ctx.emit(
                    Kind.SEVERAL_BUDGETS,
                    pod=entry.name,
                    budget=", ".join(names),
                    reason=message,
                    tier=entry.tier,
                )

    def _going_with_namespace(self, entry: Entry, error: NamespaceTerminating) -> None:
        """The namespace's controller deletes the pod when its queue reaches it. Until
        the watch shows it deleted, the pod is not terminating, so never stuck: looked
        at again at its due time (following.py), then tried again every few seconds."""
        namespace = error.namespace or entry.pod["metadata"].get("namespace", "")
        with self.ctx.cond:
            now = self.ctx.clock()
            if entry.with_namespace:  # tried again, and still not deleted
                self.schedule.not_deleted_yet(entry, now + self.ctx.options.namespace_retry)
            else:
                # Its grace from now, as an evicted pod's: looked at again then, not
                # waited for until the deadline, should its events be lost.
                entry.with_namespace = True
                why = f"going with its terminating namespace {namespace}"
                self.schedule.going(entry, now, why, due=now + pods.grace_period(entry.pod))
            if entry.name not in self.ctx.report.going_with_namespace:
                self.ctx.report.going_with_namespace.append(entry.name)
                self.ctx.emit(
                    Kind.WITH_NAMESPACE,
                    pod=entry.name,
                    reason=f"its namespace {namespace} is being deleted and the pod goes with it "
                    "(403 NamespaceTerminating, not an RBAC denial); waiting for it to be gone",
                    tier=entry.tier,
                )

    def _denied(self, entry: Entry, error: AdmissionDenied) -> None:
        """An admission policy or webhook refused this pod's eviction: a refusal of
        the pod, not of the drain. Retry it with backoff (the policy may change its
        mind: a time window, a label someone adds); the others go on meanwhile."""
        message = error.refusal
        delay = self.ctx.options.denied_retry.delay(entry.attempts - 1, self.ctx.rng)
        with self.ctx.cond:
            self.schedule.wait(entry, self.ctx.clock() + delay, f"refused by admission: {message}")
            first = entry.name not in self.ctx.report.denied
            self.ctx.report.denied[entry.name] = message
            if first:
                self.ctx.emit(
                    Kind.DENIED, pod=entry.name, uid=entry.uid, reason=message, tier=entry.tier
                )

    def _failed(self, entry: Entry, error: Exception) -> None:
        """Keep the pod and try again later, never before a throttling answer's Retry-After."""
        retry_after = error.retry_after if isinstance(error, KubeTooManyRequests) else None
        delay = self.ctx.options.retry.delay(entry.attempts - 1, self.ctx.rng, retry_after)
        if isinstance(error, KubeError):
            again = isinstance(error, KubeConflict) and entry.name in self.conflicts_said
            if isinstance(error, KubeConflict):
                self.conflicts_said.add(entry.name)
            level = logging.DEBUG if error.said or again else logging.WARNING  # said once
            log.log(level, "evicting %s failed (%s); retrying in %.1f s", entry.name, error, delay)
        else:
            log.exception("evicting %s failed unexpectedly; retrying in %.1f s", entry.name, delay)
        with self.ctx.cond:
            self.schedule.wait(entry, self.ctx.clock() + delay, f"eviction failing: {error}")
