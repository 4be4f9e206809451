"""What a drain tells people (drainer/engine/report.py): the sentence each event
becomes, the keys of its log line, the summary's counters and the timeout line."""

from __future__ import annotations

from typing import Any

import pytest

from drainer.engine.report import (
    DrainEvent,
    DrainReport,
    Kind,
    describe,
    several_budgets_message,
)
from drainer.outcome import Outcome


@pytest.mark.parametrize(
    ("event", "sentence"),
    [
        (DrainEvent(Kind.CORDONED), "cordoned node n1"),
        (DrainEvent(Kind.EVICTED, pod="shop/web-0"), "evicted shop/web-0"),
        (
            DrainEvent(Kind.EVICTED, pod="shop/web-0", refusals=3),
            "evicted shop/web-0 after 3 budget refusal(s)",
        ),
        (
            DrainEvent(Kind.REFUSED, pod="shop/web-0", budget="shop/web"),
            "eviction of shop/web-0 refused by PodDisruptionBudget shop/web; "
            "retrying when it allows",
        ),
        (DrainEvent(Kind.GONE, pod="shop/web-0"), "shop/web-0 is gone"),
        (DrainEvent(Kind.GONE, pod="shop/web-0", seconds=2.46), "shop/web-0 is gone after 2.5 s"),
        (DrainEvent(Kind.WOULD_EVICT, pod="shop/web-0"), "would evict shop/web-0"),
        (
            DrainEvent(Kind.HELD, pod="shop/web-0", budget="shop/web", reason="budget says no"),
            "not evicting shop/web-0: budget says no",
        ),
        (
            DrainEvent(Kind.SKIPPED, pod="kube-system/proxy", reason="DaemonSet-managed"),
            "skipping kube-system/proxy: DaemonSet-managed",
        ),
        (DrainEvent(Kind.STOPPED, reason="forbidden"), "drain of n1 stopped: forbidden"),
        # No sentence of its own: the kind itself.
        (DrainEvent(Kind.FINISHED), "drain_finished"),
    ],
    ids=lambda value: value.kind if isinstance(value, DrainEvent) else "",
)
def test_describe__each_event_as_a_sentence(event: DrainEvent, sentence: str) -> None:
    assert describe(event, "n1") == sentence


@pytest.mark.parametrize(
    ("event", "fields"),
    [
        (DrainEvent(Kind.CORDONED), {"event": "cordoned"}),
        (
            DrainEvent(Kind.GONE, pod="shop/web-0", seconds=1.23456),
            {"event": "pod_gone", "pod": "shop/web-0", "seconds": 1.235},
        ),
        # A zero is a value: the pod was gone at once.
        (
            DrainEvent(Kind.GONE, pod="a/b", seconds=0.0),
            {"event": "pod_gone", "pod": "a/b", "seconds": 0.0},
        ),
        (
            DrainEvent(Kind.EVICTED, pod="a/b", refusals=2, tier="critical"),
            {"event": "pod_evicted", "pod": "a/b", "refusals": 2, "tier": "critical"},
        ),
        (
            DrainEvent(Kind.STARTED, details={"pods": 3, "deadline": 60.0}),
            {"event": "drain_started", "pods": 3, "deadline": 60.0},
        ),
    ],
    ids=["nothing-set", "seconds-rounded", "zero-seconds", "counts", "details"],
)
def test_event_fields__only_the_fields_that_apply(
    event: DrainEvent, fields: dict[str, Any]
) -> None:
    assert event.fields() == fields


def test_summary__counts_and_the_pods_that_explain_them() -> None:
    report = DrainReport(
        "n1",
        outcome=Outcome.TIMED_OUT,
        evicted=2,
        skipped={"kube-system/proxy": "DaemonSet", "kube-system/etcd": "mirror pod"},
        refusals=4,
        blocked_by={"shop/web": ["shop/web-1"], "shop/db": ["shop/db-0"]},
        remaining=["shop/web-1", "shop/db-0"],
        left={"shop/web-1": "budget", "shop/db-0": "budget"},
        seconds=12.3456,
    )

    summary = report.summary()

    assert summary["outcome"] == "timed_out"
    assert (summary["evicted"], summary["skipped"], summary["pdb_refusals"]) == (2, 2, 4)
    assert list(summary["skipped_pods"]) == ["kube-system/etcd", "kube-system/proxy"]
    assert summary["budgets_holding"] == ["shop/db", "shop/web"]
    assert (summary["remaining"], summary["seconds"]) == (2, 12.346)


@pytest.mark.parametrize(
    ("left", "message"),
    [
        ({}, "nothing left on the node"),
        ({"shop/web-1": "held by shop/web"}, "held by shop/web: shop/web-1"),
        (
            {
                "shop/web-2": "held by shop/web",
                "shop/db-0": "evicted, still terminating",
                "shop/web-1": "held by shop/web",
            },
            "evicted, still terminating: shop/db-0; held by shop/web: shop/web-1, shop/web-2",
        ),
    ],
    ids=["empty", "one", "grouped-by-reason"],
)
def test_timeout_message__pods_left_grouped_by_why(left: dict[str, str], message: str) -> None:
    assert DrainReport("n1", left=left).timeout_message() == message


@pytest.mark.parametrize(
    ("budgets", "named"),
    [(["shop/a", "shop/b"], "(shop/a, shop/b)"), ([], "(names unknown)")],
)
def test_several_budgets_message__names_them_and_says_what_to_do(
    budgets: list[str], named: str
) -> None:
    message = several_budgets_message("shop/web-0", budgets)

    assert message.startswith("cannot evict shop/web-0")
    assert named in message
    assert "Delete or narrow all but one of them." in message
