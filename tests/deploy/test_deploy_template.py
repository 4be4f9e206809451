"""template.yaml: what moto creates from it, and, for what moto skips, the template
itself evaluated with tests/deploy/cfn.py."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from moto.events.models import EventPattern
from support.metrics import metric_names

from drainer.errors import SettingsError
from drainer.lifecycle.settings import VARIABLES
from tools.deploy import (
    GROUP_ARN_CHARACTERS,
    POLICY_BESIDE_THE_GROUPS,
    ROLE_POLICY_LIMIT,
    TEMPLATE_URL_LIMIT,
    check_value,
)
from tools.settings_table import parameter_for

from .cfn import ROOT, TEMPLATE, Stack
from .conftest import ASGS, CLUSTER, STACK, MotoStack

# moto warns once per resource type its CloudFormation skips (hooks, alarms, ...).
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")

EVENTS = ROOT / "tests" / "events"
ASG_NAMES = [f"nodes-{i}" for i in range(1, 13)]


def stack(**parameters: str) -> Stack:
    defaults = {"ClusterName": CLUSTER, "AsgNames": ",".join(ASGS)}
    defaults |= {"CodeS3Bucket": "code-bucket", "CodeS3Key": "drainer.zip"}
    return Stack(defaults | parameters)


def test_template_is_plain_cloudformation_within_the_template_url_limit(template: dict[str, Any]):
    assert "Transform" not in template
    assert len(TEMPLATE.read_bytes()) < TEMPLATE_URL_LIMIT


# --- what moto's CloudFormation creates ---------------------------------------------------


def test_stack_creates_the_function_with_runtime_handler_timeout_and_environment(
    moto_stack: MotoStack,
):
    function = moto_stack.client("lambda").get_function(FunctionName=STACK)["Configuration"]
    assert function["FunctionName"] == STACK  # named after the stack: the policy names it
    assert function["Runtime"] == "python3.13"
    assert function["Handler"] == "drainer.handler.lambda_handler"
    assert function["Timeout"] == 900
    assert function["MemorySize"] == 512
    assert function["Role"] == moto_stack.outputs()["RoleArn"]
    environment = {k: str(v) for k, v in function["Environment"]["Variables"].items()}
    assert environment["CLUSTER_NAME"] == CLUSTER
    assert environment["ALLOWED_ASGS"] == ",".join(ASGS)
    assert set(environment) == {v.name for v in VARIABLES}


def test_stack_creates_the_role_lambda_assumes_with_one_inline_policy(moto_stack: MotoStack):
    iam = moto_stack.client("iam")
    role_name = moto_stack.outputs()["RoleArn"].rsplit("/", 1)[1]
    role = iam.get_role(RoleName=role_name)["Role"]
    trust = role["AssumeRolePolicyDocument"]
    assert trust["Statement"] == [
        {
            "Effect": "Allow",
            "Principal": {"Service": "lambda.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ]
    assert iam.list_attached_role_policies(RoleName=role_name)["AttachedPolicies"] == []
    assert iam.list_role_policies(RoleName=role_name)["PolicyNames"] == ["eks-node-drainer"]
    document = iam.get_role_policy(RoleName=role_name, PolicyName="eks-node-drainer")[
        "PolicyDocument"
    ]
    if isinstance(document, str):  # moto keeps the resolved dict's repr
        document = ast.literal_eval(document)
    statements = {s["Sid"]: s for s in document["Statement"] if s}
    lifecycle = statements["HoldAndReleaseInstancesOfTheListedGroups"]
    assert [arn for arn in lifecycle["Resource"] if arn] == [
        f"arn:*:autoscaling:*:*:autoScalingGroup:*:autoScalingGroupName/{asg}" for asg in ASGS
    ]
    assert lifecycle["Condition"] == {"StringEquals": {"aws:RequestedRegion": "us-east-1"}}
    assert statements["HandTheDrainOverToItself"]["Resource"] == (
        f"arn:aws:lambda:us-east-1:123456789012:function:{STACK}"
    )
    assert "LambdaVpcNetworkInterfaces" not in statements


def test_stack_creates_the_rule_targeting_the_function_with_a_dead_letter_queue(
    moto_stack: MotoStack,
):
    events = moto_stack.client("events")
    rule_name = moto_stack.physical_id("TerminateRule")
    rule = events.describe_rule(Name=rule_name)
    assert rule["State"] == "ENABLED"
    (target,) = events.list_targets_by_rule(Rule=rule_name)["Targets"]
    assert target["Arn"] == moto_stack.outputs()["FunctionArn"]
    queue_url = moto_stack.outputs()["FailedEventsQueueUrl"]
    queue_arn = moto_stack.client("sqs").get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    assert target["DeadLetterConfig"] == {"Arn": queue_arn}


RULES = (
    "TerminateRule",
    "HookSyncSchedule",
    "HookSyncApiCalls",
    "SpotInterruptionRule",
    "ScheduledChangeRule",
    "CapacityReservationRule",
)


def test_stack_lets_only_its_rules_invoke_the_function(moto_stack: MotoStack):
    policy = json.loads(moto_stack.client("lambda").get_policy(FunctionName=STACK)["Policy"])
    rule_arns = {
        moto_stack.client("events").describe_rule(Name=moto_stack.physical_id(rule))["Arn"]
        for rule in RULES
    }
    assert len(policy["Statement"]) == len(RULES)
    for statement in policy["Statement"]:
        assert statement["Action"] == "lambda:InvokeFunction"
        assert statement["Principal"] == {"Service": "events.amazonaws.com"}
        assert statement["Condition"]["StringEquals"] == {"AWS:SourceAccount": "123456789012"}
    sources = {s["Condition"]["ArnLike"]["AWS:SourceArn"] for s in policy["Statement"]}
    assert sources == rule_arns


def test_stack_creates_the_hook_sync_rules(moto_stack: MotoStack):
    events = moto_stack.client("events")
    schedule = events.describe_rule(Name=moto_stack.physical_id("HookSyncSchedule"))
    assert schedule["ScheduleExpression"] == "rate(10 minutes)"
    api_calls = events.describe_rule(Name=moto_stack.physical_id("HookSyncApiCalls"))
    pattern = EventPattern.load(api_calls["EventPattern"])
    for name in ("api-create-or-update-tags", "api-create-auto-scaling-group"):
        assert pattern.matches_event(json.loads((EVENTS / f"{name}.json").read_text())), name
    assert not pattern.matches_event(event("terminate"))
    for rule in ("HookSyncSchedule", "HookSyncApiCalls"):
        (target,) = events.list_targets_by_rule(Rule=moto_stack.physical_id(rule))["Targets"]
        assert target["Arn"] == moto_stack.outputs()["FunctionArn"]


@pytest.mark.parametrize(
    "moto_stack", [{"AsgNames": "", "AsgTag": "eks-node-drainer/enabled=true"}], indirect=True
)
def test_stack_with_a_tag_and_no_names(moto_stack: MotoStack):
    function = moto_stack.client("lambda").get_function(FunctionName=STACK)["Configuration"]
    environment = {k: str(v) for k, v in function["Environment"]["Variables"].items()}
    assert environment["ALLOWED_ASGS"] == ""
    assert environment["ASG_TAG"] == "eks-node-drainer/enabled=true"
    # any group's terminate action of our hook reaches the function, which decides
    terminate = event("terminate", AutoScalingGroupName="created-later")
    terminate["detail"]["LifecycleHookName"] = "eks-node-drainer"
    assert deployed_pattern(moto_stack).matches_event(terminate)
    terminate["detail"]["LifecycleHookName"] = "other-hook"
    assert not deployed_pattern(moto_stack).matches_event(terminate)


def test_stack_sends_spot_interruption_warnings_to_the_function(moto_stack: MotoStack):
    events = moto_stack.client("events")
    rule = events.describe_rule(Name=moto_stack.physical_id("SpotInterruptionRule"))
    assert json.loads(rule["EventPattern"]) == {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Spot Instance Interruption Warning"],
    }
    (target,) = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
    assert target["Arn"] == moto_stack.outputs()["FunctionArn"]
    # A warning is worth nothing once its two minutes are over.
    assert target["RetryPolicy"]["MaximumEventAgeInSeconds"] == 120
    summaries = moto_stack.client("cloudformation").list_stack_resources(StackName=STACK)
    logical = {r["LogicalResourceId"] for r in summaries["StackResourceSummaries"]}
    assert "RebalanceRule" not in logical  # RebalanceAction defaults to off


@pytest.mark.parametrize(
    "moto_stack", [{"SpotInterruptionDrain": "false", "RebalanceAction": "cordon"}], indirect=True
)
def test_stack_rebalance_rule_on_and_spot_rule_off_by_parameters(moto_stack: MotoStack):
    summaries = moto_stack.client("cloudformation").list_stack_resources(StackName=STACK)
    logical = {r["LogicalResourceId"] for r in summaries["StackResourceSummaries"]}
    assert "SpotInterruptionRule" not in logical
    rule = moto_stack.client("events").describe_rule(Name=moto_stack.physical_id("RebalanceRule"))
    assert json.loads(rule["EventPattern"])["detail-type"] == [
        "EC2 Instance Rebalance Recommendation"
    ]
    function = moto_stack.client("lambda").get_function(FunctionName=STACK)
    variables = function["Configuration"]["Environment"]["Variables"]
    assert variables["REBALANCE_ACTION"] == "cordon"
    assert variables["SPOT_INTERRUPTION_DRAIN"] == "false"


def test_stack_sends_scheduled_changes_and_capacity_warnings__not_state_changes(
    moto_stack: MotoStack,
):
    events = moto_stack.client("events")
    health = events.describe_rule(Name=moto_stack.physical_id("ScheduledChangeRule"))
    pattern = EventPattern.load(health["EventPattern"])
    scheduled = json.loads((EVENTS / "health-scheduled-change.json").read_text())
    assert pattern.matches_event(scheduled)
    scheduled["detail"]["service"] = "RDS"
    assert not pattern.matches_event(scheduled), "another service's change reached the function"
    capacity = events.describe_rule(Name=moto_stack.physical_id("CapacityReservationRule"))
    assert EventPattern.load(capacity["EventPattern"]).matches_event(
        json.loads((EVENTS / "capacity-reservation-interruption.json").read_text())
    )
    for rule in (health, capacity):
        (target,) = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
        assert target["Arn"] == moto_stack.outputs()["FunctionArn"]
    summaries = moto_stack.client("cloudformation").list_stack_resources(StackName=STACK)
    logical = {r["LogicalResourceId"] for r in summaries["StackResourceSummaries"]}
    assert "StateChangeRule" not in logical  # StateChangeDrain defaults to false


@pytest.mark.parametrize(
    "moto_stack",
    [
        {
            "StateChangeDrain": "true",
            "ScheduledChangeDrain": "false",
            "CapacityReservationDrain": "false",
        }
    ],
    indirect=True,
)
def test_stack_state_change_rule_on__the_others_off__by_parameters(moto_stack: MotoStack):
    summaries = moto_stack.client("cloudformation").list_stack_resources(StackName=STACK)
    logical = {r["LogicalResourceId"] for r in summaries["StackResourceSummaries"]}
    assert not {"ScheduledChangeRule", "CapacityReservationRule"} & logical
    events = moto_stack.client("events")
    rule = events.describe_rule(Name=moto_stack.physical_id("StateChangeRule"))
    pattern = EventPattern.load(rule["EventPattern"])
    change = json.loads((EVENTS / "ec2-state-change.json").read_text())
    assert pattern.matches_event(change)
    change["detail"]["state"] = "running"
    assert not pattern.matches_event(change), "a running instance's notice reached the function"
    variables = moto_stack.client("lambda").get_function(FunctionName=STACK)["Configuration"][
        "Environment"
    ]["Variables"]
    assert (
        variables["STATE_CHANGE_DRAIN"],
        variables["SCHEDULED_CHANGE_DRAIN"],
        variables["CAPACITY_RESERVATION_DRAIN"],
    ) == ("true", "false", "false")
    policy = json.loads(moto_stack.client("lambda").get_policy(FunctionName=STACK)["Policy"])
    sources = {s["Condition"]["ArnLike"]["AWS:SourceArn"] for s in policy["Statement"]}
    assert rule["Arn"] in sources


@pytest.mark.parametrize("moto_stack", [{"ScheduledChangeLeadSeconds": "86400"}], indirect=True)
def test_stack_with_a_lead__scheduler_role_made_and_handed_to_the_function(moto_stack: MotoStack):
    summaries = moto_stack.client("cloudformation").list_stack_resources(StackName=STACK)
    logical = {r["LogicalResourceId"] for r in summaries["StackResourceSummaries"]}
    assert "SchedulerRole" in logical, " ".join(sorted(logical))
    variables = moto_stack.client("lambda").get_function(FunctionName=STACK)["Configuration"][
        "Environment"
    ]["Variables"]
    assert str(variables["SCHEDULED_CHANGE_LEAD_SECONDS"]) == "86400"
    role = moto_stack.client("iam").get_role(RoleName=moto_stack.physical_id("SchedulerRole"))
    assert variables["SCHEDULER_ROLE_ARN"] == role["Role"]["Arn"]


def test_stack_without_a_lead__no_scheduler_role(moto_stack: MotoStack):
    summaries = moto_stack.client("cloudformation").list_stack_resources(StackName=STACK)
    logical = {r["LogicalResourceId"] for r in summaries["StackResourceSummaries"]}
    assert "SchedulerRole" not in logical
    variables = moto_stack.client("lambda").get_function(FunctionName=STACK)["Configuration"][
        "Environment"
    ]["Variables"]
    assert variables["SCHEDULER_ROLE_ARN"] == ""


@pytest.mark.parametrize(
    "moto_stack", [{"LaunchHook": "true", "LaunchHookName": "nodes-ready"}], indirect=True
)
def test_stack_with_the_launch_hook__its_rule_passes_on_our_launch_actions(moto_stack: MotoStack):
    events = moto_stack.client("events")
    rule = events.describe_rule(Name=moto_stack.physical_id("LaunchRule"))
    pattern = EventPattern.load(rule["EventPattern"])
    launch = event("launch", AutoScalingGroupName=ASGS[0], LifecycleHookName="nodes-ready")
    assert pattern.matches_event(launch)
    assert not pattern.matches_event(event("launch", AutoScalingGroupName=ASGS[0]))
    assert not deployed_pattern(moto_stack).matches_event(launch), "the terminate rule's"
    variables = moto_stack.client("lambda").get_function(FunctionName=STACK)["Configuration"][
        "Environment"
    ]["Variables"]
    assert (variables["LAUNCH_HOOK"], variables["LAUNCH_HOOK_NAME"]) == ("true", "nodes-ready")


def test_stack_without_the_launch_hook__no_launch_rule(moto_stack: MotoStack):
    summaries = moto_stack.client("cloudformation").list_stack_resources(StackName=STACK)
    logical = {r["LogicalResourceId"] for r in summaries["StackResourceSummaries"]}
    assert "LaunchRule" not in logical


def test_stack_creates_the_log_group_with_retention(moto_stack: MotoStack):
    (group,) = moto_stack.client("logs").describe_log_groups(logGroupNamePrefix="/aws/lambda/")[
        "logGroups"
    ]
    assert group["logGroupName"] == f"/aws/lambda/{STACK}"
    assert group["retentionInDays"] == 30


def test_outputs_name_the_function_role_and_the_rbac_command(moto_stack: MotoStack):
    outputs = moto_stack.outputs()
    assert outputs["FunctionName"] == STACK
    assert outputs["RoleArn"].startswith("arn:aws:iam::123456789012:role/")
    cluster_arn = f"arn:aws:eks:us-east-1:123456789012:cluster/{CLUSTER}"
    assert outputs["RbacApplyCommand"] == f"kubectl apply --context {cluster_arn} -f k8s-rbac/"
    assert outputs["KubeconfigCommand"] == (
        f"aws eks update-kubeconfig --region us-east-1 --name {CLUSTER}"
    )


# --- the event pattern, as the stack created it, against real events ----------------------


def deployed_pattern(moto_stack: MotoStack) -> EventPattern:
    raw = moto_stack.client("events").describe_rule(Name=moto_stack.physical_id("TerminateRule"))[
        "EventPattern"
    ]
    return EventPattern.load(raw)


def event(name: str, **detail: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text())
    loaded["detail"].update(detail)
    return loaded


@pytest.mark.parametrize(
    ("why", "name", "detail", "matches"),
    [
        ("a terminate action of a listed group", "terminate", {}, True),
        ("the second listed group", "terminate", {"AutoScalingGroupName": ASGS[1]}, True),
        ("a launch action", "launch", {"LifecycleHookName": "eks-node-drainer"}, False),
        # the function refuses it (frame.admit_hook), as with AsgTag: the rule names no
        # group, so that it fits EventBridge's 2,048 characters whatever AsgNames holds
        ("a group not listed", "terminate", {"AutoScalingGroupName": "other-nodes"}, True),
        ("another tool's hook", "terminate", {"LifecycleHookName": "other-hook"}, False),
        ("a test notification", "test-notification", {}, False),
        ("an EC2 state change", "ec2-state-change", {}, False),
    ],
)
def test_rule_passes_on_only_terminate_actions_of_our_hook(
    moto_stack: MotoStack, why: str, name: str, detail: dict[str, str], matches: bool
):
    terminate = event(name, **detail)
    if name == "terminate" and "LifecycleHookName" not in detail:
        terminate["detail"]["LifecycleHookName"] = "eks-node-drainer"
    assert deployed_pattern(moto_stack).matches_event(terminate) is matches, why


# --- hooks, access entry, alarms, async config: from the template itself -----------------


def test_no_hook_resources__the_function_keeps_the_hooks():
    s = stack(AsgNames=",".join(ASG_NAMES))
    assert s.resources("AWS::AutoScaling::LifecycleHook") == {}
    environment = s.resource("DrainerFunction")["Environment"]["Variables"]
    assert environment["CREATE_LIFECYCLE_HOOKS"] == "true"
    assert environment["LIFECYCLE_HOOK_NAME"] == "eks-node-drainer"
    assert environment["HEARTBEAT_TIMEOUT"] == "600"
    assert environment["ALLOWED_ASGS"] == ",".join(ASG_NAMES)


def test_hook_sync_rules_only_when_the_hooks_are_ours():
    assert {"HookSyncSchedule", "HookSyncApiCalls"} <= set(stack().resources())
    off = stack(CreateLifecycleHooks="false").resources()
    assert not {"HookSyncSchedule", "HookSyncApiCalls"} & set(off)
    assert not {"HookSyncSchedulePermission", "HookSyncApiCallsPermission"} & set(off)


@pytest.mark.parametrize("count", [1, 10, 11, 40])
def test_policy_names_every_listed_group(count: int):
    names = [f"nodes-{i}" for i in range(1, count + 1)]
    s = stack(AsgNames=",".join(names))
    statements = {st["Sid"]: st for st in s.policy_statements()}
    lifecycle = statements["HoldAndReleaseInstancesOfTheListedGroups"]
    assert [arn.rsplit("/", 1)[1] for arn in lifecycle["Resource"]] == names


def policy_size(s: Stack) -> int:
    """What IAM counts against a role's 10,240 characters: all its inline policies (the
    role's own and the AWS::IAM::Policy attached to it), whitespace left out."""
    documents = [p["PolicyDocument"] for p in s.resource("DrainerRole")["Policies"]]
    documents += [p["PolicyDocument"] for p in s.resources("AWS::IAM::Policy").values()]
    texts = [d if isinstance(d, str) else json.dumps(d, separators=(",", ":")) for d in documents]
    return sum(len("".join(text.split())) for text in texts)


EKSCTL_NAMES = [f"eksctl-prod-eu-nodegroup-ng-{i:02d}-NodeGroup-1A2B3C4D5E6F" for i in range(90)]
"""Group names as eksctl makes them, 53 characters."""


def test_policy_size__each_listed_group_adds_its_arn__the_rest_is_as_deploy_assumes(
    template: dict[str, Any],
):
    """make deploy refuses AsgNames that cannot fit in the role's policy
    (tools/deploy.py _too_many_groups), on the fewest characters the other statements
    take: a short stack and cluster name, every option off."""
    least = {"ClusterName": "c", "CreateLifecycleHooks": "false", "CodeS3Bucket": "code"}
    least |= {"CodeS3Key": "k"}

    def size(names: list[str]) -> int:
        return policy_size(Stack(least | {"AsgNames": ",".join(names)}, stack_name="s"))

    one, two = size(EKSCTL_NAMES[:1]), size(EKSCTL_NAMES[:2])
    assert two - one == GROUP_ARN_CHARACTERS + len(EKSCTL_NAMES[1])
    assert one - (GROUP_ARN_CHARACTERS + len(EKSCTL_NAMES[0])) >= POLICY_BESIDE_THE_GROUPS
    # the fewest names deploy refuses cannot fit even so; the most it takes can
    spec = template["Parameters"]["AsgNames"]
    taken = max(
        n for n in range(1, 90) if check_value("AsgNames", ",".join(EKSCTL_NAMES[:n]), spec) is None
    )
    assert size(EKSCTL_NAMES[: taken + 1]) > ROLE_POLICY_LIMIT
    assert size(EKSCTL_NAMES[:taken]) <= ROLE_POLICY_LIMIT
    # with the stack's defaults and AsgTag, some 60 (as the docs say)
    full = stack(AsgNames=",".join(EKSCTL_NAMES[:60]), AsgTag="eks-node-drainer/enabled=true")
    assert policy_size(full) <= ROLE_POLICY_LIMIT
    assert policy_size(stack(AsgNames=",".join(EKSCTL_NAMES[:70]))) > ROLE_POLICY_LIMIT


def test_deploy_refuses_more_named_groups_than_the_policy_holds__pointing_to_the_tag(
    template: dict[str, Any],
):
    spec = template["Parameters"]["AsgNames"]
    assert check_value("AsgNames", ",".join(EKSCTL_NAMES[:60]), spec) is None
    refused = check_value("AsgNames", ",".join(EKSCTL_NAMES[:90]), spec)
    assert refused is not None
    assert "AsgNames: 90 groups take 10,620 characters of the role's policy" in refused
    assert "AsgTag" in refused


@pytest.mark.parametrize("rule", ["TerminateRule", "LaunchRule"])
def test_lifecycle_rules_filter_the_hook_name_only__whatever_the_groups(rule: str):
    """No group names in the pattern: EventBridge refuses one over 2,048 characters
    (some 30 of eksctl's names); the function refuses a group neither named nor tagged."""
    hook = "eks-node-drainer" if rule == "TerminateRule" else "eks-node-drainer-launch"

    def detail(**parameters: str) -> dict[str, Any]:
        s = stack(LaunchHook="true", **parameters)
        return dict(s.resource(rule)["EventPattern"]["detail"])

    tag = "eks-node-drainer/enabled=true"
    assert detail() == {"LifecycleHookName": [hook]}
    assert detail(AsgNames=",".join(EKSCTL_NAMES)) == {"LifecycleHookName": [hook]}
    assert detail(AsgTag=tag) == {"LifecycleHookName": [hook]}
    assert detail(AsgTag=tag, AsgNames="") == {"LifecycleHookName": [hook]}


@pytest.mark.parametrize(
    ("names", "tag", "accepted"),
    [
        ("nodes-a", "", True),
        ("", "eks-node-drainer/enabled=true", True),
        ("nodes-a", "eks-node-drainer/enabled=true", True),
        ("", "", False),
    ],
)
def test_rule__names_or_tag_or_both(names: str, tag: str, accepted: bool):
    failures = stack(AsgNames=names, AsgTag=tag).rule_failures()
    assert (failures == []) is accepted
    if not accepted:
        assert failures == [
            "Set AsgNames, AsgTag or both; with neither, no node group is protected."
        ]


@pytest.mark.parametrize(
    ("launch", "accepted"), [("eks-node-drainer-launch", True), ("eks-node-drainer", False)]
)
def test_rule__the_launch_hook_named_as_the_terminate_hook__refused(launch: str, accepted: bool):
    """One hook per name on a group: the launch hook would replace the terminate hook
    (the function refuses the pair too: SettingsError)."""
    failures = stack(AsgNames="nodes-a", LaunchHookName=launch).rule_failures()
    assert (failures == []) is accepted
    if not accepted:
        (failure,) = failures
        assert failure.startswith("LaunchHookName must differ from LifecycleHookName")


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("nodes-a", True),
        (",".join(ASG_NAMES), True),
        (",".join(f"nodes-{i}" for i in range(60)), True),  # no limit any more
        ("eksctl-prod-nodegroup-ng-1-NodeGroup-1A2B3C4D5E6F", True),
        ("", True),  # with AsgTag (the template's Rule asks for one of the two)
        ("nodes-a, nodes-b", False),  # make deploy strips the spaces first
        ("nodes-a,,nodes-b", False),
        ("nodes-*", False),  # would be a wildcard in the IAM resource
    ],
)
def test_asg_names_take_plain_names(template: dict[str, Any], value: str, accepted: bool):
    pattern = template["Parameters"]["AsgNames"]["AllowedPattern"]
    assert (re.fullmatch(pattern, value) is not None) is accepted


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("eks-node-drainer/enabled=true", True),
        ("k8s.io/cluster-autoscaler/enabled=yes", True),
        ("team=platform eng", True),
        ("", True),
        ("no-value=", False),
        ("=no-key", False),
        ("a=b=c", False),  # the value would be cut at its '=' in the IAM condition
        ('quote"=x', False),  # would break the JSON policy document
        ("key", False),
    ],
)
def test_asg_tag_is_key_equals_value__same_rule_as_the_setting(
    template: dict[str, Any], value: str, accepted: bool
):
    from drainer.lifecycle.settings import Settings

    pattern = template["Parameters"]["AsgTag"]["AllowedPattern"]
    assert (re.fullmatch(pattern, value) is not None) is accepted
    try:
        Settings.from_env({"ASG_TAG": value})
    except SettingsError:
        assert not accepted
    else:
        assert accepted


def test_access_entry_maps_the_role_to_the_group_the_rbac_manifests_bind():
    entry = stack().resource("DrainerAccessEntry")
    assert entry["ClusterName"] == CLUSTER
    assert entry["PrincipalArn"] == stack().resolve({"Fn::GetAtt": ["DrainerRole", "Arn"]})
    assert entry["Type"] == "STANDARD"
    assert entry["KubernetesGroups"] == ["eks-node-drainer"]
    assert "DrainerAccessEntry" not in stack(CreateAccessEntry="false").resources()
    bound = {
        subject["name"]
        for path in sorted((ROOT / "k8s-rbac").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("kind") == "ClusterRoleBinding"
        for subject in doc.get("subjects", [])
        if subject.get("kind") == "Group"
    }
    assert bound == {"eks-node-drainer"}


def test_failed_async_invocations_go_to_the_queue_or_the_topic():
    queue_arn = stack().resolve({"Fn::GetAtt": ["FailedEventsQueue", "Arn"]})
    config = stack().resource("AsyncInvokeConfig")
    assert config["FunctionName"] == "eks-node-drainer"
    assert config["MaximumRetryAttempts"] == 2
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == queue_arn
    topic = "arn:aws:sns:eu-west-1:123456789012:oncall"
    with_topic = stack(FailureTopicArn=topic)
    destination = with_topic.resource("AsyncInvokeConfig")["DestinationConfig"]["OnFailure"]
    assert destination["Destination"] == topic
    assert with_topic.resource("DrainFailedAlarm")["AlarmActions"] == [topic]
    assert "AlarmActions" not in stack().resource("DrainFailedAlarm")


@pytest.mark.parametrize(
    ("parameters", "actions"),
    [
        ({}, None),
        ({"NotificationEmail": "oncall@example.com"}, ["eks-node-drainer-AlarmTopic-XYZ"]),
        ({"FailureTopicArn": "arn:aws:sns:eu-west-1:123456789012:oncall"}, ["oncall"]),
        (
            {
                "NotificationEmail": "oncall@example.com",
                "FailureTopicArn": "arn:aws:sns:eu-west-1:123456789012:oncall",
            },
            ["eks-node-drainer-AlarmTopic-XYZ", "oncall"],
        ),
    ],
    ids=["nobody", "email", "topic", "both"],
)
def test_alarms_notify_the_email_topic_and_the_failure_topic(
    parameters: dict[str, str], actions: list[str] | None
) -> None:
    rendered = stack(**parameters)
    for alarm in ("DrainFailedAlarm", "FailedEventsAlarm"):
        found = rendered.resource(alarm).get("AlarmActions")
        if actions is None:
            assert found is None
        else:
            assert [str(a).rsplit(":", 1)[-1] for a in found] == actions
    topics = rendered.resources("AWS::SNS::Topic")
    if "NotificationEmail" in parameters:
        assert topics["AlarmTopic"]["Subscription"] == [
            {"Protocol": "email", "Endpoint": "oncall@example.com"}
        ]
    else:
        assert topics == {}


@pytest.mark.parametrize("moto_stack", [{"NotificationEmail": "oncall@example.com"}], indirect=True)
def test_stack_with_notification_email__topic_subscribed(moto_stack: MotoStack) -> None:
    import boto3

    sns = boto3.client("sns", region_name="us-east-1")
    subscriptions = sns.list_subscriptions()["Subscriptions"]
    assert [(s["Protocol"], s["Endpoint"]) for s in subscriptions] == [
        ("email", "oncall@example.com")
    ]


def test_drain_failed_alarm_watches_the_metric_the_handler_emits():
    """The metric contract: EMF namespace EksNodeDrainer, metric DrainFailed (1 per
    failed or timed-out drain, 0 otherwise), dimensions exactly Cluster and service
    (powertools Metrics adds service=drainer.logs.SERVICE)."""
    from drainer import logs
    from drainer.lifecycle import ending

    alarm = stack().resource("DrainFailedAlarm")
    by_id = {m["Id"]: m for m in alarm["Metrics"]}
    drains = by_id["drains"]["MetricStat"]["Metric"]
    assert drains["Namespace"] == ending.METRICS_NAMESPACE
    assert drains["MetricName"] == "DrainFailed"
    assert {d["Name"]: d["Value"] for d in drains["Dimensions"]} == {
        "Cluster": CLUSTER,
        "service": logs.SERVICE,
    }
    errors = by_id["errors"]["MetricStat"]["Metric"]
    assert (errors["Namespace"], errors["MetricName"]) == ("AWS/Lambda", "Errors")
    assert errors["Dimensions"] == [{"Name": "FunctionName", "Value": "eks-node-drainer"}]
    assert by_id["failures"]["ReturnData"] is True
    assert alarm["Threshold"] == 1
    assert alarm["TreatMissingData"] == "notBreaching"
    source = Path(ending.__file__).read_text()
    assert '"DrainFailed"' in source and 'name="Cluster"' in source


def test_function_architecture_logging_and_vpc_follow_the_parameters():
    function = stack().resource("DrainerFunction")
    assert function["Architectures"] == ["arm64"]
    assert function["LoggingConfig"] == {"LogGroup": "/aws/lambda/eks-node-drainer"}
    assert "VpcConfig" not in function
    private = stack(
        Architecture="x86_64", SubnetIds="subnet-1,subnet-2", SecurityGroupIds="sg-1"
    ).resource("DrainerFunction")
    assert private["Architectures"] == ["x86_64"]
    assert private["VpcConfig"] == {
        "SubnetIds": ["subnet-1", "subnet-2"],
        "SecurityGroupIds": ["sg-1"],
    }


# --- every drainer setting is a parameter, in step with drainer/lifecycle/settings.py -------


SET_BY_THE_STACK = {"SCHEDULER_ROLE_ARN", "STACK_ID"}
"""Settings the stack fills in from its own resources, not from a parameter."""


def test_scheduler_role_arn__the_stacks_own_role_when_drains_are_scheduled(
    template: dict[str, Any],
):
    environment = template["Resources"]["DrainerFunction"]["Properties"]["Environment"]
    assert environment["Variables"]["SCHEDULER_ROLE_ARN"] == {
        "Fn::If": ["SchedulesDrains", {"Fn::GetAtt": ["SchedulerRole", "Arn"]}, ""]
    }


@pytest.mark.parametrize(
    "variable", [v for v in VARIABLES if v.name not in SET_BY_THE_STACK], ids=lambda v: v.name
)
def test_every_setting_is_a_parameter_with_the_same_default_and_range(
    template: dict[str, Any], variable: Any
):
    name = parameter_for(variable.name)
    parameter = template["Parameters"][name]
    environment = template["Resources"]["DrainerFunction"]["Properties"]["Environment"]
    if variable.name == "NOTIFICATION_TOPIC_ARN":  # else the NotificationEmail topic
        assert environment["Variables"][variable.name] == {
            "Fn::If": [
                "HasNoticeTopic",
                {"Ref": name},
                {"Fn::If": ["HasEmail", {"Ref": "AlarmTopic"}, ""]},
            ]
        }
    else:
        assert environment["Variables"][variable.name] == {"Ref": name}
    if variable.name == "CLUSTER_NAME":
        assert "Default" not in parameter  # required: the stack is for one cluster's groups
        return
    assert str(parameter["Default"]) == variable.default
    if variable.kind == "int" and parameter["Type"] == "String":
        # a condition compares its text (review 62): the pattern holds the same range
        assert variable.minimum is not None and variable.maximum is not None
        low, high = int(variable.minimum), int(variable.maximum)
        for taken in (low, high):
            assert check_value(name, str(taken), parameter) is None, taken
        for refused in (low - 1, high + 1):
            assert check_value(name, str(refused), parameter) is not None, refused
    elif variable.kind in ("int", "float"):
        assert parameter["Type"] == "Number"
        assert (parameter["MinValue"], parameter["MaxValue"]) == (
            variable.minimum,
            variable.maximum,
        )
    elif variable.kind == "bool":
        assert parameter["AllowedValues"] == ["true", "false"]
    elif variable.kind == "choice":
        assert parameter["AllowedValues"] == list(variable.choices)


def test_the_default_environment_is_valid_settings():
    from drainer.lifecycle.settings import Settings

    environment = stack().resource("DrainerFunction")["Environment"]["Variables"]
    settings = Settings.from_env({k: str(v) for k, v in environment.items()})
    assert settings.cluster_name == CLUSTER
    assert settings.allowed_asgs == frozenset(ASGS)


@pytest.mark.parametrize(
    ("parameters", "topic"),
    [
        ({}, ""),
        ({"NotificationEmail": "oncall@example.com"}, "eks-node-drainer-AlarmTopic-XYZ"),
        ({"NotificationTopicArn": "arn:aws:sns:eu-west-1:123456789012:drains"}, "drains"),
        (
            {
                "NotificationEmail": "oncall@example.com",
                "NotificationTopicArn": "arn:aws:sns:eu-west-1:123456789012:drains",
            },
            "drains",
        ),
    ],
    ids=["none", "email-topic", "own-topic", "own-topic-wins"],
)
def test_drain_notices_go_to_the_own_topic_else_the_email_topic(
    parameters: dict[str, str], topic: str
) -> None:
    variables = stack(**parameters).resource("DrainerFunction")["Environment"]["Variables"]
    assert str(variables["NOTIFICATION_TOPIC_ARN"]).rsplit(":", 1)[-1] == topic


# --- the dashboard and the custom resource --------------------------------------------------


@pytest.mark.parametrize(
    "moto_stack", [{"Dashboard": "true"}, {"Dashboard": "false"}], indirect=True
)
def test_dashboard_on_and_off_by_its_parameter(moto_stack: MotoStack):
    dashboards = moto_stack.client("cloudwatch").list_dashboards()["DashboardEntries"]
    names = [d["DashboardName"] for d in dashboards]
    if moto_stack.parameters["Dashboard"] == "false":
        assert names == []
        return
    assert names == [f"{STACK}-drains"]
    body = json.loads(
        moto_stack.client("cloudwatch").get_dashboard(DashboardName=names[0])["DashboardBody"]
    )
    titles = [w["properties"]["title"] for w in body["widgets"]]
    assert titles == [
        "Drains by result",
        "Invocation seconds",
        "Evictions and budget refusals",
        "Alarms",
        "Drains by result and trigger",
        "By node group",
        "Drains that left pods on the node",
        "Forecast error (actual - forecast seconds)",
    ]


def test_dashboard_reads_the_metrics_the_function_emits_with_the_alarms_dimensions():
    """Every metric widget names a metric drainer/lifecycle/ending.py writes, with the
    dimension set it writes (Cluster and service), and the log widgets the end line."""
    emitted = set(metric_names())
    body = json.loads(stack().resource("DrainsDashboard")["DashboardBody"])
    shown: set[str] = set()
    for widget in body["widgets"]:
        properties = widget["properties"]
        if widget["type"] == "metric":
            for metric in properties["metrics"]:
                if metric[0] == "...":
                    continue
                shown.add(metric[1])
                assert metric[2:6] == ["Cluster", CLUSTER, "service", "eks-node-drainer"]
        elif widget["type"] == "log":
            assert "SOURCE '/aws/lambda/eks-node-drainer'" in properties["query"]
            assert "event = 'drain_finished'" in properties["query"]
        else:
            assert properties["alarms"] == [
                "arn:aws:cloudwatch:eu-west-1:123456789012:alarm:eks-node-drainer-drain-failed",
                "arn:aws:cloudwatch:eu-west-1:123456789012:alarm:eks-node-drainer-failed-events",
                "arn:aws:cloudwatch:eu-west-1:123456789012:alarm:eks-node-drainer-throttled",
                "arn:aws:cloudwatch:eu-west-1:123456789012:alarm:eks-node-drainer-concurrency",
            ]
    assert shown == emitted


def test_the_rules_that_put_hooks_back_go_before_the_custom_resource_on_delete():
    template = stack()
    hooks = template.resource("LifecycleHooks")
    assert hooks["ServiceToken"].endswith(":function:eks-node-drainer")
    for rule in ("HookSyncSchedule", "HookSyncApiCalls"):
        assert template.template["Resources"][rule]["DependsOn"] == "LifecycleHooks", rule
    # A change of any parameter that decides the hooks updates them.
    for name in ("AsgNames", "AsgTag", "LifecycleHookName", "HeartbeatTimeout", "LaunchHook"):
        assert name in hooks, name


def test_one_version__the_package_the_wheel_the_stack_and_the_changelog(
    template: dict[str, Any],
) -> None:
    """drainer.__version__ is the one version: pyproject.toml reads it for the wheel,
    the stack reports it as an output, and CHANGELOG.md has a heading for it."""
    import tomllib

    import drainer

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "drainer.__version__"}
    assert template["Outputs"]["Version"]["Value"] == drainer.__version__
    assert re.search(
        rf"^## {re.escape(drainer.__version__)}\b", (ROOT / "CHANGELOG.md").read_text(), re.M
    ), f"CHANGELOG.md has no '## {drainer.__version__}' heading"
