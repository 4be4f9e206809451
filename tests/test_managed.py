"""EKS managed node groups (drainer/lifecycle/managed.py) against moto: the hook
sync and the stack's custom resource leave them alone unless
ALLOW_MANAGED_NODE_GROUPS, and never touch EKS's own hooks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support import cfn
from test_hooks import CLUSTER, HOOK, TAG, Account

from drainer.lifecycle import hooks, managed, stack_hooks
from drainer.lifecycle.events import StackRequest, parse_event
from drainer.lifecycle.settings import Settings

MANAGED_TAGS = {"eks:nodegroup-name": "ng-1", "eks:cluster-name": CLUSTER}


@pytest.fixture
def account(moto_aws: None) -> Iterator[Account]:
    yield Account()


def managed_group(account: Account, name: str, **more: str) -> str:
    """A managed node group's Auto Scaling group, with EKS's own terminate hook."""
    account.group(name, **MANAGED_TAGS, **more)
    account.autoscaling.put_lifecycle_hook(
        AutoScalingGroupName=name, LifecycleHookName="Terminate-LC-Hook",
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING", HeartbeatTimeout=1800,
        DefaultResult="CONTINUE",
    )  # fmt: skip
    account.puts.clear()  # EKS's, not the sync's
    return name


def hook_names(account: Account, group: str) -> set[str]:
    found = account.autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=group)
    return {h["LifecycleHookName"] for h in found["LifecycleHooks"]}


def settings(**values: Any) -> Settings:
    return Settings(**({"cluster_name": CLUSTER} | values))


@pytest.mark.parametrize(
    "given",
    [{"asg_tag": TAG}, {"allowed_asgs": ("eks-ng-1", "self-managed")}],
    ids=["tagged", "named"],
)
def test_sync__managed_group_left_alone_saying_why__eks_hook_untouched(
    account: Account, given: dict[str, Any]
) -> None:
    managed_group(account, "eks-ng-1", **{"eks-node-drainer/enabled": "true"})
    account.tagged("self-managed")

    sync = hooks.sync_hooks(account.autoscaling, settings(**given))

    assert sync.covered == ("self-managed",)
    assert sync.skipped["eks-ng-1"].startswith("EKS managed node group ng-1")
    assert "ALLOW_MANAGED_NODE_GROUPS" in sync.skipped["eks-ng-1"]
    assert hook_names(account, "eks-ng-1") == {"Terminate-LC-Hook"}
    assert account.put_groups() == ["self-managed"]


def test_sync__allowed__our_hook_beside_eks_own(account: Account) -> None:
    managed_group(account, "eks-ng-1", **{"eks-node-drainer/enabled": "true"})

    sync = hooks.sync_hooks(
        account.autoscaling, settings(asg_tag=TAG, allow_managed_node_groups=True)
    )

    assert sync.covered == ("eks-ng-1",)
    assert hook_names(account, "eks-ng-1") == {"Terminate-LC-Hook", HOOK}


def _create(account: Account, given: Settings, asg_names: str) -> dict[str, Any]:
    with cfn.response_server() as answers:
        properties = {"ClusterName": CLUSTER, "AsgNames": asg_names, "LifecycleHookName": HOOK}
        request = parse_event(cfn.request("Create", answers.next_url(), properties))
        assert isinstance(request, StackRequest)
        stack_hooks.handle(request, account.autoscaling, given)
        return answers.answers[-1].body


def test_custom_resource_create__named_managed_group__failed_naming_it__no_hook_put(
    account: Account,
) -> None:
    managed_group(account, "eks-ng-1")
    account.group("self-managed", **{"eks:cluster-name": CLUSTER})

    answer = _create(account, settings(allowed_asgs=("eks-ng-1", "self-managed")), "x")

    assert answer["Status"] == "FAILED", answer
    assert "eks-ng-1" in answer["Reason"] and "AllowManagedNodeGroups=true" in answer["Reason"]
    assert "no hook was put" in answer["Reason"]
    assert hook_names(account, "eks-ng-1") == {"Terminate-LC-Hook"}
    assert hook_names(account, "self-managed") == set()


def test_custom_resource_create__named_managed_group_allowed__hooked(account: Account) -> None:
    managed_group(account, "eks-ng-1")
    given = settings(allowed_asgs=("eks-ng-1",), allow_managed_node_groups=True)

    answer = _create(account, given, "eks-ng-1")

    assert answer["Status"] == "SUCCESS", answer
    assert hook_names(account, "eks-ng-1") == {"Terminate-LC-Hook", HOOK}


@pytest.mark.parametrize(
    ("tags", "hook_names_", "expected"),
    [
        ({"eks:nodegroup-name": "ng-1"}, (), "ng-1"),
        ({}, ("Terminate-LC-Hook",), "(unnamed)"),
        ({}, ("Launch-LC-Hook", "eks-node-drainer"), "(unnamed)"),
        ({"eks:cluster-name": "prod"}, ("eks-node-drainer",), ""),
    ],
)
def test_nodegroup__by_tag_or_by_eks_hooks(
    tags: dict[str, str], hook_names_: tuple[str, ...], expected: str
) -> None:
    assert managed.nodegroup(tags, hook_names_) == expected
