"""A node back from the warm pool and Ready, for the launch hook (drainer/lifecycle/
launch.py): undo what the drain that sent it there added (k8s/cordon.py `release`:
the cordon, the label, the record), leaving what someone else set, and say what
became of it in words true of it: released and schedulable, still cordoned by
someone else (with or without a record of ours), or not released and why (a later
drain's record, a drain under way, the release failed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drainer.errors import KubeError
from drainer.k8s.cordon import live_drain, progress_of, release
from drainer.k8s.kube import Kube
from drainer.lifecycle.events_ec2 import EC2_TRIGGERS
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Back:
    """What became of a node back from the warm pool."""

    message: str
    """The launch's message: the one it had, added to or said anew."""
    released: tuple[str, ...] = ()
    """What the release undid on the node."""
    kept: tuple[str, ...] = ()
    """...and what it left, not the drainer's (a cordon someone else set)."""
    cordoned: bool = False
    """It stays cordoned, not by the drainer: it takes no pods until someone uncordons it."""


def release_back(
    kube: Kube, name: str, message: str, began: float, clock: Callable[[], float]
) -> Back:
    """Release node `name`, Ready (`message`: the launch's so far). A release that
    fails is said, and the launch goes on all the same: the node is there, cordoned,
    and `release` by hand undoes it."""
    try:
        node = kube.get_node(name)
        if node is None:
            return Back(f"{message}; the node went away meanwhile")
        kept = _not_released(node, name, message, began, clock)
        if kept is not None:
            return kept
        done = release(kube, node)
    except KubeError as e:
        log.error(
            "node %s is back from the warm pool but could not be released (run `release %s` "
            "by hand): %s",
            name,
            name,
            e,
        )
        return Back(f"{message}; release failed: {e}")
    for what in done.kept:
        log.warning("node %s back from the warm pool: %s", name, what)
    schedulable = not _cordoned(node) or "uncordoned" in done.changed
    said = "schedulable" if schedulable else "still cordoned (not by the drainer)"
    return Back(
        f"node {name} is back from the warm pool, Ready and {said} "
        f"{clock() - began:.0f} s after the launch began",
        tuple(done.changed),
        tuple(done.kept),
        cordoned=not schedulable,
    )


def _not_released(
    node: dict[str, Any], name: str, message: str, began: float, clock: Callable[[], float]
) -> Back | None:
    """Why the node is not released (None: release it): no record of ours (a cordon
    someone else set is told), a record of a drain begun or ended after this launch
    began (a late or repeated launch event: the instance went in and out of service
    since), or a drain under way."""
    record = progress_of(node)
    if record is None:  # never drained by us: nothing to release
        log.info("node %s has no eks-node-drainer record: nothing to release", name)
        if not _cordoned(node):
            return Back(message)
        return Back(
            f"node {name} is back from the warm pool, Ready but cordoned, not by "
            "eks-node-drainer (no record of a drain of ours: nothing to release), "
            f"{clock() - began:.0f} s after the launch began",
            cordoned=True,
        )
    times = [record.get(k) for k in ("since", "at")]
    if any(isinstance(t, int | float) and t > began for t in times):
        log.warning(
            "node %s was drained again after this launch began (a late launch event): not released",
            name,
        )
        return Back(f"{message}; drained again since: kept")
    live = live_drain(node, clock(), EC2_TRIGGERS | {TERMINATE_HOOK_TRIGGER})
    if live is not None:
        log.warning(
            "node %s back from the warm pool is being drained (%s, begun %.0f s ago): not released",
            name,
            live.trigger,
            clock() - live.since,
        )
        return Back(f"{message}; a {live.trigger} drain is under way")
    return None


def _cordoned(node: dict[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))
