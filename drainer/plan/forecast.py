"""A drain run against a forecast clock: the engine's own schedule
(drainer/engine/schedule.py: tiers, budget room, probes, fallback timers) picks
what to send; the forecast answers as the API server would (budgets.Allowance),
each evicted pod stops after its grace period (the upper bound: nothing shorter is
observed yet) and each replacement becomes Ready after its workload's observed
time (timing.py). No request, no wall clock."""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from drainer.engine import pods
from drainer.engine.options import DrainOptions
from drainer.engine.pods import Pod
from drainer.engine.schedule import Entry, Schedule
from drainer.plan.budgets import ForecastBudgets
from drainer.plan.timing import Owner, Startup, startup_of

SEVERAL_BUDGETS = "it is selected by more than one PodDisruptionBudget: the eviction API refuses it"


@dataclass(frozen=True)
class Going:
    """A pod the forecast sends, with the budgets that select it (none for one the
    eviction API deletes without reading them: budgets.ignores)."""

    pod: Pod
    budgets: list[str]
    stopping: float | None = None
    """Already terminating: the seconds until its deletion deadline (not evicted again,
    but waited for)."""
    stop: float | None = None
    """Once evicted, the seconds it takes to stop (drainer/plan/observed.py: its
    owner's observed stop, in tenths); None: its grace period, the bound."""
    replaced_in: list[str] = field(default_factory=list)
    """The budgets its replacement counts in, once Ready, though the eviction API
    deletes it without reading them (a Pending pod: budgets.ignores)."""


@dataclass
class Forecast:
    """When each pod would be evicted and gone (seconds from the drain's start)."""

    evicted: dict[str, float] = field(default_factory=dict)
    gone: dict[str, float] = field(default_factory=dict)
    left: dict[str, str] = field(default_factory=dict)
    """The pods that would never go, and why (the schedule's words)."""
    through: dict[str, str] = field(default_factory=dict)
    """Per pod evicted through a budget: that budget."""
    paced_by: dict[str, str] = field(default_factory=dict)
    """Per pod: the budget it waited for, when it did (a critical pod: after its
    tier started)."""
    critical_at: float | None = None
    """When the critical tier started (None: it never did)."""
    critical_why: str = ""
    """Why it started then, in the schedule's words."""

    def waves(self, budget: str) -> int:
        """The rounds of evictions through the budget: each after a replacement is Ready."""
        return len({self.evicted[pod] for pod, b in self.through.items() if b == budget})

    def waited(self, name: str, pod: Pod) -> str:
        """What the pod's eviction waited for until it was sent, in words."""
        at = self.evicted[name]
        if pods.is_critical(pod) and self.critical_at == at:
            return f"a critical pod, its tier starts at ~{at:.0f} s ({self.critical_why})"
        budget = self.paced_by.get(name)
        if budget:
            return f"it waits for PodDisruptionBudget {budget} until ~{at:.0f} s"
        return f"its eviction is sent at ~{at:.0f} s"

    @property
    def eta(self) -> float:
        return max(self.gone.values(), default=0.0)


@dataclass
class _Run:
    schedule: Schedule
    view: ForecastBudgets
    options: DrainOptions
    startups: Mapping[Owner, Startup]
    slow: bool
    bound: int
    """The most passes `step` makes at one moment: one per pod, and one more."""
    several: set[str] = field(default_factory=set)
    """The pods under more than one budget: the eviction API refuses them."""
    stops: dict[str, float] = field(default_factory=dict)
    """Per pod, its Going.stop, when it has one."""
    replaced_in: dict[str, list[str]] = field(default_factory=dict)
    """Per pod, its Going.replaced_in, when it has one."""
    result: Forecast = field(default_factory=Forecast)
    events: list[tuple[float, int, str, str, Entry | None]] = field(default_factory=list)
    order: itertools.count[int] = field(default_factory=itertools.count)

    def push(self, at: float, kind: str, budget: str, entry: Entry | None) -> None:
        heapq.heappush(self.events, (at, next(self.order), kind, budget, entry))

    def send(self, entry: Entry, now: float) -> None:
        """The API server's answer to one eviction, as budgets.Allowance has it."""
        budget = entry.budget
        if not budget and entry.name in self.several:
            self.schedule.wait(entry, math.inf, SEVERAL_BUDGETS)
            return
        allowance = self.view.by_name.get(budget) if budget else None
        if allowance is not None and not allowance.admits(entry.pod):
            self.schedule.refused(
                entry, budget, now, retry_after=None, fallback=lambda: self.options.retry_watched
            )
            return
        if allowance is not None:
            self.result.through[entry.name] = budget
            if entry.refusals or now > self._free_at(entry):
                self.result.paced_by[entry.name] = budget
            self._replace(entry.pod, now, [budget])
            allowance.evicted(entry.pod)
        else:  # deleted without its budgets read (a Pending pod's are counted in)
            self._replace(entry.pod, now, self.replaced_in.get(entry.name, []))
        self.schedule.accepted(entry, now)
        self.result.evicted[entry.name] = now
        self.push(now + self._stop(entry.pod), "gone", "", entry)

    def step(self, now: float) -> None:
        """What the drain sends at `now`. The engine looks again after each answer,
        and here every answer is instant: the critical tier may start once the
        ordinary pods are held, a slot freed takes the next pod. Until nothing more
        goes; bounded, since a refused pod may be picked again while its budget
        shows room the API server would not give."""
        for _ in range(self.bound):
            why = self.schedule.start_critical(now)
            if why:
                self.result.critical_at, self.result.critical_why = now, why
            chosen = self.schedule.pick(now, self.options.concurrency - self.schedule.in_flight())
            if not chosen:
                return
            for entry in chosen:
                self.send(entry, now)

    def _replace(self, pod: Pod, now: float, budgets: list[str]) -> None:
        """The pod's replacement, healthy when its workload's time to Ready says (even
        for a pod that was not), counted in `budgets`."""
        if not budgets:
            return  # nothing waits for it: no time to Ready asked
        startup = self._startup(pod)
        if math.isfinite(startup):
            for budget in budgets:
                self.push(now + self._created_after(pod) + startup, "ready", budget, None)

    def _free_at(self, entry: Entry) -> float:
        """When nothing but a budget held the pod any more: a critical pod waits for
        its tier first (sent when the tier starts, its budget never held it)."""
        if entry.critical:
            return self.result.critical_at or 0.0
        return 0.0

    def _stop(self, pod: Pod) -> float:
        grace = self.options.grace_period_seconds
        if grace is None and pods.name(pod) in self.stops:
            return self.stops[pods.name(pod)]
        return float(pods.grace_period(pod) if grace is None else grace)

    def _created_after(self, pod: Pod) -> float:
        """When the pod's replacement is created, from its eviction: at once for a
        ReplicaSet's; a StatefulSet's takes the same name, so only once the old pod is
        gone."""
        ref = pods.controller(pod)
        return self._stop(pod) if ref is not None and ref.get("kind") == "StatefulSet" else 0.0

    def _startup(self, pod: Pod) -> float:
        known = startup_of(pod, self.startups)
        if known is None or pods.controller(pod) is None:
            return math.inf  # nothing replaces it, or nothing says when
        return known.longest if self.slow else known.median

    def land(self, now: float) -> None:
        """Everything due at `now`: pods gone, replacements Ready."""
        while self.events and self.events[0][0] <= now:
            _, _, kind, budget, entry = heapq.heappop(self.events)
            if kind == "gone" and entry is not None:
                self.schedule.gone(entry)
                self.result.gone[entry.name] = now
            elif kind == "ready":
                self.view.by_name[budget].replaced()

    def next_time(self, now: float) -> float | None:
        """The next moment something changes; None: nothing ever will. With nothing
        in motion (no pod stopping, no replacement on its way) no budget can move,
        and a refused pod's timer would only be refused again: the one moment left
        is the critical tier's start at the deadline less the reserve, the engine's
        wake (schedule.py) whatever timers come before it."""
        if not self.events:
            start = self.schedule.deadline - self.schedule.reserve
            return start if start > now and not self.schedule.critical_started else None
        due = self.events[0][0]
        wake = self.schedule.next_wake(now)
        return min(due, wake) if wake is not None and math.isfinite(wake) else due


def forecast(
    going: list[Going],
    view: ForecastBudgets,
    options: DrainOptions,
    startups: Mapping[Owner, Startup],
    *,
    timeout: float,
    slow: bool = False,
) -> Forecast:
    """Run the drain of `going` on the forecast clock from 0 to whatever ends it:
    every pod gone, or nothing left that could move. `slow`: each replacement takes
    its workload's longest observed time to Ready instead of the median."""
    schedule = Schedule(view, deadline=timeout, reserve=options.critical_reserve_seconds)
    run = _Run(schedule, view, options, startups, slow, bound=len(going) + 1)
    for one in going:
        terminating = one.stopping is not None
        entry = schedule.add(one.pod, budgets=one.budgets, terminating=terminating, now=0.0)
        if one.stopping is not None:
            run.push(one.stopping, "gone", "", entry)
            continue
        if len(one.budgets) > 1:
            run.several.add(entry.name)
        if one.stop is not None:
            run.stops[entry.name] = one.stop
        if one.replaced_in:
            run.replaced_in[entry.name] = one.replaced_in
        annotation = pods.opted_out(one.pod) if options.honor_do_not_disrupt else ""
        if annotation:
            schedule.hold(entry, f"annotated {annotation}=true: not evicted while there is time")
    now: float | None = 0.0
    while now is not None and not schedule.settled():
        run.land(now)
        run.step(now)
        now = run.next_time(now)
    run.result.left = schedule.left()
    return run.result
