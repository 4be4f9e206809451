"""An instance refresh's arithmetic (drainer/plan/refresh.py): the batch size from
--batch or --min-healthy-percentage, and the total over batches; the wait for new
nodes from the group's launches (drainer/plan/history.py); the deadlock a refresh's
own cordons create (drainer/plan/cordons.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from drainer.plan.cordons import Placements, blockers, stuck
from drainer.plan.history import new_node_wait
from drainer.plan.refresh import batch_size, batch_times, batches, total
from testbed import workloads as w


@pytest.mark.parametrize(
    ("size", "batch", "healthy", "expected"),
    [
        (3, None, 90, 1),  # floor(0.3) is 0: at least one
        (10, None, 90, 1),
        (20, None, 80, 4),
        (7, None, 0, 7),
        (7, None, 100, 1),
        (7, 3, 90, 3),  # --batch wins
    ],
)
def test_batch_size(size: int, batch: int | None, healthy: int, expected: int) -> None:
    assert batch_size(size, batch=batch, min_healthy_percentage=healthy) == expected


def test_total__each_batch_its_slowest_node_then_the_warmup() -> None:
    grouped = batches(["a", "b", "c"], 2)
    assert grouped == [["a", "b"], ["c"]]
    assert total([[5.0, 12.0], [20.0]], warmup=30) == 12 + 30 + 20 + 30


def test_batch_times__a_batch_whose_pods_fit_nowhere_waits_for_its_new_nodes() -> None:
    etas = [[5.0, 12.0], [20.0]]
    assert batch_times(etas, warmup=30, waits=[70.0, 0.0]) == [12 + 70 + 30, 20 + 30]
    assert total(etas, warmup=30, waits=[70.0, 0.0]) == 12 + 70 + 30 + 20 + 30


# -- the wait for new nodes, from the group's launches (drainer/plan/history.py) --------

T0 = 1_800_000_000.0


@dataclass(frozen=True)
class Launch:
    instance_id: str
    start: float
    end: float


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node(instance: str, created: float, ready: float | None) -> dict[str, Any]:
    return w.node(
        f"n-{instance}",
        instance,
        pods=110,
        created=_stamp(created),
        ready=ready is not None,
        ready_since=_stamp(ready or created),
    )


def test_new_node_wait__from_each_launch_to_the_later_of_in_service_and_its_node_ready() -> None:
    launches = [
        # InService at 50 s, its node registered at 40 s and Ready at 60 s: 60 s.
        Launch("i-0a", T0, T0 + 50),
        # A launch hook that waited for the node: InService (90 s) after Ready (70 s).
        Launch("i-0b", T0, T0 + 90),
        # Its node is gone (replaced since): to InService only, and said so.
        Launch("i-0c", T0, T0 + 40),
    ]
    nodes = [_node("i-0a", T0 + 40, T0 + 60), _node("i-0b", T0 + 45, T0 + 70)]

    wait = new_node_wait(launches, nodes, bound=600, bound_why="unused")

    assert (wait.seconds, wait.basis, wait.launches) == (60, "observed", 3)
    assert "the median of the group's last 3 launch(es) (InService in ~50 s" in wait.detail
    assert "their nodes Ready ~22 s after registering" in wait.detail
    assert "1 timed to InService only: no Ready node of theirs left to time" in wait.detail
    assert wait.short == "~60 s, the median of the group's last 3 launch(es)"


def test_new_node_wait__the_last_five_launches_only() -> None:
    # The most recent first: five of 30 s, then older ones of 600 s that no longer count.
    launches = [Launch(f"i-{n:02x}", T0 - n, T0 - n + (30 if n < 5 else 600)) for n in range(9)]
    wait = new_node_wait(launches, [], bound=600, bound_why="unused")
    assert (wait.seconds, wait.launches) == (30, 5)


def test_new_node_wait__a_node_not_ready_is_timed_to_in_service() -> None:
    wait = new_node_wait(
        [Launch("i-0a", T0, T0 + 50)], [_node("i-0a", T0 + 40, None)], bound=600, bound_why=""
    )
    assert wait.seconds == 50


def test_new_node_wait__no_launch__the_bound_named_as_a_bound() -> None:
    wait = new_node_wait([], [], bound=600, bound_why="no launch: the drain's --timeout")
    assert (wait.seconds, wait.basis, wait.launches) == (600, "bound", 0)
    assert wait.detail == "no launch: the drain's --timeout"
    assert wait.short == "up to 600 s, a bound: no launch to time"
    assert wait.doc() == {
        "wait_seconds": 600,
        "basis": "bound",
        "launches": 0,
        "detail": "no launch: the drain's --timeout",
    }


# -- a deadlock the refresh's own cordons create (drainer/plan/cordons.py) --------------


def _web(name: str) -> dict[str, Any]:
    return w.pod(name, node_name="n1", labels={"app": "web"}, owner="ReplicaSet", ready=True)


def _budget(allowed: int, **value: int | str) -> dict[str, Any]:
    status = {"disruptionsAllowed": allowed, "currentHealthy": 3, "expectedPods": 3}
    return w.budget(
        "web", {"app": "web"}, status={**status, "desiredHealthy": 3 - allowed}, **value
    )


@pytest.mark.parametrize(
    ("allowed", "homeless", "deadlocked"),
    [
        (1, 2, True),  # the first eviction takes the one disruption for good
        (2, 2, False),  # each pod that fits nowhere has a disruption of its own
        (1, 1, False),  # it waits for new nodes, then recovers
        (0, 2, False),  # allows none today: the budget's own deadlock (blockers.py)
    ],
)
def test_stuck__more_pods_fit_nowhere_than_the_budget_allows(
    allowed: int, homeless: int, deadlocked: bool
) -> None:
    pods = [_web(f"web-{n}") for n in range(homeless)]
    found = stuck(pods, [_budget(allowed, min_available=3 - allowed)])
    assert bool(found) == deadlocked
    if deadlocked:
        [one] = found
        assert (one.name, one.allowed, [p["metadata"]["name"] for p in one.pods]) == (
            "default/web",
            allowed,
            ["web-0", "web-1"],
        )


def test_stuck__a_pod_under_two_budgets_is_left_to_its_own_blocker() -> None:
    other = w.budget("all", {"app": "web"}, status={"disruptionsAllowed": 1})
    assert stuck([_web("web-0"), _web("web-1")], [_budget(1, min_available=2), other]) == []


@pytest.mark.parametrize("phase", ["Pending", "Succeeded", "Failed"])
def test_stuck__a_pod_the_eviction_api_deletes_past_its_budget_takes_no_disruption(
    phase: str,
) -> None:
    """A Pending, Succeeded or Failed pod is deleted without its budget being read
    (eviction.go's canIgnorePDB): it takes none of the budget's disruptions, so one
    Running pod that fits nowhere beside it, under a budget that allows one, is no
    deadlock the cordons make. Counted, the plan reported one and exited 1."""
    other = w.pod("web-1", node_name="n1", labels={"app": "web"}, owner="ReplicaSet")
    other["status"] = {"phase": phase}
    assert stuck([_web("web-0"), other], [_budget(1, min_available=2)]) == []


WEB = "on PodDisruptionBudget default/web"


@pytest.mark.parametrize(
    ("value", "fix"),
    [
        ({"min_available": 2}, f"set minAvailable to 1 {WEB} (it is 2)"),
        ({"min_available": "66%"}, f"set minAvailable to 1 {WEB} (it is 66%)"),
        ({"max_unavailable": 1}, f"set maxUnavailable to 2 {WEB} (it is 1)"),
    ],
)
def test_blockers__each_pod_that_fits_nowhere__the_budget_value_that_lets_them_all_go(
    value: dict[str, int | str], fix: str
) -> None:
    [one] = stuck([_web("web-0"), _web("web-1")], [_budget(1, **value)])

    found = blockers(one, ["n1", "n2"], 1, smaller=None)

    assert [b.pod for b in found] == ["default/web-0", "default/web-1"]
    assert all(b.deadlock and b.budget == "default/web" and b.fix == fix for b in found)
    assert "while batch 1 (n1, n2) is cordoned" in found[0].reason
    with_batch = blockers(one, ["n1", "n2"], 1, smaller=1)
    assert with_batch[0].fix == f"--batch 1, or {fix}"


def test_placements__records_the_pods_that_fit_on_no_node_left() -> None:
    nodes = [w.node("n1", pods=1), w.node("n2", pods=1)]
    there = [w.pod("old", node_name="n2", owner="ReplicaSet", phase="Running")]
    room = Placements(nodes, there, planned={"n1"})
    first, second = _web("web-0"), _web("web-1")
    room.place(first)
    assert room.homeless == [first]  # n2's one pod slot is taken
    room.replaced(["n1"])
    assert room.place(second) == "n1"
    assert room.homeless == [first]


# -- what a refresh takes from its group when given no preferences ----------------------


def _refresh_of(monkeypatch: pytest.MonkeyPatch, **group: Any) -> Any:
    """refresh_nodes for a group of no instances, as DescribeAutoScalingGroups answers
    it with `group`'s fields (botocore's Stubber checks the answer against the
    service model; moto keeps neither DefaultInstanceWarmup nor the maintenance
    policy), given no flags."""
    import argparse

    import boto3
    from botocore.stub import Stubber

    from drainer import aws
    from drainer.cli.refresh import refresh_nodes

    autoscaling = boto3.client("autoscaling", region_name="us-east-1")
    answer = {
        "AutoScalingGroupName": "workers", "MinSize": 0, "MaxSize": 10,
        "DefaultCooldown": 300, "AvailabilityZones": ["us-east-1a"],
        "HealthCheckType": "EC2", "CreatedTime": datetime(2026, 1, 1, tzinfo=UTC),
        "Instances": [], **group,
    }  # fmt: skip
    real = aws.make_clients

    def clients(session: Any, region: str | None = None) -> aws.AwsClients:
        made = real(session, region)
        made.autoscaling = autoscaling
        return made

    monkeypatch.setattr(aws, "make_clients", clients)
    args = argparse.Namespace(asg="workers", batch=None, min_healthy_percentage=None,
                              instance_warmup=None)  # fmt: skip
    with Stubber(autoscaling) as stub:
        stub.add_response("describe_auto_scaling_groups", {"AutoScalingGroups": [answer]})
        return refresh_nodes(kube=None, args=args)  # type: ignore[arg-type]


def test_refresh_nodes__no_instance_warmup_flag__the_groups_default_instance_warmup(
    fake_aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """StartInstanceRefresh without InstanceWarmup uses the group's DefaultInstanceWarmup
    when it has one, and its HealthCheckGracePeriod only otherwise (AWS's defaults)."""
    warm = _refresh_of(
        monkeypatch, DesiredCapacity=0, HealthCheckGracePeriod=300, DefaultInstanceWarmup=60
    )
    graced = _refresh_of(monkeypatch, DesiredCapacity=0, HealthCheckGracePeriod=300)

    assert (warm.warmup, graced.warmup) == (60.0, 300.0)


def test_refresh_nodes__no_batch_flags__the_groups_maintenance_policy_min_healthy(
    fake_aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without MinHealthyPercentage, a refresh uses the group's instance maintenance
    policy's when it has one, 90 only otherwise (AWS's defaults)."""
    policy = {"MinHealthyPercentage": 50, "MaxHealthyPercentage": 100}
    halved = _refresh_of(
        monkeypatch, DesiredCapacity=4, HealthCheckGracePeriod=0, InstanceMaintenancePolicy=policy
    )
    default = _refresh_of(monkeypatch, DesiredCapacity=4, HealthCheckGracePeriod=0)

    assert (halved.batch, default.batch) == (2, 1)  # 4 x (100 - 50) / 100; 90 %: one at a time
