"""Load balancer targets: the instance leaves its target groups before it dies.

The Auto Scaling group deregisters an instance from the target groups attached to
the group itself, but not from those it does not manage: the ones the AWS Load
Balancer Controller creates in instance mode, or target groups of NodePort
services that someone registers nodes in. An instance that dies while still a
target there drops the requests in flight. So, after the pods are gone and before
CONTINUE: find the target groups where the instance is a target (the cluster's,
by the controller's `elbv2.k8s.aws/cluster` tag, plus TARGET_GROUP_ARNS),
deregister it where it is still registered, and wait, bounded, until no group
reports it as registered or draining (each group's deregistration delay).

In a target group of type ip (the controller's `target-type: ip`) the targets are
the pods' IPs, not the instance: there the same is done for the IPs of the pods the
drain took off the node (the controller deregisters them too, once it sees them
gone), and a pod whose grace period is shorter than the group's deregistration
delay is named in a warning: ELB may still send it requests after it has exited.
The pods of an earlier invocation of a handed-over drain are not known here.

An evicted pod's IP goes back to the VPC, which may give it to a pod on another
node, and the controller registers that pod under the same IP: such a target is
not the drain's to take out (the controller would not put it back before the
Service's endpoints change again), so an IP that a pod elsewhere holds now
(`holder`, asked of the cluster) is left registered, not waited for, and named.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drainer import aws
from drainer.aws.elbv2 import deregistration_delay, target_group_types
from drainer.backoff import Backoff
from drainer.engine.report import PodAddress
from drainer.errors import AwsError
from drainer.lifecycle.reused import IpsHeld

log = logging.getLogger(__name__)

CLUSTER_TAG = "elbv2.k8s.aws/cluster"
"""The tag the AWS Load Balancer Controller puts on the target groups it makes."""
GONE = ("unused",)
"""A target in this state is no target at all (deregistered, or never registered)."""


@dataclass(frozen=True)
class TargetWait:
    """What the wait found and did."""

    groups: list[str] = field(default_factory=list)
    """The target groups where the instance was a target."""
    deregistered: list[str] = field(default_factory=list)
    """The ones it was still registered in, and the drainer deregistered it from."""
    pending: list[str] = field(default_factory=list)
    """Still registered or draining when the wait ended (the instance, or a pod's IP)."""
    seconds: float = 0.0
    error: str = ""
    pod_groups: list[str] = field(default_factory=list)
    """The target groups of type ip where an IP of a pod the drain took off was a target."""
    short_grace: dict[str, str] = field(default_factory=dict)
    """Pods whose grace period is shorter than such a group's deregistration delay."""
    reused: dict[str, str] = field(default_factory=dict)
    """Evicted pods' IPs that a pod on another node holds now (IP -> that pod): left
    registered in the IP target groups, not waited for."""
    began_at: float | None = None
    """Epoch seconds when the wait began: in this invocation, or in one before that
    handed the drain over mid-wait (the next hand-over carries it on); set by the
    runner."""

    def describe(self) -> str:
        if self.error:
            return f"target groups not checked: {self.error}"
        if not self.groups and not self.pod_groups:
            return "the instance is a target of no target group"
        done = f"after {self.seconds:.1f} s"
        if self.groups:
            left = len([g for g in self.groups if g not in self.pending])
            said = (
                f"left {left} of {len(self.groups)} target group(s) {done} (deregistered "
                f"from {len(self.deregistered)})"
            )
        else:
            said = "the instance is a target of no target group"
        if self.pod_groups:
            left = len([g for g in self.pod_groups if g not in self.pending])
            said += (
                f"; the evicted pods' IPs left {left} of {len(self.pod_groups)} IP target "
                f"group(s){'' if self.groups else ' ' + done}"
            )
        if self.reused:
            said += (
                f"; left registered, held now by pods elsewhere: "
                f"{', '.join(f'{ip} ({pod})' for ip, pod in sorted(self.reused.items()))}"
            )
        if self.pending:
            said += f"; still draining in {', '.join(self.pending)}"
        return said


def _of_cluster(elbv2: aws.Client, arns: list[str], cluster: str) -> list[str]:
    tags = aws.target_group_tags(elbv2, arns)
    return [arn for arn, tagged in tags.items() if tagged.get(CLUSTER_TAG) == cluster]


def _targets(elbv2: aws.Client, group: str, ids: Collection[str]) -> list[dict[str, Any]]:
    """The targets in the group whose Id is in `ids` (one per port), with their state."""
    described = aws.target_health(elbv2, group)
    if described is None:
        log.warning("target group %s not found (deleted, or a mistyped ARN)", group)
        return []  # nothing to wait for
    return [
        d for d in described if d["Target"]["Id"] in ids and d["TargetHealth"]["State"] not in GONE
    ]


def _still_pending(
    elbv2: aws.Client,
    pending: list[str],
    ids: dict[str, set[str]],
    until: float,
    clock: Callable[[], float],
    *,
    held: IpsHeld | None = None,
) -> list[str]:
    """The groups of `pending` that still hold one of their ids (registered or
    draining), each looked at in turn until `until`. When ELB fails for now
    (throttled beyond botocore's retries, a 5xx) the round ends there: the group and
    those not looked at count as still draining (a wait given up would CONTINUE while
    the targets drain; more looks would only add to the throttling, and past the
    wait's limit to the invocation's time)."""
    left: list[str] = []
    for at, group in enumerate(pending):
        if at and clock() >= until:  # the round's first look is the wait's last
            return left + pending[at:]
        try:
            if _left(_targets(elbv2, group, ids[group]), ids[group], group, held):
                left.append(group)
        except AwsError as e:
            if aws.is_permanent(e):
                raise
            log.warning("could not look at target group %s for now (%s); looking again", group, e)
            return left + pending[at:]
    return left


def _left(targets: list[dict[str, Any]], ids: set[str], group: str, held: IpsHeld | None) -> bool:
    """Whether the group still holds one of `ids`. In a group of type ip, a target
    registered again after the drain deregistered it (not draining) may be another
    pod's now: asked afresh, and such an IP leaves `ids` (module docstring)."""
    if held is None or group not in held.ip_groups:
        return bool(targets)
    for target in targets:
        ip = target["Target"]["Id"]
        if target["TargetHealth"]["State"] != "draining" and held.again(ip):
            ids.discard(ip)
    return any(t["Target"]["Id"] in ids for t in targets)


def leave_target_groups(
    elbv2: aws.Client,
    instance: str,
    cluster: str,
    extra: Iterable[str],
    *,
    until: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    poll: float = 8.0,
    pods: Mapping[str, PodAddress] | None = None,
    holder: Callable[[str], str] | None = None,
) -> TargetWait:
    """Deregister the instance where it is registered, in the cluster's target groups
    and `extra`, and in those of type ip the IPs of `pods` (the pods the drain took
    off: the controller deregisters them too, in its time); wait until every group
    lets them go, or `until`, looking again after 1, 2, 4 s and then every `poll` s.
    An AWS error ends the wait with `error` set: the drain is done, and the log says
    what was not checked; but a look that fails for now (throttled) only counts the
    group as still draining. `holder`: the pod on another node that holds an IP now
    ("" for none); such an IP is left registered (module docstring)."""
    started = clock()
    addresses = {a.ip: pod for pod, a in (pods or {}).items()}
    held = IpsHeld(holder, addresses)
    try:
        types, ids, holding, deregistered = _until_answered(
            lambda: _take_out(elbv2, instance, cluster, extra, addresses, held=held),
            until=until,
            clock=clock,
            sleep=sleep,
        )
        pod_groups = [g for g in holding if types.get(g) == "ip"]
        short = _short_grace(elbv2, {g: holding[g] for g in pod_groups}, pods or {}, addresses)
        timing = _Timing(until, clock, sleep, poll)
        pending = _wait(elbv2, list(holding), ids, held, timing)
    except AwsError as e:
        log.warning("could not take %s out of its target groups: %s", instance, e)
        return TargetWait(seconds=clock() - started, error=str(e)[:300])
    instance_groups = [g for g in holding if g not in pod_groups]
    return TargetWait(
        groups=instance_groups,
        deregistered=[g for g in deregistered if g in instance_groups],
        pending=pending,
        seconds=clock() - started,
        pod_groups=pod_groups,
        short_grace=short,
        reused=dict(held.reused),
    )


def _wait(
    elbv2: aws.Client,
    pending: list[str],
    ids: dict[str, set[str]],
    held: IpsHeld,
    timing: _Timing,
) -> list[str]:
    """The groups of `pending` still holding their ids when they all let go or
    `timing.until`: looked at again after 1, 2, 4 s and then every `timing.poll` s."""
    until, clock = timing.until, timing.clock
    looks = 0
    while pending and clock() < until:
        timing.sleep(min(timing.poll, 2.0**looks, max(0.0, until - clock())))
        looks += 1
        pending = _still_pending(elbv2, pending, ids, until, clock, held=held)
    return pending


@dataclass(frozen=True)
class _Timing:
    """The wait's limit, clock, sleep and longest pause between looks."""

    until: float
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    poll: float


TRIES = 10
"""The most tries of taking the instance out of its groups (about a minute)."""
_RETRY = Backoff(first=1.0, cap=8.0)
_JITTER = random.Random()  # noqa: S311 - jitter, not cryptography
_TakenOut = tuple[dict[str, str], dict[str, set[str]], dict[str, list[dict[str, Any]]], list[str]]


def _take_out(
    elbv2: aws.Client,
    instance: str,
    cluster: str,
    extra: Iterable[str],
    addresses: Mapping[str, str],
    *,
    held: IpsHeld,
) -> _TakenOut:
    """The groups' types, the ids each should let go, the groups that hold some, and
    those where some were deregistered now (deregistering again is harmless). An IP
    a pod elsewhere holds now is neither let go nor waited for (`held`)."""
    held.asked, held.reused, held.failed = {}, {}, False  # a new try: ask again
    types = target_group_types(elbv2)
    groups = dict.fromkeys([*_of_cluster(elbv2, list(types), cluster), *extra])
    held.ip_groups = {g for g in groups if types.get(g) == "ip"}
    ids = {g: set(addresses) if g in held.ip_groups else {instance} for g in groups}
    holding = {g: targets for g in groups if (targets := _targets(elbv2, g, ids[g]))}
    for group in held.ip_groups & set(holding):
        ids[group] -= {ip for ip in {t["Target"]["Id"] for t in holding[group]} if held(ip)}
        holding[group] = [t for t in holding[group] if t["Target"]["Id"] in ids[group]]
        if not holding[group]:
            del holding[group]
    return types, ids, holding, _deregister_all(elbv2, holding)


def _until_answered(
    step: Callable[[], _TakenOut],
    *,
    until: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> _TakenOut:
    """`step`, again after 1, 2, 4... s (8 at most, jittered; TRIES in all) while ELB fails for
    now (throttled beyond botocore's retries, a 5xx) and the wait's time lasts: given
    up at the first failure, the drain answered CONTINUE with the instance still
    registered. A permanent error, or one at the wait's limit, is raised."""
    for attempt in range(TRIES - 1):
        try:
            return step()
        except AwsError as e:
            left = until - clock()
            if aws.is_permanent(e) or left <= 0:
                raise
            log.warning("could not take the instance out of its target groups yet: %s", e)
            sleep(min(_RETRY.delay(attempt, _JITTER), left))
    return step()


def _short_grace(
    elbv2: aws.Client,
    holding: Mapping[str, list[dict[str, Any]]],
    pods: Mapping[str, PodAddress],
    addresses: Mapping[str, str],
) -> dict[str, str]:
    """The pods whose grace period ends before their IP target group's deregistration
    delay: ELB may still send them requests after they exit. One warning line."""
    short: dict[str, str] = {}
    for group, targets in holding.items():
        delay = _delay(elbv2, group)
        if delay is None:
            continue  # deleted meanwhile (it sends nobody requests any more), or unread
        for target in targets:
            pod = addresses[target["Target"]["Id"]]
            if pods[pod].grace < delay and pod not in short:
                short[pod] = (
                    f"terminationGracePeriodSeconds {pods[pod].grace} < {group}'s "
                    f"deregistration delay {delay} s"
                )
    if short:
        log.warning(
            "pods whose grace period ends before their load balancer stops sending them "
            "requests (give them a preStop pause and a longer grace, or shorten the "
            "group's deregistration delay): %s",
            "; ".join(f"{pod}: {why}" for pod, why in sorted(short.items())),
            extra={"short_grace": short},
        )
    return short


def _delay(elbv2: aws.Client, group: str) -> int | None:
    """The group's deregistration delay, read only for the short-grace warning: None
    when the group is gone, or when ELB does not answer (throttled beyond botocore's
    retries, a 5xx, the read denied). That costs the warning about the group's pods,
    a log line, never the wait: the targets were deregistered and are draining."""
    try:
        return deregistration_delay(elbv2, group)
    except AwsError as e:
        log.warning(
            "could not read the deregistration delay of target group %s (%s): its pods' "
            "grace periods are not checked against it; the wait goes on",
            group,
            e,
        )
        return None


def _deregister_all(elbv2: aws.Client, holding: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Deregister the targets still registered (not already draining) in each group of
    `holding`; the groups where some were. A group deleted since it was described is
    dropped from `holding` (nothing to leave or wait for), and the others are still
    left: its owner may remove it at any time."""
    deregistered = []
    for group, targets in list(holding.items()):
        registered = [t["Target"] for t in targets if t["TargetHealth"]["State"] != "draining"]
        if not registered:
            continue
        if aws.deregister_targets(elbv2, group, registered):
            deregistered.append(group)
        else:
            log.warning("target group %s was deleted while the instance left it", group)
            del holding[group]
    return deregistered
