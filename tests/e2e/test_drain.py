"""From a real EventBridge lifecycle event to a recorded CompleteLifecycleAction,
through the real handler, Kubernetes over HTTPS (kubesim and the real control
plane; RBAC from k8s-rbac/, EKS tokens verified) and moto with the awssim
lifecycle extension."""

from __future__ import annotations

import time

import pytest

from drainer.k8s.cordon import EXCLUDE_LB_LABEL, PROGRESS_ANNOTATION
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on, wait_until

from .conftest import BudgetWatcher, Invoke, LogCapture


def _completion(world: World, instance_id: str) -> dict:
    calls = [c for c in world.completions() if c["InstanceId"] == instance_id]
    assert len(calls) == 1, f"expected exactly one CompleteLifecycleAction, got {calls}"
    return calls[0]


def _phase(world: World, pod: str) -> str:
    return str(world.cluster.get("Pod", pod, "default")["status"].get("phase"))


def test_plain_drain__pods_move_away__continue_sent_once(
    world: World, invoke: Invoke, budgets: BudgetWatcher
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(
        world,
        node,
        [
            w.deployment("web", 3, startup=0.2, shutdown=0.5),
            w.budget("web", {"app": "web"}, max_unavailable=1),
        ],
    )
    budgets.start()
    event = world.terminate(instance)

    summary = invoke(event)

    assert summary["result"] == "drained"
    assert summary["evicted"] == 3
    completion = _completion(world, instance)
    assert completion["LifecycleActionResult"] == "CONTINUE"
    assert completion["LifecycleActionToken"] == event["detail"]["LifecycleActionToken"]
    assert completion["LifecycleHookName"] == world.group.hook_name
    assert world.aws.calls("heartbeat"), "the action is heartbeated while the drain works"
    drained = world.cluster.get("Node", node)
    assert drained["spec"]["unschedulable"] is True
    assert drained["metadata"]["labels"][EXCLUDE_LB_LABEL] == "true"
    assert '"drained"' in drained["metadata"]["annotations"][PROGRESS_ANNOTATION]
    assert not [
        p for p in pods_on(world.cluster, node) if p["metadata"]["labels"].get("app") == "web"
    ]
    wait_until(
        lambda: (
            len([p for p in world.cluster.list("Pod") if p["status"].get("phase") == "Running"])
            == 3
        )
    )
    assert budgets.violations() == {}


def test_pdb_one_at_a_time__drains_in_order__budget_never_violated(
    world: World, invoke: Invoke, budgets: BudgetWatcher
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(
        world,
        node,
        [
            w.deployment("api", 5, startup=2.0, shutdown=0.2),
            w.budget("api", {"app": "api"}, max_unavailable=1),
        ],
        timeout=20,
    )
    budgets.start()

    summary = invoke(world.terminate(instance))

    assert summary["result"] == "drained"
    assert summary["evicted"] == 5
    # Paced by the budget's watch: each pod waits for the one before it to be
    # replaced, rather than being sent and refused.
    assert summary["pdb_refusals"] <= 1
    assert budgets.violations() == {}
    assert budgets.worst["default/api"] == 0, "the drain used the whole budget, no more"
    # Each of the five pods was evicted exactly once.
    evicted = [e for e in budgets.pod_events() if e.evicted and e.app == "api"]
    assert len(evicted) == 5
    assert _completion(world, instance)["LifecycleActionResult"] == "CONTINUE"


def test_statefulset_pod__recreated_with_same_name__new_pod_left_alone(
    world: World, invoke: Invoke
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.statefulset("db", 1, startup=0.5, shutdown=0.5, storage="")])
    old = world.cluster.get("Pod", "db-0", "default")

    summary = invoke(world.terminate(instance))

    assert summary["result"] == "drained"
    wait_until(
        lambda: world.cluster.get("Pod", "db-0", "default")["status"].get("phase") == "Running"
    )
    new = world.cluster.get("Pod", "db-0", "default")
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["spec"]["nodeName"] != node
    assert not new["metadata"].get("deletionTimestamp"), "the recreated pod must never be evicted"


def test_statefulset_volume__detached_before_continue(world: World, invoke: Invoke) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.statefulset("db", 1, startup=0.5, shutdown=0.5, detach=10)])

    summary = invoke(world.terminate(instance))

    assert summary["result"] == "drained"
    assert summary["volumes_detached"] == 1
    assert not [a for a in world.cluster.list("VolumeAttachment") if a["spec"]["nodeName"] == node]


def test_daemonset_and_mirror_pods__left_alone(world: World, invoke: Invoke) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    world.cluster.apply(
        [
            w.daemonset("agent"),
            w.pod("kube-proxy-static", node_name=node, namespace="kube-system", mirror=True),
        ]
    )
    wait_until(lambda: len([p for p in pods_on(world.cluster, node)]) == 2)

    summary = invoke(world.terminate(instance))

    assert summary["result"] == "drained"
    assert summary["evicted"] == 0
    assert summary["skipped"] == 2
    left = pods_on(world.cluster, node)
    assert len(left) == 2
    assert not any(p["metadata"].get("deletionTimestamp") for p in left)


def test_critical_pods__evicted_after_ordinary_pods_are_gone(
    world: World, invoke: Invoke, budgets: BudgetWatcher
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(
        world,
        node,
        [
            w.deployment(
                "coredns", 1, namespace="kube-system", priority_class="system-cluster-critical"
            ),
            w.deployment("web", 3, shutdown=1.0),
        ],
    )
    budgets.start()

    summary = invoke(world.terminate(instance))

    assert summary["result"] == "drained"
    events = budgets.pod_events()
    ordinary_gone = max(
        e.seq
        for e in events
        if e.type == "DELETED" and e.app == "web" and e.new["spec"].get("nodeName") == node
    )
    critical_evicted = min(e.seq for e in events if e.evicted and e.app == "coredns")
    assert critical_evicted > ordinary_gone, "DNS must keep serving until the other pods are gone"


def test_pod_stuck_terminating__stops_blocking_after_threshold(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    world.cluster.apply(
        w.pod("stuck", node_name=node, grace=1, finalizers=["example.com/never-removed"])
    )
    wait_until(
        lambda: world.cluster.get("Pod", "stuck", "default")["status"].get("phase") == "Running"
    )

    started = time.monotonic()
    summary = invoke(world.terminate(instance), STUCK_POD_SECONDS=1)

    assert summary["result"] == "drained"
    assert summary["stuck"] == 1
    assert time.monotonic() - started < 15
    assert any("still terminating" in m and "default/stuck" in m for m in drainer_logs.messages())
    assert _completion(world, instance)["LifecycleActionResult"] == "CONTINUE"


def test_node_never_joined__continue_at_once(world: World, invoke: Invoke) -> None:
    instance = world.instance_ids[0]
    world.cluster.delete("Node", world.nodes[instance])

    summary = invoke(world.terminate(instance))

    assert summary["result"] == "no_node"
    assert summary["lifecycle_result"] == "CONTINUE"
    assert _completion(world, instance)["LifecycleActionResult"] == "CONTINUE"


@pytest.mark.parametrize("world", [{"node_names": "custom"}], indirect=True)
def test_node_found_only_by_provider_id(world: World, invoke: Invoke) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    assert not node.startswith("ip-"), "the node is not named after the instance's DNS name"
    place_on(world, node, [w.deployment("web", 2)])

    summary = invoke(world.terminate(instance))

    assert summary["result"] == "drained"
    assert summary["node"] == node
    assert summary["evicted"] == 2


def test_duplicate_event__second_run_ends_well_without_a_second_completion(
    world: World, invoke: Invoke
) -> None:
    """The event delivered again after its drain ended: left to that drain, which
    answered; nothing evicted, answered or told again."""
    instance = world.instance_ids[0]
    place_on(world, world.nodes[instance], [w.deployment("web", 2)])
    event = world.terminate(instance)

    first = invoke(event)
    second = invoke(event)

    assert first["result"] == "drained"
    assert second["result"] == "redelivered", second
    assert second["evicted"] == 0
    assert second["lifecycle_result"] == "none"
    assert len(world.completions()) == 1


def test_dry_run__touches_nothing__continue_sent(world: World, invoke: Invoke) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2)])
    before = {p["metadata"]["uid"] for p in pods_on(world.cluster, node)}

    summary = invoke(world.terminate(instance), DRY_RUN="true")

    assert summary["result"] == "dry_run"
    assert summary["evicted"] == 0
    assert {p["metadata"]["uid"] for p in pods_on(world.cluster, node)} == before
    assert not world.cluster.get("Node", node)["spec"].get("unschedulable")
    assert _completion(world, instance)["LifecycleActionResult"] == "CONTINUE"
