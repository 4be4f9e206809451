"""What the drain engine needs of the settings, with every default taken from
Settings (the one source of defaults), and the one conversion from Settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from drainer.backoff import Backoff
from drainer.engine.filters import FilterOptions
from drainer.lifecycle.settings import Settings, TimeoutPolicy

_DEFAULTS = Settings()


@dataclass(frozen=True)
class DrainOptions:
    """What the engine needs of the settings; every default is Settings' own."""

    filters: FilterOptions = field(
        default_factory=lambda: FilterOptions(
            evict_unreplicated=_DEFAULTS.evict_unreplicated_pods,
            evict_emptydir=_DEFAULTS.evict_emptydir_pods,
            evict_daemonset=_DEFAULTS.evict_daemonset_pods,
        )
    )
    concurrency: int = _DEFAULTS.eviction_concurrency
    """Eviction requests in flight at once; pods waiting for a budget do not count."""
    grace_period_seconds: int | None = None
    """None: each pod's own terminationGracePeriodSeconds."""
    stuck_pod_seconds: float = _DEFAULTS.stuck_pod_seconds
    """A pod still terminating this long after its deletion deadline stops blocking."""
    critical_reserve_seconds: float = _DEFAULTS.critical_reserve_seconds
    """The critical tier starts this long before the deadline if the ordinary pods
    left are all held by budgets or terminating namespaces."""
    volume_detach_timeout: float = _DEFAULTS.volume_detach_timeout_seconds
    dry_run: bool = _DEFAULTS.dry_run
    force_on_timeout: bool = _DEFAULTS.timeout_policy == TimeoutPolicy.FORCE
    force_grace_period_seconds: int = _DEFAULTS.force_grace_period_seconds
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
    watch_timeout_seconds: int = 240
    trigger: str = ""
    """What began the drain, for the Lambda's drains ("terminate-hook",
    "spot-interruption", ...; "" from a terminal): the node's record names it, with
    the deadline, so a later event for the same instance waits for a spot event's
    drain instead of starting another, and a hand-over of the terminate hook's drain
    is checked against it."""
    fit_grace_to_deadline: bool = False
    """Cut each eviction's grace period to the time left before the deadline (a spot
    instance is reclaimed then, whatever its pods asked for)."""
    pod_selector: str = ""
    """kubectl drain's --pod-selector: only the pods this label selector selects are
    drained (the CLI's; the Lambda drains every pod, since the node goes away)."""

    @classmethod
    def from_settings(cls, settings: Settings) -> DrainOptions:
        """The one conversion from settings to drain options."""
        return cls(
            filters=FilterOptions(
                evict_unreplicated=settings.evict_unreplicated_pods,
                evict_emptydir=settings.evict_emptydir_pods,
                evict_daemonset=settings.evict_daemonset_pods,
            ),
            concurrency=settings.eviction_concurrency,
            grace_period_seconds=settings.grace_period_seconds
            if settings.grace_period_seconds >= 0
            else None,
            stuck_pod_seconds=settings.stuck_pod_seconds,
            critical_reserve_seconds=settings.critical_reserve_seconds,
            volume_detach_timeout=settings.volume_detach_timeout_seconds,
            dry_run=settings.dry_run,
            force_on_timeout=settings.timeout_policy == TimeoutPolicy.FORCE,
            force_grace_period_seconds=settings.force_grace_period_seconds,
        )
