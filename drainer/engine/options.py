"""How one drain behaves: the engine's options, with their own defaults and the
ranges of the numbers a caller may give. The engine knows no Lambda settings and no
command line; the Lambda's settings map onto these options in one place
(Settings.drain_options) and the CLI builds them from its flags."""

from __future__ import annotations

from dataclasses import dataclass, field

from drainer.backoff import Backoff
from drainer.engine.filters import FilterOptions

CONCURRENCY_RANGE = (1, 256)
"""Evictions in flight at once: bounded so that a large node does not flood the API server."""
GRACE_PERIOD_RANGE = (0, 86_400)
"""A grace period of its own for every evicted pod, in seconds (a day at most)."""
STUCK_POD_RANGE = (0, 86_400)
"""How long past its deletion deadline a terminating pod may block the drain, in seconds."""


@dataclass(frozen=True)
class DrainOptions:
    """How one drain behaves. The Lambda's settings (lifecycle/settings.py) and the
    CLI's flags (cli/main.py) map onto it; the defaults are the Lambda's."""

    filters: FilterOptions = field(default_factory=FilterOptions)
    """Which pods go: the node is going away, so by default everything but DaemonSet pods."""
    concurrency: int = 32
    """Eviction requests in flight at once; pods waiting for a budget do not count."""
    grace_period_seconds: int | None = None
    """None: each pod's own terminationGracePeriodSeconds."""
    stuck_pod_seconds: float = 60
    """A pod still terminating this long after its deletion deadline stops blocking."""
    critical_reserve_seconds: float = 120
    """The critical tier starts this long before the deadline if the ordinary pods
    left are all held by budgets or terminating namespaces."""
    volume_detach_timeout: float = 120
    dry_run: bool = False
    dry_run_server: bool = True
    """A dry run asks the server (dryRun=All on the cordon and every eviction), so
    RBAC, admission and budgets answer; False (the CLI's --dry-run=client): reads only."""
    force_on_timeout: bool = False
    """At the deadline, delete the pods left bypassing their budgets (TIMEOUT_POLICY=force)."""
    force_grace_period_seconds: int = 30
    retry: Backoff = field(default_factory=lambda: Backoff(first=0.25, cap=4.0))
    """Pacing after a failed request, or after a refusal while the budget watch is down."""
    retry_watched: float = 30.0
    """The fallback timer after a refusal while the budget watch is healthy (it wakes
    the pod anyway when the budget allows): a budget that never allows costs one
    request per pod every 15-30 s."""
    denied_retry: Backoff = field(default_factory=lambda: Backoff(first=1.0, cap=30.0))
    """Pacing of a pod whose eviction an admission policy or webhook refused: the
    policy may let it go later (a maintenance window, a label someone sets), and a
    policy that never does costs one request per pod every 15-30 s."""
    several_budgets_retry: float = 8.0
    """How often a pod under more than one budget is tried again (someone may fix them)."""
    namespace_retry: float = 5.0
    """How often a pod whose namespace is being deleted, and that its namespace's
    controller has not deleted yet, is tried again (kubectl drain's 5 s)."""
    watch_timeout_seconds: int = 240
    trigger: str = ""
    """What began the drain, for the Lambda's drains ("terminate-hook",
    "spot-interruption", ...; "" from a terminal): the node's record names it, with
    the deadline, so a later event for the same instance waits for a spot event's
    drain instead of starting another, and a hand-over of the terminate hook's drain
    is checked against it. The engine does not read it: the caller builds the node's
    record from it (k8s/cordon.py:ProgressRecord, handed to Drain as its NodeRecord)."""
    destination: str = ""
    """Where the instance goes once drained, when it is not terminated: "warm-pool"
    (stopped, kept for reuse, its Node object with it). The node's final record says
    so (through the caller's record, as `trigger`), and the launch hook's return from
    the warm pool releases the node."""
    fit_grace_to_deadline: bool = False
    """Cut each eviction's grace period to the time left before the deadline (a spot
    instance is reclaimed then, whatever its pods asked for)."""
    honor_do_not_disrupt: bool = True
    """Hold the pods annotated karpenter.sh/do-not-disrupt (or
    eks-node-drainer/do-not-disrupt) "true" until the deadline instead of evicting them."""
    pod_selector: str = ""
    """kubectl drain's --pod-selector: only the pods this label selector selects are
    drained (the CLI's; the Lambda drains every pod, since the node goes away)."""
    forced_before: int = 0
    """Pods force-deleted past their budgets by the drain's invocations before (its
    hand-over): with any, a drain that ends with the node empty ends timed_out."""
    volume_wait_began: float | None = None
    """Epoch seconds when an invocation before began the wait for the volumes to
    detach (its hand-over): VOLUME_DETACH_TIMEOUT_SECONDS counts from it."""
