"""What became of a launch (drainer/lifecycle/launch.py), and how its end is said:
the wait's outcome (Joining), the end line's keys (`launch_finished`) and the
notice's advice.

An answer is sent only while the lifecycle action is alive. Once the heartbeat has
found it gone (the hook's timeout; or someone completed it, which no call tells),
what the group did is taken from the hook's DefaultResult, not from the answer the
launch would have sent: the end line says `action_gone` (nothing sent, `completed:
false`, as a drain's end line does), and an instance back from the warm pool that
the DefaultResult put in service (CONTINUE, the stack's hook's) with its node not
usable in time is said not released, its node still cordoned by the drain into the
pool, as when the launch itself answered CONTINUE.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from drainer.lifecycle import joined, launch_release
from drainer.lifecycle.events_hook import WARM_POOL_NAME, LifecycleEvent

log = logging.getLogger(__name__)

LAUNCH_TRIGGER = "launch-hook"


@dataclass(frozen=True)
class Joining:
    """What became of a new instance's wait for its node."""

    result: str
    """joined, not_joined, failed, not_allowed, stale (the action was gone before
    its first heartbeat: answered already) or action_gone (it ended during the wait)."""
    message: str
    node: str = ""
    heartbeats: int = 0
    action_gone: bool = False
    missing: str = ""
    """Not joined: what the node still lacked, each lack (joined.Look.missing)."""
    cordoned: bool = False
    """Joined cordoned (not by the drainer): it takes no pods until someone uncordons it."""
    cluster: str = ""
    node_uid: str = ""
    released: tuple[str, ...] = ()
    """Back from the warm pool: what the release undid on the node."""
    kept: tuple[str, ...] = ()
    """...and what it left, not the drainer's (a cordon someone else set)."""
    not_released: str = ""
    """Back from the warm pool and Ready, but not released: why (launch_release.Back)."""
    default_result: str = ""
    """The hook's DefaultResult: what the group did with an action gone unanswered."""


def summary(
    event: LifecycleEvent,
    joining: Joining,
    result: str | None,
    completed: bool | None,
    seconds: float,
) -> dict[str, Any]:
    """The end line's keys (launch_finished)."""
    said: dict[str, Any] = {
        "result": joining.result,
        "lifecycle_result": result or "none",
        "completed": completed,
        "trigger": LAUNCH_TRIGGER,
        "cluster": joining.cluster,
        "node": joining.node,
        "cordoned": joining.cordoned,
        "heartbeats": joining.heartbeats,
        "seconds": round(seconds, 3),
        "message": joining.message,
    }
    # Gone before the answer: nothing sent (frame.answer). A stale one into the warm
    # pool was sent, and found gone only then.
    gone = joining.action_gone and completed is False and joining.result != "stale"
    if gone:
        said["action_gone"] = True
    if joining.result == "not_joined":
        said["waiting_for"] = joining.missing
    if event.out_of_warm_pool:
        applied = joining.default_result if gone else result  # what the group did
        said.update(_back_from_warm_pool(event, joining, applied))
    return said


def _back_from_warm_pool(
    event: LifecycleEvent, joining: Joining, applied: str | None
) -> dict[str, Any]:
    """The end line's keys of a return from the warm pool: what the release did and,
    when the group put the instance in service (`applied`) with its node not
    released, why, said in an error line with the command that releases it."""
    said: dict[str, Any] = {
        "origin": WARM_POOL_NAME,
        "released": list(joining.released),
        "kept": list(joining.kept),
        "not_released": joining.not_released,
    }
    unready = joining.result != "joined" and applied == "CONTINUE"
    if not joining.node and joining.result == "failed" and applied == "CONTINUE":
        # No look worked: in service with its node as the drain left it, unnamed.
        said["not_released"] = joining.result
        log.error(
            "instance %s comes back from the warm pool and the cluster could not be read: "
            "its node keeps what a drain into the pool left on it (a cordon, out of the "
            "load balancers), if one did; run `%s` once the function can read the cluster",
            event.instance_id,
            launch_release.release_by_instance(event.instance_id),
        )
    elif joining.node and (unready or joining.result == "action_gone"):
        # In service all the same: the drain's cordon and label are still there.
        said["not_released"] = joining.result
        log.error(
            "node %s comes back from the warm pool not released (%s): it stays cordoned "
            "and out of the load balancers; run `%s` once it is Ready",
            joining.node,
            joining.result,
            launch_release.release_command(joining.node),
        )
    return said


def advice(
    joining: Joining, *, from_warm_pool: bool, unreleased: bool = False, instance_id: str = ""
) -> str:
    """What the notice tells an operator to do. Joined cordoned: the cordon; not
    released: how to release it. At the timeout: each thing the node still lacked; a
    fresh node's cordon that was not waited for (LAUNCH_WAIT_FOR_UNCORDON=false) is
    told besides. Back from the warm pool, a cordon at the timeout is the drain's,
    which the release undoes once the node is usable: told only when the instance
    goes into service all the same (`unreleased`: CONTINUE at the timeout, answered
    or the hook's DefaultResult)."""
    if joining.not_released in launch_release.TOLD:
        return launch_release.advice(joining.node, joining.not_released)
    if from_warm_pool and unreleased and joining.result == "failed":
        return launch_release.unread_advice(joining.node, instance_id)
    if joining.result == "joined":
        if not joining.cordoned:
            return ""
        return joined.cordon_advice(joining.node, from_warm_pool=from_warm_pool)
    said = joined.advice(joining.missing)
    if unreleased:
        said = f"{said} {launch_release.unready_advice(joining.node)}"
    lacks = joining.missing.split(", ")
    if joining.cordoned and not from_warm_pool and "uncordon" not in lacks:
        said = f"{said} {joined.also_cordoned(joining.node)}".strip()
    return said
