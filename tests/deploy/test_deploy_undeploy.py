"""make undeploy (tools/undeploy.py): the stack goes, then the hooks its function
kept; another tool's hook of the same name stays; without --yes nothing changes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from awssim.world import create_node_group
from tools import undeploy
from tools.common import connect

from .conftest import ASGS, CLUSTER, STACK, MotoStack

HOOK = "eks-node-drainer"  # LifecycleHookName's default


@pytest.fixture
def groups(moto_stack: MotoStack) -> dict[str, str]:
    """The stack's two named groups, the first with this stack's hook, the second
    with a hook of the same name that names the cluster but no stack (0.1.0's, or
    another stack's); a third group, no longer the stack's, with this stack's hook."""
    ec2, autoscaling = moto_stack.client("ec2"), moto_stack.client("autoscaling")
    stack_id = moto_stack.client("cloudformation").describe_stacks(StackName=STACK)["Stacks"][0][
        "StackId"
    ]
    ours = {"cluster_name": CLUSTER, "stack_id": stack_id}
    made = {
        ASGS[0]: ours,
        ASGS[1]: {"cluster_name": CLUSTER},
        "not-listed": ours,
    }
    for name, metadata in made.items():
        create_node_group(
            ec2,
            autoscaling,
            asg_name=name,
            size=0,
            hook_name=HOOK,
            cluster_name=metadata["cluster_name"],
            notification_metadata=json.dumps(metadata),
        )
    return {name: metadata["cluster_name"] for name, metadata in made.items()}


def _hooks(moto_stack: MotoStack, group: str) -> list[str]:
    found = moto_stack.client("autoscaling").describe_lifecycle_hooks(AutoScalingGroupName=group)
    return [h["LifecycleHookName"] for h in found["LifecycleHooks"]]


def _undeploy(**options: Any) -> tuple[int, list[str]]:
    """make undeploy of STACK with `options` (undeploy.Options'), and its lines."""
    lines: list[str] = []
    status = undeploy.undeploy(
        connect("us-east-1"), undeploy.Options(stack_name=STACK, **options), lines.append
    )
    return status, lines


def _stacks(moto_stack: MotoStack) -> list[str]:
    listed = moto_stack.client("cloudformation").list_stacks()["StackSummaries"]
    return [s["StackName"] for s in listed if s["StackStatus"] != "DELETE_COMPLETE"]


def test_dry_run__says_what_it_would_delete__deletes_nothing(
    moto_stack: MotoStack, groups: dict[str, str]
) -> None:
    status, lines = _undeploy()

    assert status == 0
    text = "\n".join(lines)
    assert f"hook {HOOK} on 1 group(s): {ASGS[0]}" in text
    why = f"its NotificationMetadata names {CLUSTER} and no stack"
    assert f"left alone: {HOOK} on {ASGS[1]} ({why})" in text
    assert "dry run: nothing deleted" in text
    assert STACK in _stacks(moto_stack)
    assert _hooks(moto_stack, ASGS[0]) == [HOOK]


def test_yes__stack_deleted_then_its_hooks__others_left(
    moto_stack: MotoStack, groups: dict[str, str]
) -> None:
    status, lines = _undeploy(yes=True, poll_seconds=0.01)

    assert status == 0, lines
    assert STACK not in _stacks(moto_stack)
    assert _hooks(moto_stack, ASGS[0]) == [], "the stack's hook is left behind"
    assert _hooks(moto_stack, ASGS[1]) == [HOOK], "a hook that names no stack was deleted"
    assert _hooks(moto_stack, "not-listed") == [], "the stack's hook on a group it left"
    assert f"deleted hook {HOOK} on {ASGS[0]}" in lines


def test_no_such_stack__exit_4_nothing_touched(
    moto_aws: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    status = undeploy.main(["--stack-name", "nowhere", "--yes"])

    assert status == 4
    assert "no stack nowhere in this region; nothing to undeploy" in capsys.readouterr().err


def test_parse_args__dry_run_unless_yes() -> None:
    options: Any = undeploy.parse_args([])
    assert (options.stack_name, options.yes) == ("", False)  # the cluster's: tools/stacks.py
    assert undeploy.parse_args(["--yes", "--stack-name", "x"]).yes is True


@pytest.mark.parametrize("moto_stack", [{"LaunchHook": "true"}], indirect=True)
def test_yes__with_the_launch_hook__both_hooks_deleted(
    moto_stack: MotoStack, groups: dict[str, str]
) -> None:
    autoscaling = moto_stack.client("autoscaling")
    (ours,) = autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=ASGS[0])["LifecycleHooks"]
    autoscaling.put_lifecycle_hook(
        AutoScalingGroupName=ASGS[0],
        LifecycleHookName="eks-node-drainer-launch",
        LifecycleTransition="autoscaling:EC2_INSTANCE_LAUNCHING",
        HeartbeatTimeout=300,
        DefaultResult="CONTINUE",
        NotificationMetadata=ours["NotificationMetadata"],  # names this stack
    )
    status, lines = _undeploy(yes=True, poll_seconds=0.01)

    assert status == 0, lines
    assert _hooks(moto_stack, ASGS[0]) == [], "a hook of the stack's is left behind"
    assert f"deleted launch hook eks-node-drainer-launch on {ASGS[0]}" in lines


def test_yes__a_stack_deployed_with_both_hook_names_equal__its_hook_deleted(
    moto_stack: MotoStack, groups: dict[str, str]
) -> None:
    """A stack deployed before LAUNCH_HOOK_NAME had to differ from LIFECYCLE_HOOK_NAME
    (the settings refuse the pair now): undeploy still reads its function's settings."""
    stack = undeploy.the_stack(moto_stack.client("cloudformation"), STACK)
    name = undeploy.function_name(undeploy.stack_outputs(stack), STACK)
    lambda_client = moto_stack.client("lambda")
    variables = lambda_client.get_function_configuration(FunctionName=name)["Environment"]
    same = {k: str(v) for k, v in variables["Variables"].items()}
    same |= {"LIFECYCLE_HOOK_NAME": HOOK, "LAUNCH_HOOK_NAME": HOOK}
    lambda_client.update_function_configuration(FunctionName=name, Environment={"Variables": same})
    status, lines = _undeploy(yes=True, poll_seconds=0.01)

    assert status == 0, lines
    assert _hooks(moto_stack, ASGS[0]) == [], "the stack's hook is left behind"


@pytest.fixture
def uncovered(moto_stack: MotoStack, groups: dict[str, str]) -> str:
    """A group the stack no longer covers (untagged by hand, no cluster tag) with
    this stack's hook; another cluster's group with a hook naming this stack too,
    which the look leaves alone (ASG_TAG never admitted it). The first's name."""
    ec2, autoscaling = moto_stack.client("ec2"), moto_stack.client("autoscaling")
    (ours,) = autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=ASGS[0])["LifecycleHooks"]
    for name, cluster, tag in (
        ("untagged-by-hand", CLUSTER, ""),
        ("another-cluster", "staging", "eks:cluster-name"),
    ):
        create_node_group(
            ec2,
            autoscaling,
            asg_name=name,
            size=0,
            hook_name=HOOK,
            cluster_name=cluster,
            cluster_tag=tag,
            notification_metadata=ours["NotificationMetadata"],  # names this stack
        )
    return "untagged-by-hand"


def test_yes__the_stacks_hook_on_an_uncovered_group__deleted_another_clusters_left(
    moto_stack: MotoStack, uncovered: str
) -> None:
    status, lines = _undeploy(yes=True, poll_seconds=0.01)

    assert status == 0, lines
    assert _hooks(moto_stack, uncovered) == [], "the stack's hook on an uncovered group is left"
    assert _hooks(moto_stack, "another-cluster") == [HOOK], "another cluster's group was touched"
    assert f"deleted hook {HOOK} on {uncovered} (a group the stack does not cover)" in lines


def test_dry_run__lists_the_stacks_hooks_on_uncovered_groups(
    moto_stack: MotoStack, uncovered: str
) -> None:
    status, lines = _undeploy()

    assert status == 0
    text = "\n".join(lines)
    assert f"hook {HOOK} on 2 group(s) the stack does not cover: not-listed, {uncovered}" in text
    assert "another-cluster" not in text
    assert _hooks(moto_stack, uncovered) == [HOOK]


def test_yes__out_of_time__the_uncovered_groups_named_not_looked_at(
    moto_stack: MotoStack, uncovered: str
) -> None:
    status, lines = _undeploy(yes=True, poll_seconds=0.01, look_seconds=0.0)

    assert status == 0, lines
    assert _hooks(moto_stack, uncovered) == [HOOK]
    text = "\n".join(lines)
    assert f"2 group(s) the stack does not cover not looked at: not-listed, {uncovered}" in text
