"""A node back from the warm pool and Ready, for the launch hook (drainer/lifecycle/
launch.py): undo what the drain that sent it there added (k8s/cordon.py `release`:
the cordon, the label, the record), leaving what someone else set, and say what
became of it in words true of it: released and schedulable, still cordoned by
someone else (with or without a record of ours), or not released and why (a later
drain's record, a drain under way, the record of the drain into the pool still
draining, the release failed).

A node not released stays cordoned and out of the load balancers, and is never left
so without a word (`not_released`): a release that failed (RBAC, the API) is told as
the launch's notice and a Warning Event, with the command that releases it; one left
to a drain under way, or to the record of a later drain of ours (begun or ended since
this launch began: its cordon is that drain's, which `release` must not undo early),
is said in the end line and a Normal Event only: that drain tells its own end. A
record of the terminate hook's drain into the pool still `draining` (`drain_recorded`)
is told too: that drain may run on after its action ended (the engine does not stop
when the heartbeat finds the action gone), and releasing under it would let it evict
what lands on the node since, or it died, and nothing else will tell it; the notice
says how to tell which, and how to release.
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
from drainer.lifecycle.events_fields import iso
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER

log = logging.getLogger(__name__)

RELEASE_FAILED = "release_failed"
DRAINED_SINCE = "drained_since"
DRAIN_UNDER_WAY = "drain_under_way"
DRAIN_RECORDED = "drain_recorded"
TOLD = frozenset({RELEASE_FAILED, DRAIN_RECORDED})
"""The `not_released` reasons an operator is told of (the notice, a Warning Event): a
drain under way, or a later one's record, is that drain's to tell."""


def release_command(node: str) -> str:
    """The command that releases `node` by hand (the CLI's `release`)."""
    return f"eks-node-drainer release --node {node}"


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
    not_released: str = ""
    """Why what the drainer added stays (RELEASE_FAILED, DRAINED_SINCE, DRAIN_UNDER_WAY,
    DRAIN_RECORDED); "" when released, or when there was nothing to release."""


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
            "node %s is back from the warm pool but could not be released (run `%s` by hand): %s",
            name,
            release_command(name),
            e,
        )
        return Back(
            f"{message}; not released, the release failed ({e}): it stays cordoned and out "
            f"of the load balancers until `{release_command(name)}` runs",
            not_released=RELEASE_FAILED,
        )
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
    someone else set is told), a drain under way (begun before this launch or during
    its wait), or a record of a drain begun or ended after this launch began (a late
    or repeated launch event: the instance went in and out of service since)."""
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
    live = live_drain(node, clock(), EC2_TRIGGERS | {TERMINATE_HOOK_TRIGGER})
    if live is not None and live.trigger == TERMINATE_HOOK_TRIGGER and live.since <= began:
        return _drain_recorded(name, message, live.since, live.until)
    if live is not None:  # an EC2 event's, or begun during this launch's wait: that drain's
        log.warning(
            "node %s back from the warm pool is being drained (%s, begun %.0f s ago): not released",
            name,
            live.trigger,
            clock() - live.since,
        )
        return Back(
            f"{message}; not released: a {live.trigger} drain is under way, which tells "
            "its own end",
            not_released=DRAIN_UNDER_WAY,
        )
    times = [record.get(k) for k in ("since", "at")]
    if any(isinstance(t, int | float) and t > began for t in times):
        log.warning(
            "node %s was drained again after this launch began: not released, its cordon is "
            "that drain's",
            name,
        )
        return Back(
            f"{message}; not released: its record is of a {record.get('trigger') or 'later'} "
            "drain of ours begun or ended since this launch began: its cordon is that "
            "drain's, whose own end says what becomes of the node",
            not_released=DRAINED_SINCE,
        )
    return None


def _drain_recorded(name: str, message: str, since: float, until: float) -> Back:
    """The record of the drain into the pool still says draining: not released."""
    log.warning(
        "node %s back from the warm pool: the record of the drain into the pool still says "
        "draining: not released",
        name,
    )
    return Back(
        f"{message}; not released: the record of the drain into the warm pool (begun "
        f"{iso(since)}, its deadline {iso(until)}) still says draining",
        not_released=DRAIN_RECORDED,
    )


def advice(node: str, not_released: str) -> str:
    """What the notice tells an operator to do about a node not released (TOLD)."""
    if not_released == DRAIN_RECORDED:
        return (
            "The drain that sent the instance to the warm pool may still run, or have "
            "ended without recording it (its invocation died, or it stopped when its "
            "lifecycle action was gone): the function's "
            "log tells (the instance's drain lines). A release stops a drain that runs where "
            "it is (it evicts no more); to let it end first, wait until no drain runs (or "
            f"the deadline above), then run `{release_command(node)}` (`kubectl drainer "
            f"release {node}`), which undoes only what the drainer added."
        )
    return (
        "The node takes no pods and stays out of the load balancers until it is "
        "released: fix what refused the release (the error above; RBAC: kubectl apply "
        f"-f k8s-rbac/), then run `{release_command(node)}` (`kubectl drainer release "
        f"{node}`), which undoes only what the drainer added; `kubectl uncordon {node}` "
        "alone leaves it out of the load balancers."
    )


def release_by_instance(instance_id: str) -> str:
    """The command that releases the node of `instance_id`, its name unknown."""
    return f"eks-node-drainer release --instance-id {instance_id}"


def unread_advice(node: str, instance_id: str) -> str:
    """For the notice of an instance back from the warm pool, in service, whose node
    the function could not read at the end (`node`: its name, when an earlier look
    found it): a drain into the pool may have left its cordon on it."""
    command = release_command(node) if node else release_by_instance(instance_id)
    return (
        "The function could not read the cluster (the error above), so it released nothing: "
        "if a drain sent the instance to the warm pool, its node is still cordoned and out "
        "of the load balancers. Fix what stops the function (its network path to the API "
        f"server, its access entry or RBAC), then run `{command}` with the cluster's "
        "kubeconfig (and the instance's region), which undoes only what the drainer added."
    )


def unready_advice(node: str) -> str:
    """For the notice of a node back from the warm pool that was not usable in time,
    its instance in service all the same (CONTINUE): the drain's cordon stays."""
    return (
        "The node stays cordoned and out of the load balancers by the drain that sent it "
        "to the warm pool: the release waits for the node to be usable, and it was not in "
        f"time. Once it is Ready and free of the taints named above, run `{release_command(node)}`."
    )


def _cordoned(node: dict[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))
