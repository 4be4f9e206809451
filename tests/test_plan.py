"""The refresh plan's model (drainer/plan/), on hand-built pods and budgets: the
budget waves on the forecast clock, each workload's time to Ready, and one test
per kind of blocker."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drainer.engine.filters import FilterOptions, Overrides
from drainer.engine.options import DrainOptions
from drainer.plan.budgets import ForecastBudgets, matching
from drainer.plan.forecast import Forecast, Going, forecast
from drainer.plan.model import Cluster, NodePlan, batch_eta, plan_node
from drainer.plan.timing import startups
from testbed import workloads as w

T0 = "2026-01-01T00:00:00Z"
NOW = 1_767_225_600.0  # T0, as epoch seconds
EVERYTHING = Overrides(ignore_daemonsets=True, delete_emptydir_data=True, force=True)
OPTIONS = DrainOptions(filters=FilterOptions())


def pod(
    name: str,
    app: str = "web",
    *,
    grace: int = 10,
    ready_after: float | None = 4,
    owner: str | None = "web-rs",
    **spec: Any,
) -> dict[str, Any]:
    """A running pod on n1 of ReplicaSet `owner` (None: a bare pod), Ready
    `ready_after` s after its creation at T0 (None: not Ready); `spec`: more fields of
    its spec."""
    return w.pod(
        name,
        uid=name,
        node_name="n1",
        labels={"app": app},
        grace=grace,
        created=T0,
        owner={"kind": "ReplicaSet", "name": owner, "controller": True} if owner else None,
        phase="Running",
        ready=ready_after is not None,
        ready_since=f"2026-01-01T00:00:{int(ready_after or 0):02d}Z",
        spec_fields=spec,
    )


def phased(p: dict[str, Any], phase: str) -> dict[str, Any]:
    """The pod `p` in `phase` (Pending, Succeeded, Failed: the eviction API deletes it
    without reading its budgets, eviction.go's canIgnorePDB)."""
    p["status"]["phase"] = phase
    return p


def budget(name: str, app: str, *, expected: int, allowed: int, **spec: Any) -> dict[str, Any]:
    """w.budget of pods labelled app=`app`, all `expected` healthy and `allowed`
    disruptions; `spec`: its keywords (max_unavailable, min_available, ...)."""
    status = {
        "disruptionsAllowed": allowed,
        "currentHealthy": expected,
        "desiredHealthy": expected - allowed,
        "expectedPods": expected,
    }
    return w.budget(name, {"app": app}, status=status, **spec)


def plan(pods: list[dict[str, Any]], budgets: list[dict[str, Any]], **kw: Any) -> NodePlan:
    cluster = Cluster(budgets, startups(pods))
    overrides = kw.pop("overrides", EVERYTHING)
    options = kw.pop("options", DrainOptions(filters=FilterOptions()))
    timeout = kw.pop("timeout", 3600)
    return plan_node("n1", pods, cluster, options, overrides, timeout=timeout, now=NOW)


def test_no_budget__all_go_at_once__eta_is_the_longest_grace_period() -> None:
    result = plan([pod("a", grace=5), pod("b", grace=12)], [])

    assert (result.pods, result.eta_seconds, result.blockers) == (2, 12, [])
    assert "grace period of default/b" in result.paced_by


def test_max_unavailable_one__one_wave_per_replacement() -> None:
    # Four pods, each Ready 4 s after creation; the budget lets one go at a time.
    four = [pod(f"web-{i}", grace=3) for i in range(4)]

    result = plan(four, [budget("web", "web", expected=4, allowed=1, max_unavailable=1)])

    assert result.eta_seconds == 3 * 4 + 3  # three replacements waited for, then a stop
    assert result.blockers == []
    assert "PodDisruptionBudget default/web" in result.paced_by


def test_a_batch_shares_its_budgets__two_nodes_drained_side_by_side_take_both_nodes_waves() -> None:
    # Three pods on each of two nodes, Ready 4 s after creation, one budget of six
    # allowing one at a time: alone, each node is three waves; side by side, six.
    first = [pod(f"web-{i}", grace=3) for i in range(3)]
    second = [pod(f"web-{i}", grace=3, nodeName="n2") for i in range(3, 6)]
    budgets = [budget("web", "web", expected=6, allowed=1, max_unavailable=1)]
    cluster = Cluster(budgets, startups(first + second))

    alone = plan(first, budgets).eta_seconds
    together = batch_eta([first, second], cluster, OPTIONS, timeout=3600, now=NOW)

    assert alone == 2 * 4 + 3
    assert together == 5 * 4 + 3, "each wave of one node's pods holds the other's"
    assert batch_eta([first], cluster, OPTIONS, timeout=3600, now=NOW) == alone
    assert batch_eta([first, second], cluster, OPTIONS, timeout=10, now=NOW) == 10


def test_statefulset__its_replacement_comes_once_the_old_pod_is_gone() -> None:
    # The same name: the controller creates the replacement after the old pod has
    # stopped (3 s), then it takes its 4 s to be Ready; a ReplicaSet's starts at once.
    three = [pod(f"db-{i}", "db", grace=3, owner=None) for i in range(3)]
    for each in three:
        each["metadata"]["ownerReferences"] = [
            {"kind": "StatefulSet", "name": "db", "controller": True}
        ]

    result = plan(three, [budget("db", "db", expected=3, allowed=1, max_unavailable=1)])

    assert result.eta_seconds == 2 * (3 + 4) + 3


def test_the_upper_bound_takes_the_slowest_replacement() -> None:
    pods = [pod(f"web-{i}", grace=1, ready_after=after) for i, after in enumerate((2, 2, 8))]

    result = plan(pods, [budget("web", "web", expected=3, allowed=1, max_unavailable=1)])

    assert (result.eta_seconds, result.eta_max_seconds) == (2 * 2 + 1, 2 * 8 + 1)


@given(
    replicas=st.integers(1, 12),
    allowed=st.integers(1, 4),
    startup=st.integers(0, 30),
    grace=st.integers(0, 30),
)
def test_budget_waves__ceil_of_pods_over_allowance(
    replicas: int, allowed: int, startup: int, grace: int
) -> None:
    allowed = min(allowed, replicas)
    pods = [pod(f"web-{i}", grace=grace, ready_after=startup) for i in range(replicas)]
    waves = -(-replicas // allowed)

    result = plan(pods, [budget("web", "web", expected=replicas, allowed=allowed)])

    assert result.eta_seconds == (waves - 1) * startup + grace
    assert result.blockers == []


def test_unhealthy_pod_goes_through_a_budget_that_allows_none_when_always_allow() -> None:
    sick = pod("web-0", ready_after=None)
    policy = "AlwaysAllow"
    shut = budget(
        "web", "web", expected=3, allowed=0, min_available=2, unhealthy_pod_eviction_policy=policy
    )
    shut["status"]["currentHealthy"], shut["status"]["desiredHealthy"] = 2, 3  # unhealthy

    result = plan([sick, pod("web-other", owner="other", app="other")], [shut])

    assert result.blockers == []


def test_blocker__single_replica_min_available_one__deadlock_with_the_replica_fix() -> None:
    only = pod("web-0")

    result = plan([only], [budget("web", "web", expected=1, allowed=0, min_available=1)])

    assert result.deadlocked
    [blocker] = result.blockers
    assert (blocker.pod, blocker.budget) == ("default/web-0", "default/web")
    assert "deadlock" in blocker.reason
    assert "scale the workload to 2 replicas" in blocker.fix
    assert result.eta_seconds == 3600  # the drain runs to its timeout


def test_blocker__max_unavailable_zero__fix_sets_it_to_one() -> None:
    two = [pod("web-0"), pod("web-1")]

    result = plan(two, [budget("web", "web", expected=2, allowed=0, max_unavailable=0)])

    assert result.deadlocked
    assert {b.pod for b in result.blockers} == {"default/web-0", "default/web-1"}
    assert all("set maxUnavailable to 1" in b.fix for b in result.blockers)


def test_blocker__several_budgets__both_named() -> None:
    budgets = [budget("a", "web", expected=3, allowed=1), budget("b", "web", expected=3, allowed=1)]

    result = plan([pod("web-0")], budgets)

    [blocker] = result.blockers
    assert "default/a, default/b" in blocker.reason
    assert blocker.budget == "default/a"
    assert result.deadlocked


@pytest.mark.parametrize("phase", ["Pending", "Failed"])
def test_pending_or_failed_pod_under_two_budgets__not_a_deadlock(phase: str) -> None:
    """The eviction API deletes a Pending/Failed pod before it counts its budgets: the
    plan said deadlocked (exit 1, 'the drain waits for its timeout')."""
    stuck = phased(pod("web-0", ready_after=None), phase)
    budgets = [budget("a", "web", expected=3, allowed=1), budget("b", "web", expected=3, allowed=1)]

    result = plan([stuck], budgets)

    assert not result.deadlocked, [b.reason for b in result.blockers]
    assert result.blockers == []


def test_blocker__do_not_disrupt() -> None:
    held = pod("job-0", owner="job")
    held["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}

    result = plan([held], [])

    [blocker] = result.blockers
    assert "karpenter.sh/do-not-disrupt" in blocker.reason
    assert "karpenter.sh/do-not-disrupt-" in blocker.fix


def test_blocker__do_not_disrupt_over_a_deadlocked_budget__both_named() -> None:
    """The annotation holds it; once it goes, its budget (minAvailable 1, one replica)
    still would: both are named, the budget's as the deadlock it is."""
    held = pod("web-0")
    held["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    solo = budget("web", "web", expected=1, allowed=0, min_available=1)

    result = plan([held], [solo])

    annotation, deadlock = result.blockers
    assert "karpenter.sh/do-not-disrupt" in annotation.reason and not annotation.deadlock
    assert deadlock.budget == "default/web" and "deadlock" in deadlock.reason
    assert result.deadlocked


def test_blocker__no_controller_without_force() -> None:
    bare = pod("bare", owner=None)

    result = plan([bare], [], overrides=Overrides(ignore_daemonsets=True))

    [blocker] = result.blockers
    assert "--force" in blocker.fix and blocker.budget is None


def test_blocker__emptydir_without_delete_emptydir_data() -> None:
    scratch = pod("web-0", volumes=[{"name": "tmp", "emptyDir": {}}])

    result = plan([scratch], [], overrides=Overrides(ignore_daemonsets=True, force=True))

    [blocker] = result.blockers
    assert "local storage" in blocker.reason and "--delete-emptydir-data" in blocker.fix


def test_blocker__grace_period_longer_than_the_time_left() -> None:
    slow = pod("web-0", grace=600)

    result = plan([slow], [], timeout=300)

    [blocker] = result.blockers
    assert "after the timeout (300 s)" in blocker.reason
    assert blocker.fix.startswith("--timeout 601s")


def test_time_to_ready__restarted_pod_not_measured__other_workloads_median_used() -> None:
    flapping = pod("web-0", ready_after=50)
    flapping["status"]["containerStatuses"] = [{"restartCount": 2}]
    other = pod("api-0", app="api", owner="api-rs", ready_after=6)

    known = startups([flapping, other])

    assert [(k[2], v.median) for k, v in known.items()] == [("api-rs", 6), ("", 6)]


def test_the_plan_never_reads_the_emulators_timing_annotations() -> None:
    from pathlib import Path

    import drainer.plan

    package = Path(drainer.plan.__file__).parent
    for source in (*package.glob("*.py"), package.parent / "cli" / "plan.py"):
        assert "kubesim.io" not in source.read_text(), source


def test_a_pod_already_terminating_is_waited_for_until_its_deletion_deadline() -> None:
    going = pod("web-0", grace=30)
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:40Z"

    result = plan([going, pod("web-1", grace=5)], [])

    assert (result.pods, result.eta_seconds) == (1, 40)
    assert result.paced_by == "default/web-0, already terminating: its deletion deadline"


def test_blocker__budget_waiting_for_unready_pods_elsewhere__not_a_deadlock() -> None:
    waiting = budget("web", "web", expected=3, allowed=0, min_available=3)
    waiting["status"]["currentHealthy"] = 2  # one of its pods, on another node, not Ready

    result = plan([pod("web-0")], [waiting])

    [blocker] = result.blockers
    assert not result.deadlocked
    assert "2 of 3 pods healthy" in blocker.reason
    assert blocker.budget == "default/web"


def test_max_unavailable_zero_with_one_pod_unready__fix_is_not_make_them_ready() -> None:
    """maxUnavailable 0 (desiredHealthy == expectedPods): allowed stays 0 even once
    every pod is Ready. The fix was only 'make the workload's unhealthy pods Ready':
    the operator does so and the drain still hangs to its timeout."""
    shut = budget("web", "web", expected=3, allowed=0, max_unavailable=0)
    shut["status"].update(currentHealthy=2, desiredHealthy=3)

    result = plan([pod("web-0")], [shut])

    [blocker] = result.blockers
    assert not result.deadlocked  # a pod not Ready elsewhere: not all of it is the budget's
    assert "2 of 3 pods healthy" in blocker.reason and "desires all 3" in blocker.reason
    assert "set maxUnavailable to 1 on PodDisruptionBudget default/web" in blocker.fix, blocker
    assert "unhealthy pods Ready" in blocker.fix  # both: 2 of 3 healthy, 2 desired, none allowed


def test_deadlock_fix__percentages__the_value_that_lets_one_pod_go() -> None:
    from drainer.plan.budgets import fix

    none = budget("web", "web", expected=4, allowed=0, max_unavailable="0%")
    every = budget("web", "web", expected=4, allowed=0, min_available="100%")

    assert fix(none).startswith("set maxUnavailable to 25% (or 1)")
    assert "below 100% (with 4 pods, to 75%)" in fix(every)


@given(st.integers(min_value=1, max_value=400))
def test_deadlock_fix__max_unavailable_percentage__lets_exactly_one_pod_go(expected: int) -> None:
    """The disruption controller rounds maxUnavailable up: the value suggested must let
    exactly one of `expected` pods go (ceil(100/n)% let two: 34% of 3)."""
    import math
    import re

    from drainer.plan.budgets import fix

    none = budget("web", "web", expected=expected, allowed=0, max_unavailable="0%")

    text = fix(none)

    found = re.match(r"set maxUnavailable to (\d+)(%?)", text)
    assert found, text
    value, percent = int(found[1]), found[2] == "%"
    assert (math.ceil(expected * value / 100) if percent else value) == 1, text
    if percent:  # the largest such percentage: the budget keeps scaling with the workload
        assert math.ceil(expected * (value + 1) / 100) > 1, text


def test_sync_failed_budget__fix_is_not_the_value_it_already_has() -> None:
    """maxUnavailable 1 over pods whose controller has no scale the disruption
    controller can read (a custom resource): it fails safe, disruptionsAllowed 0 under
    a DisruptionAllowed=False/SyncFailed condition, the rest of the status as before.
    The plan told the operator to 'set maxUnavailable to ... 1', what it already is."""
    failed = budget("web", "web", expected=3, allowed=0, max_unavailable=1)
    failed["status"].update(currentHealthy=3, desiredHealthy=2)
    message = 'found no controllers for pod "web-0"'
    failed["status"]["conditions"] = [
        {"type": "DisruptionAllowed", "status": "False", "reason": "SyncFailed", "message": message}
    ]

    result = plan([pod("web-0")], [failed])

    [blocker] = result.blockers
    assert "set maxUnavailable to 1" not in blocker.fix and "(or 1)" not in blocker.fix, blocker
    assert f"SyncFailed: {message}" in blocker.reason
    assert "controller" in blocker.fix and "scale subresource" in blocker.fix
    assert result.deadlocked and blocker.budget == "default/web"


@pytest.mark.parametrize("spec", [{"max_unavailable": "100%"}, {"min_available": 0}])
def test_unready_pods_under_a_budget_desiring_none__need_an_allowed_disruption(
    spec: dict[str, Any],
) -> None:
    """The eviction API spares a pod that is not Ready only while its budget desires
    some pods (eviction.go: desiredHealthy > 0); a budget desiring none (maxUnavailable
    100%, minAvailable 0) whose status allows no disruption refuses it. The plan said
    nothing blocked."""
    sick = [pod("web-0", ready_after=None), pod("web-1", ready_after=None)]
    none = budget("web", "web", expected=2, allowed=0, **spec)
    none["status"].update(currentHealthy=0, desiredHealthy=0)

    result = plan(sick, [none])

    assert {b.pod for b in result.blockers} == {"default/web-0", "default/web-1"}, result


def test_unhealthy_pod_under_an_unhealthy_budget__if_healthy_budget__waits() -> None:
    sick = pod("web-0", ready_after=None)
    shut = budget("web", "web", expected=3, allowed=0, min_available=3)
    shut["status"]["currentHealthy"] = 2  # the default policy, IfHealthyBudget: not healthy

    result = plan([sick], [shut])

    [blocker] = result.blockers
    assert blocker.pod == "default/web-0" and blocker.budget == "default/web"


@pytest.mark.parametrize("phase", ["Pending", "Failed"])
def test_pending_or_failed_pod_under_an_unhealthy_budget__no_blocker(phase: str) -> None:
    """A Deployment of 3 whose rollout is stuck: web-0 in ImagePullBackOff (Pending),
    or a pod the kubelet evicted (Failed) left on the node; maxUnavailable 0, 2 of 3
    healthy. The API deletes that pod at once; the plan called it a blocker that
    'waits for the others to become Ready'."""
    stuck = phased(pod("web-0", ready_after=None), phase)
    shut = budget("web", "web", expected=3, allowed=0, max_unavailable=0)
    shut["status"].update(currentHealthy=2, desiredHealthy=3)

    result = plan([stuck], [shut])

    assert result.blockers == [], [b.reason for b in result.blockers]
    assert result.eta_seconds == 10  # deleted at once: its grace period


def test_a_pending_pods_replacement_still_frees_its_budget() -> None:
    """A Pending pod is deleted without its budget read, but its replacement, once
    Ready, counts in that budget: the next pod goes then (5 s), not at the timeout."""
    pods = [phased(pod("web-0", ready_after=None), "Pending"), pod("web-1", ready_after=5)]
    spare = budget("web", "web", expected=3, allowed=0, min_available=2)
    spare["status"]["currentHealthy"], spare["status"]["desiredHealthy"] = 2, 2

    result = plan(pods, [spare])

    assert result.blockers == [], result.blockers
    assert result.eta_seconds == 5 + 10


def test_a_failed_pods_deletion_frees_no_budget() -> None:
    """A Failed pod was replaced when it failed (its controller counts only the pods
    still running): deleting it makes no replacement to free the budget. Under a budget
    waiting for a pod not Ready elsewhere, the next pod waits for that one."""
    pods = [phased(pod("web-0", ready_after=None), "Failed"), pod("web-1", ready_after=5)]
    spare = budget("web", "web", expected=3, allowed=0, min_available=2)
    spare["status"]["currentHealthy"], spare["status"]["desiredHealthy"] = 2, 2

    result = plan(pods, [spare])

    [blocker] = result.blockers
    assert blocker.pod == "default/web-1" and "2 of 3 pods healthy" in blocker.reason


def test_an_unhealthy_pods_replacement_frees_the_budget_for_the_next() -> None:
    # Three pods, one not Ready: the budget (minAvailable 2) is healthy with none to
    # spare. The sick pod goes at once; its replacement, Ready 5 s later, lets one more go.
    pods = [
        pod("web-0", ready_after=None),
        pod("web-1", ready_after=5),
        pod("web-2", ready_after=5),
    ]
    spare = budget("web", "web", expected=3, allowed=0, min_available=2)
    spare["status"]["currentHealthy"], spare["status"]["desiredHealthy"] = 2, 2

    result = plan(pods, [spare])

    assert result.blockers == [], result.blockers
    # web-1 goes once web-0's replacement is Ready (5 s), web-2 once web-1's is (10 s).
    assert result.eta_seconds == 10 + 10
    assert result.paced_by.startswith("PodDisruptionBudget default/web: 3 waves")


# -- the critical tier on the forecast clock (the engine's reserve) ----------------

DNS_BUDGET = budget("dns", "dns", expected=2, allowed=1, max_unavailable=1)


def coredns() -> dict[str, Any]:
    return pod("dns-a", "dns", owner="dns-rs", grace=1, priorityClassName="system-cluster-critical")


def forecast_of(
    pods: list[dict[str, Any]], budgets: list[dict[str, Any]], *, timeout: float, **kw: Any
) -> Forecast:
    """The forecast clock's run alone: when each pod is evicted and gone."""
    going = [Going(p, matching(p, budgets)) for p in pods]
    view = ForecastBudgets.of(budgets)
    options = DrainOptions(filters=FilterOptions(), **kw)
    return forecast(going, view, options, startups(pods), timeout=timeout)


def test_ordinary_pods_deadlocked__critical_pod_evicted_at_the_reserve__no_blocker() -> None:
    """As the engine does (schedule.py: start_critical): every ordinary pod left is
    held by a budget at the deadline less the reserve, so the critical tier starts
    then, and coredns goes through its own budget, which allows one."""
    stuck = [pod(f"pay-{i}", "pay", owner="pay-rs") for i in range(2)]
    pay = budget("pay", "pay", expected=2, allowed=0, min_available=2)

    run = forecast_of([*stuck, coredns()], [pay, DNS_BUDGET], timeout=3600)
    result = plan([*stuck, coredns()], [pay, DNS_BUDGET], timeout=3600)

    assert (run.evicted["default/dns-a"], run.gone["default/dns-a"]) == (3480, 3481)
    assert set(run.left) == {"default/pay-0", "default/pay-1"}
    assert [(b.pod, b.deadlock) for b in result.blockers] == [
        ("default/pay-0", True),
        ("default/pay-1", True),
    ]


def test_drain_shorter_than_the_reserve__critical_tier_starts_once_the_budget_refuses() -> None:
    """A 60 s drain under the default 120 s reserve: the engine starts the critical
    tier as soon as the ordinary pods are held, right after the budget's refusal."""
    stuck = pod("pay-0", "pay", owner="pay-rs")
    pay = budget("pay", "pay", expected=1, allowed=0, min_available=1)

    run = forecast_of([stuck, coredns()], [pay, DNS_BUDGET], timeout=60)

    assert run.evicted["default/dns-a"] == 0
    assert list(run.left) == ["default/pay-0"]


def test_critical_reserve_option__the_tier_starts_at_the_deadline_less_it() -> None:
    stuck = pod("pay-0", "pay", owner="pay-rs")
    pay = budget("pay", "pay", expected=1, allowed=0, min_available=1)

    run = forecast_of(
        [stuck, coredns()], [pay, DNS_BUDGET], timeout=600, critical_reserve_seconds=45
    )

    assert run.evicted["default/dns-a"] == 555


def test_ordinary_pod_terminating_past_the_timeout__critical_pod_waits__fix_the_timeout() -> None:
    """An ordinary pod still terminating is not held (the engine waits for it:
    tests/test_schedule.py), so coredns's tier starts once it is gone, after the
    timeout: its fix is the longer --timeout, never a grace period 'under 0 s'."""
    reindex = pod("reindex", "reindex", owner="re-rs", grace=5400)

    result = plan([reindex, coredns()], [DNS_BUDGET], timeout=3600)

    by_pod = {b.pod: b for b in result.blockers}
    assert by_pod["default/reindex"].fix == (
        "--timeout 5401s, or a terminationGracePeriodSeconds under 3600 s"
    )
    dns = by_pod["default/dns-a"]
    assert dns.fix == "--timeout 5402s"
    assert dns.budget is None, "its budget allowed it: the critical tier held it"
    assert dns.reason == (
        "not evicted before the timeout (3600 s): a critical pod, its tier starts at "
        "~5400 s (the ordinary pods are gone)"
    )


def test_budget_waves_past_the_timeout__each_fix_means_something() -> None:
    """Four pods, one at a time, each replacement Ready in 4 s, a 3 s grace period,
    a 10 s timeout: web-2 is evicted at 8 s and stops at 11 s (a grace period under
    2 s would do); web-3 waits for the budget until 12 s (only a longer timeout would)."""
    four = [pod(f"web-{i}", grace=3) for i in range(4)]

    result = plan(
        four, [budget("web", "web", expected=4, allowed=1, max_unavailable=1)], timeout=10
    )

    fixes = {b.pod: b.fix for b in result.blockers}
    assert fixes == {
        "default/web-2": "--timeout 12s, or a terminationGracePeriodSeconds under 2 s",
        "default/web-3": "--timeout 16s",
    }
    [late] = [b for b in result.blockers if b.pod == "default/web-3"]
    assert late.reason == (
        "not evicted before the timeout (10 s): it waits for PodDisruptionBudget "
        "default/web until ~12 s"
    )


@given(
    replicas=st.integers(1, 8),
    startup=st.integers(0, 40),
    grace=st.integers(0, 60),
    timeout=st.integers(1, 200),
    critical=st.booleans(),
)
def test_a_late_pods_fix__never_a_grace_period_under_one_second(
    replicas: int, startup: int, grace: int, timeout: int, critical: bool
) -> None:
    pods = [pod(f"web-{i}", grace=grace, ready_after=startup) for i in range(replicas)]
    pods.append(pod("slow", "slow", owner="slow-rs", grace=grace * 3))
    if critical:
        pods.append(coredns())
    budgets = [budget("web", "web", expected=replicas, allowed=1, max_unavailable=1), DNS_BUDGET]

    result = plan(pods, budgets, timeout=timeout)

    for blocker in result.blockers:
        assert "under 0 s" not in blocker.fix, blocker
        assert "terminationGracePeriodSeconds under" not in blocker.fix or (
            int(blocker.fix.rsplit("under ", 1)[1].split()[0]) >= 1
        ), blocker


def test_more_pods_than_the_concurrency__the_rest_go_as_the_answers_come() -> None:
    """The engine sends the next eviction as soon as an answer frees a slot, not when
    a pod is gone: 40 pods under a concurrency of 32 all go at once."""
    many = [pod(f"web-{i}", grace=10) for i in range(40)]

    run = forecast_of(many, [], timeout=3600)

    assert set(run.evicted.values()) == {0}
    assert run.eta == 10


def test_paced_by__critical_pod_after_the_ordinary_tier__the_tier_paced_it_not_its_budget() -> None:
    """coredns goes once the node's ordinary pod is gone (3 s), through a budget that
    allows it at once: the critical tier paced it, its budget never held it (the
    plan said 'PodDisruptionBudget default/dns: 1 wave', docs/operations.md's example)."""
    result = plan([pod("web-0", grace=3), coredns()], [DNS_BUDGET])

    assert result.eta_seconds == 3 + 1
    assert result.paced_by == (
        "the critical tier from ~3 s (the ordinary pods are gone), then a 1 s grace period"
    )


def test_paced_by__critical_pods_waiting_for_their_budget__the_tier_then_the_budget() -> None:
    """Two coredns pods under a budget of one, after a 3 s ordinary pod: the tier
    starts at 3 s, dns-b waits for dns-a's replacement (4 s): both paced it."""
    second = coredns()
    second["metadata"].update(name="dns-b", uid="dns-b")

    result = plan([pod("web-0", grace=3), coredns(), second], [DNS_BUDGET])

    assert result.eta_seconds == 3 + 4 + 1
    assert result.paced_by.startswith(
        "the critical tier from ~3 s (the ordinary pods are gone), then PodDisruptionBudget "
        "default/dns: 2 waves (replacements Ready in ~4 s"
    ), result.paced_by
