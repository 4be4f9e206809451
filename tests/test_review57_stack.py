"""Review 57: the stack's custom resource (drainer/lifecycle/stack_hooks.py) against
requests that come late, out of order, or after the stack's settings moved on. Each
test shows one hook the stack put and then left behind, or an answer that loses what
the operator must do."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support import cfn
from test_hooks import CLUSTER, HOOK, TAG, Account
from test_stack_hooks import OURS, TAGGED, hooks_of, owner_of, send, settings

TAG_KEY = TAG.split("=")[0]


@pytest.fixture
def account(moto_aws: None) -> Iterator[Account]:
    yield Account()


@pytest.fixture
def answers() -> Iterator[cfn.ResponseServer]:
    with cfn.response_server() as server:
        yield server


class Stack:
    """CloudFormation's DescribeStacks of the function's own stack, in a given state."""

    def __init__(self, status: str) -> None:
        self.status = status

    def describe_stacks(self, StackName: str) -> dict[str, Any]:
        return {"Stacks": [{"StackId": StackName, "StackStatus": self.status}]}


def refuse(account: Account, action: str, *, after: int = 0) -> None:
    from awssim.apifaults import api_faults

    region = account.autoscaling.meta.region_name
    api_faults("123456789012", region).fail_next("autoscaling", action, "AccessDenied", after=after)


# --- 1. the rollback's Delete of a Create CloudFormation gave up on ---------------------


def test_rollback_delete_with_cloudformations_own_id__the_hooks_the_create_put_are_deleted(
    account: Account, answers: cfn.ResponseServer
) -> None:
    """CloudFormation cancels a custom resource's Create still in flight when another
    resource of the stack fails (or when its ServiceTimeout runs out: the answer was
    lost), and ignores its late SUCCESS. The rollback then sends a Delete whose
    PhysicalResourceId CloudFormation made up (no answer gave it one): e.g.
    "eks-node-drainer-LifecycleHooks-1KZ3W9Q0X7ABC" (cloudformation-coverage-roadmap
    #1814). Here the Create had already put its hooks and seen the stack still
    CREATE_IN_PROGRESS; the Delete, taken for "a replaced resource's cleanup" (the id
    never changes, so there is no such thing), deletes nothing: the hooks name a stack
    that is rolled back, and hold every termination of the groups for HeartbeatTimeout;
    the next deploy's Create fails on them ("already has a lifecycle hook")."""
    account.group("nodes-a")
    account.group("nodes-b")
    stack = Stack("CREATE_IN_PROGRESS")
    created = send(account, answers, "Create", settings(), cloudformation=stack)
    assert created["Status"] == "SUCCESS", created  # an answer CloudFormation ignored

    stack.status = "ROLLBACK_IN_PROGRESS"
    deleted = send(
        account,
        answers,
        "Delete",
        settings(),
        physical_id="eks-node-drainer-LifecycleHooks-1KZ3W9Q0X7ABC",
        cloudformation=stack,
    )

    assert deleted["Status"] == "SUCCESS", deleted
    assert hooks_of(account, "nodes-a") == {} and hooks_of(account, "nodes-b") == {}, (
        "the rolled-back stack's hooks were left on its groups: " + deleted["Reason"]
    )


# --- 2. the reason's by-hand commands cut off by a long list of deleted hooks ----------


def test_delete_of_many_groups__the_hook_to_delete_by_hand_still_named(
    account: Account, answers: cfn.ResponseServer
) -> None:
    """A Delete that may not delete this stack's hook on a group untagged by hand
    succeeds (not to block the stack's deletion) and is meant to name that hook with
    the command. The reason lists every hook deleted first; with a few dozen tagged
    groups that list alone passes _REASON_LIMIT, reply() cuts the tail, and the
    operator is never told that a hook naming the deleted stack is left holding every
    termination of that group for HeartbeatTimeout."""
    for i in range(40):
        account.tagged(f"cluster-prod-nodes-{i:02}")
    account.tagged("untagged-y")
    given = settings(allowed_asgs=(), asg_tag=TAG)
    properties = {**TAGGED, "AsgNames": ""}
    assert send(account, answers, "Create", given, properties=properties)["Status"] == "SUCCESS"
    account.autoscaling.delete_tags(
        Tags=[{"ResourceId": "untagged-y", "ResourceType": "auto-scaling-group", "Key": TAG_KEY}]
    )
    refuse(account, "DeleteLifecycleHook", after=40)  # the 40 tagged groups' go through

    deleted = send(account, answers, "Delete", given, physical_id=OURS)

    assert deleted["Status"] == "SUCCESS", deleted
    assert owner_of(account, "untagged-y") == cfn.STACK_ID
    assert "deleted 40 hook(s)" in deleted["Reason"]
    assert (
        "aws autoscaling delete-lifecycle-hook --auto-scaling-group-name untagged-y"
        in deleted["Reason"]
    ), deleted["Reason"][-300:]


# --- 3. an Update of ClusterName leaves the old cluster's tagged groups hooked --------


def test_update_of_cluster_name__the_old_clusters_tagged_groups_lose_this_stacks_hook(
    account: Account, answers: cfn.ResponseServer
) -> None:
    """A stack moved to a new cluster (blue/green: ClusterName prod -> prod-2, the same
    AsgTag on both clusters' groups). The old cluster's tagged groups are no longer
    admitted (tagged for another cluster), yet keep this stack's hooks: the function
    refuses their actions (the hook names cluster prod), so each of their terminations
    waits HeartbeatTimeout, undrained. _untagged runs only when the tag changed,
    _left_alone only for managed node groups; the stack's Delete skips them too
    (_elsewhere leaves out groups tagged for another cluster)."""
    account.tagged("old-nodes", **{"eks:cluster-name": CLUSTER})
    account.tagged("new-nodes", **{"eks:cluster-name": "prod-2"})
    before = {**TAGGED, "AsgNames": ""}
    given = settings(allowed_asgs=(), asg_tag=TAG)
    assert send(account, answers, "Create", given, properties=before)["Status"] == "SUCCESS"
    assert owner_of(account, "old-nodes") == cfn.STACK_ID

    after = {**before, "ClusterName": "prod-2"}
    updated = send(
        account,
        answers,
        "Update",
        settings(allowed_asgs=(), asg_tag=TAG, cluster_name="prod-2"),
        properties=after,
        old=before,
        physical_id=OURS,
    )

    assert updated["Status"] == "SUCCESS", updated
    assert json.loads(hooks_of(account, "new-nodes")[HOOK])["cluster_name"] == "prod-2"
    assert HOOK not in hooks_of(account, "old-nodes"), (
        "this stack's hook, naming the old cluster, left on a group it no longer covers: "
        + updated["Reason"]
    )
