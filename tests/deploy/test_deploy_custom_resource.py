"""The stack owns its hooks, as Lambda runs it: the custom resource's requests,
exactly as CloudFormation sends them, to the packaged function under the Lambda
Runtime Interface Emulator (testbed/lambdarie), with the groups in moto (served by
awssim) and the answers PUT to a local ResponseURL."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from support import cfn
from test_hooks import CLUSTER, HOOK, Account

from awssim.server import AwsSimServer
from testbed.lambdarie import LambdaRie

PROPERTIES = {"ClusterName": CLUSTER, "AsgNames": "nodes-a,nodes-b", "LifecycleHookName": HOOK}


@pytest.fixture
def account(moto_aws: None) -> Iterator[Account]:
    yield Account()


def hook_names(account: Account, group: str) -> set[str]:
    found = account.autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=group)
    return {h["LifecycleHookName"] for h in found["LifecycleHooks"]}


def test_create_then_delete_through_the_runtime__no_hook_of_ours_left(account: Account) -> None:
    account.group("nodes-a")
    account.group("nodes-b")
    account.group("nodes-c")
    env = {
        "AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"],
        "CLUSTER_NAME": CLUSTER,
        "ALLOWED_ASGS": "nodes-a,nodes-b,nodes-c",
        "STACK_ID": cfn.STACK_ID,
    }
    with AwsSimServer() as aws, cfn.response_server() as answers:
        with LambdaRie.start({**env, "AWS_ENDPOINT_URL": aws.url}) as function:
            create = cfn.request("Create", answers.next_url(), PROPERTIES)
            created = function.invoke(create)
            assert {HOOK} <= hook_names(account, "nodes-a")
            # Between the two: one group deleted, and on another the hook replaced by
            # another tool's of the same name.
            account.autoscaling.delete_auto_scaling_group(
                AutoScalingGroupName="nodes-b", ForceDelete=True
            )
            account.autoscaling.put_lifecycle_hook(
                AutoScalingGroupName="nodes-c",
                LifecycleHookName=HOOK,
                LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
                NotificationMetadata=json.dumps({"cluster_name": "someone-else"}),
            )
            physical = answers.answers[-1].body["PhysicalResourceId"]
            delete = cfn.request("Delete", answers.next_url(), PROPERTIES, physical_id=physical)
            deleted = function.invoke(delete)
        with LambdaRie.start(
            {**env, "ALLOWED_ASGS": "nodes-a,typo", "AWS_ENDPOINT_URL": aws.url}
        ) as f:
            refused = f.invoke(cfn.request("Create", answers.next_url(), PROPERTIES))

    story = "\n".join(created.lines + deleted.lines + refused.lines)
    assert created.error is None and deleted.error is None, story
    created_answer, deleted_answer, refused_answer = (a.body for a in answers.answers)
    assert created_answer["Status"] == "SUCCESS", story
    assert deleted_answer["Status"] == "SUCCESS", story
    assert hook_names(account, "nodes-a") == set(), story
    assert hook_names(account, "nodes-c") == {HOOK}, "another tool's hook was deleted"
    assert refused_answer["Status"] == "FAILED"
    assert "no Auto Scaling group named typo" in refused_answer["Reason"]
    assert hook_names(account, "nodes-a") == set(), "a failed create put a hook"
