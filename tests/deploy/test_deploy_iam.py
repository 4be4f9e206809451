"""The function's IAM policy grants every AWS call drainer/ makes, and nothing more.

The calls are read from the code: every `<client>.<operation>(...)` in drainer/*.py
whose method is an operation of a service the drainer has a client for, mapped to
its IAM action through botocore's service model. The policy is template.yaml's,
evaluated for a stack. The two must be equal, both ways; every resource must be an
ARN wherever AWS supports resource-level permissions for the action.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest
from botocore import xform_name

from .cfn import ACCOUNT, REGION, ROOT, Stack
from .conftest import ASGS, CLUSTER

SERVICES = (
    "ec2",
    "autoscaling",
    "eks",
    "lambda",
    "sts",
    "elbv2",
    "sns",
    "scheduler",
    "cloudformation",
)
# Variable or attribute names the drainer gives its boto3 clients.
CLIENT_NAMES = {
    "ec2": "ec2",
    "autoscaling": "autoscaling",
    "eks": "eks",
    "lambda": "lambda",
    "lambda_client": "lambda",
    "sts": "sts",
    "elbv2": "elbv2",
    "sns": "sns",
    "scheduler": "scheduler",
    "cloudformation": "cloudformation",
}
# Actions the role has only when the stack configures them (a topic for notices).
LEAD = {"ScheduledChangeLeadSeconds": "86400"}
CONFIGURED = {
    "sns:Publish": {"NotificationTopicArn": "arn:aws:sns:eu-west-1:123456789012:drains"},
    "scheduler:CreateSchedule": LEAD,
    "scheduler:GetSchedule": LEAD,
    "scheduler:UpdateSchedule": LEAD,
}
# What a call needs beside its own action: CreateSchedule hands the schedule a role.
PASSES_A_ROLE = {
    "scheduler:CreateSchedule": "iam:PassRole",
    "scheduler:UpdateSchedule": "iam:PassRole",
}
# botocore methods that name an operation in their first argument.
BY_NAME = ("generate_presigned_url", "get_paginator", "get_waiter")
# IAM actions whose name is not the API operation's.
IAM_ACTION_OF = {("lambda", "Invoke"): "lambda:InvokeFunction"}
# Services whose IAM prefix is not their client's name.
IAM_PREFIX = {"elbv2": "elasticloadbalancing"}
# Presigned, and sent by the EKS API server, not by the function: an EKS token is a
# presigned sts:GetCallerIdentity, which needs no permission at all.
NEEDS_NO_PERMISSION = {"sts:GetCallerIdentity"}
# Calls only the command line makes, with the operator's credentials, never the
# function: the action, and the drainer.aws function that makes it (used by no module
# outside drainer/aws and drainer/cli: test_cli_only_calls__the_function_never_makes_them).
CLI_ONLY = {"autoscaling:DescribeScalingActivities": "recent_launches"}  # plan --asg
# Whether AWS supports resource-level permissions for each action the role has.
# An action missing here fails the test: look it up in the Service Authorization
# Reference and add it.
RESOURCE_LEVEL = {
    "ec2:DescribeInstances": False,
    "ec2:DescribeInstanceStatus": False,
    "autoscaling:DescribeAutoScalingGroups": False,
    "autoscaling:DescribeAutoScalingInstances": False,
    "autoscaling:DescribeLifecycleHooks": False,
    "autoscaling:CompleteLifecycleAction": True,
    "autoscaling:RecordLifecycleActionHeartbeat": True,
    "autoscaling:PutLifecycleHook": True,
    "autoscaling:DeleteLifecycleHook": True,
    "eks:DescribeCluster": True,
    "lambda:InvokeFunction": True,
    "logs:CreateLogStream": True,
    "logs:PutLogEvents": True,
    "sqs:SendMessage": True,
    "sns:Publish": True,
    "elasticloadbalancing:DescribeTargetGroups": False,
    "elasticloadbalancing:DescribeTags": False,
    "elasticloadbalancing:DescribeTargetHealth": False,
    "elasticloadbalancing:DescribeTargetGroupAttributes": False,
    "elasticloadbalancing:DeregisterTargets": True,
    "scheduler:CreateSchedule": True,
    "scheduler:GetSchedule": True,
    "scheduler:UpdateSchedule": True,
    "iam:PassRole": True,
    "cloudformation:DescribeStacks": True,
}
# Statements narrowed by a condition (the only ones with one).
CONDITIONED = {
    "LeaveTheClustersTargetGroups",
    "HoldAndReleaseInstancesOfTheListedGroups",  # the region (the ARNs cannot name it)
    "HoldAndReleaseInstancesOfTheTaggedGroups",  # the AsgTag tag
    "LetTheScheduleInvokeIt",  # iam:PassedToService
}
TAG = "eks-node-drainer/enabled=true"
LIFECYCLE_ACTIONS = {
    "autoscaling:CompleteLifecycleAction",
    "autoscaling:RecordLifecycleActionHeartbeat",
    "autoscaling:PutLifecycleHook",
    "autoscaling:DeleteLifecycleHook",  # the stack's custom resource, on delete
}
# What the Lambda platform does with the role, not the drainer's code.
PLATFORM_STATEMENTS = {
    "WriteItsLogs": {"logs:CreateLogStream", "logs:PutLogEvents"},
    "ReportFailedInvocations": {"sqs:SendMessage"},
}
# Lambda's own network interfaces in a VPC, as AWSLambdaVPCAccessExecutionRole has them:
# AWS documents them with Resource "*" (the interfaces have no ARN before they exist).
VPC_ACTIONS = {
    "ec2:AssignPrivateIpAddresses",
    "ec2:CreateNetworkInterface",
    "ec2:DeleteNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:UnassignPrivateIpAddresses",
}
STACK = "eks-node-drainer"
TG_ARN = (
    f"arn:aws:elasticloadbalancing:{REGION}:{ACCOUNT}:targetgroup/nodeport-web/0123456789abcdef"
)


def operations() -> dict[str, dict[str, str]]:
    """service -> {python method name: API operation name}."""
    session = botocore.session.get_session()
    return {
        service: {xform_name(op): op for op in session.get_service_model(service).operation_names}
        for service in SERVICES
    }


def receiver_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id.lstrip("_")
    if isinstance(node, ast.Attribute):
        return node.attr.lstrip("_")
    return ""


def drainer_functions() -> set[str]:
    """Names defined in drainer/: `aws.complete_lifecycle_action(...)` is a wrapper."""
    names = set()
    for path in (ROOT / "drainer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
    return names


def aws_calls() -> Iterator[tuple[str, str, str]]:
    """(file:line, service, API operation) of every AWS call in drainer/*.py.

    Fails on a call to an AWS operation name whose client it cannot tell.
    """
    ops = operations()
    every_op = {method for by_service in ops.values() for method in by_service}
    wrappers = drainer_functions()
    for path in sorted((ROOT / "drainer").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            where = f"{path.name}:{node.lineno}"
            method = node.func.attr
            service = CLIENT_NAMES.get(receiver_name(node.func.value))
            if method in BY_NAME and service is not None:
                first = node.args[0] if node.args else None
                assert isinstance(first, ast.Constant), f"{where}: {method} of a computed name"
                yield where, service, ops[service][first.value]
            elif method in every_op:
                if service is not None and method in ops[service]:
                    yield where, service, ops[service][method]
                elif method not in wrappers:
                    pytest.fail(
                        f"{where}: .{method}() is an AWS operation name but the client "
                        f"{ast.unparse(node.func.value)!r} is not one CLIENT_NAMES knows"
                    )


def iam_action(service: str, operation: str) -> str:
    prefix = IAM_PREFIX.get(service, service)
    return IAM_ACTION_OF.get((service, operation), f"{prefix}:{operation}")


def code_actions() -> set[str]:
    called = {iam_action(service, op) for _, service, op in aws_calls()}
    return called | {PASSES_A_ROLE[a] for a in called if a in PASSES_A_ROLE}


def policy(**parameters: str) -> dict[str, dict[str, Any]]:
    """The role's statements by Sid (its inline policy and the policies attached to
    it), for a stack of two groups."""
    values = {
        "ClusterName": CLUSTER,
        "AsgNames": ",".join(ASGS),
        "CodeS3Bucket": "code",
        "CodeS3Key": "drainer.zip",
    }
    statements = Stack(values | parameters).policy_statements()
    by_sid = {s["Sid"]: s for s in statements}
    assert len(by_sid) == len(statements), "two statements with one Sid"
    return by_sid


def as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def drainer_actions(statements: dict[str, dict[str, Any]]) -> set[str]:
    skip = {*PLATFORM_STATEMENTS, "LambdaVpcNetworkInterfaces"}
    return {a for sid, s in statements.items() if sid not in skip for a in as_list(s["Action"])}


def test_the_code_calls_what_the_design_says():
    """A guard on the scanner itself: it must find the calls drainer/aws/ makes."""
    found = {(service, op) for _, service, op in aws_calls()}
    assert ("lambda", "Invoke") in found
    assert ("autoscaling", "CompleteLifecycleAction") in found
    assert ("sts", "GetCallerIdentity") in found  # the presigned token


def test_policy_grants_every_aws_call_the_code_makes():
    configured = set(CONFIGURED) | {PASSES_A_ROLE[a] for a in CONFIGURED if a in PASSES_A_ROLE}
    needed = code_actions() - NEEDS_NO_PERMISSION - configured - set(CLI_ONLY)
    missing = needed - drainer_actions(policy())
    assert not missing, f"drainer/ calls these but the role may not: {sorted(missing)}"
    for action, parameters in CONFIGURED.items():
        assert action in code_actions()
        for granted in {action, PASSES_A_ROLE.get(action, action)}:
            assert granted not in drainer_actions(policy()), f"{granted} only when configured"
            assert granted in drainer_actions(policy(**parameters))


def test_cli_only_calls__the_function_never_makes_them():
    for action, wrapper in CLI_ONLY.items():
        assert action in code_actions(), f"{action}: no longer called, drop it from CLI_ONLY"
        assert action not in drainer_actions(policy()), f"{action}: the function's role needs none"
        callers = {
            str(path.relative_to(ROOT / "drainer")).split("/")[0]
            for path in (ROOT / "drainer").rglob("*.py")
            if re.search(rf"\b{wrapper}\b", path.read_text())
        }
        assert callers <= {"aws", "cli"}, f"{wrapper} ({action}) is called from {callers}"


@pytest.mark.parametrize("parameters", [{}, LEAD], ids=["defaults", "lead"])
def test_policy_grants_nothing_the_code_does_not_call(parameters: dict[str, str]):
    extra = drainer_actions(policy(**parameters)) - code_actions()
    assert not extra, f"the role may do these but drainer/ never calls them: {sorted(extra)}"


def test_scheduled_drains__create_only_our_schedules__pass_only_the_schedulers_role():
    assert "ScheduleADrainBeforeTheWindow" not in policy(), "no lead: no scheduling"
    statements = policy(**LEAD)
    create = statements["ScheduleADrainBeforeTheWindow"]
    assert (create["Action"], create["Resource"]) == (
        ["scheduler:CreateSchedule", "scheduler:GetSchedule", "scheduler:UpdateSchedule"],
        f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/default/eks-node-drainer-*",
    )
    passing = statements["LetTheScheduleInvokeIt"]
    assert passing["Action"] == "iam:PassRole"
    assert passing["Resource"] == f"arn:aws:iam::{ACCOUNT}:role/{STACK}-SchedulerRole-ABC123"
    assert passing["Condition"] == {
        "StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}
    }
    # The schedule's role may only invoke this function.
    scheduler = Stack(
        {"ClusterName": CLUSTER, "AsgNames": ",".join(ASGS), "CodeS3Bucket": "c", "CodeS3Key": "k"}
        | LEAD
    ).resource("SchedulerRole")
    (invoke,) = scheduler["Policies"][0]["PolicyDocument"]["Statement"]
    assert (invoke["Action"], invoke["Resource"]) == (
        "lambda:InvokeFunction",
        f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{STACK}",
    )
    (trust,) = scheduler["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}


def test_the_only_permissionless_call_is_the_presigned_token():
    assert code_actions() & NEEDS_NO_PERMISSION == {"sts:GetCallerIdentity"}
    sts_calls = [(where, op) for where, service, op in aws_calls() if service == "sts"]
    assert sts_calls and all(op == "GetCallerIdentity" for _, op in sts_calls)


@pytest.mark.parametrize(
    "parameters",
    [
        {},
        {"FailureTopicArn": "arn:aws:sns:eu-west-1:123456789012:oncall"},
        {"SubnetIds": "s-1", "SecurityGroupIds": "sg-1"},
        {"TargetGroupArns": TG_ARN},
        {"NotificationEmail": "oncall@example.com"},
        {"AsgTag": TAG},
        {"AsgNames": "", "AsgTag": TAG},
        {"CreateLifecycleHooks": "false", "AsgTag": TAG},
        LEAD,
    ],
    ids=[
        "defaults",
        "topic",
        "vpc",
        "target-groups",
        "notices",
        "tag",
        "tag-only",
        "no-hooks",
        "lead",
    ],
)
def test_every_statement_allows_named_actions_on_arns_where_aws_supports_them(
    parameters: dict[str, str],
):
    for sid, statement in policy(**parameters).items():
        assert statement["Effect"] == "Allow"
        keys = {"Sid", "Effect", "Action", "Resource"} | (
            {"Condition"} if sid in CONDITIONED else set()
        )
        assert set(statement) <= keys, sid  # no NotAction; a condition only where expected
        actions = as_list(statement["Action"])
        resources = as_list(statement["Resource"])
        assert resources, sid
        for action in actions:
            assert "*" not in action, f"{sid}: wildcard action {action}"
            if sid == "LambdaVpcNetworkInterfaces":
                assert action in VPC_ACTIONS
                continue
            assert action in RESOURCE_LEVEL, f"{sid}: classify {action} in RESOURCE_LEVEL"
            if RESOURCE_LEVEL[action]:
                assert "*" not in resources, f"{sid}: {action} on every resource"
            else:
                assert resources == ["*"], f"{sid}: {action} supports no resource-level ARN"


def test_resources_are_exactly_ours():
    statements = policy()
    arn = f"arn:aws:{{}}:{REGION}:{ACCOUNT}:{{}}"
    listed = statements["HoldAndReleaseInstancesOfTheListedGroups"]
    assert as_list(listed["Resource"]) == [
        f"arn:*:autoscaling:*:*:autoScalingGroup:*:autoScalingGroupName/{asg}" for asg in ASGS
    ]
    assert listed["Condition"] == {"StringEquals": {"aws:RequestedRegion": REGION}}
    assert set(listed["Action"]) == LIFECYCLE_ACTIONS
    assert "HoldAndReleaseInstancesOfTheTaggedGroups" not in statements
    assert statements["FindTheClusterEndpoint"]["Resource"] == arn.format(
        "eks", f"cluster/{CLUSTER}"
    )
    assert statements["HandTheDrainOverToItself"]["Resource"] == arn.format(
        "lambda", f"function:{STACK}"
    )
    assert statements["WriteItsLogs"]["Resource"] == arn.format(
        "logs", f"log-group:/aws/lambda/{STACK}:*"
    )
    assert statements["ReportFailedInvocations"]["Resource"].startswith(arn.format("sqs", ""))


def test_failures_are_published_to_the_topic_when_one_is_given():
    topic = "arn:aws:sns:eu-west-1:123456789012:oncall"
    report = policy(FailureTopicArn=topic)["ReportFailedInvocations"]
    assert (report["Action"], report["Resource"]) == ("sns:Publish", topic)


def test_vpc_permissions_only_with_subnets():
    assert "LambdaVpcNetworkInterfaces" not in policy()
    vpc = policy(SubnetIds="subnet-1", SecurityGroupIds="sg-1")["LambdaVpcNetworkInterfaces"]
    assert set(vpc["Action"]) == VPC_ACTIONS
    assert set(PLATFORM_STATEMENTS) <= set(policy())
    for sid, actions in PLATFORM_STATEMENTS.items():
        assert set(as_list(policy()[sid]["Action"])) == actions


def test_deregister_only_from_the_clusters_target_groups_or_the_listed_ones():
    cluster = policy()["LeaveTheClustersTargetGroups"]
    assert cluster["Action"] == "elasticloadbalancing:DeregisterTargets"
    assert cluster["Resource"] == f"arn:aws:elasticloadbalancing:{REGION}:{ACCOUNT}:targetgroup/*/*"
    assert cluster["Condition"] == {
        "StringEquals": {"aws:ResourceTag/elbv2.k8s.aws/cluster": CLUSTER}
    }
    assert "LeaveTheListedTargetGroups" not in policy()
    listed = policy(TargetGroupArns=TG_ARN)["LeaveTheListedTargetGroups"]
    assert (listed["Action"], listed["Resource"]) == (
        "elasticloadbalancing:DeregisterTargets",
        [TG_ARN],
    )


def test_notices_published_only_to_the_configured_topic():
    assert "SendDrainNotices" not in policy()
    own = policy(NotificationTopicArn="arn:aws:sns:eu-west-1:123456789012:drains")
    assert own["SendDrainNotices"]["Resource"] == "arn:aws:sns:eu-west-1:123456789012:drains"
    email = policy(NotificationEmail="oncall@example.com")["SendDrainNotices"]
    assert email["Resource"] == "eks-node-drainer-AlarmTopic-XYZ"  # cfn.py: Ref of the topic


@pytest.mark.parametrize("names", [",".join(ASGS), ""], ids=["and-names", "tag-only"])
def test_tagged_groups__only_those_carrying_the_tag(names: str):
    statements = policy(AsgNames=names, AsgTag=TAG)
    tagged = statements["HoldAndReleaseInstancesOfTheTaggedGroups"]
    assert tagged["Resource"] == (
        f"arn:aws:autoscaling:{REGION}:{ACCOUNT}:autoScalingGroup:*:autoScalingGroupName/*"
    )
    assert tagged["Condition"] == {
        "StringEquals": {"autoscaling:ResourceTag/eks-node-drainer/enabled": "true"}
    }
    assert set(tagged["Action"]) == LIFECYCLE_ACTIONS
    assert ("HoldAndReleaseInstancesOfTheListedGroups" in statements) is bool(names)


def test_tag_with_odd_characters__still_one_valid_statement():
    tagged = policy(AsgTag="k8s.io/cluster-autoscaler/node-template:x=a b@c")[
        "HoldAndReleaseInstancesOfTheTaggedGroups"
    ]
    assert tagged["Condition"]["StringEquals"] == {
        "autoscaling:ResourceTag/k8s.io/cluster-autoscaler/node-template:x": "a b@c"
    }


def test_no_hooks_of_ours__no_put_lifecycle_hook__delete_kept_for_those_put_before():
    """CreateLifecycleHooks=false: the function puts no hook. It may still delete:
    an update turning the setting off deletes the hooks the stack had put, and the
    custom resource's Delete runs under the updated policy (its cleanup phase)."""
    put = "autoscaling:PutLifecycleHook"
    for statement in policy(CreateLifecycleHooks="false", AsgTag=TAG).values():
        assert put not in as_list(statement["Action"])
    tagged = policy(CreateLifecycleHooks="false", AsgTag=TAG)[
        "HoldAndReleaseInstancesOfTheTaggedGroups"
    ]
    assert "autoscaling:DeleteLifecycleHook" in as_list(tagged["Action"])
    listed = policy(CreateLifecycleHooks="false")["HoldAndReleaseInstancesOfTheListedGroups"]
    assert set(listed["Action"]) == LIFECYCLE_ACTIONS - {put}
