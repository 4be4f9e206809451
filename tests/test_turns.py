"""Which pods of a dry run would wait for their budget, and how long
(drainer/engine/turns.py): the server judges each dry-run eviction alone against
the budget's allowance now and never lowers it, so its answers say nothing of turns."""

from __future__ import annotations

from drainer.engine.turns import turns


def test_budget_allowing_one__the_first_goes__the_rest_wait_their_turn_in_order() -> None:
    queue = [(f"shop/web-{i}", 30) for i in range(4)]

    waits = turns({"shop/web": queue}, {"shop/web": 1})

    assert sorted(waits) == ["shop/web-1", "shop/web-2", "shop/web-3"]
    third = waits["shop/web-2"]
    assert (third.budget, third.allowed, third.ahead, third.rounds) == ("shop/web", 1, 2, 2)
    assert third.stop_seconds == 60  # two pods ahead, one at a time, each up to 30 s to stop
    assert "PodDisruptionBudget shop/web allows 1 at a time now" in third.why
    assert "2 pods go through it first" in third.why
    assert "up to 60 s" in third.why


def test_budget_allowing_two__pods_go_in_rounds_of_two__a_round_waits_for_its_slowest() -> None:
    queue = [("ns/a", 10), ("ns/b", 90), ("ns/c", 5), ("ns/d", 5), ("ns/e", 5)]

    waits = turns({"ns/pdb": queue}, {"ns/pdb": 2})

    assert sorted(waits) == ["ns/c", "ns/d", "ns/e"]
    assert (waits["ns/c"].rounds, waits["ns/c"].stop_seconds) == (1, 90)
    assert (waits["ns/e"].rounds, waits["ns/e"].stop_seconds) == (2, 95)


def test_budget_allowing_none__or_enough__nobody_waits_a_turn() -> None:
    queue = [("ns/a", 30), ("ns/b", 30)]

    assert turns({"ns/none": queue, "ns/plenty": queue}, {"ns/none": 0, "ns/plenty": 5}) == {}
