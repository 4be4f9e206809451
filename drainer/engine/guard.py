"""The node a drain is of, kept so until the end: cordoned at the start, cordoned
again when someone uncordons it mid-drain, and never mistaken for another node
object that registers under the same name (another machine, left alone).

Every write carries the node's UID, which the API server refuses to change, so a
node of the same name registered since never takes one. What the node records
about its drain is the caller's NodeRecord (drainer/engine/context.py): the guard
writes the patches it gives, at the start and at the end.
"""

from __future__ import annotations

import logging

from drainer.engine.context import DrainContext, NodeRecord, Obj
from drainer.engine.report import Kind
from drainer.engine.watchers import NodeTracker
from drainer.errors import FatalKubeError, KubeConflict, KubeError, KubeNotFound
from drainer.outcome import Outcome

BEGIN_TRIES = 5
"""Cordons tried while the node changes between the read and the write (a 409 each)."""
END_TRIES = 3
"""Writes of the drain's end tried while the node changes under it (a 409 each)."""

# The drain's logger: its name is part of every line (the CLI prints it).
log = logging.getLogger("drainer.engine.drain")


class NodeGuard:
    """The node object being drained: its UID, the node as the cordon left it, the
    version an uncordon was last undone from, and its watch."""

    def __init__(self, ctx: DrainContext, record: NodeRecord, uid: str = "") -> None:
        """`uid`: the node object the caller found (empty: the one cordon() reads)."""
        self.ctx = ctx
        self.record = record
        self.uid = uid
        self.tracker: NodeTracker | None = None
        self._cordoned: Obj | None = None  # the node as the cordon left it
        self._recordoned_at = ""  # the node version an uncordon was last undone from
        self._recordon_failures = 0  # re-cordons refused in a row (a 5xx, a timeout)
        self._recordon_retry_at = 0.0  # after a refused re-cordon: when it is tried again

    def cordon(self, deadline: float) -> bool:
        """Cordon, exclude from load balancers and record the drain begun (the
        record's patch); False if the node is gone, or is another object now. The
        patch is written on the version read: a write since (another invocation's
        cordon, a kubelet's status) answers 409 and the node is read again, the record
        judging it anew (RecordChanged when its record changed), up to BEGIN_TRIES."""
        ctx, options = self.ctx, self.ctx.options
        refused = 0
        while True:
            try:
                node = ctx.kube.get_node(ctx.node)
                if node is None:
                    raise KubeNotFound(f"node {ctx.node} not found", 404)
                uid = str(node["metadata"].get("uid") or "")
                if self.uid and uid != self.uid:
                    self.replaced(uid)
                    return False
                self.uid = uid
                patch = self.record.begin(node, ctx.clock(), deadline)
                if options.dry_run and not options.dry_run_server:
                    self._cordoned = node  # a dry run on the client sends no write
                    break
                ctx.cordon_sent = not options.dry_run
                self._cordoned = self.patch(patch, dry_run=options.dry_run, version=_version(node))
                break
            except KubeConflict:
                ctx.cordon_sent = False  # refused, not lost: the node is not cordoned
                refused += 1
                if refused == BEGIN_TRIES:
                    raise
                log.info("node %s changed as the drain cordoned it; reading it again", ctx.node)
            except KubeNotFound:
                log.info("node %s is gone; nothing to drain", ctx.node)
                return False
        ctx.report.cordoned = not options.dry_run
        ctx.emit(Kind.CORDONED, reason="dry run" if options.dry_run else "")
        return True

    def watch(self) -> None:
        """Track the node: an uncordon, a replacement under the same name."""
        ctx = self.ctx
        timeout = ctx.options.watch_timeout_seconds
        self.tracker = NodeTracker(ctx.kube, ctx.node, watch_timeout=timeout, cond=ctx.cond)
        if self._cordoned:  # from the node the cordon wrote: replaced() knows it at once
            version = str(self._cordoned.get("metadata", {}).get("resourceVersion", ""))
            self.tracker.start([self._cordoned], version)
        else:
            self.tracker.start()

    def stop(self) -> None:
        if self.tracker is not None:
            self.tracker.stop()

    def replacement(self) -> bool:
        """Whether the watch saw another node object take the name (hold the lock);
        the drain then ends, touching it not."""
        assert self.tracker is not None
        uid = self.tracker.replaced(self.uid)
        if uid:
            self.replaced(uid)
        return bool(uid)

    def released(self) -> bool:
        """Whether someone released the node mid-drain (hold the lock): the watch sees
        it without the drain's record (`release` removes it, and the cordon the drain
        added). The drain then ends, touching the node no more: no re-cordon, no end
        record, which would undo the release."""
        ctx = self.ctx
        if ctx.released:
            return True
        node = self._release_seen()
        if node is None:
            return False
        ctx.released = last_writer(node)
        ctx.report.outcome = Outcome.RELEASED
        ctx.report.stopped_by = (
            f"node {ctx.node} was released mid-drain ({ctx.released}): its drain record "
            "is gone, so the drain stops and leaves the node as the release left it"
        )
        ctx.emit(Kind.DRAIN_RELEASED, reason=ctx.report.stopped_by)
        return True

    def _release_seen(self) -> Obj | None:
        """The node as the watch has it, when it shows the drain released; else None."""
        node = self.tracker.node if self.tracker is not None else None
        if not node or self.ctx.options.dry_run or not self.record.released(node):
            return None
        return node

    def uncordoned(self) -> bool:
        """Whether the node needs cordoning again now (hold the lock): someone
        uncordoned it since the drain last cordoned it, and no refused re-cordon waits
        for its retry."""
        return self._open() and self.ctx.clock() >= self._recordon_retry_at

    def _open(self) -> bool:
        """The node is schedulable, and the drain has not cordoned it again since it
        saw it so (hold the lock)."""
        if self.tracker is None:
            return False
        node = self.tracker.node or {}
        version = str(node.get("metadata", {}).get("resourceVersion", ""))
        return self.tracker.uncordoned() and version != self._recordoned_at

    def next_recordon(self) -> float | None:
        """When a refused re-cordon is tried again (hold the lock); None when none waits."""
        if self._recordon_failures and self._open():
            return self._recordon_retry_at
        return None

    def patch(self, patch: Obj, *, dry_run: bool = False, version: str = "") -> Obj:
        """Write to the node this drain is of, and to no other: the patch carries the
        node's UID, which the API server refuses to change (a node of the same name
        registered since answers 409 or 422, never takes the write); with `version`,
        its resourceVersion too (changed since: 409)."""
        ctx = self.ctx
        if self.uid or version:
            meta = {**patch.get("metadata", {}), "uid": self.uid, "resourceVersion": version}
            patch = {**patch, "metadata": {k: v for k, v in meta.items() if v}}
        try:
            return ctx.kube.patch_node(ctx.node, patch, dry_run=dry_run)
        except KubeError as e:
            if e.status in (409, 422) and self.name_taken():
                raise KubeNotFound(f"node {ctx.node} was replaced", 404) from e
            raise

    def name_taken(self) -> bool:
        """Whether the node's name now belongs to another node object (one GET)."""
        try:
            current = self.ctx.kube.get_node(self.ctx.node)
        except KubeError:
            return False
        uid = str(((current or {}).get("metadata") or {}).get("uid") or "")
        if current is not None and uid and uid != self.uid:
            self.replaced(uid)
            return True
        return False

    def replaced(self, uid: str) -> None:
        """Another node object took this node's name: this drain ends, touching it not."""
        ctx = self.ctx
        if ctx.replaced:
            return
        ctx.replaced = uid
        ctx.report.outcome = Outcome.NO_NODE
        ctx.report.stopped_by = (
            f"node {ctx.node} was replaced: a new node object of the same name "
            f"(uid {uid}) registered in place of the one being drained "
            f"(uid {self.uid or 'unknown'}); it is another machine, left alone"
        )
        ctx.emit(Kind.STOPPED, reason=ctx.report.stopped_by)

    def recordon(self) -> None:
        """Someone uncordoned the node mid-drain: cordon it again, the record saying
        that cordon is the drain's (for `release` to undo), and say who uncordoned it."""
        ctx = self.ctx
        with ctx.cond:
            node = dict(self.tracker.node or {}) if self.tracker is not None else {}
            self._recordoned_at = str(node.get("metadata", {}).get("resourceVersion", ""))
        who = last_writer(node)
        try:
            self.patch(_cordoning(self.record.recordon()))
        except KubeNotFound:
            return
        except FatalKubeError as e:
            ctx.fail(e)
            return
        except KubeError as e:
            self._recordon_refused(e)
            return
        with ctx.cond:
            self._recordon_failures = 0
            self._recordon_retry_at = 0.0
            ctx.report.recordons += 1
        ctx.emit(
            Kind.RECORDONED,
            reason=f"the node was uncordoned mid-drain ({who}); cordoned again",
        )

    def _recordon_refused(self, error: KubeError) -> None:
        """The re-cordon failed (its client's retries spent): tried again after a
        backoff (as an admission refusal is: up to 30 s), whether or not the watch
        sees the node change meanwhile; said once for each series of failures."""
        ctx = self.ctx
        with ctx.cond:
            self._recordoned_at = ""
            self._recordon_failures += 1
            failures = self._recordon_failures
            delay = ctx.options.denied_retry.delay(failures - 1, ctx.rng)
            self._recordon_retry_at = ctx.clock() + delay
            ctx.cond.notify_all()
        level = logging.WARNING if failures == 1 else logging.DEBUG
        log.log(level, "could not cordon %s again (%s, %d time(s)); retrying in %.1f s",
                ctx.node, error, failures, delay)  # fmt: skip

    def record_end(self, outcome: Outcome) -> None:
        """The drain's end in the node's record, through the record's patch: `release`
        reads it. A node still open (a re-cordon refused and not yet retried, or an
        uncordon the loop had not seen) is cordoned by the same patch, its record
        saying that cordon is the drain's, or, should that be refused, the record goes
        alone, claiming the cordon only if a re-cordon took (`report.recordons`): one
        refused and followed by an operator's own cordon is not ours to undo. The patch
        holds the node's resourceVersion as the drain last saw it: a release landing
        after that look makes it fail (409), and the node, read again, is left so; any
        other change is read and the end written again. A refusal is a log line: the
        drain is over."""
        ctx = self.ctx
        with ctx.cond:
            if self._release_seen() is not None:  # released as the drain ended: left so
                return
            still_open = self._open()
            recordoned = ctx.report.recordons > 0  # a re-cordon took: that cordon is ours
            seen = self.tracker.node if self.tracker is not None else None
        error: KubeError | None = None
        for _ in range(END_TRIES):
            try:
                self._write_end(outcome, _version(seen), still_open, recordoned)
                return
            except KubeConflict as e:  # changed since the last look: released, or not
                error = e
                try:
                    seen = ctx.kube.get_node(ctx.node)
                except KubeError as read:  # unreadable: tried again on the old version
                    error = read
                    continue
                if seen is None or self.record.released(seen):
                    log.info("node %s was released as its drain ended: left so", ctx.node)
                    return
                still_open = still_open and not (seen.get("spec") or {}).get("unschedulable")
            except KubeNotFound:
                return
            except KubeError as e:  # the drain is over; a failed record is only a log line
                error = e
                break
        log.warning("could not record the %s state on node %s: %s", outcome, ctx.node, error)

    def _write_end(self, outcome: Outcome, version: str, still_open: bool, ours: bool) -> None:
        """The end's patch (with the cordon when the node is open), on `version`."""
        now, evicted = self.ctx.clock(), self.ctx.report.evicted
        if still_open and self._cordon_with(
            self.record.end(outcome, now, evicted, cordoned=True), version
        ):
            return
        self.patch(self.record.end(outcome, now, evicted, cordoned=ours), version=version)

    def _cordon_with(self, patch: Obj, version: str = "") -> bool:
        """The end's patch with the cordon: True when it took. The node gone, or
        changed since `version` (a conflict), is raised."""
        ctx = self.ctx
        try:
            self.patch(_cordoning(patch), version=version)
        except (KubeNotFound, KubeConflict):
            raise
        except KubeError as e:
            log.warning("could not cordon %s again with its end record (%s)", ctx.node, e)
            return False
        with ctx.cond:
            ctx.report.recordons += 1
        log.info("cordoned %s again with the drain's end record", ctx.node)
        return True


def _version(node: Obj | None) -> str:
    """A node's resourceVersion ("" when unknown: the write is then unconditional)."""
    return str(((node or {}).get("metadata") or {}).get("resourceVersion") or "")


def _cordoning(patch: Obj) -> Obj:
    """The record's patch, cordoning the node as well."""
    return {**patch, "spec": {**patch.get("spec", {}), "unschedulable": True}}


def last_writer(node: Obj) -> str:
    """Who last changed the node, as far as its managedFields tell."""
    entries = [m for m in (node.get("metadata") or {}).get("managedFields") or [] if m.get("time")]
    if not entries:
        return "by whom, the API does not say"
    last = max(entries, key=lambda m: str(m["time"]))
    manager, operation = last.get("manager", "unknown"), last.get("operation", "")
    return f"last written by {manager} ({operation}) at {last['time']}"
