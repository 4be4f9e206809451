"""drainer/engine/relay.py: when an eviction's worker takes the loop's turn, what it
keeps for itself and what it hands the loop (issue 39, item 10)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from drainer.engine.relay import Relay, Step
from drainer.engine.schedule import Entry
from testbed import workloads as objects


def entry(name: str) -> Entry:
    return Entry(objects.pod(name, node_name="n1"), critical=False)


class Turns:
    """The loop's turn, scripted; counts how often it was taken."""

    def __init__(self, *steps: Step | None) -> None:
        self.steps = list(steps)
        self.taken = 0

    def __call__(self) -> Step | None:
        self.taken += 1
        return self.steps.pop(0)


class Woken:
    """The drain's condition: counts the wake-ups of the loop."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.count = 0
        notify = self.cond.notify_all

        def counted() -> None:
            self.count += 1
            notify()

        self.cond.notify_all = counted  # type: ignore[method-assign]


@pytest.fixture
def woken() -> Woken:
    return Woken()


def lending(woken: Woken, turn: Callable[[], Step | None]) -> Relay:
    """A relay whose loop waits with an eviction in flight, lending `turn`."""
    relay = Relay(woken.cond)
    relay.waiting(turn)
    return relay


def test_loop_busy__lends_no_turn__the_worker_sends_nothing__the_loop_is_woken(
    woken: Woken,
) -> None:
    relay = Relay(woken.cond)
    with woken.cond:
        assert relay.next_send() is None  # the caller wakes the loop
    assert relay.take() is None


def test_loop_waiting__sending_is_all_the_turn_decides__the_worker_sends_without_waking_it(
    woken: Woken,
) -> None:
    a = entry("a")
    turns = Turns(Step(send=[a]), None)
    relay = lending(woken, turns)
    with woken.cond:
        assert relay.next_send() is a
    assert woken.count == 0
    assert relay.take() is None
    with woken.cond:  # the loop still waits: the next answer takes a turn too
        assert relay.next_send() is None
    assert turns.taken == 2


def test_loop_waiting__several_to_send__the_worker_sends_one__the_loop_the_rest(
    woken: Woken,
) -> None:
    a, b, c = entry("a"), entry("b"), entry("c")
    turns = Turns(Step(send=[a, b, c]), Step(send=[entry("d")]))
    relay = lending(woken, turns)
    with woken.cond:
        assert relay.next_send() is a
    assert woken.count == 1
    with woken.cond:  # what the loop has not taken yet comes first: no other turn
        assert relay.next_send() is None
    assert turns.taken == 1
    handed = relay.take()
    assert handed is not None and handed.send == [b, c]
    assert relay.take() is None


@pytest.mark.parametrize(
    "decided",
    [
        {"recordon": True},  # the node cordoned again before the next eviction
        {"verify": True},
        {"check_name": True},
        {"force": [entry("held")]},
    ],
    ids=["recordon", "verify", "check-name", "force"],
)
def test_loop_waiting__the_turn_decides_more_than_sending__all_of_it_goes_to_the_loop(
    woken: Woken, decided: dict[str, object]
) -> None:
    a = entry("a")
    step = Step(send=[a], **decided)  # type: ignore[arg-type]
    relay = lending(woken, Turns(step))
    with woken.cond:
        assert relay.next_send() is None
    assert woken.count == 1
    handed = relay.take()
    assert handed is step and handed.send == [a]  # sent after the loop's own step


def test_loop_waiting__the_turn_ends_the_drain__the_loop_is_told(woken: Woken) -> None:
    relay = lending(woken, Turns(Step(over=True)))
    with woken.cond:
        assert relay.next_send() is None
    handed = relay.take()
    assert handed is not None and handed.over


def test_loop_waiting__nothing_to_do__nothing_handed(woken: Woken) -> None:
    relay = lending(woken, Turns(None))
    with woken.cond:
        assert relay.next_send() is None
    assert relay.take() is None
    assert woken.count == 0  # the caller (evictions.py) wakes the loop then


def test_loop_gone__no_worker_takes_its_turn_again(woken: Woken) -> None:
    turns = Turns(Step(send=[entry("a")]))
    relay = lending(woken, turns)
    relay.waiting(None)
    with woken.cond:
        assert relay.next_send() is None
    assert turns.taken == 0


def test_the_workers_turn_raises__the_loop_raises_it_at_its_next_turn(woken: Woken) -> None:
    """An error in the turn is the drain's, as when the loop takes it: never lost in a
    worker's future."""
    taken = []

    def broken() -> Step | None:
        taken.append(1)
        raise ValueError("a bug in a turn")

    relay = lending(woken, broken)
    with woken.cond:
        assert relay.next_send() is None
        assert relay.next_send() is None  # the loop's now
    assert len(taken) == 1
    with pytest.raises(ValueError, match="a bug in a turn"):
        relay.take()
    assert relay.take() is None
