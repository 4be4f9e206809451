"""A drain that changes nothing (drainer/engine/dryrun.py), against kubesim: every
eviction is asked with dryRun=All, so the server judges budgets as it would for
real, the report says what a drain would do now, and every pod is still there."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from drainer.engine.dryrun import dry_run
from drainer.engine.options import DrainOptions
from drainer.engine.report import DrainReport, Kind, Outcome
from drainer.k8s.kube import Kube
from kubesim import KubeSim
from kubesim import testing as k
from testbed.workloads import budget, node, pod

NODE = "n1"
SHOP = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim() as running:
        running.apply([node(NODE), SHOP])
        yield running


def _on_node(sim: KubeSim) -> list[dict[str, Any]]:
    return [p for p in sim.list("Pod") if p["spec"].get("nodeName") == NODE]


def _run(sim: KubeSim, kube: Kube, *objects: dict[str, Any]) -> tuple[DrainReport, list[Kind]]:
    sim.apply(list(objects))
    sim.settle()
    k.eventually(
        lambda: all((p.get("status") or {}).get("phase") == "Running" for p in _on_node(sim)),
        what="pods running",
    )
    report, kinds = DrainReport(NODE), []
    dry_run(kube, _on_node(sim), DrainOptions(), report, lambda kind, **_: kinds.append(kind))
    return report, kinds


WEB = {"app": "web"}


@pytest.mark.parametrize(
    ("case", "objects", "would_evict", "blocked_by", "skipped"),
    [
        (
            "pods free to go",
            [pod("web-0", namespace="shop", node_name=NODE), pod("api-0", node_name=NODE)],
            ["default/api-0", "shop/web-0"],
            {},
            [],
        ),
        (
            "a budget that allows none: held, not counted as going, the budget named",
            [
                pod("web-0", namespace="shop", node_name=NODE, labels=WEB),
                budget("web", WEB, namespace="shop", max_unavailable=0),
            ],
            [],
            {"shop/web": ["shop/web-0"]},
            [],
        ),
        (
            "a budget that lets every pod go",
            [
                pod("web-0", namespace="shop", node_name=NODE, labels=WEB),
                budget("web", WEB, namespace="shop", min_available=0),
            ],
            ["shop/web-0"],
            {},
            [],
        ),
        (
            "a mirror pod: the kubelet's, skipped",
            [pod("etcd", namespace="shop", node_name=NODE, mirror=True)],
            [],
            {},
            ["shop/etcd"],
        ),
    ],
)
def test_dry_run__says_what_a_drain_would_do_and_evicts_nothing(
    sim: KubeSim,
    kube: Kube,
    case: str,
    objects: list[dict[str, Any]],
    would_evict: list[str],
    blocked_by: dict[str, list[str]],
    skipped: list[str],
) -> None:
    report, kinds = _run(sim, kube, *objects)

    assert report.outcome == Outcome.DRY_RUN, case
    assert sorted(report.would_evict) == would_evict, case
    assert report.blocked_by == blocked_by, case
    assert sorted(report.skipped) == skipped, case
    assert kinds.count(Kind.WOULD_EVICT) == len(would_evict), case
    assert sorted(p["metadata"]["name"] for p in _on_node(sim)) == sorted(
        o["metadata"]["name"] for o in objects if o["kind"] == "Pod"
    ), "nothing evicted"


def test_dry_run__pod_under_two_budgets__an_error_naming_both(sim: KubeSim, kube: Kube) -> None:
    report, kinds = _run(
        sim,
        kube,
        pod("web-0", namespace="shop", node_name=NODE, labels={"app": "web", "tier": "front"}),
        budget("web-a", WEB, namespace="shop", max_unavailable=1),
        budget("web-b", {"tier": "front"}, namespace="shop", max_unavailable=1),
    )

    assert report.multiple_budgets == {"shop/web-0": ["shop/web-a", "shop/web-b"]}
    assert "shop/web-a, shop/web-b" in report.errors[0]
    assert report.would_evict == []
    assert kinds == [Kind.SEVERAL_BUDGETS]


def test_dry_run__do_not_disrupt_pod__would_be_held_not_evicted(sim: KubeSim, kube: Kube) -> None:
    annotated = {"karpenter.sh/do-not-disrupt": "true"}

    report, kinds = _run(
        sim,
        kube,
        pod("batch-0", node_name=NODE, annotations=annotated),
        pod("api-0", node_name=NODE),
    )

    assert report.would_evict == ["default/api-0"]
    assert report.do_not_disrupt == {"default/batch-0": "karpenter.sh/do-not-disrupt"}
    assert kinds.count(Kind.HELD) == 1
    assert len(_on_node(sim)) == 2
