"""The stack owns its hooks (drainer/lifecycle/stack_hooks.py): the custom resource's
Create, Update and Delete against moto's Auto Scaling, answered to a local
ResponseURL. tests/deploy/test_deploy_custom_resource.py runs the same requests
through the Lambda runtime."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support import cfn
from test_hooks import CLUSTER, HOOK, Account

from drainer import handler
from drainer.lifecycle import stack_hooks
from drainer.lifecycle.events import StackRequest, parse_event
from drainer.lifecycle.settings import Settings

LAUNCH = "eks-node-drainer-launch"
PROPERTIES = {"ClusterName": CLUSTER, "AsgNames": "nodes-a,nodes-b", "LifecycleHookName": HOOK}


@pytest.fixture
def account(moto_aws: None) -> Iterator[Account]:
    yield Account()


@pytest.fixture
def answers() -> Iterator[cfn.ResponseServer]:
    with cfn.response_server() as server:
        yield server


def settings(**values: Any) -> Settings:
    return Settings(**({"cluster_name": CLUSTER, "allowed_asgs": ("nodes-a", "nodes-b")} | values))


def hooks_of(account: Account, group: str) -> dict[str, str]:
    found = account.autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=group)
    return {
        h["LifecycleHookName"]: h.get("NotificationMetadata", "") for h in found["LifecycleHooks"]
    }


def send(
    account: Account,
    answers: cfn.ResponseServer,
    kind: str,
    given: Settings,
    **more: Any,
) -> dict[str, Any]:
    event = cfn.request(kind, answers.next_url(), PROPERTIES, **more)
    request = parse_event(event)
    assert isinstance(request, StackRequest)
    stack_hooks.handle(request, account.autoscaling, given)
    answer = answers.answers[-1]
    assert answer.path.startswith("/cloudformation-custom-resource-response/")
    assert answer.content_type in (None, ""), "a presigned S3 URL refuses a Content-Type"
    assert answer.body["RequestId"] == event["RequestId"]
    assert answer.body["StackId"] == cfn.STACK_ID
    assert answer.body["LogicalResourceId"] == "LifecycleHooks"
    return answer.body


def test_create__hooks_put__then_delete__ours_gone__anothers_stays(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")
    account.group("nodes-b")
    account.group("elsewhere")
    account.put_hook("elsewhere")  # same name and metadata, a group the stack never named

    created = send(account, answers, "Create", settings())
    assert created["Status"] == "SUCCESS", created
    assert created["PhysicalResourceId"] == "eks-node-drainer-lifecycle-hooks"
    assert HOOK in hooks_of(account, "nodes-a") and HOOK in hooks_of(account, "nodes-b")
    # Another tool's hook of the same name on a group the stack covers.
    account.autoscaling.delete_lifecycle_hook(
        AutoScalingGroupName="nodes-b", LifecycleHookName=HOOK
    )
    account.put_hook("nodes-b", NotificationMetadata=json.dumps({"cluster_name": "other"}))

    deleted = send(
        account, answers, "Delete", settings(), physical_id=created["PhysicalResourceId"]
    )

    assert deleted["Status"] == "SUCCESS", deleted
    assert deleted["PhysicalResourceId"] == created["PhysicalResourceId"]
    assert hooks_of(account, "nodes-a") == {}
    assert HOOK in hooks_of(account, "nodes-b"), "another cluster's hook was deleted"
    assert HOOK in hooks_of(account, "elsewhere"), "a group the stack never covered"
    assert "left to their owners: nodes-b/eks-node-drainer" in deleted["Reason"]


def test_delete__a_group_deleted_since__success(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")
    account.group("nodes-b")
    send(account, answers, "Create", settings())
    account.autoscaling.delete_auto_scaling_group(AutoScalingGroupName="nodes-b", ForceDelete=True)

    deleted = send(account, answers, "Delete", settings(), physical_id="x")

    assert deleted["Status"] == "SUCCESS", deleted
    assert hooks_of(account, "nodes-a") == {}


def test_create__a_named_group_missing__failed_naming_it(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")

    created = send(account, answers, "Create", settings())

    assert created["Status"] == "FAILED"
    assert "no Auto Scaling group named nodes-b (check AsgNames)" in created["Reason"]


def test_update__launch_hook_off_and_hook_renamed__the_old_ones_deleted(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")
    account.group("nodes-b")
    send(account, answers, "Create", settings(launch_hook=True))
    assert set(hooks_of(account, "nodes-a")) == {HOOK, LAUNCH}

    updated = send(
        account,
        answers,
        "Update",
        settings(lifecycle_hook_name="drainer-v2", allowed_asgs=("nodes-a",)),
        old={**PROPERTIES, "LaunchHook": "true", "LaunchHookName": LAUNCH},
        physical_id="eks-node-drainer-lifecycle-hooks",
    )

    assert updated["Status"] == "SUCCESS", updated
    assert set(hooks_of(account, "nodes-a")) == {"drainer-v2"}
    assert hooks_of(account, "nodes-b") == {}, "a group no longer named keeps our hooks"


def test_update__a_named_group_deleted_since__success_saying_so(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")

    updated = send(account, answers, "Update", settings(), old=PROPERTIES, physical_id="x")

    assert updated["Status"] == "SUCCESS", updated
    assert "gone: nodes-b" in updated["Reason"]


def test_hooks_not_ours__nothing_touched(account: Account, answers: cfn.ResponseServer) -> None:
    account.group("nodes-a")
    account.put_hook("nodes-a")

    deleted = send(account, answers, "Delete", settings(create_lifecycle_hooks=False))

    assert deleted["Status"] == "SUCCESS"
    assert HOOK in hooks_of(account, "nodes-a")


@pytest.mark.parametrize(("kind", "status"), [("Create", "FAILED"), ("Delete", "SUCCESS")])
def test_settings_unreadable__answered_not_left_to_time_out(
    kind: str,
    status: str,
    answers: cfn.ResponseServer,
    moto_aws: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLUSTER_NAME", CLUSTER)
    monkeypatch.setenv("HEARTBEAT_TIMEOUT", "ten minutes")
    handler.reset()
    event = cfn.request(kind, answers.next_url(), PROPERTIES, physical_id="x")

    handler.lambda_handler(event, None)

    (answer,) = answers.answers
    assert answer.body["Status"] == status
    assert "HEARTBEAT_TIMEOUT" in answer.body["Reason"]


def test_an_answer_too_long__cut_to_what_cloudformation_accepts(
    account: Account, answers: cfn.ResponseServer
) -> None:
    many = tuple(f"missing-{i:03}-{'x' * 40}" for i in range(200))

    created = send(account, answers, "Create", settings(allowed_asgs=many))

    assert created["Status"] == "FAILED"
    raw = json.dumps(answers.answers[-1].body).encode()
    assert len(raw) <= 4096
