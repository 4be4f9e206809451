"""The last step of a drain: wait, bounded, until the volumes of the pods that left
the node are detached from it, so their EBS volumes are not yanked from a live
instance.

As Karpenter's terminator does, the wait is for every VolumeAttachment on the node
but those of the pods that stay on it (skipped, tolerating the cordon, stuck): a
pod evicted by an invocation before a hand-over, or one whose generic ephemeral
volume's claim went with it, is waited for too. Attachments of inline volumes (no
PersistentVolume) are left out: no claim ties them to a pod that stays.

The VolumeAttachments are tracked by a watch (the attach-detach controller deletes
each one once the CSI driver has detached its volume); the drain's lock and
condition are shared, so a fatal error elsewhere ends this wait at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from drainer.engine import pods
from drainer.engine.context import DrainContext
from drainer.engine.pods import Pod
from drainer.engine.report import Kind
from drainer.engine.watchers import AttachmentTracker
from drainer.errors import FatalKubeError, KubeError
from drainer.k8s.kube import Kube, Obj

# The drain's logger: its name is part of every line (the CLI prints it).
log = logging.getLogger("drainer.engine.drain")


@dataclass
class Detach:
    detached: list[str] = field(default_factory=list)
    """VolumeAttachment (volume, and its claim when known) of each volume that went:
    while waiting, or before, when it was among the attachments the drain saw at its
    start."""
    pending: list[str] = field(default_factory=list)
    """Volumes still attached when the wait ended."""
    error: FatalKubeError | None = None


def claims_of(kube: Kube, pod_list: Iterable[Pod]) -> dict[str, str]:
    """PersistentVolume -> namespace/claim, for the claims the pods mounted (bound
    claims only)."""
    claims = {(p["metadata"]["namespace"], c) for p in pod_list for c in pods.claim_names(p)}
    volumes = {}
    for namespace, claim_name in sorted(claims):
        claim = kube.get_claim(namespace, claim_name)
        if claim and (claim.get("spec") or {}).get("volumeName"):
            volumes[claim["spec"]["volumeName"]] = f"{namespace}/{claim_name}"
    return volumes


def volumes_of(kube: Kube, pod_list: Iterable[Pod]) -> set[str]:
    """The PersistentVolumes behind the claims the pods mounted (bound claims only)."""
    return set(claims_of(kube, pod_list))


def labelled(volume: str, claims: Mapping[str, str]) -> str:
    """The volume, with its claim when known: "pvc-1a2b of shop/data-db-0"."""
    return f"{volume} of {claims[volume]}" if volume in claims else volume


def attachments_in(items: Iterable[Obj], node: str) -> dict[str, str]:
    """VolumeAttachment name -> volume, of those of `items` on `node` (a
    PersistentVolume's: an inline volume's has none)."""
    found = {}
    for attachment in items:
        spec = attachment.get("spec") or {}
        volume = (spec.get("source") or {}).get("persistentVolumeName")
        if spec.get("nodeName") == node and volume:
            found[attachment["metadata"]["name"]] = volume
    return found


def attachments_on(kube: Kube, node: str) -> dict[str, str]:
    """VolumeAttachment name -> volume, of those on `node` now: what the drain's
    volumes were attached as before it began, so one that detaches before the wait
    (while the pods stop) is counted as detached, not as never attached."""
    return attachments_in(kube.list_volume_attachments()[0], node)


def wait_for_detach(
    ctx: DrainContext,
    volumes: set[str],
    until: float,
    attached_before: dict[str, str],
    *,
    listed: tuple[list[Obj], str] | None = None,
    claims: Mapping[str, str] | None = None,
) -> Detach:
    """Wait until none of `volumes` is attached to the drain's node, `until`, or the
    drain is over; each detached volume is an event. Those of `attached_before`
    (attachments_on at the drain's start) already gone count as detached. `listed`:
    the VolumeAttachments' list already made (one request saved); `claims`: volume ->
    its claim, to name it by (claims_of)."""
    items, version = listed or ctx.kube.list_volume_attachments()
    pending = {n: v for n, v in attachments_in(items, ctx.node).items() if v in volumes}
    result = Detach()

    def detached(name: str, volume: str) -> None:
        what = f"{name} ({labelled(volume, claims or {})})"
        result.detached.append(what)
        ctx.emit(Kind.VOLUME_DETACHED, reason=what)

    with ctx.cond:
        for name, volume in sorted(attached_before.items()):
            if volume in volumes and name not in pending:
                detached(name, volume)
    if not pending:
        return result
    timeout = ctx.options.watch_timeout_seconds
    attachments = AttachmentTracker(ctx.kube, watch_timeout=timeout, cond=ctx.cond)
    attachments.start(items, version)
    try:
        with ctx.cond:
            pending = attachments.attached(ctx.node, volumes)
            while pending and ctx.clock() < until and not ctx.over():
                if isinstance(attachments.error, FatalKubeError):
                    result.error = attachments.error
                    break
                ctx.pause(until)
                still = attachments.attached(ctx.node, volumes)
                for name in sorted(pending.keys() - still.keys()):
                    detached(name, pending[name])
                pending = still
    finally:
        attachments.stop()
    result.pending = sorted(pending.values())
    return result


class Volumes:
    """One drain's volumes: what was attached to the node before the first eviction,
    and the bounded wait at the end until the volumes of the pods that left the node
    are detached."""

    def __init__(self, ctx: DrainContext) -> None:
        self.ctx = ctx
        self.attached_before: dict[str, str] = {}  # VolumeAttachments on the node at the start
        self.claims: dict[str, str] = {}  # volume -> the claim of a pod to evict (its name)
        self.denied: FatalKubeError | None = None  # the claims' read, refused (RBAC)

    def note(self, acting: list[Pod]) -> None:
        """Before the first eviction, when a pod to evict mounts a claim: the node's
        attachments now (a volume may detach before the wait for it), and the volumes
        behind the claims, to name them by (a generic ephemeral volume's claim goes
        with its pod)."""
        ctx = self.ctx
        if ctx.options.volume_detach_timeout <= 0 or not any(pods.claim_names(p) for p in acting):
            return
        try:
            self.attached_before = attachments_on(ctx.kube, ctx.node)
        except KubeError as e:  # then only what detaches during the wait is counted
            log.debug("could not list the volume attachments of %s: %s", ctx.node, e)
        try:
            self.claims = claims_of(ctx.kube, acting)
        except FatalKubeError as e:  # RBAC: the pods go all the same; the wait fails on it
            self.denied = e
        except KubeError as e:  # then the volumes are named without their claims
            log.debug("could not read the claims of the pods on %s: %s", ctx.node, e)

    def wait(self, limit: float, on_node: Callable[[], Iterable[Pod]]) -> bool:
        """Wait, bounded, until every volume attached to the node is detached but
        those of the pods that stay on it (`on_node`: the pods on the node now, as the
        drain's watch has them; called holding the lock), and say what is still
        attached. True when the hand-over moment (`limit`, before the drain's
        deadline) ended the wait with a volume attached: the drain hands over, and the
        next invocation waits on, the timeout counted from the wait's start in the
        invocation that began it (DrainOptions.volume_wait_began; one past the clock
        counts as now)."""
        ctx = self.ctx
        timeout = ctx.options.volume_detach_timeout
        if timeout <= 0:
            return False
        started = ctx.clock()
        claimed = ctx.options.volume_wait_began
        began = started if claimed is None else min(claimed, started)
        try:
            if self.denied is not None:  # after the evictions, as any wait refused
                raise self.denied
            listed = ctx.kube.list_volume_attachments()
            volumes = self._leaving(listed[0], on_node)
            if not volumes:
                return False
            ctx.report.volume_wait_began = began  # the next invocation's, at a hand-over
            until = min(limit, began + timeout)
            result = wait_for_detach(
                ctx, volumes, until, self.attached_before, listed=listed, claims=self.claims
            )
        except FatalKubeError:
            raise
        except KubeError as e:  # the pods are gone: a courtesy wait not had, not a failure
            level = logging.DEBUG if e.said else logging.WARNING
            log.log(level, "not waiting for volumes to detach from %s: %s", ctx.node, e)
            return False
        if result.error is not None:
            ctx.fail(result.error)
        ctx.report.volumes_detached = len(result.detached)
        ctx.report.volumes_pending = result.pending
        if not result.pending:
            return False
        cut = limit < began + timeout  # the limit, not the timeout, bounded the wait
        names = ", ".join(labelled(v, self.claims) for v in result.pending)
        return _say_pending(ctx, names, began, limit if cut else None)

    def _leaving(self, attachments: list[Obj], on_node: Callable[[], Iterable[Pod]]) -> set[str]:
        """The volumes to wait for: those attached to the node now or at the drain's
        start, but those of the pods that stay on it (their claims' volumes)."""
        ctx = self.ctx
        attached = {*attachments_in(attachments, ctx.node).values(), *self.attached_before.values()}
        if not attached:
            return set()
        if ctx.options.pod_selector:  # the node's pods it leaves out stay on the node too
            staying = ctx.kube.list_pods_on_node(ctx.node)[0]
        else:
            with ctx.cond:
                staying = list(on_node())
        return attached - volumes_of(ctx.kube, staying)


def _say_pending(ctx: DrainContext, names: str, started: float, cut: float | None) -> bool:
    """Say what is still attached, after how long since `started` (the wait's start,
    in an invocation before when it was handed over), and what ended the wait: the
    timeout, the drain's stop, or `cut` (the drain's limit, which came first). True:
    that limit was this invocation's hand-over moment, before the drain's deadline."""
    waited = ctx.clock() - started
    if ctx.over():
        why = "the drain stopped"
    elif cut is None:
        why = "VOLUME_DETACH_TIMEOUT_SECONDS"
    elif cut < ctx.deadline:
        log.info(
            "volumes still attached to %s after %.0f s, at this invocation's hand-over "
            "moment; the next invocation waits on: %s",
            ctx.node,
            waited,
            names,
        )
        return True
    else:
        why = "the drain's deadline ended the wait, before VOLUME_DETACH_TIMEOUT_SECONDS"
    log.warning("volumes still attached to %s after %.0f s (%s): %s", ctx.node, waited, why, names)
    return False
