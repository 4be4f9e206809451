"""Spot instances: the interruption warning drains the node at once, within the two
minutes before EC2 reclaims it; a rebalance recommendation cordons it; the
terminate hook's event that follows for the same instance waits for the drain
under way instead of starting another. The events are EC2's, as EventBridge
delivers them (awssim/ec2_events.py), run through the real handler."""

from __future__ import annotations

import json
import threading
from datetime import datetime
from typing import Any

import boto3
import pytest

from drainer.k8s.cordon import PROGRESS_ANNOTATION
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on, wait_until

from .conftest import BudgetWatcher, Invoke, LogCapture, place_guarded


def _record(world: World, node: str) -> dict[str, Any]:
    found = world.cluster.client.get("Node", node)
    raw = (found["metadata"].get("annotations") or {}).get(PROGRESS_ANNOTATION, "{}")
    record: dict[str, Any] = json.loads(raw)
    return record


def full_name(pod: dict[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def parse_time(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _unschedulable(world: World, node: str) -> bool:
    return bool(world.cluster.client.get("Node", node)["spec"].get("unschedulable"))


def test_interruption_warning__drained_within_the_window__no_lifecycle_action(
    world: World, invoke: Invoke
) -> None:
    node = world.nodes[world.instance_ids[0]]
    place_on(
        world,
        node,
        [
            w.deployment("web", 4),
            w.budget("web", {"app": "web"}, max_unavailable=1),
            w.deployment(
                "coredns", 1, namespace="kube-system", priority_class="system-cluster-critical"
            ),
        ],
    )

    summary = invoke(world.spot_warning(world.instance_ids[0]))

    assert summary["result"] == "drained"
    assert summary["trigger"] == "spot-interruption"
    assert summary["lifecycle_result"] == "none"
    assert summary["evicted"] == 5
    # Within the warning's two minutes less the 15 s margin, and far within on a
    # fast emulator: nothing waited for the hook or for a tier.
    assert summary["seconds"] < 105
    assert "spot interruption warning at" in summary["deadline_source"]
    assert world.completions() == [], "a spot drain has no lifecycle action to complete"
    assert [p["metadata"]["name"] for p in pods_on(world.cluster, node)] == []
    record = _record(world, node)
    assert record["phase"] == "drained"
    assert _unschedulable(world, node)


def test_warning_already_past__instance_stopped__node_cordoned_and_timed_out(
    world: World, invoke: Invoke
) -> None:
    """A warning delivered after its two minutes, EC2 having stopped the instance: the
    drain has no time; it cordons and says so rather than pretend. (One whose instance
    still runs is drained with budgets respected: tests/e2e/test_late_events.py.)"""
    node = place_guarded_one(world)
    instance = world.instance_ids[0]
    boto3.client("ec2", region_name=world.region).stop_instances(InstanceIds=[instance])

    summary = invoke(world.spot_warning(instance, age=200))

    assert summary["result"] == "timed_out"
    assert summary["trigger"] == "spot-interruption"
    assert summary["deadline_source"].startswith("spot interruption warning at")
    assert _unschedulable(world, node)


def place_guarded_one(world: World) -> str:
    node = world.nodes[world.instance_ids[0]]
    place_on(world, node, [w.deployment("web", 1)])
    return node


def test_terminate_hook_after_the_warning__waits_for_that_drain__not_started_twice(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    instance = world.instance_ids[0]
    node = place_guarded(world, 2)
    results: dict[str, dict[str, Any]] = {}

    def run(name: str, event: dict[str, Any]) -> None:
        results[name] = invoke(event)

    spot = threading.Thread(target=run, args=("spot", world.spot_warning(instance)))
    spot.start()
    wait_until(lambda: _record(world, node).get("trigger") == "spot-interruption", 30)
    hook = threading.Thread(target=run, args=("hook", world.terminate(instance)))
    hook.start()
    wait_until(
        lambda: any(
            "waiting for it instead of starting another" in m for m in drainer_logs.messages()
        ),
        30,
    )
    # The budget is relaxed: the spot drain, and only it, evicts the pods.
    world.cluster.apply([w.budget("guard", {"app": "guarded"}, max_unavailable=2)], replace=True)
    spot.join(120)
    hook.join(120)

    assert results["spot"]["result"] == "drained"
    assert results["spot"]["evicted"] == 2
    assert results["hook"]["result"] == "drained"
    assert results["hook"]["evicted"] == 0, "the hook's invocation evicted pods itself"
    assert (
        "the drain begun by the spot-interruption event ended: drained"
        in (results["hook"]["message"])
    )
    (complete,) = world.completions()
    assert complete["LifecycleActionResult"] == "CONTINUE"
    evicting = [r for r in drainer_logs.records() if r.get("event") == "pod_evicted"]
    assert len(evicting) == 2, "each pod evicted once"


def test_rebalance_cordon__node_cordoned_pods_stay__hook_drain_later_releases_nothing_extra(
    world: World, invoke: Invoke
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2)])

    summary = invoke(world.rebalance(instance), REBALANCE_ACTION="cordon")

    assert summary["result"] == "cordoned"
    assert summary["trigger"] == "rebalance-recommendation"
    assert _unschedulable(world, node)
    assert len(pods_on(world.cluster, node)) == 2, "a cordon evicts nothing"
    record = _record(world, node)
    assert (record["phase"], record["trigger"]) == ("cordoned", "rebalance-recommendation")
    assert "cordon" in record["added"], "release must know the drainer cordoned it"

    later = invoke(world.terminate(instance))

    assert later["result"] == "drained", "a cordon is not a drain under way"
    assert later["evicted"] == 2


@pytest.mark.parametrize("setting", [{"SPOT_INTERRUPTION_DRAIN": "false"}])
def test_interruption_drain_off__event_skipped__node_untouched(
    world: World, invoke: Invoke, setting: dict[str, str]
) -> None:
    node = world.nodes[world.instance_ids[0]]

    summary = invoke(world.spot_warning(world.instance_ids[0]), **setting)

    assert summary == {
        "result": "skipped",
        "reason": "spot interruption warning: SPOT_INTERRUPTION_DRAIN is off",
    }
    assert not _unschedulable(world, node)


@pytest.mark.parametrize(
    ("label", "value", "manager"),
    [
        ("karpenter.sh/nodepool", "default", "Karpenter"),
        ("eks.amazonaws.com/compute-type", "auto", "EKS Auto Mode"),
    ],
)
def test_node_of_another_manager__spot_warning__left_alone_in_one_line(
    world: World, invoke: Invoke, drainer_logs: LogCapture, label: str, value: str, manager: str
) -> None:
    """Karpenter and EKS Auto Mode drain their nodes themselves on EC2's events; a
    spot warning for one (EC2 sends them for every instance) changes nothing."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2)])
    world.cluster.patch("Node", node, {"metadata": {"labels": {label: value}}})

    summary = invoke(world.spot_warning(instance))

    assert summary["result"] == "not_ours", summary
    assert manager in summary["message"] and f"{label}={value}" in summary["message"]
    assert not _unschedulable(world, node)
    assert PROGRESS_ANNOTATION not in (
        world.cluster.get("Node", node)["metadata"].get("annotations") or {}
    )
    assert len(pods_on(world.cluster, node)) == 2, "nothing evicted"
    assert drainer_logs.events("cordoned") == [] and drainer_logs.events("pod_evicted") == []


def test_interruption__budget_never_allows__each_pod_deleted_with_its_grace_before_ec2_acts(
    world: World, invoke: Invoke, budgets: BudgetWatcher
) -> None:
    """EC2 reclaims the instance at the deadline whatever the budgets say: a pod still
    held when only its grace period is left is deleted then, its grace cut to the
    time left, so it gets SIGTERM and ends before the instance goes."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(
        world,
        node,
        [
            w.deployment("db-quick", 1, grace=10, labels={"app": "db", "stop": "quick"}),
            w.deployment("db-slow", 1, grace=60, labels={"app": "db", "stop": "slow"}),
            w.budget("db", {"app": "db"}, max_unavailable=0),
        ],
    )
    held = {full_name(p) for p in pods_on(world.cluster, node)}
    assert len(held) == 2
    budgets.start()
    warning = world.spot_warning(instance, age=90)  # 15 s to the deadline
    deadline = parse_time(warning["time"]) + 120 - 15

    summary = invoke(warning)

    print("end line:", {k: summary.get(k) for k in ("result", "forced", "forced_pods")})
    assert summary["result"] == "timed_out", summary
    assert set(summary["forced_pods"]) == held
    assert all("default/db" in why for why in summary["forced_pods"].values())
    started = {
        full_name(e.new): e.new["metadata"]
        for e in budgets.pod_events()
        if e.evicted and full_name(e.new) in held
    }
    assert set(started) == held, "each held pod got its SIGTERM"
    for name, metadata in started.items():
        ends = parse_time(metadata["deletionTimestamp"])
        print(
            f"{name}: grace {metadata['deletionGracePeriodSeconds']} s, "
            f"ends {deadline - ends:.1f} s before the deadline"
        )
        grace = int(metadata["deletionGracePeriodSeconds"])
        assert grace >= 1, (name, metadata)
        assert ends <= deadline + 1.5, f"{name}'s grace ends {ends - deadline:.1f} s past it"
    quick = next(m for n, m in started.items() if "db-quick" in n)
    # Its whole grace when the time was there; on a loaded machine the handler may start
    # so late that less is left, and then the grace is cut to end at the deadline.
    quick_ends = deadline - parse_time(quick["deletionTimestamp"])
    whole = int(quick["deletionGracePeriodSeconds"]) == 10
    assert whole or quick_ends < 1.5, (quick, f"ends {quick_ends:.1f} s before the deadline")
    assert parse_time(quick["deletionTimestamp"]) >= deadline - 2.5, "budget held until then"
