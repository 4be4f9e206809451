"""`make deploy`: check, package, upload, create or update the stack, say what's next.

    python -m tools.deploy --cluster-name prod --asg-names ng-a,ng-b [--arch arm64]
        [--stack-name eks-node-drainer-prod] [--region eu-west-1] [--bucket my-bucket]
        [--params-file params.json] [--yes] [--change-cluster] [Key=Value ...]

In this order, and each step only once the one before has succeeded:

1. parameters, with no AWS call: from the file (a JSON object {"Key": "value"} or
   the AWS CLI's [{"ParameterKey": ..., "ParameterValue": ...}] list), then the
   named options, then Key=Value arguments, each overriding the one before. The
   cluster name and the group names are required; every value is checked against
   the template's own constraints, so a typo fails here and not half-way through
   a stack update.
2. the region and the credentials (sts get-caller-identity);
3. the stack as it is (by default the cluster's, tools/stacks.py): one of this
   template's (a ClusterName parameter, a FunctionName output), not another
   cluster's (--change-cluster lets its ClusterName change), and in a state
   CloudFormation takes a change set in (a *_FAILED one stops with the command that
   fixes it): a parameter given nowhere keeps the stack's current value (the
   template default for a new stack), like `aws cloudformation deploy`; then
   make preflight's checks of the cluster and its groups (tools/preflight.py): a
   blocking one stops here;
4. the zip (tools.package) for the stack's architecture;
5. the upload, to a content-addressed key (eks-node-drainer/<sha256>.zip), so a
   new build changes CodeS3Key and CloudFormation updates the code, and a rebuild
   of the same sources uploads nothing;
6. a change set (create or update), shown (its resources, its parameters before
   and after; a resource CloudFormation may replace marked so), executed on a
   person's yes on stdin (--yes: unasked; neither a terminal nor --yes stops the
   deploy before step 4), with the stack's events printed as they come. A "no"
   deletes the change set, and a new stack this deploy began unless another
   deploy's change set is on it too;
7. what to do next: the RBAC command, a scale-in to try it, the logs.

Exit status: 0 deployed (or nothing to change), 2 bad parameters (a stack of another
cluster or application among them), 3 no region or credentials, 1 anything else.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import secrets
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from drainer.lifecycle.settings import VARIABLES
from tools import package
from tools.common import (
    Aws,
    DeployError,
    connect,
    describe_stack,
    normalise_names,
    rbac_documents,
    run_tool,
)
from tools.settings_table import parameter_for

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"
# CloudFormation's limit for a template it reads from S3 (TemplateURL): deploy uploads
# the template beside the zip (a template passed inline may only have 51,200 bytes).
TEMPLATE_URL_LIMIT = 1_048_576
KEY_PREFIX = "eks-node-drainer"
CAPABILITIES = ["CAPABILITY_IAM"]
# Required parameters and the make variable that sets each.
REQUIRED = {"ClusterName": "CLUSTER_NAME"}
# The node groups: by name, by tag, or both; at least one of the two.
GROUPS = {"AsgNames": "ASG_NAMES", "AsgTag": "ASG_TAG"}
# Set by this script from the upload, never by the user.
MANAGED = ("CodeS3Bucket", "CodeS3Key")
_NO_CHANGES = ("didn't contain changes", "No updates are to be performed")
# The parameters the function reads as integers: CloudFormation's Number takes 5400.5.
INTEGER_PARAMETERS = frozenset(parameter_for(v.name) for v in VARIABLES if v.kind == "int")
# IAM's limit on all of a role's inline policies together (whitespace is not counted),
# the fewest of them the role's other statements take (tests/deploy measure both), and
# what each AsgNames group adds: its ARN, "arn:*:autoscaling:*:*:autoScalingGroup:*:
# autoScalingGroupName/<name>" (62 characters and the name), quoted, with a comma.
ROLE_POLICY_LIMIT = 10_240
POLICY_BESIDE_THE_GROUPS = 1_950
GROUP_ARN_CHARACTERS = 65
_DONE = re.compile(r"^(CREATE|UPDATE|DELETE|ROLLBACK|UPDATE_ROLLBACK|IMPORT)_(COMPLETE|FAILED)$")

Client = Any
Say = Callable[[str], None]


# --- 1. parameters ----------------------------------------------------------------------


def template_parameters(template_text: str) -> dict[str, dict[str, Any]]:
    """The template's Parameters section."""
    from tools.stacks import CfnLoader

    loaded = yaml.load(template_text, Loader=CfnLoader)  # noqa: S506 - a SafeLoader subclass
    parameters: dict[str, dict[str, Any]] = loaded["Parameters"]
    return parameters


def read_params_file(path: Path) -> dict[str, str]:
    """{"Key": "value"} or [{"ParameterKey": "Key", "ParameterValue": "value"}, ...]."""
    try:
        raw = json.loads(path.read_text())
    except OSError as e:
        raise DeployError(f"cannot read the parameters file {path}: {e.strerror}", 2) from e
    except json.JSONDecodeError as e:
        raise DeployError(f"the parameters file {path} is not JSON: {e}", 2) from e
    if isinstance(raw, dict):
        return {str(k): _text(v) for k, v in raw.items()}
    if isinstance(raw, list) and all(
        isinstance(item, dict) and "ParameterKey" in item and "ParameterValue" in item
        for item in raw
    ):
        return {str(item["ParameterKey"]): _text(item["ParameterValue"]) for item in raw}
    raise DeployError(
        f'the parameters file {path} must be a JSON object {{"Key": "value"}} or a list '
        '[{"ParameterKey": "Key", "ParameterValue": "value"}]',
        2,
    )


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def collect_parameters(
    spec: Mapping[str, Mapping[str, Any]],
    *,
    params_file: Path | None,
    named: Mapping[str, str],
    overrides: Sequence[str],
) -> dict[str, str]:
    """The parameters the user gave, checked; raises DeployError (status 2)."""
    given: dict[str, str] = dict(read_params_file(params_file)) if params_file else {}
    given.update({k: v for k, v in named.items() if v})
    for pair in overrides:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise DeployError(f"{pair!r} is not Key=Value (e.g. DrainTimeoutSeconds=7200)", 2)
        given[key.strip()] = value.strip()
    if "AsgNames" in given:
        given["AsgNames"] = normalise_names(given["AsgNames"])

    unknown = sorted(set(given) - set(spec))
    if unknown:
        raise DeployError(
            f"unknown parameter(s) {', '.join(unknown)}; the template's are: "
            f"{', '.join(k for k in spec if k not in MANAGED)}",
            2,
        )
    managed = sorted(set(given) & set(MANAGED))
    if managed:
        raise DeployError(
            f"{', '.join(managed)} are set by make deploy from the uploaded zip; leave them out",
            2,
        )
    missing = [f"{var} (parameter {key})" for key, var in REQUIRED.items() if not given.get(key)]
    if not any(given.get(key) for key in GROUPS):
        missing.append(" or ".join(f"{var} (parameter {key})" for key, var in GROUPS.items()))
    if missing:
        raise DeployError(
            f"missing {' and '.join(missing)}: e.g. make deploy CLUSTER_NAME=my-cluster "
            "ASG_NAMES=my-nodes-a,my-nodes-b (or ASG_TAG=eks-node-drainer/enabled=true, "
            "for every group tagged so), or put them in PARAMS_FILE",
            2,
        )
    problems = [p for key, value in given.items() if (p := check_value(key, value, spec[key]))]
    if problems:
        raise DeployError("invalid parameter(s):\n  " + "\n  ".join(problems), 2)
    return given


def check_value(key: str, value: str, spec: Mapping[str, Any]) -> str | None:
    """What is wrong with `value` by the template's own constraints; None when fine."""
    why = spec.get("ConstraintDescription")
    allowed = spec.get("AllowedValues")
    if allowed is not None and value not in [_text(a) for a in allowed]:
        return f"{key}={value!r}: must be one of {', '.join(_text(a) for a in allowed)}"
    if spec.get("Type") == "Number":
        try:
            number = float(value)
        except ValueError:
            return f"{key}={value!r}: must be a number"
        if not math.isfinite(number):
            return f"{key}={value!r}: must be a number"
        if key in INTEGER_PARAMETERS and not number.is_integer():
            return f"{key}={value!r}: must be a whole number (the function reads an integer)"
        low, high = spec.get("MinValue"), spec.get("MaxValue")
        if (low is not None and number < float(low)) or (high is not None and number > float(high)):
            return f"{key}={value!r}: must be from {low} to {high}"
    pattern = spec.get("AllowedPattern")
    if pattern is not None and not re.fullmatch(pattern, value):
        return f"{key}={value!r}: {why or f'must match {pattern}'}"
    if len(value) < int(spec.get("MinLength", 0)):
        return f"{key}={value!r}: must not be empty"
    if key == "AsgNames":
        return _too_many_groups(value)
    return None


def _too_many_groups(names: str) -> str | None:
    """Why the role's policy cannot name these groups; None when it may. Only what
    cannot fit is refused: the other statements take 2,000 to 3,500 characters."""
    groups = [name for name in names.split(",") if name]
    size = sum(len(name) + GROUP_ARN_CHARACTERS for name in groups)
    room = ROLE_POLICY_LIMIT - POLICY_BESIDE_THE_GROUPS
    if size <= room:
        return None
    return (
        f"AsgNames: {len(groups)} groups take {size:,} characters of the role's policy, "
        f"which IAM limits to {ROLE_POLICY_LIMIT:,} in all, {POLICY_BESIDE_THE_GROUPS:,} "
        "or more of them its other statements' (some 60 groups of eksctl's 55-character "
        "names fit): name fewer and tag the others (AsgTag, e.g. "
        "ASG_TAG=eks-node-drainer/enabled=true), which has no limit"
    )


# --- 2. region and credentials -----------------------------------------------------------


# --- 3. the stack as it is ------------------------------------------------------------------


def stack_outputs(stack: Mapping[str, Any]) -> dict[str, str]:
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def function_name(outputs: Mapping[str, str], stack_name: str) -> str:
    """The stack's function: its FunctionName output (the stack's name)."""
    return outputs.get("FunctionName") or stack_name


_STUCK = {
    "ROLLBACK_COMPLETE": "it failed to create and was rolled back; see why with `aws "
    "cloudformation describe-stack-events --stack-name {name}`, delete it with `aws "
    "cloudformation delete-stack --stack-name {name}`, then deploy again",
    "UPDATE_ROLLBACK_FAILED": "an update failed and so did its rollback, and CloudFormation "
    "takes no change set until the rollback ends: `aws cloudformation continue-update-rollback "
    "--stack-name {name}` (with --resources-to-skip for a resource that cannot roll back: "
    "describe-stack-events names it), then deploy again",
    "ROLLBACK_FAILED": "it failed to create and so did its rollback; it can only be deleted: "
    "`aws cloudformation delete-stack --stack-name {name}` (should that end DELETE_FAILED, "
    "again with --retain-resources and the resources it could not delete), then deploy again",
    "DELETE_FAILED": "its deletion failed (describe-stack-events says why); delete it again "
    "with `make undeploy STACK_NAME={name} YES=1` (also its hooks), or `aws cloudformation "
    "delete-stack --stack-name {name} --retain-resources <the resources it could not delete>`, "
    "then deploy again",
}
"""The stacks CloudFormation takes no change set on, and what makes them deployable."""


def current_stack(cfn: Client, stack_name: str) -> dict[str, Any] | None:
    """The stack to deploy over, or None when there is none (or only a
    never-executed change set); a stack in no state to update is a DeployError that
    says how to get it into one, before anything is built."""
    stack = describe_stack(cfn, stack_name)
    if stack is None:
        return None
    status = stack["StackStatus"]
    if status in _STUCK:
        raise DeployError(
            f"stack {stack_name} is {status}: {_STUCK[status].format(name=stack_name)}; "
            "nothing was built, uploaded or changed"
        )
    if status.endswith("_IN_PROGRESS") and status != "REVIEW_IN_PROGRESS":
        raise DeployError(f"stack {stack_name} is {status}; wait for it to finish, then deploy")
    return stack


def stack_to_deploy(
    aws: Aws, options: Options, cluster: str, say: Say
) -> tuple[str, dict[str, Any] | None]:
    """The stack's name (tools/stacks.py resolve) and the stack as it is (None: a new
    one), said; a DeployError when it is in no state to update, not this template's,
    or another cluster's (unless options.change_cluster)."""
    from tools import stacks

    cfn = aws.client("cloudformation")
    stack_name, note = stacks.resolve(cfn, options.stack_name, cluster)
    say(f"deploying stack {stack_name} to {aws.account} {aws.region} as {aws.caller}")
    if note:
        say(note)
    stack = current_stack(cfn, stack_name)
    stacks.refuse_foreign(cfn, stack_name, stack, cluster)
    if not options.change_cluster:
        stacks.refuse_cluster_change(stack_name, stack, cluster)
    if stack is not None and stack["StackStatus"] == "REVIEW_IN_PROGRESS":
        say(stacks.review_note(cfn, stack_name))
    return stack_name, stack


def effective_parameters(
    spec: Mapping[str, Mapping[str, Any]], given: Mapping[str, str], stack: Mapping[str, Any] | None
) -> dict[str, str]:
    """Given values, else the stack's current ones, else the template defaults."""
    previous = {}
    if stack is not None and stack["StackStatus"] != "REVIEW_IN_PROGRESS":
        previous = {p["ParameterKey"]: p["ParameterValue"] for p in stack.get("Parameters", [])}
    values = {}
    for key, parameter in spec.items():
        if key in given:
            values[key] = given[key]
        elif key in previous:
            values[key] = previous[key]
        elif "Default" in parameter:
            values[key] = _text(parameter["Default"])
    return values


# --- 4 and 5. the zip and its upload -----------------------------------------------------


def the_zip(arch: str, prebuilt: Path | None, say: Say) -> tuple[Path, package.Manifest]:
    """The prebuilt zip if given (its manifest must match), else a fresh build."""
    if prebuilt is None:
        say(f"building the Lambda zip for {arch} ...")
        try:
            manifest = package.build(arch)
        except package.PackageError as e:
            raise DeployError(f"packaging failed: {e}") from e
        return package.DEFAULT_OUTPUT, manifest
    try:
        manifest = package.read_manifest(prebuilt)
    except (OSError, ValueError, TypeError) as e:
        raise DeployError(
            f"{prebuilt} has no readable manifest beside it ({e}); build it with make package"
        ) from e
    if manifest.architecture != arch:
        raise DeployError(
            f"{prebuilt} was built for {manifest.architecture}, the stack runs on {arch}: "
            f"make package ARCH={arch}"
        )
    if package.sha256(prebuilt) != manifest.sha256:
        raise DeployError(f"{prebuilt} does not match its manifest; rebuild it with make package")
    return prebuilt, manifest


def default_bucket(account: str, region: str) -> str:
    return f"{KEY_PREFIX}-{account}-{region}"


def ensure_bucket(s3: Client, bucket: str, region: str, create: bool, say: Say) -> None:
    """The bucket exists and is ours; created (private, encrypted) when `create`."""
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=bucket)
        return
    except ClientError as e:
        code = str(e.response.get("Error", {}).get("Code", ""))
        if code not in ("404", "NoSuchBucket", "NotFound"):
            raise DeployError(
                f"cannot use bucket {bucket} ({code}): it belongs to another account or you "
                "lack s3:ListBucket on it; pass BUCKET=<a bucket of yours>"
            ) from e
    if not create:
        raise DeployError(f"bucket {bucket} does not exist; create it or leave BUCKET unset")
    say(f"creating bucket s3://{bucket} (private, encrypted) for the function's code")
    if region == "us-east-1":
        s3.create_bucket(Bucket=bucket)
    else:
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": region})
    s3.put_public_access_block(
        Bucket=bucket,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )
    s3.put_bucket_encryption(
        Bucket=bucket,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        },
    )


def upload(s3: Client, bucket: str, zip_path: Path, manifest: package.Manifest, say: Say) -> str:
    """Upload to a key named by the content; skipped when that key is already there."""
    from botocore.exceptions import ClientError

    key = f"{KEY_PREFIX}/{manifest.sha256}.zip"
    try:
        s3.head_object(Bucket=bucket, Key=key)
        say(f"s3://{bucket}/{key} is already uploaded")
        return key
    except ClientError as e:
        if str(e.response.get("Error", {}).get("Code", "")) not in ("404", "NoSuchKey", "NotFound"):
            raise
    say(f"uploading {zip_path.name} ({manifest.size / 1e6:.1f} MB) to s3://{bucket}/{key}")
    s3.upload_file(str(zip_path), bucket, key)
    return key


def upload_template(s3: Client, bucket: str, body: str, region: str) -> str:
    """The template in the code bucket, named by its sha256; its TemplateURL."""
    key = f"{KEY_PREFIX}/templates/{hashlib.sha256(body.encode()).hexdigest()}.yaml"
    s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://s3.{region}.{domain}/{bucket}/{key}"


# --- 6. the change set ------------------------------------------------------------------------


def apply_change_set(
    cfn: Client,
    stack_name: str,
    *,
    template_url: str,
    parameters: Mapping[str, str],
    creating: bool,
    poll: float,
    say: Say,
    purpose: str = "",
    before: Mapping[str, str] | None = None,
    confirm: Callable[[], bool] | None = None,
) -> bool:
    """Create, show and execute a change set; False when there was nothing to change.
    Shown: the resources it changes and its parameters (`before`: the stack's, for
    "old -> new"). `confirm`, when given, decides after the showing: False deletes the
    change set (and a stack this deploy began, when no other deploy's change set is
    on it: tools/stacks.py leave_declined) and stops the deploy."""
    from tools.stacks import leave_declined

    made = creating and describe_stack(cfn, stack_name) is None
    # The second alone would give two deploys in one second the same name: CloudFormation
    # refuses the second, and a declined one's clean-up would delete the other's.
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    name = f"deploy-{stamp}-{secrets.token_hex(3)}{purpose}"
    change_set = _created_change_set(
        cfn, stack_name, name, poll, kind="CREATE" if creating else "UPDATE",
        TemplateURL=template_url, Capabilities=CAPABILITIES, Description="make deploy",
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
    )  # fmt: skip
    if change_set is None:
        return False
    say(f"{'creating' if creating else 'updating'} stack {stack_name}:")
    show_change_set(change_set, before or {}, parameters, say)
    if confirm is not None and not confirm():
        left = leave_declined(cfn, stack_name, name, creating=creating, made=made)
        raise DeployError(
            f"not deployed: the change set was not executed; stack {stack_name} {left}"
        )
    started = time.time()
    cfn.execute_change_set(StackName=stack_name, ChangeSetName=name)
    status = wait_for_stack(cfn, stack_name, started, poll, say)
    if status not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
        raise DeployError(
            f"stack {stack_name} ended {status}; the events above say why (also: aws "
            f"cloudformation describe-stack-events --stack-name {stack_name})"
        )
    return True


def _created_change_set(
    cfn: Client, stack_name: str, name: str, poll: float, *, kind: str, **more: Any
) -> Mapping[str, Any] | None:
    """The change set `name` of ChangeSetType `kind` (CreateChangeSet's `more`
    arguments) once CloudFormation has made it; None (and it deleted) when it
    changes nothing; a DeployError when refused."""
    cfn.create_change_set(StackName=stack_name, ChangeSetName=name, ChangeSetType=kind, **more)
    while True:
        change_set = cfn.describe_change_set(StackName=stack_name, ChangeSetName=name)
        if change_set["Status"] in ("CREATE_COMPLETE", "FAILED"):
            break
        time.sleep(poll)
    if change_set["Status"] == "FAILED":
        reason = str(change_set.get("StatusReason", ""))
        if any(text in reason for text in _NO_CHANGES):
            cfn.delete_change_set(StackName=stack_name, ChangeSetName=name)
            return None
        raise DeployError(f"CloudFormation refused the change set: {reason}")
    return dict(change_set)


_REPLACEMENT = {"True": " (replacement)", "Conditional": " (may be replaced)"}
"""A resource change's Replacement as shown: "Conditional" when CloudFormation can
tell only during the update (a property that requires it, set from another
resource's value)."""


def show_change_set(
    change_set: Mapping[str, Any], before: Mapping[str, str], after: Mapping[str, str], say: Say
) -> None:
    """A line per resource the change set changes, then its parameters, old -> new."""
    from tools.stacks import parameter_changes

    for change in change_set.get("Changes", []):
        rc = change.get("ResourceChange", {})
        replacement = _REPLACEMENT.get(str(rc.get("Replacement")), "")
        say(
            f"  {rc.get('Action', '?'):8} {rc.get('LogicalResourceId')} "
            f"{rc.get('ResourceType')}{replacement}"
        )
    changed = parameter_changes(before, after)
    say("  parameters:" if changed else "  parameters: unchanged")
    for line in changed:
        say(f"    {line}")


def wait_for_stack(cfn: Client, stack_name: str, since: float, poll: float, say: Say) -> str:
    """Print the stack's new events until it reaches a final status; return that status."""
    seen: set[str] = set()
    while True:
        events = cfn.describe_stack_events(StackName=stack_name).get("StackEvents", [])
        for event in reversed(events):
            stamp = event.get("Timestamp")
            if event["EventId"] in seen or (stamp is not None and stamp.timestamp() < since - 5):
                continue
            seen.add(event["EventId"])
            reason = (
                f"  {event['ResourceStatusReason']}" if event.get("ResourceStatusReason") else ""
            )
            column = f"{event.get('ResourceStatus', ''):22}"
            say(f"  {column} {event.get('LogicalResourceId', '')}{reason}")
        status = str(cfn.describe_stacks(StackName=stack_name)["Stacks"][0]["StackStatus"])
        if _DONE.match(status) and not status.endswith("_IN_PROGRESS"):
            return status
        time.sleep(poll)


# --- 7. what next --------------------------------------------------------------------------


def next_steps(
    outputs: Mapping[str, str], values: Mapping[str, str], region: str, stack_name: str
) -> str:
    """The stack's outputs as commands to run next (built here when an output is missing)."""
    asg = (
        values.get("AsgNames", "").split(",")[0]
        or "<a group tagged " + values.get("AsgTag", "") + ">"
    )
    cluster = values["ClusterName"]
    function = outputs.get("FunctionName", stack_name)  # the template names it so
    kubeconfig = outputs.get(
        "KubeconfigCommand", f"aws eks update-kubeconfig --region {region} --name {cluster}"
    )
    rbac = outputs.get("RbacApplyCommand", "kubectl apply -f k8s-rbac/")
    logs = outputs.get(
        "TailLogsCommand", f"make logs STACK_NAME={stack_name} REGION={region} FOLLOW=1"
    )
    role = outputs.get("RoleArn", f"(see: aws cloudformation describe-stacks --region {region})")
    access = ""
    if values.get("CreateAccessEntry", "true") != "true":
        access = (
            "\n    CreateAccessEntry=false: map the role to the Kubernetes group eks-node-drainer\n"
            "    yourself (eksctl create iamidentitymapping ... --group eks-node-drainer, or the\n"
            f"    aws-auth ConfigMap): {role}\n"
        )
    return f"""
Deployed: function {function}, role {role}.

Next:
 1. Let the function drain: grant its Kubernetes group the RBAC it needs (once, from
    this repository's root, as a cluster admin):
      {kubeconfig}
      {rbac}
{access}
 2. Try it: take one instance out of {asg} and watch it drain:
      aws autoscaling describe-auto-scaling-groups --region {region} \\
        --auto-scaling-group-names {asg} \\
        --query 'AutoScalingGroups[0].[DesiredCapacity,Instances[].InstanceId]'
      aws autoscaling terminate-instance-in-auto-scaling-group --region {region} \\
        --should-decrement-desired-capacity --instance-id <one of those instances>
    (or lower the desired capacity by one with
      aws autoscaling set-desired-capacity --region {region} \\
        --auto-scaling-group-name {asg} --desired-capacity <current - 1>)
 3. Read the logs, as readable lines (every drain ends with a "drain finished" line;
    INSTANCE=i-... or NODE=... for one drain):
      {logs}
""".rstrip()


# --- the whole ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    stack_name: str = ""
    """Default: the cluster's stack (tools/stacks.py: eks-node-drainer-<cluster>, or
    an older eks-node-drainer stack of that cluster)."""
    cluster_name: str = ""
    asg_names: str = ""
    asg_tag: str = ""
    arch: str = ""
    region: str = ""
    profile: str = ""
    bucket: str = ""
    params_file: Path | None = None
    overrides: tuple[str, ...] = ()
    zip_path: Path | None = None
    template: Path = TEMPLATE
    poll_seconds: float = 5.0
    apply_rbac: bool = False
    """Apply k8s-rbac/ as a cluster admin (else print the command and wait for it)."""
    kubeconfig: str = ""
    """The kubeconfig to apply it with (default: $KUBECONFIG or ~/.kube/config)."""
    context: str = ""
    """Its context (default: the cluster's ARN, as aws eks update-kubeconfig names it)."""
    check_wait_seconds: float = 900.0
    """How long to wait for the function's self-check to pass (RBAC being applied)."""
    yes: bool = False
    """Execute the change set without asking (CI); else a person answers yes on stdin."""
    change_cluster: bool = False
    """Allow the deploy to change an existing stack's ClusterName."""
    check_poll_seconds: float = 10.0


def _cannot_drain(message: str, values: Mapping[str, str], *, live: bool, say: Say) -> None:
    """The self-check failed: say what that means for the hooks."""
    if values["CreateLifecycleHooks"] != "true":
        say(f"warning: the function cannot drain yet ({message}); your hooks are yours")
        return
    if live:
        raise DeployError(
            f"the function cannot drain ({message}); its lifecycle hooks are ON, so every "
            "scale-in fails its drain until this is fixed",
            1,
        )
    raise DeployError(
        f"the function cannot drain yet: {message}. The stack is deployed with its "
        "lifecycle hooks OFF (no scale-in is held for a drain); fix that, then run "
        "make deploy again to turn them on",
        1,
    )


def _parameters_of(stack: Mapping[str, Any] | None) -> dict[str, str]:
    """The stack's parameters as they are (a change set's "before")."""
    return {p["ParameterKey"]: p["ParameterValue"] for p in (stack or {}).get("Parameters", [])}


def _confirmer(options: Options, ask: Callable[[str], str] | None) -> Callable[[], bool] | None:
    """What decides, once the change set is shown, whether it is executed: nothing with
    --yes; else a person's yes, on stdin when it is a terminal. Without either the
    deploy stops here, before anything is built or uploaded."""
    if options.yes:
        return None
    if ask is None:
        if not sys.stdin.isatty():
            raise DeployError(
                "make deploy shows the change set and waits for a yes, and stdin is not a "
                "terminal: run it in one, or pass YES=1 (--yes) to execute the change set "
                "unasked (CI); nothing was uploaded or changed",
                2,
            )
        ask = input
    question = ask

    def confirm() -> bool:
        try:
            answer = question("Execute this change set? [y/N] ")
        except EOFError:
            return False
        return answer.strip().lower() in ("y", "yes")

    return confirm


def _previous(stack: Mapping[str, Any] | None, key: str) -> str:
    for parameter in (stack or {}).get("Parameters", []):
        if parameter["ParameterKey"] == key:
            return str(parameter["ParameterValue"])
    return ""


def _outputs(cfn: Client, stack_name: str) -> dict[str, str]:
    return stack_outputs(cfn.describe_stacks(StackName=stack_name)["Stacks"][0])


def apply_rbac(kubeconfig: str, context: str, say: Say) -> None:
    """Create or replace k8s-rbac/'s objects with an admin's kubeconfig."""
    from drainer.errors import KubeError
    from drainer.k8s.kube import Kube

    try:
        kube = Kube.from_kubeconfig(kubeconfig or None, context or None)
        try:
            for document in rbac_documents():
                _create_or_replace(kube, document)
        finally:
            kube.close()
    except KubeError as e:
        raise DeployError(
            f"could not apply k8s-rbac/ (context {context}): {e}. The lifecycle hooks stay as "
            "they were; apply it yourself (kubectl apply -f k8s-rbac/) and run make deploy again",
            1,
        ) from e
    say(
        "applied k8s-rbac/ (ClusterRole and ClusterRoleBinding eks-node-drainer; the "
        "ConfigMap kube-system/eks-node-drainer-observed and its Role and RoleBinding)"
    )


def _create_or_replace(kube: Any, document: dict[str, Any]) -> None:
    """Create the object, or replace it; a ConfigMap is only created: what the drains
    wrote in it stays."""
    from drainer.errors import KubeNotFound

    plural = f"{document['kind'].lower()}s"
    version = document["apiVersion"]
    namespace = document["metadata"].get("namespace")
    path = f"/apis/{version}" if "/" in version else f"/api/{version}"
    path += f"/namespaces/{namespace}/{plural}" if namespace else f"/{plural}"
    name = document["metadata"]["name"]
    try:
        found = kube.request("GET", f"{path}/{name}", verb="get", resource=plural)
    except KubeNotFound:
        kube.request("POST", path, body=document, verb="create", resource=plural)
        return
    if document["kind"] == "ConfigMap":
        return
    document["metadata"]["resourceVersion"] = found["metadata"]["resourceVersion"]
    kube.request("PUT", f"{path}/{name}", body=document, verb="update", resource=plural)


def _invoke_json(lambda_client: Client, function: str, payload: Mapping[str, Any]) -> Any:
    """Invoke the function synchronously; its JSON object answer, or a str saying
    why there is none (not invoked, the function failed, not a JSON object)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        answer = lambda_client.invoke(
            FunctionName=function,
            InvocationType="RequestResponse",
            Payload=json.dumps(payload).encode(),
        )
    except (BotoCoreError, ClientError) as e:
        return f"could not invoke {function}: {e}"
    text = answer["Payload"].read().decode(errors="replace")
    if answer.get("FunctionError"):
        return f"{function} failed: {text[:500]}"
    try:
        result = json.loads(text)
    except ValueError:
        result = None
    return result if isinstance(result, dict) else f"{function} answered {text[:200]!r}"


def self_check(lambda_client: Client, function: str, cluster: str) -> dict[str, Any]:
    """Invoke the function with a self-check event (drainer/k8s/selfcheck.py)."""
    result = _invoke_json(lambda_client, function, {"self_check": {"cluster_name": cluster}})
    if isinstance(result, str):
        return {"passed": False, "message": result}
    passed = result.get("result") == "check_passed"
    return {
        "passed": passed,
        "message": str(result.get("message", result)),
        "plan": result.get("plan"),
    }


def forecast_lines(plan: object) -> list[str]:
    """The self-check's plan part (drainer/plan/groups.py) as make deploy prints it:
    a line per group the function drains, a warning where something would block a
    drain or the group was not planned, each blocker under it with its fix. Never a
    failure: a blocker holds a drain, not the deploy."""
    if not isinstance(plan, Mapping):
        return []
    if plan.get("not_planned"):
        return [f"warning: plan: {plan['not_planned']}"]
    lines = []
    for group in plan.get("groups", []):
        nodes = group.get("nodes", [])
        found = [(n["node"], b) for n in nodes for b in n.get("blockers", [])]
        warn = "warning: " if found or group.get("not_planned") else ""
        lines.append(f"{warn}{group.get('summary', group.get('group'))}")
        for node, blocker in found:
            budget = blocker.get("budget")
            named = "" if not budget or budget in blocker["reason"] else f" (budget {budget})"
            lines.append(f"  {blocker['pod']} on {node}: {blocker['reason']}{named}")
            lines.append(f"    fix: {blocker['fix']}")
    return lines


def sync_hooks(lambda_client: Client, function: str) -> dict[str, Any]:
    """Invoke the function once to put its groups' lifecycle hooks in place now
    ({"sync_hooks": {}}, drainer/lifecycle/hooks.py); its answer, or {"result": "sync_failed"}."""
    result = _invoke_json(lambda_client, function, {"sync_hooks": {}})
    if isinstance(result, str):
        return {"result": "sync_failed", "message": result}
    return dict(result)


def describe_sync(answer: Mapping[str, Any]) -> str:
    """make deploy's line about the hooks the function just put in place."""
    if answer.get("result") != "hooks_synced":
        return (
            f"warning: the lifecycle hooks were not synced now ({answer.get('message', answer)}); "
            "the function's schedule puts them in place within 10 minutes"
        )
    lines = [
        f"lifecycle hooks in place on {answer.get('groups', 0)} group(s): "
        + (", ".join(answer.get("covered", [])) or "none yet")
    ]
    for key, label in (("hooks_created", "created on"), ("hooks_updated", "corrected on")):
        if answer.get(key):
            lines.append(f"  {label}: {', '.join(answer[key])}")
    for name, why in dict(answer.get("skipped", {})).items():
        lines.append(f"  left alone: {name} ({why})")
    for name, whose in dict(answer.get("not_ours", {})).items():
        lines.append(
            f"  warning: {name} has a hook of that name this stack did not put ({whose}): "
            "left as it is; delete it, or give the stack another LifecycleHookName"
        )
    for name, why in dict(answer.get("failed", {})).items():
        lines.append(f"  warning: {name}: {why}")
    return "\n".join(lines)


def wait_for_self_check(
    lambda_client: Client,
    function: str,
    values: Mapping[str, str],
    options: Options,
    *,
    say: Say,
    outputs: Mapping[str, str],
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The self-check, again every few seconds while it fails for lack of RBAC (a
    person applying it now), up to options.check_wait_seconds."""
    deadline = time.monotonic() + options.check_wait_seconds
    told = False
    while True:
        check = self_check(lambda_client, function, values["ClusterName"])
        if check["passed"]:
            say(f"self-check passed: {check['message'].splitlines()[0]}")
            for line in forecast_lines(check.get("plan")):
                say(line)
            return check
        # Missing RBAC (a person applying it now), or a 401 while the access entry the
        # stack just made reaches the cluster's authenticator.
        waiting = any(
            text in check["message"] for text in ("kubectl apply -f k8s-rbac/", "401 Unauthorized")
        )
        if not waiting or time.monotonic() + options.check_poll_seconds > deadline:
            say(f"self-check failed: {check['message']}")
            return check
        if not told:
            rbac = outputs.get("RbacApplyCommand", "kubectl apply -f k8s-rbac/")
            say(
                f"self-check: {check['message']}\nwaiting for the RBAC: run, as a cluster "
                f"admin, from this repository's root:\n  {rbac}\n(checking every "
                f"{options.check_poll_seconds:g} s for up to {options.check_wait_seconds:g} s; "
                "Ctrl-C stops here, with the hooks as they were)"
            )
            told = True
        sleep(options.check_poll_seconds)


def _list_parameter(value: str) -> tuple[str, ...]:
    """A CommaDelimitedList parameter's items. CloudFormation reports an empty one as
    "", moto as "['']": both are no items."""
    return tuple(item for item in (v.strip(" []'\"") for v in value.split(",")) if item)


def _preflight(aws: Aws, values: Mapping[str, str], say: Say, stack_name: str = "") -> None:
    """make preflight's checks (tools/preflight.py) of the stack `stack_name`, before
    anything is built: a blocking one stops the deploy."""
    from tools import preflight

    checks = preflight.run(
        aws,
        preflight.Options(
            cluster_name=values["ClusterName"],
            asg_names=tuple(n for n in values.get("AsgNames", "").split(",") if n),
            asg_tag=values.get("AsgTag", ""),
            hook_name=values.get("LifecycleHookName", "eks-node-drainer"),
            subnet_ids=_list_parameter(values.get("SubnetIds", "")),
            access_entry=values.get("CreateAccessEntry", "true") == "true",
            allow_managed=values.get("AllowManagedNodeGroups", "false") == "true",
            stack_name=stack_name,
            create_hooks=values.get("CreateLifecycleHooks", "true") == "true",
        ),
    )
    say("preflight:\n" + preflight.table(checks))
    failed = preflight.blocking(checks)
    if failed:
        raise DeployError(
            f"{len(failed)} preflight check(s) block the deploy: "
            + "; ".join(f"{c.what}: {c.detail}" for c in failed)
            + ". Fix them (the table above says how); nothing was uploaded or changed",
            1,
        )


def deploy(
    options: Options,
    say: Say = print,
    *,
    sleep: Callable[[float], None] = time.sleep,
    ask: Callable[[str], str] | None = None,
) -> int:
    """The whole deploy; `sleep` paces the wait for the self-check, `ask` puts the
    question before the change set is executed (tests pass their own; default: stdin)."""
    template_body = options.template.read_text()
    if len(template_body.encode()) > TEMPLATE_URL_LIMIT:
        raise DeployError(f"{options.template} is over CloudFormation's limit of 1 MB")
    spec = template_parameters(template_body)
    named = {
        "ClusterName": options.cluster_name.strip(),
        "AsgNames": options.asg_names.strip(),
        "AsgTag": options.asg_tag.strip(),
        "Architecture": options.arch.strip(),
    }
    given = collect_parameters(
        spec, params_file=options.params_file, named=named, overrides=options.overrides
    )
    name_given = options.stack_name
    if name_given and not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,63}", name_given):
        raise DeployError(
            f"STACK_NAME={options.stack_name!r}: the function is named after the stack, so it "
            "must be 1 to 64 letters, digits or '-', starting with a letter",
            2,
        )

    aws = connect(options.region, options.profile)
    confirm = _confirmer(options, ask)
    cfn = aws.client("cloudformation")
    stack_name, stack = stack_to_deploy(aws, options, given["ClusterName"], say)
    values = effective_parameters(spec, given, stack)
    _preflight(aws, values, say, stack_name)

    zip_path, manifest = the_zip(values["Architecture"], options.zip_path, say)
    s3 = aws.client("s3")
    bucket = options.bucket or default_bucket(aws.account, aws.region)
    ensure_bucket(s3, bucket, aws.region, create=not options.bucket, say=say)
    values["CodeS3Bucket"] = bucket
    values["CodeS3Key"] = upload(s3, bucket, zip_path, manifest, say)
    template_url = upload_template(s3, bucket, template_body, aws.region)

    creating = stack is None or stack["StackStatus"] == "REVIEW_IN_PROGRESS"
    # No unsafe window: hooks that are not live yet go live only once the function
    # has proved it can drain. A scale-in before that is simply not held.
    live = not creating and _previous(stack, "CreateLifecycleHooks") == "true"
    staged = values["CreateLifecycleHooks"] == "true" and not live

    def change(
        parameters: Mapping[str, str], *, creating: bool, purpose: str = "", asked: bool = False
    ) -> bool:
        return apply_change_set(
            cfn,
            stack_name,
            template_url=template_url,
            parameters=parameters,
            creating=creating,
            poll=options.poll_seconds,
            say=say,
            purpose=purpose,
            before={} if creating else _parameters_of(stack),
            confirm=confirm if asked else None,
        )

    if staged:
        say("the lifecycle hooks stay off until the function has proved it can drain")
    first = {**values, "CreateLifecycleHooks": "false"} if staged else values
    if staged:
        say("then, once it has: CreateLifecycleHooks: false -> true")
    if not change(first, creating=creating, asked=True):
        say(f"stack {stack_name} is already up to date: nothing to change")
    outputs = _outputs(cfn, stack_name)
    version = outputs.get("Version", "(unknown)")
    say(f"stack {stack_name} deploys eks-node-drainer {version}")
    if options.apply_rbac:
        partition = aws.caller.split(":")[1] if aws.caller.count(":") > 1 else "aws"
        arn = f"arn:{partition}:eks:{aws.region}:{aws.account}:cluster/{values['ClusterName']}"
        apply_rbac(options.kubeconfig, options.context or arn, say)
    from botocore.config import Config

    # One try, waited for as long as the function may run: botocore's own retries
    # and 60 s read timeout would turn a slow self-check into "Read timeout".
    patient = Config(read_timeout=960, retries={"max_attempts": 1})
    patient_lambda = aws.session.client("lambda", region_name=aws.region, config=patient)
    function = function_name(outputs, stack_name)
    check = wait_for_self_check(
        patient_lambda,
        function,
        values,
        options,
        say=say,
        outputs=outputs,
        sleep=sleep,
    )
    if not check["passed"]:
        _cannot_drain(str(check["message"]), values, live=live, say=say)
    elif staged:
        say("turning the lifecycle hooks on")
        change(values, creating=False, purpose="-hooks-on")
    if check["passed"] and values["CreateLifecycleHooks"] == "true":
        # The hooks in place now, not at the schedule's next run (drainer/lifecycle/hooks.py).
        say(describe_sync(sync_hooks(patient_lambda, function)))
    say(next_steps(outputs, values, aws.region, stack_name))
    return 0


def parse_args(argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m tools.deploy", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument(
        "--stack-name",
        default="",
        help="default: the cluster's, eks-node-drainer-<cluster> (or an older eks-node-drainer "
        "of that cluster)",
    )
    parser.add_argument("--cluster-name", default="", help="ClusterName (make: CLUSTER_NAME)")
    parser.add_argument("--asg-names", default="", help="AsgNames, comma-separated (ASG_NAMES)")
    parser.add_argument("--asg-tag", default="", help="AsgTag, key=value (ASG_TAG)")
    parser.add_argument("--arch", default="", help="Architecture: arm64 or x86_64 (ARCH)")
    parser.add_argument("--region", default="", help="default: the AWS CLI's (REGION)")
    parser.add_argument("--profile", default="", help="AWS profile (default: AWS_PROFILE)")
    parser.add_argument("--bucket", default="", help="default: eks-node-drainer-<account>-<region>")
    parser.add_argument("--params-file", default="", help="JSON parameters (PARAMS_FILE)")
    parser.add_argument("--zip", default="", help="a zip built by make package (default: build)")
    parser.add_argument("--poll-seconds", type=float, default=5.0, help=argparse.SUPPRESS)
    parser.add_argument(
        "--apply-rbac", action="store_true", help="apply k8s-rbac/ as a cluster admin (APPLY_RBAC)"
    )
    parser.add_argument("--kubeconfig", default="", help="for --apply-rbac (KUBECONFIG)")
    parser.add_argument(
        "--context", default="", help="for --apply-rbac (CONTEXT; default: the cluster's ARN)"
    )
    parser.add_argument(
        "--check-wait-seconds",
        type=float,
        default=900.0,
        help="how long to wait for the function's self-check (the RBAC) before giving up",
    )
    parser.add_argument(
        "--yes", action="store_true", help="execute the change set without asking (YES=1)"
    )
    parser.add_argument(
        "--change-cluster",
        action="store_true",
        help="let an existing stack's ClusterName change (CHANGE_CLUSTER=1)",
    )
    parser.add_argument("overrides", nargs="*", metavar="Key=Value", help="more parameters")
    args = parser.parse_args(argv)
    return Options(
        stack_name=args.stack_name,
        cluster_name=args.cluster_name,
        asg_names=args.asg_names,
        asg_tag=args.asg_tag,
        arch=args.arch,
        region=args.region,
        profile=args.profile,
        bucket=args.bucket,
        params_file=Path(args.params_file) if args.params_file else None,
        overrides=tuple(args.overrides),
        zip_path=Path(args.zip) if args.zip else None,
        poll_seconds=args.poll_seconds,
        apply_rbac=args.apply_rbac,
        kubeconfig=args.kubeconfig,
        context=args.context,
        check_wait_seconds=args.check_wait_seconds,
        yes=args.yes,
        change_cluster=args.change_cluster,
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    return run_tool(
        "deploy",
        lambda: deploy(options),
        interrupted="the stack is as the last step left it (a new stack's lifecycle "
        "hooks stay off until make deploy completes)",
    )


if __name__ == "__main__":
    sys.exit(main())
