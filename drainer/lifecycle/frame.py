"""The steps every trigger's run passes through, written once: the lifecycle frame
(issue 39) that the terminate hook (drainer/lifecycle/scale_in.py) and EC2's events
(drainer/lifecycle/ec2_events.py) share, so that a new trigger takes them rather
than copies them.

- `heartbeating`: the lifecycle action kept alive while a step runs, stopped however
  the step ends.
- `aws_guarded`: a run that an AWS error stops. One AWS can still fix is raised, for
  Lambda to run the event again (every step of a drain is safe to repeat); one no
  retry can fix ends the run as failed, naming it, instead of running the same event
  into the same error.
- `admit_hook` and `locate`: a lifecycle action's group admitted (ALLOWED_ASGS,
  ASG_TAG) with its hook, then the instance's cluster, EC2 identity and EKS cluster.
- `answer`: the lifecycle action completed with what the group is told, unless the
  action is gone already.
- `end_summary`: the outcome's log line and the end line's keys.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from drainer import aws, logs
from drainer.errors import AwsError, ClusterNotFound, InstanceNotFound
from drainer.lifecycle import ending, notices
from drainer.lifecycle.admission import (
    Tags,
    group_refused,
    group_tags,
    hook_refused,
    resolve_cluster,
)
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER, LifecycleEvent
from drainer.lifecycle.hooks import owner_of
from drainer.lifecycle.job import Run, Tools

log = logging.getLogger(__name__)


@contextmanager
def heartbeating(
    autoscaling: aws.Client, event: LifecycleEvent, hook: aws.HookInfo
) -> Iterator[aws.Heartbeat]:
    """Heartbeat the event's lifecycle action at the hook's interval (at least every
    second) while the block runs; the heartbeat says afterwards how many beats it
    sent and whether the action was gone."""
    heartbeat = aws.Heartbeat(autoscaling, event, max(1.0, hook.heartbeat_interval))
    heartbeat.start()
    try:
        yield heartbeat
    finally:
        heartbeat.stop()


def aws_guarded(step: Callable[[], Run]) -> Run:
    """The step's run; a failed run naming the error when AWS refuses for good
    (ending.permanent). Raised when AWS failed beyond botocore's retries, for Lambda
    to retry the event (a lifecycle hook's heartbeat timeout is the backstop)."""
    try:
        return step()
    except AwsError as e:
        if not aws.is_permanent(e):
            log.error("AWS call failed; the invocation will be retried: %s", e)
            raise
        return ending.permanent(e)


def end_summary(
    run: Run,
    result: str | None,
    completed: bool | None,
    started: float,
    *,
    trigger: str = TERMINATE_HOOK_TRIGGER,
) -> dict[str, Any]:
    """Log the run's outcome and give the end line's keys; `started`: the invocation's
    time.monotonic() when it took the event, `result` and `completed`: what the Auto
    Scaling group was told, if anything."""
    ending.log_outcome(run, result, completed)
    return ending.summary_of(run, result, completed, time.monotonic() - started, trigger=trigger)


@dataclass(frozen=True)
class Admitted:
    """A lifecycle action of a group that is the function's, with its hook."""

    tags: Tags
    hook: aws.HookInfo


def admit_hook(event: LifecycleEvent, tools: Tools) -> Admitted | str:
    """The action's group admitted, and its hook read; else why not (the action is
    then left alone: it is another tool's to answer)."""
    autoscaling = tools.clients.autoscaling
    tags = group_tags(autoscaling, event.asg_name)
    refused = group_refused(tools.settings, autoscaling, event.asg_name, tags=tags)
    if refused:
        return f"{refused}; leaving its lifecycle action alone{_left_behind(event, tools)}"
    hook = aws.lifecycle_hook(autoscaling, event.asg_name, event.hook_name)
    refused = hook_refused(tools.settings, event, hook)
    if refused:  # said aloud: a hook made by hand naming no cluster of ours lands here too
        log.warning("%s; leaving its lifecycle action alone", refused)
        return f"{refused}; leaving its lifecycle action alone"
    return Admitted(tags, hook)


def _left_behind(event: LifecycleEvent, tools: Tools) -> str:
    """When the refused group's hook names this stack (STACK_ID: put while the group
    was covered, tagged then untagged), what it costs and the way out, said as a warning
    (the role may no longer delete it); "" otherwise, or when the hook cannot be read."""
    stack = tools.settings.stack_id
    if not stack:  # without it, a hook's metadata names no stack
        return ""
    try:
        found = aws.describe_hook(tools.clients.autoscaling, event.asg_name, event.hook_name)
    except AwsError:
        return ""
    if found is None or owner_of(found) != stack:
        return ""
    cost = (
        "each launch into the group waits its HeartbeatTimeout before it goes on"
        if event.launching
        else "each termination of the group waits its HeartbeatTimeout and goes undrained"
    )
    why = (
        f"; its hook {event.hook_name} is this stack's, put while the group was covered: "
        f"{cost} ({found.get('HeartbeatTimeout')} s). Name or tag the group "
        "again, or delete the hook: aws autoscaling delete-lifecycle-hook "
        f"--auto-scaling-group-name {event.asg_name} --lifecycle-hook-name {event.hook_name}"
        f" --region {event.region}"
    )
    log.warning("group %s is no longer covered%s", event.asg_name, why)
    return why


@dataclass(frozen=True)
class Located:
    """Where the action's instance is: its cluster's name and EKS description, and its
    EC2 identity (the node's name, its zone)."""

    cluster_name: str
    cluster: aws.ClusterInfo
    identity: aws.NodeIdentity


@dataclass(frozen=True)
class NotLocated:
    """Why the instance could not be placed; `no_instance`: EC2 does not know it (no
    node to act on), else a failure."""

    message: str
    cluster_name: str = ""
    no_instance: bool = False


def locate(event: LifecycleEvent, admitted: Admitted, tools: Tools) -> Located | NotLocated:
    """The instance's cluster (the hook's metadata, the group's tags, CLUSTER_NAME),
    its EC2 identity and the cluster's EKS description; the cluster's name is bound
    to the log lines from here on."""
    name = resolve_cluster(event, admitted.hook, tools.settings, admitted.tags)
    if not name:
        return NotLocated(
            f"no cluster for Auto Scaling group {event.asg_name}: set the hook's "
            'NotificationMetadata ({"cluster_name": ...}), tag the group '
            "eks:cluster-name, or set CLUSTER_NAME"
        )
    logs.bind(cluster=name)
    try:
        identity = aws.describe_instance(tools.clients.ec2, event.instance_id)
    except InstanceNotFound as e:
        return NotLocated(str(e), name, no_instance=True)
    try:
        cluster = aws.describe_cluster(tools.clients.eks, name)
    except ClusterNotFound as e:
        return NotLocated(str(e), name)
    return Located(name, cluster, identity)


def answer(
    clients: aws.AwsClients, event: LifecycleEvent, result: str | None, *, action_gone: bool
) -> bool | None:
    """Complete the action with `result`: whether it was completed; False when the
    action was gone already (completed elsewhere, timed out), None when the group is
    told nothing."""
    if result is None:
        return None
    if action_gone:
        return False
    return ending.complete(clients, event, result)


class StartNotice:
    """NOTIFY_ON_START's notice of one invocation's drain: told once, when called
    (the drain's own cordon took, or its wait for another trigger's drain began),
    however often the runner tries the drain again after an API error."""

    def __init__(self, tools: Tools, notice: notices.Notice) -> None:
        self._settings, self._clients, self._notice = tools.settings, tools.clients, notice
        self.told = False

    def __call__(self) -> None:
        if not self.told:
            self.told = True
            ending.notify(self._settings, self._clients, self._notice)


def start_notice(tools: Tools, notice: notices.Notice) -> Tools:
    """The tools whose drain tells NOTIFICATION_TOPIC_ARN it starts (NOTIFY_ON_START)
    once its own cordon has taken: the node's record is this invocation's then, not
    another delivery's of the same event, which is left to that drain and tells
    nothing. Armed by a chain's first invocation, and by a step after it whose
    hand-over says no invocation before told it (`start_untold`)."""
    return replace(tools, on_started=StartNotice(tools, notice))


def start_untold(tools: Tools) -> bool:
    """Whether this invocation armed the start notice and has not told it (no cordon
    of its own took): its hand-over says so, for the next step to tell it."""
    started = tools.on_started
    return isinstance(started, StartNotice) and not started.told
