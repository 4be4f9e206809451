"""Drain notices: a short message for people when a drain starts, ends, fails or
times out, published to an SNS topic (NOTIFICATION_TOPIC_ARN; the stack points it
at NotificationTopicArn or at the topic it makes for NotificationEmail).

Operators want to know without reading CloudWatch: which instance and node, the
result and what the Auto Scaling group was told, how long it took, what was
evicted, which budgets held pods back and what was left behind. The message is
text for an email; its attributes are for subscription filters (`result`,
`cluster`, `asg_name`, `instance_id`). A notice that cannot be sent is a log line,
never a failed drain.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from drainer import aws
from drainer.errors import AwsError
from drainer.lifecycle.events_ec2 import RUNS_THROUGH, Ec2Event, Ec2Kind
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER, WARM_POOL_NAME, LifecycleEvent
from drainer.lifecycle.late import CAME_LATE
from drainer.lifecycle.launch_release import TOLD, release_command

log = logging.getLogger(__name__)

_TITLES = {
    "drained": "drained",
    "no_node": "had no node to drain",
    "dry_run": "dry run done",
    "timed_out": "drain TIMED OUT",
    "failed": "drain FAILED",
    "released": "released (its drain stopped there)",
}


class Subject(Protocol):
    """The instance a notice is about: a lifecycle event's, or a spot event's."""

    @property
    def instance_id(self) -> str: ...

    @property
    def asg_name(self) -> str: ...


Notice = tuple[str, str, dict[str, str]]
"""An SNS subject, the message text and its attributes."""


class Ec2Subject(Subject, Protocol):
    """An instance that one of EC2's events is about."""

    @property
    def event(self) -> Ec2Event: ...


def ec2_start_notice(found: Ec2Subject, cluster: str) -> Notice:
    """The notice that one of EC2's events (a spot warning, a scheduled change, a state
    change, a capacity reservation's warning) began a drain."""
    event = found.event
    when = _when(event.acts_at)
    why = {
        Ec2Kind.INTERRUPTION: "EC2 sent an interruption warning: it reclaims the instance "
        "in two minutes.",
        Ec2Kind.REBALANCE: "EC2 sent a rebalance recommendation: the instance is at higher "
        "risk of interruption.",
        Ec2Kind.SCHEDULED_CHANGE: f"AWS Health scheduled {event.detail_code} for the "
        + (
            f"instance, starting {when}."
            if event.announced_at is None
            else f"instance, starting {_when(event.announced_at)}; EC2 moved it to {when}."
        ),
        Ec2Kind.STATE_CHANGE: f"EC2 says the instance is {event.detail_code}.",
        Ec2Kind.CAPACITY_RESERVATION: "EC2 takes the instance's interruptible capacity "
        f"reservation back, terminating it at {when}.",
    }[event.kind]
    spot = event.kind in (Ec2Kind.INTERRUPTION, Ec2Kind.REBALANCE)
    return _start(found, "spot " if spot else "", found.asg_name or "no group", cluster, why)


def stale_event_notice(found: Ec2Subject, reason: str) -> Notice:
    """The notice that one of EC2's events came late: about an earlier life of its
    instance (it was started again since), or an update of a scheduled change after
    its close (EC2 lists its window as over); `reason` says which. Nothing drained."""
    title = f"eks-node-drainer: {found.instance_id} left alone (late event)"
    text = f"Instance {found.instance_id} of {found.asg_name or 'no group'}: {reason}."
    return title, text, _attributes(found, "skipped", "")


def moved_later_notice(found: Ec2Subject, message: str, drain_at: str) -> Notice:
    """The notice that a scheduled change's drain under way waits for the time EC2
    moved its window to (scheduled.mid_chain says why, in `message`)."""
    title = f"eks-node-drainer: {found.instance_id} drain resumes at {drain_at}"
    return title, f"{message}.", _attributes(found, "scheduled", "")


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "a time it does not say"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def start_notice(event: LifecycleEvent, cluster: str) -> Notice:
    """The notice that the terminate hook's event began a drain."""
    why = "its lifecycle action waits until the pods are gone."
    if event.into_warm_pool:
        why = (
            "its lifecycle action waits until the pods are gone; the instance then goes to "
            "the warm pool (stopped and kept for reuse), not terminated."
        )
    return _start(event, "", f"Auto Scaling group {event.asg_name}", cluster, why)


def _start(subject: Subject, kind: str, group: str, cluster: str, why: str) -> Notice:
    short_group = subject.asg_name or "no group"
    text = (
        f"Draining {kind}instance {subject.instance_id} of {group}"
        f"{f' in cluster {cluster}' if cluster else ''}: {why}"
    )
    title = f"eks-node-drainer: draining {kind}{subject.instance_id} ({short_group})"
    return title, text, _attributes(subject, "started", cluster)


def end_notice(event: Subject, summary: Mapping[str, Any]) -> Notice:
    """The subject, text and attributes of the notice for a drain's end."""
    result = str(summary.get("result", ""))
    node = summary.get("node") or "(no node)"
    subject = f"eks-node-drainer: {node} {_TITLES.get(result, result)}"
    ec2 = getattr(event, "event", None)  # an EC2 event's target: what EC2 does
    fate = ec2_fate(ec2, summary) if isinstance(ec2, Ec2Event) else ("EC2 ends the instance", False)
    # The drain as a whole, across hand-overs, when it was handed over (scale_in's totals).
    seconds = summary.get("drain_seconds_total", summary.get("seconds", 0))
    evicted = summary.get("evicted_total", summary.get("evicted", 0))
    lines = [
        f"Instance {event.instance_id} of {event.asg_name or 'no group'}, node {node}, cluster "
        f"{summary.get('cluster') or '?'}: {result}.",
        f"Lifecycle action: {_told(summary)}{_began_by(summary.get('trigger', ''), fate[0])}.",
        f"Duration: {float(seconds):.0f} s. Pods evicted: {evicted}.",
    ]
    if "forecast_seconds" in summary:
        lines.append(_forecast_line(summary))
    if summary.get("destination") == WARM_POOL_NAME and result in ("drained", "timed_out"):
        lines.append(
            "The instance goes to the warm pool (stopped and kept for reuse), not terminated: "
            "its node stays, cordoned, until it is released when the instance comes back."
        )
    if fate[1] and result in ("drained", "timed_out"):
        lines.append(comes_back(str(node), str(summary.get("trigger", "")), fate[0]))
    if summary.get("budgets_holding"):
        lines.append("Budgets that held pods back: " + ", ".join(summary["budgets_holding"]) + ".")
    left = summary.get("left") or {}
    if left:
        lines.append("Left on the node:")
        lines.extend(f"  {pod}: {why}" for pod, why in sorted(left.items()))
    if summary.get("message"):
        lines.append(f"Why: {summary['message']}")
    return (
        subject,
        "\n".join(lines),
        _attributes(event, result, str(summary.get("cluster", ""))),
    )


def _forecast_line(summary: Mapping[str, Any]) -> str:
    """The drain's forecast against what it took (from its start to its last pod gone)."""
    forecast = float(summary["forecast_seconds"])
    if "actual_seconds" not in summary:
        return f"Forecast: {forecast:.0f} s (not every pod went: nothing to compare)."
    actual = float(summary["actual_seconds"])
    off = actual - forecast
    how = "as forecast" if abs(off) < 1 else f"{abs(off):.0f} s {'late' if off > 0 else 'early'}"
    return f"Forecast: {forecast:.0f} s; took {actual:.0f} s ({how})."


_LAUNCH_TITLES = {
    "not_joined": "cannot take pods: launch TIMED OUT",
    "failed": "launch not checked",
}
_LAUNCH_RESULTS = {
    "ABANDON": "Auto Scaling terminates the instance and launches another (an instance "
    "refresh goes no further); a new instance with the same trouble gets the same answer.",
    "CONTINUE": "the instance goes into service.",
}


def launch_notice(event: Subject, summary: Mapping[str, Any], advice: str) -> Notice:
    """The notice for a launch that did not simply join (drainer/lifecycle/launch.py):
    its node cordoned, back from the warm pool but not released (launch_release.TOLD),
    not able to take pods in time, or not checked at all."""
    result = str(summary.get("result", ""))
    node = summary.get("node") or "(no node)"
    cordoned = bool(summary.get("cordoned")) and result == "joined"
    kept = result == "joined" and summary.get("not_released") in TOLD
    title = "joined cordoned" if cordoned else _LAUNCH_TITLES.get(result, result)
    if kept:
        title, result = "back from the warm pool NOT RELEASED: still cordoned", "not_released"
    told = _told(summary)  # nothing sent when the action was gone
    fate = _LAUNCH_RESULTS.get(told)
    lines = [
        f"New instance {event.instance_id} of {event.asg_name or 'no group'}, node {node}, "
        f"cluster {summary.get('cluster') or '?'}: {result}"
        f"{' (cordoned)' if cordoned or kept else ''}.",
        f"Lifecycle action (launch hook): {f'{told}: {fate}' if fate else f'{told}.'}",
    ]
    if summary.get("waiting_for"):
        lines.append(f"Still missing: {summary['waiting_for']}.")
    if summary.get("message"):
        lines.append(f"Why: {summary['message']}")
    if advice:
        lines.append(advice)
    attributes = _attributes(
        event, "cordoned" if cordoned else result, str(summary.get("cluster", ""))
    )
    return f"eks-node-drainer: {node} {title}", "\n".join(lines), attributes


def _told(summary: Mapping[str, Any]) -> str:
    """What the group was told: the end line's `lifecycle_result`; nothing when the
    action was gone before the answer (`action_gone`, `completed: false`), which its
    hook's DefaultResult, or whoever completed it, decided. An answer that was sent
    and not completed (refused, or found gone only then) is still the one sent."""
    if summary.get("action_gone") and summary.get("completed") is False:
        return (
            "no answer sent (the action was gone: the hook's DefaultResult or whoever "
            "completed it decided)"
        )
    if summary.get("result") == "released" and summary.get("trigger") == TERMINATE_HOOK_TRIGGER:
        return "none (left to the hook's timeout and its DefaultResult)"
    return str(summary.get("lifecycle_result", "none"))


def ec2_fate(event: Ec2Event, summary: Mapping[str, Any]) -> tuple[str, bool]:
    """What EC2 does to the instance, in words, and whether it may come back: the
    event's own fate, but for an event that came after EC2's moment to act with the
    instance still running (its drain's deadline source says so): EC2 did not take
    it then, and its node stays cordoned until it is released."""
    if CAME_LATE in str(summary.get("deadline_source") or ""):
        return f"{event.fate[0]}, but had not when the event came", True
    return event.fate


def _began_by(trigger: str, fate: str) -> str:
    if not trigger or trigger == TERMINATE_HOOK_TRIGGER:
        return ""
    return f" (begun by the {trigger}: {fate})"


def comes_back(node: str, trigger: str = "", fate: str = "") -> str:
    """What to do about a node whose instance may come back after EC2's action. A
    scheduled change's close releases it (drainer/lifecycle/closed.py) where the
    instance runs through the change (a reboot, a maintenance), or where the change
    is cancelled before its window; a stopped or retired instance's node is not."""
    released = (
        f"The instance may come back: its node stays cordoned and out of the load "
        f"balancers until it is released (`{release_command(node)}` once it is Ready)."
    )
    if trigger != Ec2Kind.SCHEDULED_CHANGE:
        return released
    if fate in RUNS_THROUGH:
        return (
            "The instance runs through the change: its node stays cordoned and out of the "
            "load balancers until AWS Health closes the change, which releases it if the "
            "instance runs and EC2 has nothing else scheduled for it (or "
            f"`{release_command(node)}` once it is Ready)."
        )
    return f"{released} Should AWS cancel the change before its window, its close releases it."


def _attributes(event: Subject, result: str, cluster: str) -> dict[str, str]:
    values = {
        "result": result,
        "cluster": cluster,
        "asg_name": event.asg_name,
        "instance_id": event.instance_id,
    }
    return {k: v for k, v in values.items() if v}


def publish(sns: aws.Client, topic: str, notice: Notice) -> bool:
    """Send the notice; False (and a log line) when it could not be sent."""
    subject, text, attributes = notice
    try:
        aws.publish_to_topic(sns, topic, subject, text, attributes)
    except AwsError as e:
        log.warning("could not send the drain notice to %s: %s", topic, e)
        return False
    return True
