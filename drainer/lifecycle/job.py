"""A drain job: what each trigger builds and drainer/lifecycle/runner.py runs.

A trigger (the terminate hook, a spot event) parses its event, decides whether the
instance is the function's (drainer/lifecycle/admission.py), and builds one
`DrainJob`: the instance, its cluster, the window of time it has and its approach
(how it drains). What became of it is a `Run`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from drainer import aws
from drainer.engine.options import DrainOptions
from drainer.engine.pace import Accuracy, Forecaster
from drainer.engine.report import DrainEvent, DrainReport
from drainer.k8s.cordon import Delivery
from drainer.lifecycle.clients import KubeFactory
from drainer.lifecycle.handover import Handover
from drainer.lifecycle.outcomes import Result
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.targets import TargetWait
from drainer.lifecycle.window import Deadline, Window


@dataclass(frozen=True)
class Approach:
    """How one drain goes: its engine options, and the triggers whose live drains
    (begun by other invocations for the same instance) it waits for rather than start
    its own (drainer/lifecycle/live.py)."""

    options: DrainOptions
    waits_for: frozenset[str]
    change: str = ""
    """An AWS Health scheduled change's eventArn, for the node's record."""
    own_deadline: bool = False
    """An EC2 event's drain to a deadline EC2 does not keep (a late warning's own time,
    a rebalance's, a window further away): the node's record says so, for the
    terminate hook that follows it (drainer/lifecycle/live.py)."""
    over: str = ""
    """A continued drain whose change EC2 lists as over, why: the node is released
    (runner.released_over), not drained on."""
    continued: float = 0.0
    """When the drain began (epoch seconds), for one an earlier invocation handed over
    after it recorded the drain on the node (an EC2 event's, the terminate hook's); 0
    for any other. The node must still carry a record: one released since is left
    alone (runner.released_since); a node object registered since is another, drained."""
    delivery: Delivery | None = None
    """A scheduled change's or a terminate hook's drain: which delivery of its event
    runs it, for the node's record; a delivery of the same event again finds it there
    (redelivered.py)."""
    fixed_by_ec2: bool = False
    """EC2 takes the instance at the drain's deadline (a warning's, a capacity
    reservation's, a state change's, a near scheduled change's): it waits only for a
    live drain that acts by then as it would (drainer/lifecycle/live.py)."""
    ends_at_deadline: bool = False
    """The drain's deadline is the instance's last moment (the terminate hook's: the
    group is then told TIMEOUT_POLICY's answer, or, under abandon, the hook's timeout
    decides): a live drain whose deadline is later will not act by it as this one must
    (its critical tier, its TIMEOUT_POLICY), so it is not waited for (live.py)."""


@dataclass(frozen=True)
class DrainJob:
    """One drain to run: the instance, its cluster, its window of time and its approach."""

    identity: aws.NodeIdentity
    cluster: aws.ClusterInfo
    window: Window
    approach: Approach
    handed_over: Handover | None = None
    """The progress of the invocations before this one, when the drain was handed
    over (a claim, bounded by drainer/lifecycle/handover.py): the pods they evicted,
    when the wait for the target groups began."""

    def options(self) -> DrainOptions:
        """The drain's options with what an invocation before handed over to the
        engine: the pods it force-deleted and when it began the wait for the volumes."""
        options, before = self.approach.options, self.handed_over
        if before is None:
            return options
        return replace(
            options, forced_before=before.forced, volume_wait_began=before.volume_wait_began
        )

    def target_wait_began(self, now: float) -> float:
        """When the wait for the target groups began: now, or in an invocation before
        that handed it over (the hand-over's claim). A claimed start past this
        invocation's clock counts as now: a claim may shorten the wait, never lengthen
        it past one begun now."""
        claimed = self.handed_over.target_wait_began if self.handed_over else None
        return now if claimed is None else min(claimed, now)


def jitter() -> random.Random:
    return random.Random()  # noqa: S311 - jitter, not cryptography


@dataclass(frozen=True)
class Tools:
    """What every step of a trigger's drain shares: settings, clients, and the clock
    it waits on (real time unless a test hands in its own)."""

    settings: Settings
    clients: aws.AwsClients
    kube_factory: KubeFactory
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=jitter)
    on_event: Callable[[DrainEvent], None] | None = None
    forecaster: Forecaster | None = None
    """Forecasts a node's drain at its start, for its ETA (the handler's and the CLI's:
    drainer/plan/eta.py); None: no ETA."""
    on_started: Callable[[], None] | None = None
    """Called by the runner once the drain has cordoned the node (not for a drain it
    leaves to another: a delivery of the event again, one whose cordon came first, a
    live drain it followed, a node released since): an EC2 event's start notice
    (called at most once)."""
    action_gone: Callable[[], bool] | None = None
    """Whether the terminate hook's lifecycle action is gone (its heartbeat's word): a
    drain cut by its invocation then records its end instead of handing over."""


@dataclass(frozen=True)
class Run:
    """What became of one lifecycle event in this invocation."""

    result: Result
    message: str = ""
    cluster: str = ""
    node: str = ""
    report: DrainReport | None = None
    heartbeats: int = 0
    started_at: float = 0.0
    deadline: Deadline | None = None
    handover: Handover | None = None  # the next invocation's, when HANDED_OVER
    action_gone: bool = False  # the heartbeat found the lifecycle action completed or expired
    targets: TargetWait | None = None  # how the instance left its target groups
    accuracy: Accuracy | None = None  # the drain's forecast against its span, when forecast
