"""make deploy with no unsafe window, on both backends: the stack comes up with its
lifecycle hooks off, k8s-rbac/ is applied, the function proves by its self-check,
as its own identity, that it can drain, and only then are the hooks turned on.
moto plays AWS; awssim runs the function's synchronous invocations in process
(moto would need Docker), with the real handler against the world's cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from deploy.test_deploy_script import prebuilt_zip

from awssim.invocations import run_synchronously
from drainer import handler
from testbed import World
from tools import deploy

STACK = "drainer-flow"
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")


@pytest.fixture
def function(world: World, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The stack's function, run by the real handler with the environment the stack
    gave it (the world's over it); what it answered."""
    answered: list[Any] = []

    def run(payload: object) -> object:
        configuration = boto3.client("lambda", region_name="us-east-1").get_function(
            FunctionName=STACK
        )["Configuration"]
        stack_env = configuration.get("Environment", {}).get("Variables", {})
        for key, value in {**{k: str(v) for k, v in stack_env.items()}, **world.env()}.items():
            monkeypatch.setenv(key, value)
        handler.reset()
        answer = handler.lambda_handler(payload, None)
        answered.append(answer)
        return answer

    run_synchronously(STACK, run)
    yield answered
    run_synchronously(STACK, None)
    # make deploy's APPLY_RBAC made these outside the world's record: the next test
    # on a shared control plane must not find them.
    world.cluster.delete("ClusterRoleBinding", "eks-node-drainer")
    world.cluster.delete("ClusterRole", "eks-node-drainer")
    for kind in ("RoleBinding", "Role", "ConfigMap"):
        world.cluster.delete(kind, "eks-node-drainer-observed", "kube-system")


def _deploy(
    world: World,
    tmp_path: Path,
    said: list[str],
    sleep: Any = None,
    **options: Any,
) -> int:
    return deploy.deploy(
        deploy.Options(
            stack_name=STACK,
            cluster_name=world.cluster_name,
            asg_names=world.group.asg_name,
            region=world.region,
            zip_path=prebuilt_zip(tmp_path),
            overrides=(f"LifecycleHookName={world.group.hook_name}",),
            poll_seconds=0.01,
            yes=True,  # no person here to answer the change set's question
            **options,
        ),
        said.append,
        sleep=sleep or (lambda seconds: None),
    )


def _hooks_parameter() -> str:
    stack = boto3.client("cloudformation", region_name="us-east-1").describe_stacks(
        StackName=STACK
    )["Stacks"][0]
    return {p["ParameterKey"]: p["ParameterValue"] for p in stack["Parameters"]}[
        "CreateLifecycleHooks"
    ]


def _index(said: list[str], text: str) -> int:
    return next(i for i, line in enumerate(said) if text in line)


@pytest.mark.parametrize("world", [{"rbac": []}], indirect=True)
def test_new_stack__hooks_off__rbac_applied__self_check__then_hooks_on(
    world: World, function: list[Any], tmp_path: Path
) -> None:
    said: list[str] = []

    code = _deploy(
        world, tmp_path, said, apply_rbac=True, kubeconfig=str(world.cluster.kubeconfig),
        context="admin",
    )  # fmt: skip

    assert code == 0, "\n".join(said)
    order = [
        _index(said, "the lifecycle hooks stay off"),
        _index(said, "creating stack drainer-flow"),
        _index(said, "applied k8s-rbac/"),
        _index(said, "self-check passed: can drain in cluster"),
        _index(said, "turning the lifecycle hooks on"),
        _index(said, "updating stack drainer-flow"),
        _index(said, "lifecycle hooks in place on 1 group(s)"),
    ]
    assert order == sorted(order), "\n".join(said)
    # The hooks synced at once, by the function the stack now configures. The world's
    # hook of the same name (300 s, ABANDON) was put before the stack, by someone else:
    # the function leaves it as it is, and make deploy says so.
    assert [a["result"] for a in function] == ["check_passed", "hooks_synced"]
    assert function[1]["hooks_updated"] == {}
    assert list(function[1]["not_ours"]) == [world.group.asg_name]
    assert (
        f"  warning: {world.group.asg_name} has a hook of that name this stack did not put"
        in (said[-2])
    )
    (hook,) = boto3.client("autoscaling", region_name="us-east-1").describe_lifecycle_hooks(
        AutoScalingGroupName=world.group.asg_name
    )["LifecycleHooks"]
    assert (hook["HeartbeatTimeout"], hook["DefaultResult"]) == (300, "ABANDON")
    assert _hooks_parameter() == "true"


@pytest.mark.parametrize("world", [{"rbac": []}], indirect=True)
def test_rbac_never_applied__stack_left_with_hooks_off__says_what_to_do(
    world: World, function: list[Any], tmp_path: Path
) -> None:
    said: list[str] = []

    with pytest.raises(deploy.DeployError) as stopped:
        _deploy(world, tmp_path, said, check_wait_seconds=0.0)

    message = str(stopped.value)
    assert "lifecycle hooks OFF" in message
    assert "not allowed to get nodes" in message
    assert "kubectl apply -f k8s-rbac/" in message
    assert [a["result"] for a in function] == ["check_failed"]
    assert _hooks_parameter() == "false"


def test_rbac_applied_by_hand_while_waiting__hooks_on_after_it(
    world: World, function: list[Any], tmp_path: Path
) -> None:
    """The person applies the RBAC while make deploy waits for it (here: the role's
    binding appears after the first self-check failed)."""
    binding = world.cluster.get("ClusterRoleBinding", "eks-node-drainer")
    world.cluster.delete("ClusterRoleBinding", "eks-node-drainer")
    said: list[str] = []
    sleeps: list[float] = []

    def person_applies(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 1:
            binding["metadata"] = {"name": "eks-node-drainer"}
            world.cluster.apply(binding)

    code = _deploy(world, tmp_path, said, person_applies, check_poll_seconds=10.0)

    assert code == 0, "\n".join(said)
    assert [a["result"] for a in function] == ["check_failed", "check_passed", "hooks_synced"]
    assert sleeps[:1] == [10.0]
    assert any("waiting for the RBAC: run, as a cluster admin" in line for line in said)
    assert _hooks_parameter() == "true"
