"""The launch lifecycle hook's trigger (LAUNCH_HOOK): a new instance of a node group
waits in Pending:Wait until its node can take pods, heartbeating; then CONTINUE. An
instance refresh or a replacement so moves on to terminate the next old node only
once the new one can take its pods. What "can take pods" means (Ready, the startup
taints gone, a cordon told or waited for, with LAUNCH_WAIT_DAEMONSETS its DaemonSet
pods Ready) is drainer/lifecycle/joined.py's.

An instance that comes back from the warm pool (Origin "WarmPool") has kept its
Node object, cordoned and labelled by the drain that sent it there: once the node
is Ready again (and EC2's shutdown taint is gone), the function releases it as
`release` does (uncordon, label, record: only what the drainer added; a cordon
someone else set stays, said in a log line and the notice; launch_release.py), then
answers CONTINUE. A node it does not release stays cordoned and is never left so
without a word: the end line's `not_released` says why; a release that failed, or
one held by the record of the drain into the pool still saying draining, is told by
a notice and a Warning Event that name the command that releases it (one left to a
later or running drain of ours, by that drain's own end). An instance launched into
the warm pool is answered at once: it is stopped once warmed, and a node it
registers meanwhile is left alone.

An event whose action is gone before its first heartbeat (a duplicate delivery of
one answered already, a late one after the hook's timeout) is stale: its node is not
waited for, nothing is answered, and no notice says it did not join. Back from the
warm pool, such an event is waited for all the same (the hook's timeout may have put
the instance in service, cordoned) unless EC2 says the instance is not running
(terminated, stopped, or on the way: launch_locate.NOT_RUNNING): then it is stale too.
So is one into the warm pool whose answer finds the action gone (answered at once,
no heartbeat), and one of an instance EC2 no longer knows whose action is gone too;
while its action is alive, an instance EC2 does not know is one EC2 has not caught
up with yet: looked for again, then retried by Lambda, never skipped
(launch_locate.py). An action that ends during the wait (completed by hand, the
hook's timeout) stops it: the launch ends `action_gone`, answering nothing, with no
notice. A return from the warm pool waited for with its action gone is told by what
the hook's DefaultResult did, not by the answer it could not send (launch_summary.py):
put in service (CONTINUE) with its node not usable in time, the node is said not
released, as when the launch answers CONTINUE.

A node that cannot take pods within LAUNCH_TIMEOUT_SECONDS of the action's start (or
by the end of this invocation) gets LAUNCH_TIMEOUT_RESULT: ABANDON (Auto Scaling
terminates the instance and launches another; an instance refresh stops) or CONTINUE
with a warning; the end line, an Event on the node and the notice say what it still
lacked, each thing it lacked when several (joined.look), with the notice's advice
for each. When the cluster cannot be read at all (RBAC, TLS, no such cluster), or
its API server could not be reached for the wait's last look (a 5xx, a connection
refused, a timeout: each such look is tried again until the limit, and one that
succeeded before is no answer then), the function says so and answers CONTINUE
(`failed`): a broken drainer must not stop a group from launching. The hook's own
DefaultResult is CONTINUE for the same reason.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from drainer import aws, logs
from drainer.errors import AwsError, FatalKubeError, KubeError
from drainer.k8s.events import EventPoster, Regarding
from drainer.k8s.kube import Kube
from drainer.lifecycle import (
    ending,
    frame,
    joined,
    launch_locate,
    launch_release,
    launch_summary,
    notices,
)
from drainer.lifecycle.events_fields import Skip
from drainer.lifecycle.events_hook import LifecycleEvent
from drainer.lifecycle.job import Tools
from drainer.lifecycle.launch_summary import Joining
from drainer.lifecycle.window import Invocation, hand_over_at

log = logging.getLogger(__name__)

LAUNCH_TRIGGER = launch_summary.LAUNCH_TRIGGER
POLL_SECONDS = 2.0
"""How often the new node is looked at until it registers (a GET by its DNS name,
then a list by label or providerID)."""
READY_POLL_SECONDS = 0.5
"""How often once it has registered (a GET of the node, a list of its pods): the
launch action goes on as soon as the node can take pods."""
SHUTDOWN_TAINT = joined.SHUTDOWN_TAINT
AGAIN = (
    "looked at again until the limit; should it still fail then, the cluster could not "
    "be read: `failed`, CONTINUE"
)
"""What a look that failed for now (not fatal: a 5xx, a timeout) leads to, for its log line."""
LIMIT = "LAUNCH_TIMEOUT_SECONDS or the invocation's end"
GONE = "the action was gone (the hook's DefaultResult or whoever completed it decided)"
FIRST_BEAT_SECONDS = 5.0
"""How long the first heartbeat's answer is waited for before the node is looked at
(one RecordLifecycleActionHeartbeat: well under a second). Past it the wait begins,
and still ends stale when that answer says the action is gone."""


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
    completed = frame.answer(clients, event, result, action_gone=joining.action_gone)
    if completed is False and event.into_warm_pool and not joining.action_gone:
        joining = _stale(event.instance_id, "into_warm_pool")
    summary = launch_summary.summary(event, joining, result, completed, time.monotonic() - started)
    quiet = joining.result in ("stale", "action_gone") or (
        joining.result == "joined" and not joining.cordoned and not joining.not_released
    )
    level = logging.INFO if quiet else logging.WARNING
    log.log(
        level,
        "launch finished: %s; lifecycle result %s%s",
        joining.message,
        result or "none",
        f", not sent: {GONE}" if summary.get("action_gone") else "",
        extra=logs.safe_fields({"event": "launch_finished", **summary}),
    )
    _metrics(joining, summary, settings.cluster_name)
    told = joining.not_released in launch_release.TOLD
    if joining.result in ("not_joined", "failed") or joining.cordoned or told:
        # In service, cordoned: not usable in time, or its node never read.
        unreleased = summary.get("not_released") in ("not_joined", "failed")
        advice = launch_summary.advice(
            joining,
            from_warm_pool=event.out_of_warm_pool,
            unreleased=unreleased,
            instance_id=event.instance_id,
        )
        ending.notify(settings, clients, notices.launch_notice(event, summary, advice))
    return summary


def _metrics(joining: Joining, summary: dict[str, Any], cluster_name: str) -> None:
    """The launch's metrics line, as a drain's: LaunchJoined, LaunchNotJoined (not
    ready by the limit), LaunchFailed (the cluster could not be read), none for a
    group that is not the function's; a stale event, or one whose action ended
    during the wait, counts none of them."""
    if joining.result == "not_allowed":
        return
    counts = {
        "LaunchJoined": int(joining.result == "joined"),
        "LaunchNotJoined": int(joining.result == "not_joined"),
        "LaunchFailed": int(joining.result == "failed"),
    }
    ending.write_metrics(joining.cluster or cluster_name, counts, float(summary["seconds"]))


def _lifecycle_result(joining: Joining, on_timeout: str) -> str | None:
    if joining.result in ("not_allowed", "stale", "action_gone"):
        return None
    if joining.result == "not_joined":
        return "ABANDON" if on_timeout == "abandon" else "CONTINUE"
    return "CONTINUE"  # joined; or failed: never stop a group from launching for our sake


def _wait(event: LifecycleEvent, tools: Tools, invocation: Invocation | None) -> Joining:
    settings, clients, clock = tools.settings, tools.clients, tools.clock
    try:
        admitted = frame.admit_hook(event, tools)
        if isinstance(admitted, str):
            return Joining("not_allowed", admitted)
        if event.into_warm_pool:  # answered at once, but only for a group of ours
            return Joining(
                "joined",
                f"instance {event.instance_id} goes to the warm pool: no node to wait for "
                "(a node it registers while warmed is left alone)",
            )
        where = launch_locate.locate(event, admitted, tools)
    except AwsError as e:
        if not aws.is_permanent(e):
            raise  # Lambda retries the event; the hook's heartbeat timeout is the backstop
        return Joining("failed", str(e))
    if isinstance(where, frame.NotLocated):
        if where.no_instance:  # and its action is gone (launch_locate.locate)
            return replace(_stale(event.instance_id, "unknown"), cluster=where.cluster_name)
        return Joining("failed", where.message, cluster=where.cluster_name)
    began = event.waiting_since or clock()
    until = began + settings.launch_timeout_seconds
    stop = hand_over_at(invocation, settings, clock)
    limit = until if stop is None else min(until, stop)
    # A node back from the warm pool is released whether or not its action is still
    # there: the hook's timeout may have put the instance in service, cordoned.
    warm = event.out_of_warm_pool
    with frame.heartbeating(clients.autoscaling, event, admitted.hook) as heartbeat:
        joining = _at_first_beat(heartbeat, event, where.identity)
        if joining is None:
            joining = _on_the_cluster(
                event,
                tools,
                where,
                began=began,
                limit=limit,
                ended=(lambda: None) if warm else (lambda: _ended(heartbeat, event.instance_id)),
                gone=lambda: heartbeat.gone,
            )
    return replace(
        joining,
        heartbeats=heartbeat.beats,
        action_gone=heartbeat.gone,
        cluster=where.cluster_name,
        default_result=admitted.hook.default_result,
    )


def _at_first_beat(
    heartbeat: aws.Heartbeat, event: LifecycleEvent, identity: aws.NodeIdentity
) -> Joining | None:
    """The launch's end when its action is gone at the first heartbeat (stale), None to
    wait for the node. Back from the warm pool, only when EC2 says the instance is not
    running (launch_locate.NOT_RUNNING: terminated, stopped, or on the way): one that
    runs may be in service by the hook's timeout, cordoned, and is released all the same."""
    if not event.out_of_warm_pool:
        return _ended(heartbeat, event.instance_id) if _first_beat_settled(heartbeat) else None
    if identity.state not in launch_locate.NOT_RUNNING or not _first_beat_settled(heartbeat):
        return None
    if heartbeat.gone and heartbeat.beats == 0 and heartbeat.failures == 0:
        return _stale(event.instance_id, "not_running", identity.state)
    return None


def _first_beat_settled(heartbeat: aws.Heartbeat) -> bool:
    """Wait (FIRST_BEAT_SECONDS at most, in real time: the ticker's thread calls AWS)
    until the heartbeat's first beat has an answer: recorded, failed, or the action
    gone. False when it has none by then."""
    pause = threading.Event()
    until = time.monotonic() + FIRST_BEAT_SECONDS
    while not (heartbeat.beats or heartbeat.failures or heartbeat.gone):
        if time.monotonic() >= until:
            return False
        pause.wait(0.01)
    return True


def _ended(heartbeat: aws.Heartbeat, instance_id: str) -> Joining | None:
    """The launch's end once the heartbeat found its action gone during the wait
    (action_gone: waiting on would only end in a "not joined" that nobody waits
    for), None while it is alive. Gone at the very first beat (none recorded, none
    failed) is stale: answered before this event came."""
    if not heartbeat.gone:
        return None
    if heartbeat.beats == 0 and heartbeat.failures == 0:
        return _stale(instance_id)
    return Joining(
        "action_gone",
        f"the launch lifecycle action of instance {instance_id} ended during the wait for "
        "its node, answered elsewhere or timed out (completed by hand or by another tool, "
        "or the hook's timeout applied its DefaultResult): the wait stopped and nothing "
        "is answered",
        action_gone=True,
    )


def _stale(instance_id: str, why: str = "answered", state: str = "") -> Joining:
    return Joining(
        "stale", launch_locate.STALE[why].format(instance_id, state=state), action_gone=True
    )


def _on_the_cluster(
    event: LifecycleEvent,
    tools: Tools,
    where: frame.Located,
    *,
    began: float,
    limit: float,
    ended: Callable[[], Joining | None],
    gone: Callable[[], bool],
) -> Joining:
    """Wait for the node, release it when it is back from the warm pool, and tell the
    end on it as an Event. `ended`: the launch's end once its action is gone; `gone`:
    whether it is (back from the warm pool, waited for all the same: nothing is sent)."""
    settings, cluster = tools.settings, where.cluster
    try:
        kube = tools.kube_factory(cluster, cluster.name, settings)
        poster = EventPoster(kube, clock=tools.clock)
        try:
            restarted = event.out_of_warm_pool
            joining = _until_ready(
                kube, where.identity, tools, limit, began, restarted=restarted, ended=ended
            )
            if joining.result == "joined" and restarted:
                joining = _release(kube, joining, began, tools.clock)
            told = _lifecycle_result(joining, settings.launch_timeout_result)
            if told is not None and gone():
                told = f"nothing: {GONE}"
            _tell_node(poster, joining, told)
        finally:
            poster.close(then=kube.close)
    except FatalKubeError as e:  # TLS, a refused token: the cluster cannot be read
        joining = Joining("failed", f"the cluster cannot be read: {e}")
    return joining


def _tell_node(poster: EventPoster, joining: Joining, told: str | None) -> None:
    """The launch's end as an Event on the node (`kubectl describe node`): Joined,
    JoinedCordoned or NotJoined, with what the Auto Scaling group is told; back from
    the warm pool and not released, ReleaseFailed or NotReleased (a Warning when the
    notice tells it: launch_release.TOLD; Normal when a later or running drain's)."""
    if not joining.node or told is None or joining.result == "failed":
        return
    group = f"; the Auto Scaling group is told {told}"
    if joining.result == "not_joined":
        reason, warning = "NotJoined", True
    elif joining.not_released:  # back from the warm pool, still cordoned by a drain
        failed = joining.not_released == launch_release.RELEASE_FAILED
        reason = "ReleaseFailed" if failed else "NotReleased"
        warning = joining.not_released in launch_release.TOLD
    elif joining.cordoned:
        reason, warning = "JoinedCordoned", True
    else:
        reason, warning = "Joined", False
    regarding = Regarding("Node", joining.node, uid=joining.node_uid)
    poster.post(regarding, reason, "Launch", f"{joining.message}{group}", warning=warning)


def _release(kube: Kube, joining: Joining, began: float, clock: Callable[[], float]) -> Joining:
    """Back from the warm pool and Ready: undo what the drain that sent it there added,
    leaving what someone else set (launch_release.py)."""
    back = launch_release.release_back(kube, joining.node, joining.message, began, clock)
    return replace(
        joining,
        message=back.message,
        released=back.released,
        kept=back.kept,
        cordoned=joining.cordoned or back.cordoned,
        not_released=back.not_released,
    )


def _until_ready(
    kube: Kube,
    identity: aws.NodeIdentity,
    tools: Tools,
    limit: float,
    began: float,
    *,
    restarted: bool = False,
    ended: Callable[[], Joining | None] = lambda: None,
) -> Joining:
    """Look at the instance's node until it can take pods or `limit` passes, or
    `ended` gives the launch's end because its action is gone (_ended).
    `restarted`: the instance comes back from the warm pool (joined.look). A look
    that fails for now (not fatal) is looked again; one that fails at the limit
    ends the wait `failed` (_at_limit)."""
    clock = tools.clock
    seen = joined.Look()
    said = ""
    read: float | None = None  # when a look last succeeded
    error: KubeError | None = None  # the last look's, None when it succeeded
    while True:
        try:
            last = clock() >= limit  # the last look names every lack
            seen = joined.look(kube, identity, tools.settings, restarted=restarted, every=last)
            if not last and seen.waiting_for and clock() >= limit:  # it ended past the limit
                seen = joined.look(kube, identity, tools.settings, restarted=restarted)
            read, error = clock(), None
        except FatalKubeError as e:
            return Joining("failed", f"the cluster cannot be read: {e}", seen.node)
        except KubeError as e:
            level = logging.INFO if error is not None else logging.WARNING  # a run's first aloud
            log.log(
                level, "looking at the node of %s failed: %s; %s", identity.instance_id, e, AGAIN
            )
            error = e
        gone = ended()
        if gone is not None:
            return replace(gone, node=seen.node)
        now = clock()
        if error is None and seen.waiting_for and seen.waiting_for != said:
            log.info("instance %s: waiting for %s", identity.instance_id, seen.waiting_for)
            said = seen.waiting_for
        if not seen.waiting_for:
            return _joined(seen, identity, now - began, restarted=restarted)
        if now >= limit:
            return _at_limit(
                seen, identity, now - began, error, None if read is None else now - read
            )
        pause = READY_POLL_SECONDS if seen.node else POLL_SECONDS
        tools.sleep(max(0.0, min(pause, limit - now)))


def _at_limit(
    seen: joined.Look,
    identity: aws.NodeIdentity,
    seconds: float,
    error: KubeError | None,
    ago: float | None,
) -> Joining:
    """The wait's end at its limit, the node not able to take pods by the last look
    that succeeded (`seen`, `ago` seconds before; None: none did): not_joined. When
    the last look failed (`error`: a 5xx, a connection refused, a timeout), whether
    the node can take pods is not known, and a look before is no answer (the node may
    have come up since): the cluster could not be read, `failed` (CONTINUE), as when
    it cannot be read at all."""
    if error is not None:
        node = f"the node of instance {identity.instance_id}"
        when = f"{seconds:.0f} s after the launch began ({LIMIT})"
        said = (
            f"the last look at {node}, {when}, failed; the last that succeeded, {ago:.0f} s "
            f"before, found it waiting for {seen.waiting_for}"
            if ago is not None
            else f"no look at {node} succeeded by {when}"
        )
        return Joining(
            "failed",
            f"the cluster could not be read: {error}: {said}",
            seen.node,
            node_uid=seen.uid,
        )
    return Joining(
        "not_joined",
        f"instance {identity.instance_id}: still waiting for {seen.waiting_for} "
        f"{seconds:.0f} s after the launch began ({LIMIT}){_drains(seen)}",
        seen.node,
        missing=seen.missing,
        cordoned=seen.cordoned and not seen.drain,
        node_uid=seen.uid,
    )


def _drains(seen: joined.Look) -> str:
    """A new node's cordon set by a drain of ours, for the message (joined.drain_cordon)."""
    return f"; cordoned by {seen.drain}: that drain's cordon" if seen.drain else ""


def _joined(
    seen: joined.Look, identity: aws.NodeIdentity, seconds: float, *, restarted: bool
) -> Joining:
    ready = f"node {seen.node} of instance {identity.instance_id} is Ready"
    after = f"{seconds:.0f} s after the launch began"
    if seen.drain and not restarted:  # the cordon of a drain of ours: that drain's to tell
        return Joining(
            "joined",
            f"{ready} and cordoned by {seen.drain}: that drain's cordon, whose own end "
            f"says what becomes of the node; not waited for, CONTINUE, {after}",
            seen.node,
            node_uid=seen.uid,
        )
    if seen.cordoned and not restarted:  # back from the pool: the release decides
        return Joining(
            "joined",
            f"{ready} but cordoned, not by eks-node-drainer (spec.unschedulable, set when it "
            f"registered): it takes no pods until someone uncordons it; CONTINUE all the "
            f"same (LAUNCH_WAIT_FOR_UNCORDON=false), {after}",
            seen.node,
            cordoned=True,
            node_uid=seen.uid,
        )
    return Joining("joined", f"{ready} {after}", seen.node, node_uid=seen.uid)
