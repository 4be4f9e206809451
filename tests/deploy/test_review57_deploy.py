"""Review 57: make deploy, make preflight and make undeploy (tools/) against inputs
that come late, twice or out of order, or that name something another owner made.
Each test shows what the operator sees go wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from awssim.world import create_node_group
from tools import deploy, preflight, undeploy
from tools.common import DeployError, connect, describe_stack
from tools.preflight_rows import Status

from .conftest import CLUSTER, STACK, MotoStack
from .test_deploy_clusters import REGION, _cluster, _deploy


def _client(service: str) -> Any:
    return boto3.client(service, region_name=REGION)


# --- 1. a stack of another application, named by STACK_NAME ---------------------------------

OTHER_APP = """
AWSTemplateFormatVersion: "2010-09-09"
Description: billing-api, not eks-node-drainer
Resources:
  Queue:
    Type: AWS::SQS::Queue
Outputs:
  QueueUrl:
    Value: !Ref Queue
"""


def test_stack_name_of_another_application__refused__its_stack_never_updated(
    moto_aws: None, tmp_path: Path
) -> None:
    """STACK_NAME=billing-api (a typo, a copied command): a stack with none of this
    template's parameters or outputs. The cluster check lets it through (it has no
    ClusterName), so make deploy YES=1 replaces billing-api's resources with the
    drainer's."""
    _cluster("prod")
    cfn = _client("cloudformation")
    cfn.create_stack(StackName="billing-api", TemplateBody=OTHER_APP)

    with pytest.raises(DeployError) as refused:
        _deploy(tmp_path, "prod", stack_name="billing-api")

    assert "billing-api" in str(refused.value)
    resources = cfn.list_stack_resources(StackName="billing-api")["StackResourceSummaries"]
    assert [r["LogicalResourceId"] for r in resources] == ["Queue"]
    assert cfn.list_change_sets(StackName="billing-api")["Summaries"] == []


# --- 2. a decline while another person's first deploy waits for its yes ----------------------


def test_decline_while_anothers_create_waits__their_change_set_and_stack_not_deleted(
    moto_aws: None, tmp_path: Path
) -> None:
    """Two operators deploy prod's first stack at once. The first sees its change set
    and has not answered yet (the stack is REVIEW_IN_PROGRESS, holding only that change
    set). The second declines its own: make deploy deletes the whole stack, the
    first's change set with it, and says the stack "is as it was"."""
    _cluster("prod")
    cfn = _client("cloudformation")
    cfn.create_change_set(
        StackName="eks-node-drainer-prod",
        ChangeSetName="deploy-first-operator",
        ChangeSetType="CREATE",
        TemplateBody=OTHER_APP,
    )

    with pytest.raises(DeployError, match="is as it was"):
        _deploy(tmp_path, "prod", answer="n")

    # The first operator's stack and its change set, waiting for their yes: still there.
    assert describe_stack(cfn, "eks-node-drainer-prod") is not None, "their stack was deleted"


# --- 3. a stack left in a state no update can start from -----------------------------------


class _Cfn:
    """DescribeStacks of one stack in `status`."""

    def __init__(self, status: str) -> None:
        self.status = status

    def describe_stacks(self, StackName: str) -> dict[str, Any]:
        return {"Stacks": [{"StackName": StackName, "StackStatus": self.status}]}


@pytest.mark.parametrize(
    ("status", "advice"),
    [
        ("UPDATE_ROLLBACK_FAILED", "continue-update-rollback"),
        ("ROLLBACK_FAILED", "delete-stack"),
        ("DELETE_FAILED", "delete-stack"),
    ],
)
def test_stack_in_a_failed_state__stops_before_the_build_with_advice(
    status: str, advice: str
) -> None:
    """CloudFormation refuses any change set on these stacks. current_stack stops on
    ROLLBACK_COMPLETE and *_IN_PROGRESS only, so make deploy builds and uploads, then
    ends on CreateChangeSet's bare "an AWS call failed: ... can not be updated"."""
    with pytest.raises(DeployError) as stopped:
        deploy.current_stack(_Cfn(status), "eks-node-drainer-prod")

    assert status in str(stopped.value)
    assert advice in str(stopped.value)


# --- 4. preflight's "ok" where the deploy will not work ------------------------------------


def test_api_mode_without_the_access_entry__not_ok_saying_the_stacks_entry_maps_it() -> None:
    """CreateAccessEntry=false in a cluster of authentication mode API: the stack makes
    no access entry and aws-auth is not read in that mode, so the function's role is
    mapped by nothing. Preflight says ok, "the stack's access entry maps the function",
    and make deploy's next steps tell the operator to map it in aws-auth."""
    options = preflight.Options("prod", ("prod-nodes",), access_entry=False)
    row = preflight.check_access({"accessConfig": {"authenticationMode": "API"}}, options)

    assert row.status != Status.OK, row
    assert "the stack's access entry" not in row.detail


def test_group_carrying_another_stacks_hook_of_our_name__not_ok(moto_aws: None) -> None:
    """The group keeps a hook named eks-node-drainer that another stack of the cluster
    put (drainer-prod, deployed with STACK_NAME before). The new stack's custom
    resource refuses to put its hook there (FAILED, the stack rolls back); preflight
    says "ok  hook eks-node-drainer already there"."""
    _cluster("prod")
    other = "arn:aws:cloudformation:us-east-1:123456789012:stack/drainer-prod/0a1b2c3d"
    create_node_group(
        _client("ec2"), _client("autoscaling"), asg_name="prod-shared", size=0,
        hook_name="eks-node-drainer", cluster_name="prod",
        notification_metadata=json.dumps({"cluster_name": "prod", "stack_id": other}),
    )  # fmt: skip

    checks = preflight.run(connect(REGION), preflight.Options("prod", ("prod-shared",)))

    (row,) = [c for c in checks if c.what == "group prod-shared hooks"]
    assert row.status != Status.OK, row


# --- 5. undeploy of a stack that drains another cluster than the one named ------------------


def test_undeploy_yes__cluster_name_and_another_clusters_stack__nothing_deleted(
    moto_stack: MotoStack,
) -> None:
    """make undeploy CLUSTER_NAME=staging STACK_NAME=drainer-test YES=1, where
    drainer-test drains prod-eu: STACK_NAME wins, the cluster is never compared, and
    prod-eu's drainer is deleted."""
    lines: list[str] = []
    options = undeploy.Options(
        stack_name=STACK, cluster_name="staging", yes=True, poll_seconds=0.01
    )

    status = undeploy.undeploy(connect(REGION), options, lines.append)

    assert status != 0, lines
    assert describe_stack(moto_stack.client("cloudformation"), STACK) is not None, (
        f"{CLUSTER}'s stack was deleted on an undeploy for cluster staging"
    )


# --- 6. a change set that may replace the role ---------------------------------------------


class _ChangeSets:
    """CloudFormation's change set calls, for one change set of `changes`."""

    def __init__(self, changes: list[dict[str, Any]]) -> None:
        self.changes = changes

    def create_change_set(self, **_: Any) -> dict[str, Any]:
        return {}

    def describe_change_set(self, **_: Any) -> dict[str, Any]:
        return {"Status": "CREATE_COMPLETE", "Changes": self.changes}

    def delete_change_set(self, **_: Any) -> dict[str, Any]:
        return {}


def test_change_set__conditional_replacement_of_the_role__shown_as_one() -> None:
    """CloudFormation answers Replacement "Conditional" when it can only tell during
    the update whether a resource is replaced (a property that requires it, set from
    another resource's value). The line shows a plain Modify, as for an in-place
    update, and the operator says yes to what may be a new role."""
    said: list[str] = []
    role = {
        "Type": "Resource",
        "ResourceChange": {
            "Action": "Modify",
            "LogicalResourceId": "DrainerRole",
            "ResourceType": "AWS::IAM::Role",
            "Replacement": "Conditional",
        },
    }
    with pytest.raises(DeployError, match="not deployed"):
        deploy.apply_change_set(
            _ChangeSets([role]), "eks-node-drainer-prod", template_url="https://x/t.yaml",
            parameters={}, creating=False, poll=0, say=said.append, before={"A": "1"},
            confirm=lambda: False,
        )  # fmt: skip

    (line,) = [s for s in said if "DrainerRole" in s]
    assert "replace" in line, line
