"""Review 57: the stack's custom resource (drainer/lifecycle/stack_hooks.py) against
requests that come late, out of order, or after the stack's settings moved on. Each
test shows one hook the stack put and then left behind, or an answer that loses what
the operator must do; the last two, time: a Create on many groups of a throttled
account answered within the ServiceTimeout, and a sync in flight during the Delete."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support import cfn
from test_hooks import CLUSTER, HOOK, TAG, Account
from test_stack_hooks import OURS, PROPERTIES, TAGGED, hooks_of, own_stack, owner_of, send, settings

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


class Throttled:
    """A throttled account on a clock of its own: each Auto Scaling call takes `pace`
    seconds (botocore's retries), the custom resource's time reads that clock, and the
    moments its answers are sent are kept."""

    def __init__(self, account: Account, monkeypatch: pytest.MonkeyPatch, pace: float) -> None:
        from types import SimpleNamespace

        from drainer import aws
        from drainer.lifecycle import hooks, stack_hooks

        self.clock = [1000.0]
        self.started = self.clock[0]
        self.answered_at: list[float] = []
        self._account = account
        fake_time = SimpleNamespace(monotonic=lambda: self.clock[0], time=lambda: self.clock[0])
        monkeypatch.setattr(stack_hooks, "time", fake_time)
        monkeypatch.setattr(hooks, "time", fake_time)
        account.autoscaling.meta.events.register("before-call.autoscaling", self._slow)
        self._pace = pace
        original = aws.answer_custom_resource

        def timed(url: str, body: Any, **kw: Any) -> None:
            self.answered_at.append(self.clock[0])
            original(url, body, **kw)

        monkeypatch.setattr(aws, "answer_custom_resource", timed)

    def _slow(self, **_: Any) -> None:
        self.clock[0] += self._pace

    def stop(self) -> None:
        """Calls take no time from here."""
        self._account.autoscaling.meta.events.unregister("before-call.autoscaling", self._slow)


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


# --- 4. the ServiceTimeout: a Create's sync has no deadline -------------------------------


def test_create_on_many_groups__answered_within_the_service_timeout(
    account: Account, answers: cfn.ResponseServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resource's ServiceTimeout is 300 s (template.yaml): an answer later than that
    is ignored, the Create fails as timed out, and the stack rolls back. Only the looks
    of a Delete and an Update are bounded (LOOK_SECONDS); a Create reads every covered
    group's hooks twice (others_hooks, then _keep_hooks) and puts each, one call per
    group and name, without any deadline. 120 tagged groups with the launch hook, each
    Auto Scaling call taking 0.5 s (a throttled account, botocore's standard retries):
    the answer goes out after some 360 s, when CloudFormation no longer waits."""
    for i in range(120):
        account.tagged(f"nodes-{i:03}")
    throttled = Throttled(account, monkeypatch, pace=0.5)
    given = settings(allowed_asgs=(), asg_tag=TAG, launch_hook=True)

    send(account, answers, "Create", given, properties={**TAGGED, "AsgNames": ""})

    (at,) = throttled.answered_at
    started = throttled.started
    assert at - started < 300, f"answered {at - started:.0f} s after the request: too late"


# --- 5. a hook sync in flight while the stack's Delete runs puts a hook back ------------


def test_sync_running_through_the_stacks_delete__puts_no_hook_back(
    account: Account, answers: cfn.ResponseServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schedule and the API-call rule are deleted before the custom resource, "so
    neither puts a hook back once the Delete has removed them" (stack_hooks' docstring).
    That holds for the invocations they start after; not for one already running (a
    sync over many groups takes tens of seconds; a queued asynchronous event may start
    late). Here the scheduled sync has read nodes-a's hook when the stack's Delete
    removes both; the sync then finds nodes-b's missing and puts it back. The function
    is deleted next: the hook names a stack that no longer exists and holds every
    termination of nodes-b for HeartbeatTimeout, for good."""

    from drainer import aws, handler
    from drainer.lifecycle import stack_hooks
    from drainer.lifecycle.events import StackRequest, parse_event

    cloudformation, stack_id = own_stack()
    account.group("nodes-a")
    account.group("nodes-b")
    ours = settings(stack_id=stack_id)
    created = send(account, answers, "Create", ours, stack_id=stack_id)
    assert created["Status"] == "SUCCESS", created

    described = aws.describe_hook
    deleted: list[dict[str, Any]] = []

    def stack_deleted_meanwhile(autoscaling: Any, group: str, name: str) -> Any:
        if group == "nodes-b" and not deleted:
            deleted.append({})  # the stack's deletion: the rules, then the resource
            cloudformation.delete_stack(StackName=stack_id)
            event = cfn.request("Delete", answers.next_url(), PROPERTIES, physical_id=OURS,
                                stack_id=stack_id)  # fmt: skip
            request = parse_event(event)
            assert isinstance(request, StackRequest)
            deleted[0] = stack_hooks.handle(request, account.autoscaling, ours, cloudformation)
        return described(autoscaling, group, name)

    monkeypatch.setattr(aws, "describe_hook", stack_deleted_meanwhile)
    monkeypatch.setenv("CLUSTER_NAME", CLUSTER)
    monkeypatch.setenv("ALLOWED_ASGS", "nodes-a,nodes-b")
    monkeypatch.setenv("STACK_ID", stack_id)
    handler.reset()
    try:
        handler.lambda_handler({"source": "aws.events", "detail-type": "Scheduled Event"}, None)
    finally:
        handler.reset()

    assert deleted and deleted[0]["Status"] == "SUCCESS", deleted
    assert hooks_of(account, "nodes-a") == {}
    assert HOOK not in hooks_of(account, "nodes-b"), (
        "the deleted stack's hook put back by its own sync after the Delete removed it"
    )


# --- 6. the ServiceTimeout: a Delete's removals had no deadline ---------------------------


def test_delete_on_many_groups__answered_within_the_service_timeout__again_goes_on(
    account: Account, answers: cfn.ResponseServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Create's and an Update's puts stop at WORK_SECONDS (review 57); a Delete's
    removals did not: one DescribeLifecycleHooks and one DeleteLifecycleHook for each
    group and name, 60 tagged groups with the launch hook on a throttled account (1.5 s
    a call) answered after some 370 s, past the resource's ServiceTimeout (300 s):
    CloudFormation no longer waited, the Delete failed as timed out, saying nothing of
    which hooks were left. Now it answers FAILED within the timeout, naming what is
    left and that deleting the stack again goes on where it stopped; and it does."""
    groups = [f"nodes-{i:03}" for i in range(60)]
    for group in groups:
        account.tagged(group)
    given = settings(allowed_asgs=(), asg_tag=TAG, launch_hook=True)
    properties = {**TAGGED, "AsgNames": ""}
    created = send(account, answers, "Create", given, properties=properties)
    assert created["Status"] == "SUCCESS", created
    throttled = Throttled(account, monkeypatch, pace=1.5)
    started = throttled.started

    deleted = send(account, answers, "Delete", given, properties=properties, physical_id=OURS)

    (at,) = throttled.answered_at
    assert at - started < 300, f"answered {at - started:.0f} s after the request: too late"
    assert deleted["Status"] == "FAILED", deleted
    assert "delete the stack again" in deleted["Reason"].lower(), deleted["Reason"]
    assert "not reached" in deleted["Reason"], "what is left, named"
    left = [g for g in groups if owner_of(account, g) is not None]
    assert left, "all deleted in time: the test's pace no longer shows the bound"
    throttled.stop()

    again = send(account, answers, "Delete", given, properties=properties, physical_id=OURS)

    assert again["Status"] == "SUCCESS", again
    assert not [g for g in groups if hooks_of(account, g)], "a hook of ours left behind"
