"""Drains in a hostile world (issue 13): budgets that never allow, a node someone
uncordons and fills mid-drain, permissions revoked mid-drain, a lifecycle hook whose
GlobalTimeout ends before DRAIN_TIMEOUT_SECONDS.

Each scenario checks what an operator would notice: which pods went and when (from
an independent watch, not from the drainer's own account), what the log and the
summary name as left behind and why, and the lifecycle result AWS received. They run
on both backends; the drain's deadline is brought near by a hand-over start time or
an event time in the past, never by waiting for it.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from testbed import World
from testbed import workloads as w
from testbed.world import drainer_may, place_on, pods_on, wait_until

from .conftest import (
    POLICY,
    POLICY_MESSAGE,
    BudgetWatcher,
    Invoke,
    LogCapture,
    PodEvent,
    deny_evictions,
)
from .test_faults import drainer_requests, nearly_timed_out

DRAIN_TIMEOUT = 60  # the shortest DRAIN_TIMEOUT_SECONDS allows; the start is moved back
RBAC_DENIED = re.compile(r"RBAC denied '(?P<verb>[a-z]+)' on '(?P<resource>[a-z/]+)'")


# -- helpers -------------------------------------------------------------------------


def in_background(action: Callable[[], None]) -> Callable[[], None]:
    """Run `action` in a thread while the test drains; the returned function joins it
    and raises what it raised."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as e:  # handed to the test's thread by join()
            errors.append(e)

    thread = threading.Thread(target=run, daemon=True, name="meanwhile")
    thread.start()

    def join() -> None:
        thread.join(60)
        assert not thread.is_alive(), "the background action never finished"
        if errors:
            raise errors[0]

    return join


def on_node(event: PodEvent, node: str) -> bool:
    return bool(event.new["spec"].get("nodeName") == node)


def full_name(pod: dict[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def pods_of(world: World, node: str, app: str) -> set[str]:
    """namespace/name of the pods labelled app=`app` on the node."""
    return {
        full_name(p)
        for p in pods_on(world.cluster, node)
        if (p["metadata"].get("labels") or {}).get("app") == app
    }


def log_time(record: dict[str, Any]) -> float:
    """Epoch seconds of a log line (powertools' timestamp, millisecond resolution)."""
    return datetime.strptime(str(record["timestamp"]), "%Y-%m-%d %H:%M:%S,%f%z").timestamp()


def event_time(event: dict[str, Any]) -> float:
    return datetime.strptime(event["time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def one_completion(world: World, instance: str) -> dict[str, Any]:
    calls = [dict(c) for c in world.completions() if c["InstanceId"] == instance]
    assert len(calls) == 1, f"expected exactly one CompleteLifecycleAction, got {calls}"
    return calls[0]


def left_by_budget(summary: dict[str, Any], logs: LogCapture, pods: set[str], budget: str) -> None:
    """The summary and one pod_left line per pod name exactly `pods` as left, each
    held by `budget`."""
    assert set(summary["left"]) == pods, summary["left"]
    for pod, why in summary["left"].items():
        assert budget in why, f"{pod} left for {why!r}, which does not name {budget}"
    lines = logs.events("pod_left")
    assert {line["pod"] for line in lines} == pods
    for line in lines:
        assert line.get("budget") == budget or budget in str(line.get("reason")), line


# -- 1. head-of-line ---------------------------------------------------------------------


def test_forty_pods_held_by_budget__twenty_free_pods_go_at_once__timeout_names_the_forty(
    world: World, invoke: Invoke, budgets: BudgetWatcher, drainer_logs: LogCapture
) -> None:
    """Far more held pods than eviction slots: the free pods must not queue behind
    them. ("api" sorts before "worker", so a drain that takes pods in list order
    meets the held ones first.)"""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    shutdown = 1.0  # real seconds (the annotation is scaled by the backends' speed)
    place_on(
        world,
        node,
        [
            w.deployment("api", 40, startup=0.2),
            w.budget("api", {"app": "api"}, min_available="100%"),
            w.deployment("worker", 20, startup=0.2, shutdown=shutdown * world.cluster.speed),
        ],
        timeout=60,
    )
    held, free = pods_of(world, node, "api"), pods_of(world, node, "worker")
    assert (len(held), len(free)) == (40, 20)
    budgets.start()
    seconds_left = 15.0
    event = nearly_timed_out(world.terminate(instance), seconds_left, DRAIN_TIMEOUT)

    summary = invoke(event, EVICTION_CONCURRENCY=4, DRAIN_TIMEOUT_SECONDS=DRAIN_TIMEOUT)

    # From the drain's start (its drain_started line, after the cordon and the first
    # list) to each free pod gone, as the independent watch saw it.
    [drain_started] = drainer_logs.events("drain_started")
    began = log_time(drain_started)
    events = budgets.pod_events()
    gone = {
        full_name(e.new): e.at - began
        for e in events
        if e.type == "DELETED" and e.app == "worker" and on_node(e, node)
    }
    assert set(gone) == free, f"free pods never gone: {sorted(free - set(gone))}"
    slowest = max(gone.values())
    assert slowest < shutdown + 4.0, (
        f"the last free pod went {slowest:.1f} s into the drain, {shutdown:.0f} s of it "
        f"its shutdown: it waited behind the held pods (the deadline was "
        f"{seconds_left:.0f} s away)"
    )
    assert not [e for e in events if e.evicted and e.app == "api"], "a held pod was evicted"
    assert summary["result"] == "timed_out"
    assert summary["evicted"] == 20
    assert summary["budgets_holding"] == ["default/api"]
    left_by_budget(summary, drainer_logs, held, "default/api")
    assert one_completion(world, instance)["LifecycleActionResult"] == "CONTINUE"
    assert budgets.violations() == {}


# -- 2. a stuck tier with a critical pod behind it --------------------------------------


def test_ordinary_pod_never_allowed__critical_pod_evicted_at_the_reserve__before_deadline(
    world: World, invoke: Invoke, budgets: BudgetWatcher, drainer_logs: LogCapture
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(
        world,
        node,
        [
            w.deployment("api", 1),
            w.budget("api", {"app": "api"}, max_unavailable=0),
            w.deployment(
                "dns",
                1,
                namespace="kube-system",
                priority_class="system-cluster-critical",
                shutdown=0.5 * world.cluster.speed,
            ),
            w.budget("dns", {"app": "dns"}, namespace="kube-system", max_unavailable=1),
        ],
    )
    [api], [dns] = pods_of(world, node, "api"), pods_of(world, node, "dns")
    budgets.start()
    reserve = 10
    event = nearly_timed_out(world.terminate(instance), 20.0, DRAIN_TIMEOUT)
    deadline = datetime.fromisoformat(event["time"]).timestamp() + DRAIN_TIMEOUT

    summary = invoke(event, DRAIN_TIMEOUT_SECONDS=DRAIN_TIMEOUT, CRITICAL_RESERVE_SECONDS=reserve)

    events = [e for e in budgets.pod_events() if full_name(e.new) == dns]
    evicted = [e for e in events if e.evicted]
    assert evicted, "the critical pod was never evicted"
    at = evicted[0].at
    assert deadline - reserve - 0.25 <= at < deadline, (
        f"the critical pod was evicted {deadline - at:.1f} s before the deadline; "
        f"expected within the last {reserve} s (CRITICAL_RESERVE_SECONDS)"
    )
    # An eviction through the Eviction API, not a deletion: the server marks the pod.
    assert any(
        c.get("type") == "DisruptionTarget" and c.get("reason") == "EvictionByEvictionAPI"
        for e in events
        for c in (e.new.get("status") or {}).get("conditions") or []
    ), "the critical pod was deleted, not evicted"
    assert [line["pod"] for line in drainer_logs.events("pod_evicted")] == [dns]
    assert not drainer_logs.events("pod_force_deleted")
    [tier] = drainer_logs.events("critical_tier_started")
    # Started early, on the reserve: the line says so by naming what still holds the
    # ordinary tier (a tier that finished would have nothing to name).
    assert api in str(tier.get("reason")) and "deadline" in str(tier.get("reason")), tier
    assert summary["result"] == "timed_out"
    assert summary["forced"] == 0
    left_by_budget(summary, drainer_logs, {api}, "default/api")
    assert world.cluster.find("Pod", dns.split("/")[1], "kube-system") is None, (
        "the critical pod was still there at the end"
    )
    assert one_completion(world, instance)["LifecycleActionResult"] == "CONTINUE"
    assert budgets.violations() == {}


# -- 3. uncordoned and given three pods mid-drain ------------------------------------------


def test_node_uncordoned_and_three_pods_bound_mid_drain__recordoned__new_pods_evicted(
    world: World, invoke: Invoke, budgets: BudgetWatcher, drainer_logs: LogCapture
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    # One pod slow to stop holds the drain open for ~5 s.
    place_on(world, node, [w.deployment("slow", 1, shutdown=5.0 * world.cluster.speed, grace=120)])
    budgets.start()
    newcomers = {f"default/new-{i}" for i in range(1, 4)}
    mutated_at: list[float] = []

    def uncordon_and_bind_three() -> None:
        wait_until(
            lambda: any(
                p["metadata"].get("deletionTimestamp") for p in pods_on(world.cluster, node)
            ),
            timeout=20,
        )
        world.cluster.patch("Node", node, {"spec": {"unschedulable": False}})
        world.cluster.apply(
            [
                w.pod(name.split("/")[1], node_name=node, shutdown=0.2 * world.cluster.speed)
                for name in sorted(newcomers)
            ]
        )
        mutated_at.append(time.time())

    join = in_background(uncordon_and_bind_three)
    event = nearly_timed_out(world.terminate(instance), 30.0, DRAIN_TIMEOUT)
    summary = invoke(event, DRAIN_TIMEOUT_SECONDS=DRAIN_TIMEOUT)
    ended = time.time()
    join()

    assert mutated_at and mutated_at[0] < ended, "the node changed while the drain ran"
    # What the cluster shows: cordoned again, the newcomers evicted and gone.
    assert world.cluster.get("Node", node)["spec"].get("unschedulable") is True
    watched = {full_name(e.new) for e in budgets.pod_events() if e.evicted}
    assert newcomers <= watched, f"never evicted: {sorted(newcomers - watched)}"
    still = [full_name(p) for p in pods_on(world.cluster, node)]
    assert still == [], f"pods still on the node: {still}"
    assert summary["result"] == "drained", summary
    assert one_completion(world, instance)["LifecycleActionResult"] == "CONTINUE"
    # What the log tells the operator.
    assert drainer_logs.events("recordoned"), "no recordoned line after the uncordon"
    assert summary["recordoned"] >= 1
    appeared = {line["pod"] for line in drainer_logs.events("pod_appeared")}
    assert newcomers <= appeared, f"not logged as appeared: {sorted(newcomers - appeared)}"
    evicted = {line["pod"] for line in drainer_logs.events("pod_evicted")}
    assert newcomers <= evicted, f"not logged as evicted: {sorted(newcomers - evicted)}"
    assert budgets.violations() == {}


# -- 4. permission lost mid-drain --------------------------------------------------------


def test_rbac_binding_deleted_while_waiting_on_budget__drain_stops_within_a_second(
    world: World, invoke: Invoke, budgets: BudgetWatcher, drainer_logs: LogCapture
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(
        world,
        node,
        [w.deployment("api", 2), w.budget("api", {"app": "api"}, max_unavailable=0)],
    )
    budgets.start()
    revoked_at: list[float] = []

    def revoke_once_refused() -> None:
        wait_until(lambda: bool(drainer_logs.events("pod_refused")), timeout=20)
        world.cluster.delete("ClusterRoleBinding", "eks-node-drainer")
        wait_until(lambda: not drainer_may(world.cluster, "create", "pods", "eviction"), timeout=10)
        revoked_at.append(time.time())
        # The budget now allows one: the drain's next eviction meets the missing binding.
        world.cluster.patch("PodDisruptionBudget", "api", {"spec": {"maxUnavailable": 1}})

    join = in_background(revoke_once_refused)
    event = nearly_timed_out(world.terminate(instance), 30.0, DRAIN_TIMEOUT)
    summary = invoke(event, DRAIN_TIMEOUT_SECONDS=DRAIN_TIMEOUT)
    ended = time.time()
    join()

    assert summary["result"] == "failed", summary
    denied = RBAC_DENIED.search(summary.get("message", ""))
    assert denied, f"the message names no permission: {summary.get('message')!r}"
    assert summary["lifecycle_result"] == "ABANDON"
    assert one_completion(world, instance)["LifecycleActionResult"] == "ABANDON"
    assert ended - revoked_at[0] < 5.0, "the drain went on long after losing its permission"
    [stopped] = drainer_logs.events("drain_stopped")
    assert RBAC_DENIED.search(str(stopped.get("reason"))), stopped
    [finished] = drainer_logs.events("drain_finished")
    assert log_time(finished) - log_time(stopped) <= 1.0, (
        f"{log_time(finished) - log_time(stopped):.2f} s from the fatal error to the end"
    )
    if world.cluster.backend == "kubesim":  # its request records: when the 403 was answered
        # The drain's own 403s: an Event's (a refusal's, posted by the Event thread as
        # the binding goes) may come first, and stops the poster, never the drain.
        refused = [r for r in drainer_requests(world) if r.status == 403 and r.resource != "events"]
        assert refused, "the drainer never met the missing permission"
        first = min(refused, key=lambda r: r.done)
        assert ended - first.done <= 1.0, f"{ended - first.done:.2f} s after the first 403"
        assert (denied["verb"], denied["resource"]) == (first.verb, first.resource)


# -- 5. the hook's GlobalTimeout comes first ------------------------------------------------

HEARTBEAT = 30
GLOBAL_TIMEOUT = 100 * HEARTBEAT  # what AWS derives from it; awssim sets it explicitly
MARGIN = 60


@pytest.mark.parametrize(
    "world", [{"heartbeat_timeout": HEARTBEAT, "global_timeout": GLOBAL_TIMEOUT}], indirect=True
)
def test_global_timeout_before_drain_timeout__deadline_from_the_hook__continue_in_time(
    world: World, invoke: Invoke, budgets: BudgetWatcher, drainer_logs: LogCapture
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(
        world, node, [w.deployment("api", 1), w.budget("api", {"app": "api"}, max_unavailable=0)]
    )
    [api] = pods_of(world, node, "api")
    budgets.start()
    # The action began long ago: 8 s remain before GlobalTimeout less the margin.
    event = world.terminate(instance, age=GLOBAL_TIMEOUT - MARGIN - 8)
    began = event_time(event)
    expected = began + GLOBAL_TIMEOUT - MARGIN

    summary = invoke(
        event,
        timeout=90,  # the hand-over moment (~30 s) would come long after the deadline
        DRAIN_TIMEOUT_SECONDS=172800,
        GLOBAL_TIMEOUT_MARGIN_SECONDS=MARGIN,
    )

    assert summary["result"] == "timed_out", summary
    completion = one_completion(world, instance)
    assert completion["LifecycleActionResult"] == "CONTINUE"
    assert expected - 1.5 <= completion["time"] <= expected + 5.0, (
        "CONTINUE must come at the shortened deadline, well before the hook's GlobalTimeout"
    )
    assert completion["time"] < began + GLOBAL_TIMEOUT
    assert not world.aws.calls("timeout"), "Auto Scaling timed the action out first"
    [action] = [a for a in world.aws.actions() if a["instance_id"] == instance]
    assert action["closed_by"] == "complete"
    # The log says which deadline applied and why, and what was left.
    [started] = drainer_logs.events("drain_started")
    deadline = datetime.fromisoformat(started["deadline"]).timestamp()
    assert abs(deadline - expected) <= 1.5, (started["deadline"], expected)
    source = str(started["deadline_source"])
    assert "global" in source.lower() and str(GLOBAL_TIMEOUT) in source, source
    left_by_budget(summary, drainer_logs, {api}, "default/api")
    assert budgets.violations() == {}


# -- 6. an admission policy refuses one pod's eviction -------------------------------------


def test_admission_policy_refuses_one_pod__others_drain__it_is_named__not_an_rbac_abort(
    world: World, invoke: Invoke, budgets: BudgetWatcher, drainer_logs: LogCapture
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("api", 4), w.deployment("db", 1)])
    pinned, others = pods_of(world, node, "db"), pods_of(world, node, "api")
    budgets.start()
    lift = deny_evictions(world, pinned)
    try:
        event = nearly_timed_out(world.terminate(instance), 8.0, DRAIN_TIMEOUT)
        summary = invoke(event, DRAIN_TIMEOUT_SECONDS=DRAIN_TIMEOUT)
    finally:
        lift()

    print("end line:", {k: summary.get(k) for k in ("result", "evicted", "remaining", "left")})
    evicted = {full_name(e.new) for e in budgets.pod_events() if e.evicted and on_node(e, node)}
    assert others <= evicted, f"never evicted: {sorted(others - evicted)}"
    assert not evicted & pinned, "the pinned pod was evicted"
    assert summary["result"] == "timed_out", summary
    assert summary["stopped_by"] == "", "an admission refusal is not the drain's failure"
    assert summary["evicted"] == len(others)
    assert summary["remaining"] == 1
    assert set(summary["left"]) == pinned
    assert POLICY_MESSAGE in str(summary["left"]) and POLICY in str(summary["left"])
    [denied] = drainer_logs.events("pod_denied")
    assert denied["pod"] in pinned and POLICY_MESSAGE in str(denied["reason"])
    assert one_completion(world, instance)["LifecycleActionResult"] == "CONTINUE"


# -- 7. pods that tolerate the cordon come back: each evicted once, then left -------------


def test_pods_tolerating_the_cordon__each_evicted_once__replacements_named__drained(
    world: World, invoke: Invoke, budgets: BudgetWatcher, drainer_logs: LogCapture
) -> None:
    """An agent that tolerates every taint and fits only this node (its pool's
    label): every replacement the controller makes is scheduled back onto the
    cordoned node. kubectl drain evicts each pod once and reports drained; chasing
    the replacements was an eviction storm that left the agent without a Ready
    replica most of the time."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    world.cluster.patch("Node", node, {"metadata": {"labels": {"pool": "agents"}}})
    agent = w.deployment("agent", 2, shutdown=2.0 * world.cluster.speed)
    template = agent["spec"]["template"]["spec"]
    template["tolerations"] = [{"operator": "Exists"}]
    template["nodeSelector"] = {"pool": "agents"}
    place_on(world, node, [agent, w.deployment("api", 2)])
    originals = pods_of(world, node, "agent") | pods_of(world, node, "api")
    budgets.start()

    summary = invoke(world.terminate(instance), DRAIN_TIMEOUT_SECONDS=DRAIN_TIMEOUT)

    evictions = [full_name(e.new) for e in budgets.pod_events() if e.evicted]
    print("end line:", {k: summary.get(k) for k in ("result", "evicted", "tolerating_cordon")})
    assert sorted(evictions) == sorted(originals), "each original once, no replacement"
    assert summary["result"] == "drained", summary
    assert summary["evicted"] == len(originals)
    back = pods_of(world, node, "agent")
    assert back, "the agent's replacements came back to the node"
    assert set(summary["tolerating_cordon"]) == back
    named = {line["pod"] for line in drainer_logs.events("pod_tolerates_cordon")}
    assert named == back
    assert one_completion(world, instance)["LifecycleActionResult"] == "CONTINUE"


# -- 8. the node replaced by another of the same name --------------------------------------


def test_node_replaced_mid_drain__new_node_left_alone__drain_ends_saying_so(
    world: World, invoke: Invoke, budgets: BudgetWatcher, drainer_logs: LogCapture
) -> None:
    """The instance goes and another registers under its (reused) private DNS name:
    a new Node object, another UID and providerID. It is another machine."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    zone = world.cluster.get("Node", node)["metadata"]["labels"]["topology.kubernetes.io/zone"]
    # A pod whose finalizer nobody removes holds the drain open (kubesim deletes the
    # other pods with their node at once): the new node registers while it runs.
    place_on(
        world,
        node,
        [
            w.deployment("slow", 1, shutdown=5.0 * world.cluster.speed, grace=120),
            w.pod("held", node_name=node, grace=1, finalizers=["example.com/held"]),
        ],
    )
    old_uid = world.cluster.get("Node", node)["metadata"]["uid"]

    def replace_the_node() -> None:
        wait_until(
            lambda: any(
                p["metadata"].get("deletionTimestamp") for p in pods_on(world.cluster, node)
            ),
            timeout=20,
        )
        world.cluster.delete("Node", node)
        world.cluster.apply(
            [
                w.node(node, "i-0fffffffffffffff0", zone, pods=110),
                w.pod("newcomer", node_name=node),
            ]
        )

    join = in_background(replace_the_node)
    summary = invoke(world.terminate(instance), DRAIN_TIMEOUT_SECONDS=DRAIN_TIMEOUT)
    join()

    print("end line:", {k: summary.get(k) for k in ("result", "stopped_by", "message")})
    new = world.cluster.get("Node", node)
    assert new["metadata"]["uid"] != old_uid
    assert not new["spec"].get("unschedulable"), "the new node was cordoned"
    assert "eks-node-drainer/progress" not in (new["metadata"].get("annotations") or {})
    newcomer = world.cluster.find("Pod", "newcomer", "default")
    assert newcomer is not None and not newcomer["metadata"].get("deletionTimestamp")
    assert "replaced" in str(summary.get("stopped_by")) + str(summary.get("message")), summary
    assert summary["result"] != "drained", summary
    assert one_completion(world, instance)["LifecycleActionResult"] == "CONTINUE"


# -- 9. pods that opt out (karpenter.sh/do-not-disrupt): held, released, or forced ------


def test_do_not_disrupt__held_while_others_drain__released_pod_evicted__last_forced_at_deadline(
    world: World, invoke: Invoke, budgets: BudgetWatcher, drainer_logs: LogCapture
) -> None:
    """A batch job and a long request annotated not to be disrupted: neither is
    evicted while the others drain; the request's owner lifts its annotation once
    the work is done, and it goes at once; the job is still at work at the deadline,
    where TIMEOUT_POLICY=force deletes it, so it gets its SIGTERM before the node goes."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    job = w.deployment("batch", 1, grace=1)
    job["spec"]["template"]["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = "true"
    request = w.pod(
        "request", node_name=node, grace=1, annotations={"eks-node-drainer/do-not-disrupt": "true"}
    )
    place_on(world, node, [w.deployment("api", 2), job, request])
    [batch] = pods_of(world, node, "batch")
    held = {batch, "default/request"}
    others = pods_of(world, node, "api")
    budgets.start()

    def finish_the_request() -> None:
        wait_until(lambda: not pods_of(world, node, "api"), timeout=20)
        world.cluster.patch(
            "Pod",
            "request",
            {"metadata": {"annotations": {"eks-node-drainer/do-not-disrupt": None}}},
        )

    join = in_background(finish_the_request)
    event = nearly_timed_out(world.terminate(instance), 10.0, DRAIN_TIMEOUT)
    summary = invoke(
        event,
        DRAIN_TIMEOUT_SECONDS=DRAIN_TIMEOUT,
        TIMEOUT_POLICY="force",
        FORCE_GRACE_PERIOD_SECONDS=1,
    )
    join()

    print("end line:", {k: summary.get(k) for k in ("result", "do_not_disrupt", "forced_pods")})
    assert {line["pod"] for line in drainer_logs.events("pod_held")} == held
    assert [line["pod"] for line in drainer_logs.events("pod_released")] == ["default/request"]
    evicted = [line["pod"] for line in drainer_logs.events("pod_evicted")]
    assert sorted(evicted) == sorted([*others, "default/request"]), "the held job was evicted"
    assert [line["pod"] for line in drainer_logs.events("pod_force_deleted")] == [batch]
    assert summary["result"] == "timed_out", summary
    assert summary["forced"] == 1
    assert summary["do_not_disrupt"] == {
        batch: "karpenter.sh/do-not-disrupt",
        "default/request": "eks-node-drainer/do-not-disrupt",
    }
    # Deleted its grace (1 s) before the deadline: gone by then, named with what held it.
    assert summary["left"] == {}
    assert "karpenter.sh/do-not-disrupt=true" in summary["forced_pods"][batch]
    assert world.cluster.find("Pod", "request", "default") is None
    assert one_completion(world, instance)["LifecycleActionResult"] == "CONTINUE"
