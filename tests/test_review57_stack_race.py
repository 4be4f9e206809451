"""Review 57: the stack's custom resource (drainer/lifecycle/stack_hooks.py) and the hook
sync against time: a Create on many groups of a throttled account must answer within
the resource's ServiceTimeout, and a sync already running when the stack's Delete
removes the hooks must not put one back. (The other tests of review 57 are in
tests/test_review57_stack.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support import cfn
from test_hooks import CLUSTER, HOOK, TAG, Account
from test_stack_hooks import OURS, PROPERTIES, TAGGED, hooks_of, send, settings


@pytest.fixture
def account(moto_aws: None) -> Iterator[Account]:
    yield Account()


@pytest.fixture
def answers() -> Iterator[cfn.ResponseServer]:
    with cfn.response_server() as server:
        yield server


# --- 1. the ServiceTimeout: a Create's sync has no deadline -------------------------------


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
    from types import SimpleNamespace

    from drainer import aws
    from drainer.lifecycle import hooks, stack_hooks

    for i in range(120):
        account.tagged(f"nodes-{i:03}")
    clock = [1000.0]
    fake_time = SimpleNamespace(monotonic=lambda: clock[0], time=lambda: clock[0])
    monkeypatch.setattr(stack_hooks, "time", fake_time)
    monkeypatch.setattr(hooks, "time", fake_time)

    def slow(**_: Any) -> None:
        clock[0] += 0.5

    account.autoscaling.meta.events.register("before-call.autoscaling", slow)
    answered_at: list[float] = []
    original = aws.answer_custom_resource

    def timed(url: str, body: Any, **kw: Any) -> None:
        answered_at.append(clock[0])
        original(url, body, **kw)

    monkeypatch.setattr(aws, "answer_custom_resource", timed)
    given = settings(allowed_asgs=(), asg_tag=TAG, launch_hook=True)
    started = clock[0]

    send(account, answers, "Create", given, properties={**TAGGED, "AsgNames": ""})

    (at,) = answered_at
    assert at - started < 300, f"answered {at - started:.0f} s after the request: too late"


# --- 2. a hook sync in flight while the stack's Delete runs puts a hook back ------------


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
    import boto3

    from drainer import aws, handler
    from drainer.lifecycle import stack_hooks
    from drainer.lifecycle.events import StackRequest, parse_event

    cloudformation = boto3.client("cloudformation", region_name="us-east-1")
    stack_id = cloudformation.create_stack(
        StackName="eks-node-drainer",
        TemplateBody=json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}),
    )["StackId"]
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
