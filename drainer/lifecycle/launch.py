"""The launch lifecycle hook's trigger (LAUNCH_HOOK): a new instance of a node group
waits in Pending:Wait until its node has joined the cluster and is Ready (and, with
LAUNCH_WAIT_DAEMONSETS, its DaemonSet pods on it are Ready), heartbeating; then
CONTINUE. An instance refresh or a replacement so moves on to terminate the next
old node only once the new one can take its pods.

An instance that comes back from the warm pool (Origin "WarmPool") has kept its
Node object, cordoned and labelled by the drain that sent it there: once the node
is Ready again (and EC2's shutdown taint is gone), the function releases it as
`release` does (uncordon, label, record: only what the drainer added; a cordon
someone else set stays, said in a log line), then answers CONTINUE. An instance
launched into the warm pool is answered at once: it is stopped once warmed, and a
node it registers meanwhile is left alone.

A node not Ready within LAUNCH_TIMEOUT_SECONDS of the action's start (or by the end
of this invocation) gets LAUNCH_TIMEOUT_RESULT: ABANDON (Auto Scaling terminates the
instance and launches another; an instance refresh stops) or CONTINUE with a
warning. When the cluster cannot be read at all (RBAC, TLS, no such cluster), the
function says so and answers CONTINUE: a broken drainer must not stop a group from
launching. The hook's own DefaultResult is CONTINUE for the same reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from drainer import aws, logs
from drainer.engine import pods
from drainer.errors import AwsError, ClusterNotFound, FatalKubeError, InstanceNotFound, KubeError
from drainer.k8s.cordon import live_drain, progress_of, release
from drainer.k8s.kube import Kube
from drainer.k8s.nodes import find_node_object
from drainer.lifecycle import ending
from drainer.lifecycle.admission import group_refused, group_tags, resolve_cluster
from drainer.lifecycle.events import (
    EC2_TRIGGERS,
    TERMINATE_HOOK_TRIGGER,
    WARM_POOL_NAME,
    LifecycleEvent,
    Skip,
)
from drainer.lifecycle.job import Tools
from drainer.lifecycle.window import Invocation, hand_over_at

log = logging.getLogger(__name__)

LAUNCH_TRIGGER = "launch-hook"
POLL_SECONDS = 2.0
"""How often the new node is looked at until it registers (a GET by its DNS name,
then a list by label or providerID)."""
READY_POLL_SECONDS = 0.5
"""How often once it has registered (a GET of the node, a list of its pods): the
launch action goes on as soon as the node is Ready."""
SHUTDOWN_TAINT = "node.cloudprovider.kubernetes.io/shutdown"
"""The cloud controller's taint on the node of a stopped instance, removed once the
instance runs again: a node back from the warm pool is not usable before."""


@dataclass(frozen=True)
class Joining:
    """What became of a new instance's wait for its node."""

    result: str
    """joined, not_joined, failed or not_allowed."""
    message: str
    node: str = ""
    heartbeats: int = 0
    action_gone: bool = False
    released: tuple[str, ...] = ()
    """Back from the warm pool: what the release undid on the node."""
    kept: tuple[str, ...] = ()
    """...and what it left, not the drainer's (a cordon someone else set)."""


def handle(event: LifecycleEvent, tools: Tools, invocation: Invocation | None) -> dict[str, Any]:
    """A launch lifecycle action, from the event to what the Auto Scaling group is
    told: the end line."""
    settings, clients = tools.settings, tools.clients
    if not settings.launch_hook:
        return ending.skipped(Skip("launch lifecycle action: LAUNCH_HOOK is off"))
    if event.hook_name != settings.launch_hook_name:
        return ending.skipped(
            Skip(
                f"launch lifecycle action of hook {event.hook_name!r}, not "
                f"LAUNCH_HOOK_NAME {settings.launch_hook_name!r}: another tool's, left alone"
            )
        )
    started = time.monotonic()
    joining = _wait(event, tools, invocation)
    result = _lifecycle_result(joining, settings.launch_timeout_result)
    completed = None
    if result is not None and not joining.action_gone:
        completed = ending.complete(clients, event, result)
    summary: dict[str, Any] = {
        "result": joining.result,
        "lifecycle_result": result or "none",
        "completed": completed,
        "trigger": LAUNCH_TRIGGER,
        "node": joining.node,
        "heartbeats": joining.heartbeats,
        "seconds": round(time.monotonic() - started, 3),
        "message": joining.message,
    }
    if event.out_of_warm_pool:
        summary["origin"] = WARM_POOL_NAME
        summary["released"] = list(joining.released)
        summary["kept"] = list(joining.kept)
        if joining.result != "joined" and result == "CONTINUE" and joining.node:
            # In service all the same: the drain's cordon and label are still there.
            log.error(
                "node %s comes back from the warm pool not released (%s): it stays cordoned "
                "and out of the load balancers; run `release %s` once it is Ready",
                joining.node,
                joining.result,
                joining.node,
            )
    level = logging.INFO if joining.result == "joined" else logging.WARNING
    log.log(
        level,
        "launch finished: %s; lifecycle result %s",
        joining.message,
        result or "none",
        extra=logs.safe_fields({"event": "launch_finished", **summary}),
    )
    return summary


def _lifecycle_result(joining: Joining, on_timeout: str) -> str | None:
    if joining.result == "not_allowed":
        return None
    if joining.result == "not_joined":
        return "ABANDON" if on_timeout == "abandon" else "CONTINUE"
    return "CONTINUE"  # joined; or failed: never stop a group from launching for our sake


def _wait(event: LifecycleEvent, tools: Tools, invocation: Invocation | None) -> Joining:
    settings, clients, clock = tools.settings, tools.clients, tools.clock
    if event.into_warm_pool:
        return Joining(
            "joined",
            f"instance {event.instance_id} goes to the warm pool: no node to wait for (a "
            "node it registers while warmed is left alone)",
        )
    try:
        tags = group_tags(clients.autoscaling, event.asg_name)
        refused = group_refused(settings, clients.autoscaling, event.asg_name, tags=tags)
        if refused:
            return Joining("not_allowed", f"{refused}; leaving its lifecycle action alone")
        hook = aws.lifecycle_hook(clients.autoscaling, event.asg_name, event.hook_name)
        cluster_name = resolve_cluster(event, hook, settings, tags)
        if not cluster_name:
            return Joining("failed", f"no cluster for Auto Scaling group {event.asg_name}")
        logs.bind(cluster=cluster_name)
        identity = aws.describe_instance(clients.ec2, event.instance_id)
        cluster = aws.describe_cluster(clients.eks, cluster_name)
    except (InstanceNotFound, ClusterNotFound) as e:
        return Joining("failed", str(e))
    except AwsError as e:
        if not aws.is_permanent(e):
            raise  # Lambda retries the event; the hook's heartbeat timeout is the backstop
        return Joining("failed", str(e))
    began = event.waiting_since or clock()
    until = began + settings.launch_timeout_seconds
    stop = hand_over_at(invocation, settings, clock)
    limit = until if stop is None else min(until, stop)
    heartbeat = aws.Heartbeat(clients.autoscaling, event, max(1.0, hook.heartbeat_interval))
    heartbeat.start()
    try:
        kube = tools.kube_factory(cluster, cluster.name, settings)
        try:
            joining = _until_ready(
                kube, identity, tools, limit, began, restarted=event.out_of_warm_pool
            )
            if joining.result == "joined" and event.out_of_warm_pool:
                joining = _release(kube, joining, began, tools.clock)
        finally:
            kube.close()
    except FatalKubeError as e:  # TLS, a refused token: the cluster cannot be read
        joining = Joining("failed", f"the cluster cannot be read: {e}")
    finally:
        heartbeat.stop()
    return replace(joining, heartbeats=heartbeat.beats, action_gone=heartbeat.gone)


def _release(kube: Kube, joining: Joining, began: float, clock: Callable[[], float]) -> Joining:
    """Back from the warm pool and Ready: undo what the drain that sent it there added
    (release), leaving what someone else set. A release that fails is said, and the
    launch goes on all the same: the node is there, cordoned, and `release` by hand
    undoes it."""
    try:
        node = kube.get_node(joining.node)
        if node is None:
            return replace(joining, message=f"{joining.message}; the node went away meanwhile")
        if progress_of(node) is None:  # never drained: it joined on its way into service
            log.info("node %s has no eks-node-drainer record: nothing to release", joining.node)
            return joining
        live = live_drain(node, clock(), EC2_TRIGGERS | {TERMINATE_HOOK_TRIGGER})
        if live is not None:
            log.warning(
                "node %s back from the warm pool is being drained (%s, begun %.0f s ago): "
                "not released",
                joining.node,
                live.trigger,
                clock() - live.since,
            )
            return replace(
                joining, message=f"{joining.message}; a {live.trigger} drain is under way"
            )
        done = release(kube, node)
    except KubeError as e:
        log.error(
            "node %s is back from the warm pool but could not be released (run `release %s` "
            "by hand): %s",
            joining.node,
            joining.node,
            e,
        )
        return replace(joining, message=f"{joining.message}; release failed: {e}")
    for what in done.kept:
        log.warning("node %s back from the warm pool: %s", joining.node, what)
    cordoned = bool((node.get("spec") or {}).get("unschedulable"))
    schedulable = not cordoned or "uncordoned" in done.changed
    said = "schedulable" if schedulable else "still cordoned (not by the drainer)"
    return replace(
        joining,
        message=(
            f"node {joining.node} is back from the warm pool, Ready and {said} "
            f"{clock() - began:.0f} s after the launch began"
        ),
        released=tuple(done.changed),
        kept=tuple(done.kept),
    )


def _until_ready(
    kube: Kube,
    identity: aws.NodeIdentity,
    tools: Tools,
    limit: float,
    began: float,
    *,
    restarted: bool = False,
) -> Joining:
    """Look at the instance's node until it is ready or `limit` passes. `restarted`:
    the instance comes back from the warm pool, its node must also have lost EC2's
    shutdown taint."""
    clock = tools.clock
    waiting_for = "its node to register"
    said = ""
    node = ""
    while True:
        try:
            node, waiting_for = _readiness(
                kube, identity, tools.settings.launch_wait_daemonsets, restarted=restarted
            )
        except FatalKubeError as e:
            return Joining("failed", f"the cluster cannot be read: {e}", node)
        except KubeError as e:
            log.info("looking at the new node failed for now: %s", e)
        now = clock()
        if waiting_for and waiting_for != said:
            log.info("instance %s: waiting for %s", identity.instance_id, waiting_for)
            said = waiting_for
        if not waiting_for:
            return Joining(
                "joined",
                f"node {node} of instance {identity.instance_id} is Ready "
                f"{now - began:.0f} s after the launch began",
                node,
            )
        if now >= limit:
            return Joining(
                "not_joined",
                f"instance {identity.instance_id}: still waiting for {waiting_for} "
                f"{now - began:.0f} s after the launch began (LAUNCH_TIMEOUT_SECONDS or the "
                "invocation's end)",
                node,
            )
        pause = READY_POLL_SECONDS if node else POLL_SECONDS
        tools.sleep(max(0.0, min(pause, limit - now)))


def _readiness(
    kube: Kube, identity: aws.NodeIdentity, daemonsets: bool, *, restarted: bool = False
) -> tuple[str, str]:
    """(the node's name, what it still waits for; "" when ready)."""
    found = find_node_object(
        kube, identity.private_dns_name, identity.hostname_candidates, identity.provider_id_suffix
    )
    if found is None:
        return "", "its node to register"
    name = str(found["metadata"]["name"])
    if not pods.is_ready(found):
        return name, f"node {name} to be Ready"
    taints = (found.get("spec") or {}).get("taints") or []
    if restarted and any(t.get("key") == SHUTDOWN_TAINT for t in taints):
        return name, f"node {name} to lose the taint {SHUTDOWN_TAINT}"
    if not daemonsets:
        return name, ""
    on_node, _ = kube.list_pods_on_node(name)
    waiting = sorted(
        pods.name(p) for p in on_node if pods.is_daemonset_pod(p) and not pods.is_ready(p)
    )
    if waiting:
        return name, f"its DaemonSet pods to be Ready ({', '.join(waiting[:5])})"
    return name, ""
