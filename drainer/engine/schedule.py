"""Which pod to evict next: the drain's decisions, kept apart from its requests.

A pod waiting for its budget does not hold a thread: it is an entry here, parked
until its budget changes or its own timer runs out. The drain asks `pick()` for
what to send whenever something changes, and sends at most its concurrency bound
of requests at once, so budget-free pods go at once however many others wait.

The rules, as kubectl drain and the eviction API would have them:
- A budget that allows N disruptions gets at most N evictions in flight for it
  (fewer once some were accepted since it last changed). An accepted eviction the
  server did not charge to the budget (`_charged`: the pod not Ready, or Pending,
  Succeeded or Failed) is not counted: nothing writes the budget for it, and
  counting it would spend the budget's room until a change that may never come.
- A budget that allows none, and that nothing was sent through yet, gets one
  probe (the server is the judge). After that its pods wait until the watch shows
  it allows again, or for their own fallback timer, in the order they were
  refused; a pod that lands on the node since waits for the budget's timer too.
  A pod that is not Ready may go through a budget with none allowed
  (unhealthyPodEvictionPolicy), so it is tried once whatever the budget says.
- A Retry-After, or the backoff after a failure, binds: no request before it.
- Critical pods go last, but not held hostage: their tier starts when the
  ordinary pods are gone, or at `reserve` seconds before the deadline when every
  ordinary pod left is held by something the drain cannot hurry (a budget, a
  terminating namespace).
- TIMEOUT_POLICY=force (force.py) deletes `held` pods before the deadline: a pod
  refused, or parked by a refusal of its budget while it was there. One that
  landed since, or that waits for a budget whose room is spent, was never asked:
  it is named as such (`_unasked`) for the end's words and the critical tier,
  never held.

Nothing here talks to the API or reads the clock: the caller passes `now`.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from drainer.engine import pods
from drainer.engine.pods import Pod


class State(StrEnum):
    TODO = "todo"
    """To evict: never tried, refused by a budget, or waiting after a failure."""
    IN_FLIGHT = "in_flight"
    EVICTED = "evicted"
    """The API accepted the eviction; the pod is on its way out."""
    TERMINATING = "terminating"
    """On its way out without our eviction: terminating already, or going with its
    terminating namespace."""
    GONE = "gone"
    STUCK = "stuck"
    """Terminating long past its grace period (a finalizer nobody removes): no longer waited for."""


OPEN = frozenset({State.TODO, State.IN_FLIGHT, State.EVICTED, State.TERMINATING})


class BudgetView(Protocol):
    """What the schedule needs from the budget watch."""

    def allowed(self, namespace: str, name: str) -> int | None: ...

    def seen(self, namespace: str, name: str) -> int: ...


@dataclass
class Entry:
    pod: Pod
    """The latest version of this pod (same UID) the drain has seen."""
    critical: bool
    budget: str = ""
    """namespace/name of the budget that selects it: the only one that matched when
    it was listed, or the one the server named when it refused."""
    order: int = 0
    state: State = State.TODO
    attempts: int = 0
    refusals: int = 0
    seen: int = -1
    """The budget's version at the last refusal."""
    sent_at: int = -1
    """The budget's version when the last request was sent: an acceptance counts
    against that version only. A version seen after the send may already include
    the eviction (the API server writes the budget with it), and counting it there
    too would leave the budget's room at nothing until a change that may never come."""
    not_before: float = 0.0
    """No request before this (0: none sent yet, nothing to wait for)."""
    hard: bool = False
    """`not_before` binds (Retry-After, backoff after a failure): no early wake."""
    since: float | None = None
    """When it started going: the eviction accepted, or first seen terminating."""
    held: str = ""
    """What holds it back now, in words (for the pod_left line)."""
    due: float | None = None
    """Its deletion deadline once it is terminating (deletionTimestamp), parsed once."""
    opted_out: bool = False
    """Annotated not to be disrupted: never sent while so (`held` says by what)."""
    forcing: bool = False
    """TIMEOUT_POLICY=force is deleting it before the deadline: no eviction any more."""
    force_after: float = 0.0
    """Its early deletion failed: not tried again before this."""
    with_namespace: bool = False
    """Its eviction was refused because its namespace is being deleted (403
    NamespaceTerminating): it goes when the namespace's controller deletes it."""

    uid: str = field(init=False, default="")
    name: str = field(init=False, default="")
    """namespace/name. Both read once: a newer version of the pod keeps its UID."""

    def __post_init__(self) -> None:
        self.uid = pods.uid(self.pod)
        self.name = pods.name(self.pod)

    @property
    def tier(self) -> str:
        """Its tier, in the words of the drain's events."""
        return "critical" if self.critical else "ordinary"


def _charged(pod: Pod) -> bool:
    """Whether the eviction API charged the pod's budget for accepting its eviction,
    as far as the pod tells (eviction.go): it deletes a pod Pending, Succeeded or
    Failed without reading its budgets, and lets a pod that is not Ready go without
    using them while its budget is healthy (or its policy AlwaysAllow). One not Ready
    under a budget short of healthy pods is charged, so refused while the budget
    allows none; accepted all the same (a budget desiring no pod, or figures not yet
    recomputed), the server wrote the budget: the watch's next version counts it,
    and until then at most one request through it is refused, and parked."""
    phase = (pod.get("status") or {}).get("phase")
    return pods.is_ready(pod) and phase not in ("Pending", "Succeeded", "Failed")


def _pick_order(entry: Entry) -> tuple[bool, int]:
    return bool(entry.budget), entry.order


def _split(budget: str) -> tuple[str, str]:
    namespace, _, name = budget.partition("/")
    return namespace, name


class Schedule:
    def __init__(self, budgets: BudgetView, *, deadline: float, reserve: float) -> None:
        self.budgets = budgets
        self.deadline = deadline
        self.reserve = reserve
        self.critical_started = ""
        """Why the critical tier started; empty until it has."""
        self._entries: dict[tuple[str, str, str], Entry] = {}
        self._by_name: dict[tuple[str, str], list[Entry]] = {}
        self._open = Counter[bool]()  # open entries by `critical`
        self._todo: dict[int, Entry] = {}  # the TODO entries by `order`
        self._queue: list[Entry] | None = None
        """The TODO entries in the order pick() looks at them, kept between picks
        (an entry that left TODO is dropped as met); None when one came (back) in."""
        self._order = itertools.count()
        self._flying: Counter[str] = Counter()
        self._accepted: dict[str, tuple[int, int]] = {}  # budget -> (version, accepted at it)
        self._closed: dict[str, int] = {}  # budget -> version at which it last refused
        self._refused_at: dict[str, int] = {}  # budget -> its version when a refused pod was sent
        self._retry_at: dict[str, float] = {}  # budget -> its last refusal's timer

    # -- the pods ---------------------------------------------------------------

    def add(self, pod: Pod, *, budgets: list[str], terminating: bool, now: float) -> Entry:
        """Track a pod to evict (or, when `terminating`, only to wait for)."""
        entry = Entry(
            pod,
            critical=pods.is_critical(pod),
            budget=budgets[0] if len(budgets) == 1 else "",
            order=next(self._order),
            due=pods.deletion_deadline(pod),
        )
        self._entries[(*pods.key(pod), pods.uid(pod))] = entry
        self._by_name.setdefault(pods.key(pod), []).append(entry)
        self._open[entry.critical] += 1
        self._todo[entry.order] = entry
        self._queue = None
        if terminating:
            self._move(entry, State.TERMINATING)
            entry.since = now
        elif entry.budget in self._retry_at:
            # Landed under a budget that refused: it waits for a change, or for the
            # budget's timer like the pods parked there (not for a change alone: the
            # budget's refused pods may be gone, and their refusals with them).
            entry.not_before = max(now, self._retry_at[entry.budget])
        return entry

    def _move(self, entry: Entry, state: State) -> None:
        """Every change of state goes through here, to keep the counts."""
        if state is State.TODO:
            self._todo[entry.order] = entry
            self._queue = None
        elif entry.state is State.TODO:
            del self._todo[entry.order]
        self._open[entry.critical] += (state in OPEN) - (entry.state in OPEN)
        entry.state = state

    def named(self, key: tuple[str, str]) -> list[Entry]:
        """The entries of the pods that had this namespace/name (one per UID)."""
        return self._by_name.get(key, [])

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self._entries.values()))

    def open(self) -> list[Entry]:
        return [e for e in self._entries.values() if e.state in OPEN]

    def settled(self) -> bool:
        """Every pod is gone or stuck."""
        return not (self._open[False] or self._open[True])

    def in_flight(self) -> int:
        return sum(self._flying.values())

    # -- what to send -----------------------------------------------------------

    def room(self, budget: str) -> int:
        """Evictions the budget allows now, less those in flight or accepted since it
        last changed. Unknown to the watch (not listed yet, deleted): one probe."""
        namespace, name = _split(budget)
        allowed = self.budgets.allowed(namespace, name)
        if allowed is None:
            return 1 - self._flying[budget]
        return allowed - self._spent(budget) - self._flying[budget]

    def _spent(self, budget: str) -> int:
        """Evictions accepted through the budget since it last changed."""
        at, count = self._accepted.get(budget, (-1, 0))
        return count if at == self.budgets.seen(*_split(budget)) else 0

    def eligible(self, entry: Entry, now: float) -> bool:
        if entry.state is not State.TODO or (entry.critical and not self.critical_started):
            return False
        if entry.opted_out or entry.forcing:
            return False
        if entry.hard or not entry.budget:
            return now >= entry.not_before
        budget = entry.budget
        if self.room(budget) > 0 and not self._refused_as_seen(budget):
            return True
        if self._flying[budget]:
            return False  # one probe at a time through a budget that allows none
        if budget not in self._closed and budget not in self._accepted:
            return True  # nothing sent through it yet: one request finds out
        if entry.attempts == 0 and not pods.is_ready(entry.pod):
            return True  # an unhealthy pod may go through a budget with none allowed
        return 0 < entry.not_before <= now  # the fallback timer, should a change be missed

    def _refused_as_seen(self, budget: str) -> bool:
        """The server refused through the budget at the version the watch shows: the
        room that version shows is not the server's (the watch lags: broken and
        re-listing, or behind another's eviction), and trusting it re-sends the pod
        at once, refusal after refusal. Its pods wait for a change or their timer."""
        return self._refused_at.get(budget, -1) == self.budgets.seen(*_split(budget))

    def pick(self, now: float, slots: int) -> list[Entry]:
        """Up to `slots` pods to send an eviction for now; they are in flight from here."""
        chosen: list[Entry] = []
        if slots <= 0 or not self._todo:
            return chosen
        for entry in self._waiting():
            if len(chosen) >= slots:
                break
            if entry.state is State.TODO and self.eligible(entry, now):
                self._move(entry, State.IN_FLIGHT)
                if entry.budget:
                    entry.sent_at = self.budgets.seen(*_split(entry.budget))
                entry.attempts += 1
                self._flying[entry.budget] += 1
                chosen.append(entry)
        return chosen

    def _waiting(self) -> list[Entry]:
        """The TODO entries, those under no budget first, each in its turn: sorted
        once, not at every pick (a pick per answer made it quadratic in the pods)."""
        if self._queue is None:
            self._queue = sorted(self._todo.values(), key=_pick_order)
        queue = self._queue
        met = 0
        while met < len(queue) and queue[met].state is not State.TODO:
            met += 1
        del queue[:met]
        return queue

    def next_wake(self, now: float) -> float | None:
        """The next moment a timer makes something eligible (None: only a change will)."""
        times = [e.not_before for e in self._todo.values() if e.not_before > now]
        start = self.deadline - self.reserve
        if not self.critical_started and start > now:
            times.append(start)
        return min(times, default=None)

    # -- answers ----------------------------------------------------------------

    def _landed(self, entry: Entry) -> bool:
        """The answer to a request in flight arrived; False if the pod went meanwhile."""
        if entry.state is not State.IN_FLIGHT:
            return False
        self._flying[entry.budget] -= 1
        return True

    def accepted(self, entry: Entry, now: float) -> None:
        if not self._landed(entry):
            return
        self._move(entry, State.EVICTED)
        entry.since, entry.held = now, ""
        if entry.due is None:
            # Until the watch tells of its deletionTimestamp: its own grace period from
            # now. A pod the watch never reports on (an event lost with a broken
            # stream) is then looked at again at the stuck check, not waited for until
            # the deadline.
            entry.due = now + pods.grace_period(entry.pod)
        if entry.budget and _charged(entry.pod):  # the pod as sent: not followed in flight
            version = entry.sent_at
            at, count = self._accepted.get(entry.budget, (-1, 0))
            self._accepted[entry.budget] = (version, (count if at == version else 0) + 1)

    def refused(
        self,
        entry: Entry,
        budget: str,
        now: float,
        *,
        retry_after: float | None,
        fallback: Callable[[], float],
    ) -> None:
        """A budget refused: park the pod until the budget changes, its fallback timer,
        or the server's Retry-After; park with it the pods of that budget not yet tried."""
        if not self._landed(entry):
            return
        self._move(entry, State.TODO)
        entry.refusals += 1
        if entry.budget and budget in ("", entry.budget):
            # The version the request was sent at, not the answer's: a change the
            # watch saw since may be newer than the refusal. The latest such: a late
            # answer to an older request never lowers it.
            seen = self._refused_at.get(entry.budget, -1)
            self._refused_at[entry.budget] = max(seen, entry.sent_at)
        entry.budget = budget or entry.budget
        entry.held = f"PodDisruptionBudget {entry.budget or '(unnamed)'} allows no disruption"
        if not entry.budget:
            entry.hard, entry.not_before = True, now + (retry_after or fallback())
            return
        version = self.budgets.seen(*_split(entry.budget))
        entry.seen = self._closed[entry.budget] = version
        entry.hard = bool(retry_after)
        entry.not_before = self._retry_at[entry.budget] = now + (retry_after or fallback())
        for other in self._todo.values():
            # Not those on a timer already: parked before, or landed since the budget
            # refused (never asked: not `held`, which force.py deletes early).
            if other.budget == entry.budget and not (other.held or other.not_before):
                other.held = entry.held
                other.not_before = now + fallback()

    def wait(self, entry: Entry, until: float, why: str) -> None:
        """No request for this pod before `until` (a failure's backoff, a budget
        problem only a person can fix)."""
        if not self._landed(entry):
            return
        self._move(entry, State.TODO)
        entry.hard, entry.not_before, entry.held = True, until, why

    def hold(self, entry: Entry, why: str) -> None:
        """The pod opted out of disruption: no request for it until `release`."""
        if entry.state is State.TODO:
            entry.opted_out, entry.held = True, why

    def release(self, entry: Entry, now: float) -> None:
        """The pod no longer opts out: it may be sent now, even through a budget that
        refused others (one probe, as the fallback timer would send; a Retry-After or
        backoff it had stands)."""
        if entry.opted_out:
            entry.opted_out, entry.held = False, ""
            entry.not_before = max(entry.not_before, now)

    def going(self, entry: Entry, now: float, why: str, *, due: float | None = None) -> None:
        """The pod goes without our eviction (its namespace is being deleted); `due`:
        when it should be gone, until the watch tells of its deletionTimestamp (as
        `accepted` gives an evicted pod: looked at again at the stuck check)."""
        if entry.state is State.IN_FLIGHT:
            self._landed(entry)
        self._move(entry, State.TERMINATING)
        entry.since, entry.held = now, why
        if entry.due is None:
            entry.due = due

    def not_deleted_yet(self, entry: Entry, until: float) -> None:
        """A pod going with its terminating namespace that is not deleted yet (no
        deletionTimestamp): evicted again, not before `until`, as kubectl drain does
        until the namespace's controller deletes it. Its due time goes with it."""
        if not (self._landed(entry) or entry.state is State.TERMINATING):
            return
        self._move(entry, State.TODO)
        entry.hard, entry.not_before, entry.due = True, until, None
        entry.held = "going with its terminating namespace, not deleted yet"

    def gone(self, entry: Entry) -> None:
        if entry.state is State.IN_FLIGHT:
            self._landed(entry)
        self._move(entry, State.GONE)

    def stuck(self, entry: Entry) -> None:
        self._move(entry, State.STUCK)

    # -- tiers and the end ------------------------------------------------------

    def start_critical(self, now: float) -> str:
        """Start the critical tier if it is time; returns why it started ("" if not now)."""
        if self.critical_started or not self._open[True]:
            return ""
        if not self._open[False]:
            self.critical_started = "the ordinary pods are gone"
            return self.critical_started
        if now < self.deadline - self.reserve:
            return ""
        ordinary = [e for e in self._entries.values() if not e.critical and e.state in OPEN]
        held = {e.name: e.held or self._unasked(e) for e in ordinary}
        if all(e.state in (State.TODO, State.TERMINATING) and held[e.name] for e in ordinary):
            left = max(0.0, self.deadline - now)
            when = (
                f"{left:.0f} s before the deadline (the critical reserve is {self.reserve:g} s)"
                if left < self.reserve - 1
                else f"{self.reserve:g} s before the deadline"
            )
            self.critical_started = f"{when}, the ordinary pods left are held: " + "; ".join(
                f"{e.name} ({held[e.name]})" for e in ordinary
            )
        return self.critical_started

    def _unasked(self, entry: Entry) -> str:
        """What keeps a pod never asked for waiting, in words: its budget, when that
        refused others or its room is spent (the budget's timer, or a change, sends
        it). Words only, never `held`: the force policy deletes held pods early."""
        budget = entry.budget
        if entry.state is not State.TODO or entry.attempts or entry.opted_out or not budget:
            return ""
        if budget not in self._closed and budget not in self._accepted:
            return ""  # nothing sent through it yet: one request finds out
        if self.room(budget) > 0 and not self._refused_as_seen(budget):
            return ""  # it may go now
        return f"PodDisruptionBudget {budget} allows no disruption (not asked yet)"

    def left(self) -> dict[str, str]:
        """Each pod still on the node, and why."""
        reasons = {}
        for entry in self.open():
            if entry.state is State.TODO and entry.critical and not self.critical_started:
                why = "critical pod: its tier waits for the ordinary pods, which are still held"
            elif entry.state is State.TODO:
                why = entry.held or self._unasked(entry) or "not evicted yet"
            elif entry.state is State.IN_FLIGHT:
                why = "eviction request unanswered"
            elif entry.state is State.EVICTED:
                why = "evicted, still terminating"
            else:
                why = entry.held or "terminating, not gone yet"
            reasons[entry.name] = why
        return reasons
