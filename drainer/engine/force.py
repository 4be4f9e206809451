"""TIMEOUT_POLICY=force: every pod gets its SIGTERM and grace before the deadline.

A pod still held (by its budget, an admission policy, its do-not-disrupt
annotation) is deleted when only its grace period is left before the deadline
(`ForcePolicy.due`, `early`), and what is left at the deadline is deleted then
(`at_deadline`); the drain (drainer/engine/drain.py) then waits briefly for the
deleted pods to go. The deletion bypasses PodDisruptionBudgets and admission
policies that refuse evictions: it is the last resort, and the node goes anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from drainer.engine import pods
from drainer.engine.context import DrainContext
from drainer.engine.pods import Pod
from drainer.engine.report import DrainReport, Emit, Kind
from drainer.engine.schedule import Entry, Schedule, State
from drainer.errors import FatalKubeError, KubeConflict, KubeError, KubeNotFound
from drainer.k8s.kube import Kube

# The drain's logger: its name is part of every line (the CLI prints it).
log = logging.getLogger("drainer.engine.drain")

FORCE_REQUEST_SECONDS = 1.0
"""A held pod is deleted this long before its grace would have to start, so that the
whole grace fits before the deadline."""
FORCE_RETRY_SECONDS = 2.0
"""After an early deletion failed (not fatally): the pause before it is tried again."""


class ForcePolicy:
    """TIMEOUT_POLICY=force over one drain's schedule. Its state is the entries'
    own (`forcing`, `force_after`); with the policy off it deletes nothing.
    `look_again(pod)`: a deleted pod is looked at again at the loop's next turn."""

    def __init__(
        self, ctx: DrainContext, schedule: Schedule, look_again: Callable[[Pod], None]
    ) -> None:
        self.ctx = ctx
        self.schedule = schedule
        self.look_again = look_again

    def _at(self, entry: Entry) -> float:
        """When a pod still held must be deleted so that its grace period ends by the
        deadline: the deadline less its own grace, at most FORCE_GRACE_PERIOD_SECONDS,
        and a second for the request (a grace of 0 is the deadline's own deletion)."""
        grace = self._grace(entry)
        at = self.ctx.deadline - grace - (FORCE_REQUEST_SECONDS if grace else 0.0)
        return max(at, entry.force_after)

    def _grace(self, entry: Entry) -> int:
        options = self.ctx.options
        own = options.grace_period_seconds
        if own is None:
            own = pods.grace_period(entry.pod)
        return max(0, min(own, options.force_grace_period_seconds))

    def _forceable(self) -> list[Entry]:
        """The held pods the policy may delete: those refused (or parked behind a
        refusal of their budget, or opted out), not one never asked for (its budget
        may allow it after all)."""
        if not self.ctx.options.force_on_timeout:
            return []
        if self.ctx.clock() >= self.ctx.deadline:
            return []  # the deadline's own deletion (at_deadline) takes what is left
        return [
            e
            for e in self.schedule.open()
            if e.state is State.TODO and not e.forcing and (e.attempts or e.held)
        ]

    def due(self, now: float) -> list[Entry]:
        """The held pods whose deletion cannot wait any longer (hold the lock)."""
        due = [e for e in self._forceable() if self._at(e) <= now]
        for entry in due:
            entry.forcing = True
        return due

    def next_at(self) -> float | None:
        """When the next held pod is due (hold the lock)."""
        return min((self._at(e) for e in self._forceable()), default=None)

    def early(self, entries: list[Entry]) -> None:
        """Delete the pods whose budgets (or opt-out, or a policy) still hold them when
        only their grace period is left before the deadline: each gets SIGTERM and
        that grace, cut to the time left; one that failed is tried again shortly. A
        fatal error ends the drain."""
        ctx = self.ctx

        def grace(entry: Entry) -> int:
            left = int(ctx.deadline - ctx.clock())
            return max(1, min(self._grace(entry), left))

        try:
            deleted = delete_left(ctx.kube, entries, grace, report=ctx.report, emit=ctx.emit)
        except FatalKubeError as e:
            ctx.fail(e)
            return
        with ctx.cond:
            for entry in entries:
                if entry not in deleted:  # a failure: tried again shortly, gone or not
                    entry.forcing, entry.force_after = False, ctx.clock() + FORCE_RETRY_SECONDS
            for entry in deleted:
                why = f"deleted {ctx.deadline - ctx.clock():.0f} s before the deadline"
                self.schedule.going(entry, ctx.clock(), why)
                self.look_again(entry.pod)

    def at_deadline(self, remaining: list[Entry]) -> bool:
        """Delete what is left at the deadline, bypassing budgets, with
        FORCE_GRACE_PERIOD_SECONDS; those deleted are going. False: a fatal error
        ended the drain."""
        ctx = self.ctx
        grace = ctx.options.force_grace_period_seconds
        remaining = [e for e in remaining if not e.forcing]  # deleted early already
        try:
            deleted = delete_left(ctx.kube, remaining, grace, report=ctx.report, emit=ctx.emit)
        except FatalKubeError as e:
            ctx.fail(e)
            return False
        with ctx.cond:
            for entry in deleted:
                self.schedule.going(entry, ctx.clock(), "force-deleted")
                self.look_again(entry.pod)
        return True


def delete_left(
    kube: Kube,
    left: list[Entry],
    grace: int | Callable[[Entry], int],
    *,
    report: DrainReport,
    emit: Emit,
) -> list[Entry]:
    """Delete each pod of `left` with `grace` seconds to go (or the grace `grace`
    gives it), and return those deleted. A pod gone already is skipped, and one whose
    deletion fails is logged and left; a fatal error (RBAC, TLS, a refused token) is
    raised and deletes no more."""
    deleted = []
    for entry in left:
        seconds = grace(entry) if callable(grace) else grace
        why = report.left.get(entry.name) or entry.held or "not gone by the deadline"
        try:
            kube.delete_pod(entry.pod, grace_period_seconds=seconds)
        except (KubeNotFound, KubeConflict):
            continue
        except FatalKubeError:
            raise
        except KubeError as e:
            log.error("force-deleting %s failed: %s", entry.name, e)
            continue
        deleted.append(entry)
        report.forced += 1
        report.forced_pods[entry.name] = why
        emit(
            Kind.FORCED,
            pod=entry.name,
            uid=entry.uid,
            seconds=float(seconds),
            reason=why,
            refusals=entry.refusals,
            tier=entry.tier,
        )
    return deleted
