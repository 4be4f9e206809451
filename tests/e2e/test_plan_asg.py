"""`plan --asg NAME`: an instance refresh of a group of three, its instances mapped to
nodes through EC2 as the function maps them, planned batch by batch with the
refresh's flags; the total is each batch's slowest node plus the warm-up."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from drainer.cli.main import main
from testbed import World
from testbed import workloads as w
from testbed.world import pods_on, wait_until

GRACE = (5, 12, 20)
"""Each node's one pod's grace period, in the refresh's order (by instance id)."""

pytestmark = pytest.mark.kubesim_only(
    "the AWS side (moto's group, EC2's instances) is what is tested; the plan's "
    "Kubernetes reads are the same on both backends (tests/e2e/test_plan.py)"
)


def _plan(world: World, *flags: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    where = ["--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"]
    code = main(["plan", "--asg", world.group.asg_name, *flags, "-o", "json", *where], stdout=out)
    return code, json.loads(out.getvalue())


@pytest.fixture
def refresh_order(world: World) -> list[str]:
    """The group's nodes, each with one replicated pod, in the order a refresh takes them."""
    nodes = [world.nodes[i] for i in sorted(world.instance_ids)]
    for node, grace in zip(nodes, GRACE, strict=True):
        world.cluster.apply(w.pod(f"on-{grace}", node_name=node, grace=grace, owner="ReplicaSet"))
    wait_until(lambda: all(len(pods_on(world.cluster, n)) == 1 for n in nodes))
    return nodes


def test_plan_asg__batch_2__warmup_30__each_batch_its_slowest_node_plus_warmup(
    world: World, refresh_order: list[str]
) -> None:
    code, plan = _plan(world, "--batch", "2", "--instance-warmup", "30")

    assert (code, plan["result"]) == (0, "planned"), plan
    assert [n["node"] for n in plan["nodes"]] == refresh_order
    assert [n["eta_seconds"] for n in plan["nodes"]] == list(GRACE)
    assert plan["refresh"]["batches"] == [refresh_order[:2], refresh_order[2:]]
    # max(5, 12) + 30, then 20 + 30; not the nodes one after the other (37 s).
    assert plan["total_eta_seconds"] == 12 + 30 + 20 + 30


def test_plan_asg__defaults__min_healthy_90_one_at_a_time__warmup_the_groups_grace_period(
    world: World, refresh_order: list[str]
) -> None:
    world.autoscaling.update_auto_scaling_group(
        AutoScalingGroupName=world.group.asg_name, HealthCheckGracePeriod=45
    )
    code, plan = _plan(world)

    assert code == 0, plan
    refresh = plan["refresh"]
    assert (refresh["batch"], refresh["instance_warmup_seconds"]) == (1, 45)
    assert plan["total_eta_seconds"] == sum(GRACE) + 3 * 45


def test_plan_asg__min_healthy_percentage_0__one_batch_of_three(
    world: World, refresh_order: list[str]
) -> None:
    code, plan = _plan(world, "--min-healthy-percentage", "0", "--instance-warmup", "0")

    assert plan["refresh"]["batches"] == [refresh_order]
    assert plan["total_eta_seconds"] == max(GRACE)
    # All three at once: nowhere left for their pods (the refresh's new instances come
    # with the next batch; there is none).
    assert code == 1
    assert {b["reason"] for n in plan["nodes"] for b in n["blockers"]} == {"no node can take it"}


def test_plan_asg__no_such_group__one_line__exit_1(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"]
    code = main(["plan", "--asg", "nope", *where], stdout=io.StringIO())
    assert code == 1
    assert "no Auto Scaling group nope in us-east-1" in capsys.readouterr().err


def test_plan__refresh_flags_without_asg__usage_exit_2(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["plan", "some-node", "--batch", "2"], stdout=io.StringIO())
    assert code == 2
    assert "--batch is only for plan --asg" in capsys.readouterr().err
