"""The last step of a drain: wait, bounded, until the evicted pods' volumes are
detached from the node, so their EBS volumes are not yanked from a live instance.

The VolumeAttachments are tracked by a watch (the attach-detach controller deletes
each one once the CSI driver has detached its volume); the drain's lock and
condition are shared, so a fatal error elsewhere ends this wait at once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from drainer.engine import pods
from drainer.engine.context import DrainContext
from drainer.engine.pods import Pod
from drainer.engine.report import Kind
from drainer.engine.watchers import AttachmentTracker
from drainer.errors import FatalKubeError, KubeError
from drainer.k8s.kube import Kube

# The drain's logger: its name is part of every line (the CLI prints it).
log = logging.getLogger("drainer.engine.drain")


@dataclass
class Detach:
    detached: list[str] = field(default_factory=list)
    """VolumeAttachment (volume) of each volume that went: while waiting, or before,
    when it was among the attachments the drain saw at its start."""
    pending: list[str] = field(default_factory=list)
    """Volumes still attached when the wait ended."""
    error: FatalKubeError | None = None


def volumes_of(kube: Kube, drained: Iterable[Pod]) -> set[str]:
    """The PersistentVolumes behind the claims the pods mounted (bound claims only)."""
    claims = {(p["metadata"]["namespace"], c) for p in drained for c in pods.claim_names(p)}
    volumes = set()
    for namespace, claim_name in sorted(claims):
        claim = kube.get_claim(namespace, claim_name)
        if claim and (claim.get("spec") or {}).get("volumeName"):
            volumes.add(claim["spec"]["volumeName"])
    return volumes


def attachments_on(kube: Kube, node: str) -> dict[str, str]:
    """VolumeAttachment name -> volume, of those on `node` now: what the drain's
    volumes were attached as before it began, so one that detaches before the wait
    (while the pods stop) is counted as detached, not as never attached."""
    found = {}
    for attachment in kube.list_volume_attachments()[0]:
        spec = attachment.get("spec") or {}
        volume = (spec.get("source") or {}).get("persistentVolumeName")
        if spec.get("nodeName") == node and volume:
            found[attachment["metadata"]["name"]] = volume
    return found


def wait_for_detach(
    ctx: DrainContext, volumes: set[str], until: float, attached_before: dict[str, str]
) -> Detach:
    """Wait until none of `volumes` is attached to the drain's node, `until`, or the
    drain is over; each detached volume is an event. Those of `attached_before`
    (attachments_on at the drain's start) already gone count as detached."""
    timeout = ctx.options.watch_timeout_seconds
    attachments = AttachmentTracker(ctx.kube, watch_timeout=timeout, cond=ctx.cond)
    attachments.start(*ctx.kube.list_volume_attachments())
    result = Detach()

    def detached(what: str) -> None:
        result.detached.append(what)
        ctx.emit(Kind.VOLUME_DETACHED, reason=what)

    try:
        with ctx.cond:
            pending = attachments.attached(ctx.node, volumes)
            for name, volume in sorted(attached_before.items()):
                if volume in volumes and name not in pending:
                    detached(f"{name} ({volume})")
            while pending and ctx.clock() < until and not ctx.over():
                if isinstance(attachments.error, FatalKubeError):
                    result.error = attachments.error
                    break
                ctx.pause(until)
                still = attachments.attached(ctx.node, volumes)
                for name in sorted(pending.keys() - still.keys()):
                    detached(f"{name} ({pending[name]})")
                pending = still
    finally:
        attachments.stop()
    result.pending = sorted(pending.values())
    return result


class Volumes:
    """One drain's volumes: what was attached to the node before the first eviction,
    and the bounded wait at the end until the evicted pods' volumes are detached."""

    def __init__(self, ctx: DrainContext) -> None:
        self.ctx = ctx
        self.attached_before: dict[str, str] = {}  # VolumeAttachments on the node at the start

    def note(self, acting: list[Pod]) -> None:
        """Before the first eviction, when a pod to evict mounts a claim: the node's
        attachments now (a volume may detach before the wait for it)."""
        ctx = self.ctx
        if ctx.options.volume_detach_timeout <= 0 or not any(pods.claim_names(p) for p in acting):
            return
        try:
            self.attached_before = attachments_on(ctx.kube, ctx.node)
        except KubeError as e:  # then only what detaches during the wait is counted
            log.debug("could not list the volume attachments of %s: %s", ctx.node, e)

    def wait(self, limit: float, drained: Iterable[Pod]) -> None:
        """Wait, bounded, until the volumes of the `drained` pods are detached from
        the node, and say what is still attached."""
        ctx = self.ctx
        timeout = ctx.options.volume_detach_timeout
        if timeout <= 0:
            return
        try:
            volumes = volumes_of(ctx.kube, drained)
            if not volumes:
                return
            until = min(limit, ctx.clock() + timeout)
            result = wait_for_detach(ctx, volumes, until, self.attached_before)
        except FatalKubeError:
            raise
        except KubeError as e:  # the pods are gone: a courtesy wait not had, not a failure
            level = logging.DEBUG if e.said else logging.WARNING
            log.log(level, "not waiting for volumes to detach from %s: %s", ctx.node, e)
            return
        if result.error is not None:
            ctx.fail(result.error)
        ctx.report.volumes_detached = len(result.detached)
        ctx.report.volumes_pending = result.pending
        if result.pending:
            log.warning(
                "volumes still attached to %s after %.0f s: %s",
                ctx.node,
                timeout,
                ", ".join(result.pending),
            )
