"""`plan --asg NAME`: an instance refresh of a group of three, its instances mapped to
nodes through EC2 as the function maps them, planned batch by batch with the
refresh's flags; the total is each batch's slowest node plus the warm-up."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest

from drainer.cli.main import main
from drainer.engine.pods import parse_time
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on, wait_until, workloads_ready

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


def test_plan_asg__min_healthy_percentage_0__one_batch_of_three__no_launch_to_time(
    world: World, refresh_order: list[str]
) -> None:
    code, plan = _plan(
        world, "--min-healthy-percentage", "0", "--instance-warmup", "0", "--timeout", "600"
    )

    assert plan["refresh"]["batches"] == [refresh_order]
    # All three at once: nowhere left for their pods (the refresh's new instances come
    # with the next batch; there is none).
    assert code == 1
    assert {b["reason"] for n in plan["nodes"] for b in n["blockers"]} == {"no node can take it"}
    # The group has launched nothing Auto Scaling still records: how long its new nodes
    # take is not known, and the plan says so, counting the drain's --timeout as a bound.
    new_nodes = plan["refresh"]["new_nodes"]
    assert (new_nodes["basis"], new_nodes["launches"], new_nodes["wait_seconds"]) == (
        "bound",
        0,
        600,
    )
    assert "no launch of eks-workers among its last 100 scaling activities" in new_nodes["detail"]
    assert plan["refresh"]["waits_for_new_nodes"] == [True]
    assert plan["total_eta_seconds"] == max(GRACE) + 600


def _ready_at(world: World, node: str) -> float:
    conditions = world.cluster.get("Node", node)["status"]["conditions"]
    ready = next(c for c in conditions if c["type"] == "Ready")
    return parse_time(ready["lastTransitionTime"])


def test_plan_asg__pods_fit_nowhere__the_wait_for_new_nodes_is_the_median_of_the_groups_launches(
    world: World, refresh_order: list[str]
) -> None:
    # The group's history, as DescribeScalingActivities answers it: each instance's
    # launch, timed against its node's Ready. The first went InService 10 s before its
    # node was Ready (60 s in all); the second's InService came last (a launch hook
    # waiting for the node: 70 s); the third 90 s.
    spans = {refresh_order[0]: (60, 50), refresh_order[1]: (30, 70), refresh_order[2]: (90, 40)}
    for instance, node in world.nodes.items():
        before, in_service = spans[node]
        start = _ready_at(world, node) - before
        world.aws.add_launch_activity(world.group.asg_name, instance, start, start + in_service)

    code, plan = _plan(world, "--min-healthy-percentage", "0", "--instance-warmup", "0")

    assert code == 1
    new_nodes = plan["refresh"]["new_nodes"]
    assert (new_nodes["basis"], new_nodes["launches"], new_nodes["wait_seconds"]) == (
        "observed",
        3,
        70,
    )
    assert "InService in ~50 s" in new_nodes["detail"]
    # The one batch: its slowest drain, then the new nodes' 70 s.
    assert plan["refresh"]["batch_eta_seconds"] == [max(GRACE) + 70]
    assert plan["total_eta_seconds"] == max(GRACE) + 70
    assert all(
        n["paced_by"].startswith("waits for new nodes (~70 s, the median of the group's last 3")
        for n in plan["nodes"]
    )
    [call] = world.aws.activity_calls()
    assert call["AutoScalingGroupName"] == world.group.asg_name


def test_plan_asg__pods_fit_on_the_nodes_left__the_groups_history_is_not_read(
    world: World, refresh_order: list[str]
) -> None:
    code, plan = _plan(world, "--batch", "1")

    assert code == 0, plan
    assert plan["refresh"]["new_nodes"] is None
    assert plan["refresh"]["waits_for_new_nodes"] == [False, False, False]
    assert world.aws.activity_calls() == []


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


HOSTNAME = "kubernetes.io/hostname"


def _replica(name: str) -> dict[str, Any]:
    """A one-replica Deployment of the `tier=web` pods, none on a node with another."""
    deployment = w.deployment(name, 1, labels={"app": name, "tier": "web"}, grace=1)
    term = {"labelSelector": {"matchLabels": {"tier": "web"}}, "topologyKey": HOSTNAME}
    deployment["spec"]["template"]["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    return deployment


# "custom" node names: the nodes carry a kubernetes.io/hostname label.
@pytest.mark.parametrize("world", [{"node_names": "custom"}], indirect=True)
def test_plan_asg__a_budget_that_allows_one_today__deadlocked_by_the_batchs_own_cordons(
    world: World,
) -> None:
    order = [world.nodes[i] for i in sorted(world.instance_ids)]
    for node, name in zip(order, ("web-a", "web-b", "web-c"), strict=True):
        place_on(world, node, [_replica(name)])
    world.cluster.apply(w.budget("web", {"tier": "web"}, min_available=2))
    wait_until(
        lambda: (
            (world.cluster.get("PodDisruptionBudget", "web", "default").get("status") or {}).get(
                "disruptionsAllowed"
            )
            == 1
        )
    )

    # One at a time, the budget's one disruption is enough: each replacement waits for
    # its batch's new node, and the budget recovers with it.
    code, plan = _plan(world, "--batch", "1", "--instance-warmup", "0")
    assert (code, plan["deadlocked"]) == (1, False), plan

    # Two at a time: web-a's replacement takes the one disruption and fits on no node
    # (the third runs web-c), so web-b is never evicted, the batch never drains, and
    # its new nodes never come.
    code, plan = _plan(world, "--batch", "2", "--instance-warmup", "0")

    assert (code, plan["result"], plan["deadlocked"]) == (1, "blocked", True), plan
    stuck = [b for n in plan["nodes"] for b in n["blockers"] if b["budget"] == "default/web"]
    assert sorted(b["pod"].split("-")[1] for b in stuck) == ["a", "b"]
    for blocker in stuck:
        assert "allows 1 disruption(s) today" in blocker["reason"]
        assert f"while batch 1 ({order[0]}, {order[1]}) is cordoned" in blocker["reason"]
        assert blocker["fix"] == (
            "--batch 1, or set minAvailable to 1 on PodDisruptionBudget default/web (it is 2)"
        )
    first, second, third = plan["nodes"]
    assert first["paced_by"].startswith("deadlock: PodDisruptionBudget default/web")
    assert second["paced_by"].startswith("deadlock: PodDisruptionBudget default/web")
    assert (first["eta_seconds"], third["blockers"]) == (3600, [])


def test_plan_asg__pods_that_fit_only_on_the_batchs_own_nodes__deadlocked__fix_the_budget(
    world: World,
) -> None:
    first, second, _ = (world.nodes[i] for i in sorted(world.instance_ids))
    for node in (first, second):
        world.cluster.patch("Node", node, {"metadata": {"labels": {"pool": "a"}}})
    web = w.deployment("web", 2, labels={"app": "web"}, grace=1)
    web["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "a"}
    world.cluster.apply([web, w.budget("web", {"app": "web"}, max_unavailable=1)])
    wait_until(lambda: workloads_ready(world.cluster, [web]))
    wait_until(
        lambda: (
            (world.cluster.get("PodDisruptionBudget", "web", "default").get("status") or {}).get(
                "disruptionsAllowed"
            )
            == 1
        )
    )

    # Both pool-a nodes in one batch: the replacements fit nowhere else (the third node
    # is not in the pool), and the budget's one disruption goes to the first for good.
    code, plan = _plan(world, "--batch", "2", "--instance-warmup", "0")

    assert (code, plan["deadlocked"]) == (1, True), plan
    stuck = [b for n in plan["nodes"] for b in n["blockers"] if b["budget"] == "default/web"]
    assert len(stuck) == 2
    assert {b["fix"] for b in stuck} == {
        "--batch 1, or set maxUnavailable to 2 on PodDisruptionBudget default/web (it is 1)"
    }
    assert f"while batch 1 ({first}, {second}) is cordoned" in stuck[0]["reason"]
    assert plan["nodes"][2]["blockers"] == []

    # One at a time, the other pool-a node (then the first's new instance) takes them.
    code, plan = _plan(world, "--batch", "1", "--instance-warmup", "0")
    assert (code, plan["deadlocked"]) == (0, False), plan


def test_plan_asg__the_groups_history_refused__the_bound_and_why__on_stderr_too(
    world: World, refresh_order: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    world.aws.fail_action("autoscaling", "DescribeScalingActivities", "AccessDenied")

    code, plan = _plan(world, "--min-healthy-percentage", "0", "--timeout", "600")

    assert code == 1
    new_nodes = plan["refresh"]["new_nodes"]
    assert (new_nodes["basis"], new_nodes["wait_seconds"]) == ("bound", 600)
    assert new_nodes["detail"].startswith("the group's scaling activities could not be read (")
    assert "counted as the drain's --timeout (600 s), a bound" in new_nodes["detail"]
    err = capsys.readouterr().err
    assert "note: the wait for new nodes is a bound: " in err
    assert "autoscaling:DescribeScalingActivities" in err


# --- AWS refuses or cannot be reached: exit 3, one line (issue 40: 3 for access or
# connection problems, 2 is a usage error) ---------------------------------------------


def _plan_failed(world: World, capsys: pytest.CaptureFixture[str]) -> str:
    """The plan of the group, which AWS fails: exit 3 and its JSON error document;
    the one line stderr carries."""
    code, plan = _plan(world)
    assert (code, plan["result"], plan["exit_code"]) == (3, "error", 3), plan
    [line] = capsys.readouterr().err.splitlines()
    assert line == f"error: {plan['message']}"
    return line


@pytest.mark.parametrize(
    ("service", "action", "permission"),
    [
        ("autoscaling", "DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingGroups"),
        ("ec2", "DescribeInstances", "ec2:DescribeInstances"),
    ],
    ids=["the-group", "its-instances"],
)
def test_plan_asg__aws_denies_a_read__exit_3__the_call_and_the_permission_to_grant(
    world: World,
    refresh_order: list[str],
    capsys: pytest.CaptureFixture[str],
    service: str,
    action: str,
    permission: str,
) -> None:
    world.aws.fail_action(service, action, "AccessDenied")

    line = _plan_failed(world, capsys)

    assert f"{action} " in line and "access denied (AccessDenied)" in line, line
    assert f"grant {permission} to " in line, line


def test_plan_asg__no_aws_credentials__exit_3__says_how_to_give_them(
    world: World,
    refresh_order: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for source in (
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(source, raising=False)

    line = _plan_failed(world, capsys)

    assert "DescribeAutoScalingGroups eks-workers: no AWS credentials found" in line, line
    assert "AWS_PROFILE" in line


def test_plan_asg__aws_endpoint_unreachable__exit_3__after_botocores_retries__says_so(
    world: World,
    refresh_order: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket
    import types

    import botocore.endpoint

    with socket.socket() as closed:  # a port of this machine that nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    pauses: list[float] = []  # botocore's backoff between its retries, not slept
    monkeypatch.setattr(
        botocore.endpoint, "time", types.SimpleNamespace(sleep=pauses.append, time=time.time)
    )

    line = _plan_failed(world, capsys)

    assert "DescribeAutoScalingGroups eks-workers: EndpointConnectionError" in line, line
    assert "check the network path to the AWS endpoint" in line
    assert pauses, "botocore retried it first"


def test_plan_asg__no_aws_region__exit_3__says_where_to_set_it(
    world: World,
    refresh_order: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(variable)

    line = _plan_failed(world, capsys)

    assert "set AWS_REGION" in line, line
