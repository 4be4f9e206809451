"""One node's plan: which pods go (the engine's filters, with the drain's options),
the forecast of their drain twice (each workload's median and longest time to
Ready), what paces it, and what blocks it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from drainer.engine import filters, pods
from drainer.engine.filters import Action
from drainer.engine.options import DrainOptions
from drainer.engine.pods import Pod
from drainer.plan import budgets as b
from drainer.plan.blockers import Blocker, left, refused
from drainer.plan.capacity import Capacity
from drainer.plan.forecast import Forecast, Going, forecast
from drainer.plan.observed import Stop, Stops
from drainer.plan.timing import Owner, Startup, startup_of


@dataclass(frozen=True)
class NodePlan:
    node: str
    pods: int
    """The pods the drain would evict."""
    eta_seconds: float
    eta_max_seconds: float
    paced_by: str
    blockers: list[Blocker] = field(default_factory=list)
    stops: list[Stop] = field(default_factory=list)
    """Each owner's stop time in eta_seconds: observed by the drains, or a bound."""

    @property
    def deadlocked(self) -> bool:
        return any(x.deadlock for x in self.blockers)

    def doc(self) -> dict[str, object]:
        return {
            "node": self.node,
            "pods": self.pods,
            "eta_seconds": round(self.eta_seconds, 1),
            "eta_max_seconds": round(self.eta_max_seconds, 1),
            "paced_by": self.paced_by,
            "blockers": [x.doc() for x in self.blockers],
            "stops": [x.doc() for x in self.stops],
        }


@dataclass(frozen=True)
class Cluster:
    """What the plan reads: the budgets, each workload's time to Ready, the room on
    the nodes left (None: not checked), and the stops the drains observed."""

    budgets: list[b.Budget]
    startups: Mapping[Owner, Startup]
    capacity: Capacity | None = None
    stops: Stops = field(default_factory=Stops)


def plan_node(
    node: str,
    pod_list: list[Pod],
    cluster: Cluster,
    options: DrainOptions,
    overrides: filters.Overrides,
    *,
    timeout: float,
    now: float,
) -> NodePlan:
    """The plan of one node's drain, its pods as listed at `now` (the wall clock:
    only for the deletion deadlines of pods already terminating)."""
    blocked = refused(pod_list, overrides)
    going = _going(pod_list, cluster, options, now)
    # The likely drain stops each pod in its owner's observed time; the slowest, in
    # its grace period (the bound).
    likely = _likely(going, cluster, options, timeout)
    slowest = _run(going, cluster, options, timeout, slow=True)
    honor = options.honor_do_not_disrupt
    blocked += left(going, cluster.budgets, slowest, timeout, honor_do_not_disrupt=honor)
    homeless = _homeless(going, likely, cluster.capacity)
    paced_by = _paced_by(likely, going, cluster, timeout)
    if homeless:
        paced_by = f"waits for new nodes: {len(homeless)} pod(s) fit on no node left; {paced_by}"
    return NodePlan(
        node,
        sum(1 for g in going if g.stopping is None),
        _within(likely, timeout),
        _within(slowest, timeout),
        paced_by,
        blocked + homeless,
        cluster.stops.on_node(going),
    )


def likely_drain(
    pod_list: list[Pod], cluster: Cluster, options: DrainOptions, *, timeout: float, now: float
) -> tuple[float, str, Forecast]:
    """The likely drain alone, as a drain's ETA wants it (no bound, no blockers): its
    ETA, what paces it and its run; half the work of `plan_node`."""
    going = _going(pod_list, cluster, options, now)
    likely = _likely(going, cluster, options, timeout)
    return _within(likely, timeout), _paced_by(likely, going, cluster, timeout), likely


def _likely(
    going: list[Going], cluster: Cluster, options: DrainOptions, timeout: float
) -> Forecast:
    """Each pod stopping in its owner's observed time."""
    return _run([cluster.stops.timed(g) for g in going], cluster, options, timeout, slow=False)


def _within(run: Forecast, timeout: float) -> float:
    """A run's ETA, the timeout when a pod never goes or the run outlasts it."""
    return timeout if run.left or run.eta > timeout else run.eta


def batch_eta(
    pod_lists: list[list[Pod]],
    cluster: Cluster,
    options: DrainOptions,
    *,
    timeout: float,
    now: float,
) -> float:
    """How long a batch's drains take side by side: its nodes' pods forecast as one
    drain, so that nodes under the same budget share its allowance (each node's own
    plan has the whole of it), each node evicting at its own concurrency."""
    together = [pod for pod_list in pod_lists for pod in pod_list]
    going = _going(together, cluster, options, now)
    wide = replace(options, concurrency=options.concurrency * max(1, len(pod_lists)))
    return _within(_likely(going, cluster, wide, timeout), timeout)


def _going(pod_list: list[Pod], cluster: Cluster, options: DrainOptions, now: float) -> list[Going]:
    """The pods the drain evicts, with their budgets, and those already terminating."""
    decisions = [filters.decide(p, options.filters) for p in pod_list]
    going = [_evicted(d.pod, cluster.budgets) for d in decisions if d.action == Action.EVICT]
    return going + [_stopping(d.pod, now) for d in decisions if d.action == Action.WAIT]


def _evicted(pod: Pod, budget_list: list[b.Budget]) -> Going:
    """A pod the drain evicts, with its budgets: none for one the eviction API deletes
    without reading them (Pending, Succeeded, Failed); a Pending one's replacement, once
    Ready, still counts in them (a finished one's was made when it finished)."""
    matched = b.matching(pod, budget_list)
    if not b.ignores(pod):
        return Going(pod, matched)
    pending = (pod.get("status") or {}).get("phase") == "Pending"
    return Going(pod, [], replaced_in=matched if pending else [])


def _homeless(going: list[Going], run: Forecast, capacity: Capacity | None) -> list[Blocker]:
    """The evicted pods whose replacement fits on no node left, placed in the order the
    forecast evicts them (a DaemonSet's pod or a bare one has no replacement to place)."""
    if capacity is None:
        return []
    evicted = sorted(
        (g.pod for g in going if pods.name(g.pod) in run.evicted),
        key=lambda p: run.evicted[pods.name(p)],
    )
    found = []
    for pod in evicted:
        ref = pods.controller(pod)
        if ref is None or ref.get("kind") == "DaemonSet":
            continue
        if capacity.place(pod) is None:
            reason, fix = capacity.why(pod)
            found.append(Blocker(pods.name(pod), reason, None, fix))
    return found


def _stopping(pod: Pod, now: float) -> Going:
    """A pod already terminating: waited for until its deletion deadline."""
    deadline = pods.deletion_deadline(pod)
    return Going(pod, [], stopping=max(0.0, (deadline or now) - now))


def _run(
    going: list[Going], cluster: Cluster, options: DrainOptions, timeout: float, *, slow: bool
) -> Forecast:
    view = b.ForecastBudgets.of(cluster.budgets)
    return forecast(going, view, options, cluster.startups, timeout=timeout, slow=slow)


def _paced_by(run: Forecast, going: list[Going], cluster: Cluster, timeout: float) -> str:
    """What the drain's length comes from: the last pod to go, and what held it."""
    if not going:
        return "nothing to evict"
    if run.left:
        return f"the timeout ({timeout:g} s): {len(run.left)} pod(s) never go"
    last = max(run.gone, key=lambda name: run.gone[name])
    budget = run.paced_by.get(last)
    last_going = next(g for g in going if pods.name(g.pod) == last)
    pod, stop = last_going.pod, cluster.stops.of(last_going.pod)
    if last_going.stopping is not None:
        return f"{last}, already terminating: its deletion deadline"
    tier = _tier(run, pod)
    if budget:
        return tier + (
            f"PodDisruptionBudget {budget}: {_waves(run.waves(budget))} "
            f"({_observed(startup_of(pod, cluster.startups))}), then {stop.then()}"
        )
    return tier + stop.then() if tier else stop.last(last)


def _tier(run: Forecast, pod: Pod) -> str:
    """PACED BY's start when the last pod is a critical one whose tier started late:
    it waited for the ordinary pods to go (or for the reserve before the deadline)
    before any budget of its own could hold it; "" otherwise."""
    if not pods.is_critical(pod) or not run.critical_at:
        return ""
    why = run.critical_why.split(": ", 1)[0]  # not the held pods' list
    return f"the critical tier from ~{run.critical_at:.0f} s ({why}), then "


def _waves(count: int) -> str:
    return f"{count} wave" if count == 1 else f"{count} waves"


def _observed(startup: Startup | None) -> str:
    """Where the replacement time comes from: observed, and on which pods."""
    if startup is None:
        return "no time to Ready observed in the cluster"
    median = f"replacements Ready in ~{startup.median:.0f} s"
    if not startup.observed:
        return f"{median}: the cluster's median, none of its own measured"
    return f"{median}, the median of {startup.observed} of its pods"
