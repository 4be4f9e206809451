"""The schedule's decisions, table by table: which pod is sent next, how many go
through a budget, when the critical tier starts, what is said of the pods left.
No API and no clock: `now` is a number the test moves."""

from __future__ import annotations

from typing import Any

import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from drainer.engine.schedule import Entry, Schedule, State
from testbed import workloads as objects
from testbed.workloads import Obj

DEADLINE = 1000.0
PROPERTIES = hypothesis.settings(max_examples=100, deadline=None)


class Budgets:
    """What the budget watch would say: allowed disruptions and a version per budget."""

    def __init__(self, **allowed: int) -> None:
        self._allowed = {name.replace("__", "/"): n for name, n in allowed.items()}
        self._versions = dict.fromkeys(self._allowed, 1)

    def allowed(self, namespace: str, name: str) -> int | None:
        return self._allowed.get(f"{namespace}/{name}")

    def seen(self, namespace: str, name: str) -> int:
        return self._versions.get(f"{namespace}/{name}", 0)

    def change(self, budget: str, allowed: int) -> None:
        self._allowed[budget] = allowed
        self._versions[budget] = self._versions.get(budget, 0) + 1


def pod(name: str, *, critical: bool = False, ready: bool = True) -> Obj:
    priority_class = objects.CRITICAL if critical else ""
    return objects.pod(
        name, namespace="shop", uid=f"uid-{name}", priority_class=priority_class, ready=ready
    )


def schedule_of(budgets: Budgets, reserve: float = 120.0) -> Schedule:
    return Schedule(budgets, deadline=DEADLINE, reserve=reserve)


def add(schedule: Schedule, name: str, budget: str = "", **kw: Any) -> Entry:
    return schedule.add(
        pod(name, **kw), budgets=[budget] if budget else [], terminating=False, now=0
    )


def names(entries: list[Entry]) -> list[str]:
    return [e.name.split("/")[1] for e in entries]


def refuse(
    schedule: Schedule,
    entry: Entry,
    now: float,
    retry_after: float | None = None,
    fallback: float = 30.0,
) -> None:
    schedule.refused(entry, entry.budget, now, retry_after=retry_after, fallback=lambda: fallback)


# -- head of line ---------------------------------------------------------------


def test_forty_pods_blocked_by_their_budget__the_twenty_free_ones_still_go_at_once() -> None:
    budgets = Budgets(shop__db=0)
    schedule = schedule_of(budgets)
    for i in range(40):
        add(schedule, f"db-{i}", "shop/db")
    for i in range(20):
        add(schedule, f"web-{i}")
    sent: list[str] = []
    for _ in range(6):  # six rounds of four slots
        for entry in schedule.pick(now=1.0, slots=4 - schedule.in_flight()):
            sent.append(entry.name)
            if entry.budget:
                refuse(schedule, entry, 1.0)
            else:
                schedule.accepted(entry, 1.0)

    assert [n for n in sent if "web" in n] == [f"shop/web-{i}" for i in range(20)]
    assert [n for n in sent if "db" in n] == ["shop/db-0"], (
        "one probe; the rest wait for the budget"
    )


def test_budget_allowing_two__at_most_two_in_flight_and_none_past_what_it_allowed() -> None:
    budgets = Budgets(shop__api=2)
    schedule = schedule_of(budgets)
    for i in range(10):
        add(schedule, f"api-{i}", "shop/api")

    first = schedule.pick(now=1.0, slots=32)
    assert names(first) == ["api-0", "api-1"]
    schedule.accepted(first[0], 1.0)
    assert schedule.pick(now=1.0, slots=32) == [], "one accepted and one in flight use both"
    schedule.accepted(first[1], 1.0)
    assert schedule.pick(now=1.0, slots=32) == [], "the budget has not changed since"

    budgets.change("shop/api", 1)  # one evicted pod came back Ready elsewhere
    assert names(schedule.pick(now=2.0, slots=32)) == ["api-2"]


def test_refused_pods_wait_for_the_budget__then_go_in_the_order_refused() -> None:
    budgets = Budgets(shop__api=0)
    schedule = schedule_of(budgets)
    entries = [add(schedule, f"api-{i}", "shop/api") for i in range(3)]
    (probe,) = schedule.pick(now=1.0, slots=32)
    refuse(schedule, probe, 1.0)

    assert schedule.pick(now=2.0, slots=32) == [], "refused at this version: wait"
    budgets.change("shop/api", 0)
    assert schedule.pick(now=3.0, slots=32) == [], "changed, but still allows none"
    budgets.change("shop/api", 1)
    (next_one,) = schedule.pick(now=4.0, slots=32)
    assert next_one is entries[0], "the first refused goes first"
    assert entries[0].refusals == 1


def test_refused_pod__its_fallback_timer_retries_it_should_a_change_be_missed() -> None:
    schedule = schedule_of(Budgets(shop__api=0))
    entry = add(schedule, "api-0", "shop/api")
    schedule.pick(now=1.0, slots=1)
    refuse(schedule, entry, 1.0)

    assert schedule.pick(now=30.9, slots=1) == []
    assert schedule.next_wake(2.0) == 31.0
    assert schedule.pick(now=31.0, slots=1) == [entry]


def test_retry_after_binds__even_when_the_budget_allows_sooner() -> None:
    budgets = Budgets(shop__api=0)
    schedule = schedule_of(budgets)
    entry = add(schedule, "api-0", "shop/api")
    schedule.pick(now=1.0, slots=1)
    refuse(schedule, entry, 1.0, retry_after=10.0)
    budgets.change("shop/api", 1)

    assert schedule.pick(now=10.9, slots=1) == []
    assert schedule.pick(now=11.0, slots=1) == [entry]


def test_unready_pod__tried_once_through_a_budget_that_refused() -> None:
    """unhealthyPodEvictionPolicy IfHealthyBudget: the server may let it through."""
    schedule = schedule_of(Budgets(shop__api=0))
    healthy = add(schedule, "api-0", "shop/api")
    sick = add(schedule, "api-1", "shop/api", ready=False)
    schedule.pick(now=1.0, slots=4)
    refuse(schedule, healthy, 1.0)

    assert schedule.pick(now=2.0, slots=4) == [sick]


@pytest.mark.parametrize(
    ("ready", "phase"),
    [
        pytest.param(False, "Running", id="not-ready"),
        pytest.param(True, "Pending", id="pending"),
        pytest.param(True, "Succeeded", id="succeeded"),
        pytest.param(True, "Failed", id="failed"),
    ],
)
def test_eviction_the_server_did_not_charge__leaves_the_budget_room_to_the_others(
    ready: bool, phase: str
) -> None:
    """eviction.go deletes a Pending, Succeeded or Failed pod without reading its
    budget (whatever its Ready condition), and lets one not Ready go without using it
    (a healthy budget): nothing writes the budget, its version stays, and the room it
    shows is still there for the Ready pod."""
    schedule = schedule_of(Budgets(shop__web=1))
    spared = schedule.add(
        objects.pod("web-0", namespace="shop", uid="uid-web-0", phase=phase, ready=ready),
        budgets=["shop/web"],
        terminating=False,
        now=0,
    )
    healthy = add(schedule, "web-1", "shop/web")
    assert schedule.pick(now=1.0, slots=1) == [spared]
    schedule.accepted(spared, 1.0)

    assert schedule.pick(now=2.0, slots=4) == [healthy]


def test_unready_pod_charged_after_all__one_refusal_then_the_budget_write_rules() -> None:
    """A pod not Ready under a budget desiring none is charged (eviction.go spares it
    only while the budget desires some): the server writes the budget, which the
    watch may show only later. Not counted, the drain sends one more pod on the room
    it still shows: refused, parked, sent again once the budget allows again."""
    budgets = Budgets(shop__web=1)
    schedule = schedule_of(budgets)
    sick = add(schedule, "web-0", "shop/web", ready=False)
    healthy = add(schedule, "web-1", "shop/web")
    assert schedule.pick(now=1.0, slots=1) == [sick]
    schedule.accepted(sick, 1.0)
    assert schedule.pick(now=1.5, slots=4) == [healthy], "the watch still shows 1 allowed"
    refuse(schedule, healthy, 2.0)
    budgets.change("shop/web", 0)  # the charge's own write, seen now

    assert schedule.pick(now=3.0, slots=4) == []
    budgets.change("shop/web", 1)  # web-0's replacement Ready
    assert schedule.pick(now=4.0, slots=4) == [healthy]


def test_several_answers_for_one_pod__only_the_first_counts() -> None:
    schedule = schedule_of(Budgets())
    entry = add(schedule, "web-0")
    schedule.pick(now=1.0, slots=1)
    schedule.gone(entry)
    schedule.accepted(entry, 2.0)  # the answer arrives after the watch saw it go

    assert entry.state is State.GONE
    assert schedule.in_flight() == 0


# -- the critical tier ----------------------------------------------------------


def test_critical_pods__wait_for_the_ordinary_tier__then_go() -> None:
    schedule = schedule_of(Budgets())
    web = add(schedule, "web-0")
    dns = add(schedule, "dns-0", critical=True)

    assert schedule.pick(now=1.0, slots=4) == [web]
    assert schedule.start_critical(1.0) == ""
    schedule.accepted(web, 1.0)
    assert schedule.start_critical(2.0) == "", "evicted but not gone yet"
    schedule.gone(web)
    assert schedule.start_critical(3.0) == "the ordinary pods are gone"
    assert schedule.pick(now=3.0, slots=4) == [dns]


@pytest.mark.parametrize(
    ("now", "starts"),
    [
        pytest.param(DEADLINE - 121, False, id="before-the-reserve"),
        pytest.param(DEADLINE - 120, True, id="at-the-reserve"),
    ],
)
def test_ordinary_tier_held_by_a_budget__critical_tier_starts_at_the_reserve(
    now: float, starts: bool
) -> None:
    schedule = schedule_of(Budgets(shop__db=0))
    db = add(schedule, "db-0", "shop/db")
    dns = add(schedule, "dns-0", critical=True)
    schedule.pick(now=1.0, slots=4)
    refuse(schedule, db, 1.0, fallback=DEADLINE)
    assert schedule.next_wake(1.0) == DEADLINE - 120, "the loop wakes at the reserve"

    why = schedule.start_critical(now)

    assert bool(why) is starts
    if starts:
        assert "shop/db-0 (PodDisruptionBudget shop/db allows no disruption)" in why
        assert schedule.pick(now=now, slots=4) == [dns]


@pytest.mark.parametrize(
    ("now", "said"),
    [
        pytest.param(DEADLINE - 120, "120 s before the deadline, the", id="at-the-reserve"),
        pytest.param(
            DEADLINE - 60,
            "60 s before the deadline (the critical reserve is 120 s), the",
            id="a-drain-shorter-than-the-reserve",
        ),
    ],
)
def test_critical_tier_started__says_how_long_before_the_deadline_it_really_was(
    now: float, said: str
) -> None:
    """A 60 s drain with the default 120 s reserve starts the critical tier at once:
    'starting the critical tier: 120 s before the deadline' would be untrue."""
    schedule = schedule_of(Budgets(shop__db=0))
    db = add(schedule, "db-0", "shop/db")
    add(schedule, "dns-0", critical=True)
    schedule.pick(now=now, slots=4)
    refuse(schedule, db, now, fallback=DEADLINE)

    assert schedule.start_critical(now).startswith(said)


def test_ordinary_pod_still_terminating__not_held__critical_tier_waits_for_it() -> None:
    schedule = schedule_of(Budgets())
    web = add(schedule, "web-0")
    add(schedule, "dns-0", critical=True)
    schedule.pick(now=1.0, slots=4)
    schedule.accepted(web, 1.0)

    assert schedule.start_critical(DEADLINE - 10) == ""


# -- what is left, and why ------------------------------------------------------


def test_left__each_pod_with_its_reason() -> None:
    schedule = schedule_of(Budgets(shop__db=0))
    db = add(schedule, "db-0", "shop/db")
    web = add(schedule, "web-0")
    add(schedule, "dns-0", critical=True)
    schedule.pick(now=1.0, slots=4)
    refuse(schedule, db, 1.0)
    schedule.accepted(web, 1.0)

    assert schedule.left() == {
        "shop/db-0": "PodDisruptionBudget shop/db allows no disruption",
        "shop/web-0": "evicted, still terminating",
        "shop/dns-0": "critical pod: its tier waits for the ordinary pods, which are still held",
    }


def test_acceptance_answered_after_the_watch_moved_on__the_next_pod_goes_when_it_allows() -> None:
    """The API server writes the budget with the eviction; its watch may show that
    version (and the controller's next one) before the eviction's answer is read.
    The acceptance counts against the version it was sent at, so the budget's
    later room is not spent a second time (the drain waited for its deadline)."""
    budgets = Budgets(shop__web=1)
    schedule = schedule_of(budgets)
    first, second = add(schedule, "web-0", "shop/web"), add(schedule, "web-1", "shop/web")
    assert names(schedule.pick(now=1.0, slots=8)) == ["web-0"]
    budgets.change("shop/web", 0)  # the eviction's own write
    budgets.change("shop/web", 1)  # web-0 replaced and Ready: one more allowed
    schedule.accepted(first, now=1.5)  # its answer read only now

    assert names(schedule.pick(now=2.0, slots=8)) == ["web-1"]
    assert second.state is State.IN_FLIGHT


def test_acceptance_before_the_budget_changes__room_spent_until_it_does() -> None:
    budgets = Budgets(shop__web=1)
    schedule = schedule_of(budgets)
    first = add(schedule, "web-0", "shop/web")
    add(schedule, "web-1", "shop/web")
    schedule.pick(now=1.0, slots=8)
    schedule.accepted(first, now=1.2)

    assert schedule.pick(now=2.0, slots=8) == [], "the budget's one disruption is spent"
    budgets.change("shop/web", 1)
    assert names(schedule.pick(now=3.0, slots=8)) == ["web-1"]


# -- the budget's accounting, over any order of picks and answers -----------------


@st.composite
def rounds(draw: st.DrawFn) -> list[tuple[str, int]]:
    """Steps of a drain against one budget that does not change: pick with some free
    slots, or the answer to the oldest request in flight (accepted or refused)."""
    step = st.one_of(
        st.tuples(st.just("pick"), st.integers(min_value=0, max_value=6)),
        st.tuples(st.sampled_from(["accept", "refuse"]), st.just(0)),
    )
    return draw(st.lists(step, max_size=20))


@hypothesis.settings(max_examples=50, deadline=None)
@given(
    allowed=st.integers(min_value=0, max_value=4),
    pod_count=st.integers(min_value=1, max_value=12),
    steps=rounds(),
)
def test_budget_unchanged__never_more_sent_through_it_than_it_allows_or_one_probe(
    allowed: int, pod_count: int, steps: list[tuple[str, int]]
) -> None:
    budgets = Budgets(shop__api=allowed)
    schedule = schedule_of(budgets)
    for i in range(pod_count):
        add(schedule, f"api-{i}", "shop/api")
    flying: list[Entry] = []
    accepted = 0
    for now, (step, slots) in enumerate(steps, start=1):
        if step == "pick":
            picked = schedule.pick(now=float(now), slots=slots)
            assert len(picked) <= slots
            flying += picked
        elif flying:
            entry = flying.pop(0)
            if step == "accept":
                schedule.accepted(entry, float(now))
                accepted += 1
            else:
                refuse(schedule, entry, float(now), fallback=1e6)  # no timer within the test
        assert schedule.in_flight() == len(flying)
        assert accepted + len(flying) <= max(allowed, 1), "past the budget (or its one probe)"


@PROPERTIES
@given(
    free=st.integers(min_value=0, max_value=20),
    slots=st.integers(min_value=-2, max_value=25),
)
def test_pods_without_a_budget__as_many_go_as_there_are_slots(free: int, slots: int) -> None:
    schedule = schedule_of(Budgets())
    for i in range(free):
        add(schedule, f"web-{i}")

    picked = schedule.pick(now=1.0, slots=slots)

    assert names(picked) == [f"web-{i}" for i in range(min(free, max(slots, 0)))]
    assert schedule.in_flight() == len(picked)


def test_a_late_refusal_of_an_older_request__the_newer_refusal_still_holds_the_budget() -> None:
    """y sent at the budget's first version, x at its second; x refused, then y's
    refusal comes late: the budget stays closed at the second version (the late
    answer reset it to the first, and x and z were sent again at once, refused)."""
    budgets = Budgets(shop__web=3)
    schedule = schedule_of(budgets)
    y = add(schedule, "y", "shop/web")
    assert names(schedule.pick(now=0, slots=1)) == ["y"]
    budgets.change("shop/web", 3)  # a new version of the budget, room still shown
    x = add(schedule, "x", "shop/web")
    add(schedule, "z", "shop/web")
    assert names(schedule.pick(now=0, slots=1)) == ["x"]

    refuse(schedule, x, now=0)
    refuse(schedule, y, now=0)

    assert schedule.pick(now=1, slots=5) == [], "sent again at a version the server refused"


# -- pods a budget holds that were never asked for --------------------------------


def test_pod_landing_under_a_budget_that_refused__sent_on_the_budgets_timer() -> None:
    """A pod that lands on the node mid-drain under a budget that refused, whose
    refused pod went meanwhile (deleted by its owner, or by the force policy): probed
    on the budget's timer, as the pods parked there are. It waited for a budget change
    that may never come, and sat "not evicted yet" until the deadline."""
    budgets = Budgets(shop__api=0)
    schedule = schedule_of(budgets)
    first = add(schedule, "api-0", "shop/api")
    schedule.pick(now=1.0, slots=4)
    refuse(schedule, first, 1.0)  # the budget's timer: 31
    schedule.gone(first)
    late = schedule.add(pod("api-9"), budgets=["shop/api"], terminating=False, now=5.0)

    assert schedule.pick(now=5.0, slots=4) == [], "refused at this version: not at once"
    assert schedule.next_wake(5.0) == 31.0
    assert schedule.pick(now=31.0, slots=4) == [late]


def test_pod_landing_beside_pods_a_budget_refused__probed_after_them__never_held_unasked() -> None:
    """Never `held` before it is asked: the force policy reads that as asked, and
    deletes such pods early."""
    budgets = Budgets(shop__api=0)
    schedule = schedule_of(budgets)
    first = add(schedule, "api-0", "shop/api")
    schedule.pick(now=1.0, slots=4)
    refuse(schedule, first, 1.0)  # the budget's timer: 31
    late = schedule.add(pod("api-9"), budgets=["shop/api"], terminating=False, now=5.0)

    assert schedule.pick(now=5.0, slots=4) == []
    assert schedule.pick(now=31.0, slots=4) == [first], "one probe at a time"
    refuse(schedule, first, 31.0)
    assert late.held == "" and late.attempts == 0, "held, never asked"
    assert schedule.pick(now=31.0, slots=4) == [late], "its timer was not pushed back"


@pytest.mark.parametrize("landed", [False, True], ids=["listed", "landed-mid-drain"])
def test_budget_spent_by_one_acceptance__its_other_pods_named__critical_tier_at_the_reserve(
    landed: bool,
) -> None:
    """The budget allowed one eviction, and never another (the replacement never
    becomes Ready): its other pods wait for it, said so, and the critical tier starts
    at its reserve instead of waiting for them until the deadline."""
    budgets = Budgets(shop__web=1)
    schedule = schedule_of(budgets)
    first = add(schedule, "web-0", "shop/web")
    other = None if landed else add(schedule, "web-1", "shop/web")
    add(schedule, "dns-0", critical=True)
    schedule.pick(now=1.0, slots=8)
    schedule.accepted(first, 1.2)
    budgets.change("shop/web", 0)  # the eviction's own write; no Ready replacement since
    schedule.gone(first)
    if other is None:
        other = schedule.add(pod("web-1"), budgets=["shop/web"], terminating=False, now=5.0)

    assert schedule.pick(now=DEADLINE - 121, slots=8) == []
    assert schedule.left()["shop/web-1"] == (
        "PodDisruptionBudget shop/web allows no disruption (not asked yet)"
    )
    why = schedule.start_critical(DEADLINE - 120)
    assert "shop/web-1 (PodDisruptionBudget shop/web allows no disruption" in why
    assert names(schedule.pick(now=DEADLINE - 120, slots=8)) == ["dns-0"]
    assert other.held == "" and other.attempts == 0, "words only: never asked"


@PROPERTIES
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["add", "add_budgeted", "pick", "back"]), st.integers(0, 5)),
        max_size=40,
    )
)
def test_picks_in_turn_whatever_came_and_went_between_picks(steps: list[tuple[str, int]]) -> None:
    """The order pick() keeps between picks is the one it would sort anew: pods under
    no budget first, each in the order it came, one sent back (a timer's wait) in its
    old turn, a pod new mid-drain in its own."""
    schedule = schedule_of(Budgets(shop__pdb=100))
    entries: list[Entry] = []
    for i, (step, n) in enumerate(steps):
        if step.startswith("add"):
            entries.append(add(schedule, f"p{i}", "shop/pdb" if step == "add_budgeted" else ""))
        elif step == "back":
            flying = [e for e in entries if e.state is State.IN_FLIGHT]
            for entry in flying[:n]:
                schedule.wait(entry, until=0.0, why="the server asked to wait")
        else:
            todo = [e for e in entries if e.state is State.TODO]
            expected = sorted(todo, key=lambda e: (bool(e.budget), e.order))[:n]
            assert schedule.pick(now=1.0, slots=n) == expected
