"""`make preflight`: check a cluster and its node groups before deploying the drainer.

    python -m tools.preflight --cluster-name prod --asg-names ng-a,ng-b [--region R]
        [--subnet-ids subnet-a,subnet-b] [--hook-name eks-node-drainer]
        [--no-access-entry] [--allow-managed-node-groups] [--kubeconfig PATH [--context NAME]]
        [--stack-name NAME] [--no-lifecycle-hooks]

Read-only: every call is a Describe, a List or a Kubernetes GET. It prints a table
of checks, each with the command that fixes it, and exits 1 when one blocks (a
deploy would not drain), 0 when all pass or only warn. `make deploy` runs the same
checks first and stops on a blocking one.

What it checks:
- the cluster exists and is ACTIVE; its authentication mode allows access entries
  (API or API_AND_CONFIG_MAP), unless the role is mapped in aws-auth instead; with
  --no-access-entry, a warning to map the role after the deploy: by an access entry
  in mode API (which reads no aws-auth), in aws-auth or by an entry otherwise;
- its API endpoint is reachable from where the function runs: public (and open to
  AWS's addresses), or private with SubnetIds in the cluster's VPC;
- each group exists, belongs to this cluster (its eks:cluster-name or
  kubernetes.io/cluster/<name> tag), is not an EKS managed node group (its
  eks:nodegroup-name tag or EKS's hooks Terminate-LC-Hook, Launch-LC-Hook: EKS
  drains those nodes itself, so naming one blocks unless --allow-managed-node-groups,
  and EKS's hooks are never to be deleted), and has no other terminate lifecycle
  hook, which would complete or time out the same action as ours; a hook of our name
  already there is the stack's to keep (its NotificationMetadata names the stack, or
  it is 0.1.0's on a group an update covered before), else the stack's custom
  resource refuses it and the deploy rolls back (drainer/lifecycle/stack_hooks.py):
  another stack's, 0.1.0's elsewhere or another tool's blocks. The stack is
  --stack-name, else the cluster's as make deploy finds it; unless named, a live
  stack of this cluster that put the hook only warns (it is that stack's update);
- with a kubeconfig (an admin's), that its context is the named cluster (its
  certificate authority is the EKS cluster's: a tunnel or tls-server-name still
  passes, another cluster blocks), then that k8s-rbac/ is applied as it is in this
  repository: the role grants what a drain needs and no more, bound to the group
  eks-node-drainer;
- with a kubeconfig, for each group the function would drain, the plan of a refresh
  of it as `eks-node-drainer plan --asg NAME` makes it (tools/preflight_plan.py): the
  forecast, and each blocker with its fix, as warnings (a blocker holds a refresh,
  not the deploy).

Exit status: 0 ready (warnings allowed), 1 a check blocks, 2 bad arguments, 3 no
region or credentials.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from drainer import aws as drainer_aws
from drainer.k8s.selfcheck import Permission, describe
from drainer.lifecycle import hooks as drainer_hooks
from drainer.lifecycle import managed
from drainer.lifecycle.admission import STACK_KEY
from tools.common import Aws, connect, describe_stack, normalise_names, rbac_documents, run_tool
from tools.preflight_plan import Where, check_plans
from tools.preflight_rows import Check, Status

GROUP = "eks-node-drainer"
TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"

Client = Any


@dataclass(frozen=True)
class Options:
    cluster_name: str
    asg_names: tuple[str, ...]
    region: str = ""
    asg_tag: str = ""
    """AsgTag, key=value: every group carrying it is checked too."""
    profile: str = ""
    hook_name: str = "eks-node-drainer"
    subnet_ids: tuple[str, ...] = ()
    access_entry: bool = True
    """The stack creates an EKS access entry (CreateAccessEntry=true, the default)."""
    kubeconfig: str = ""
    context: str = ""
    allow_managed: bool = False
    """AllowManagedNodeGroups=true: our hook goes on EKS managed node groups too."""
    stack_name: str = ""
    """STACK_NAME, the stack to deploy; "" the cluster's, as make deploy finds it
    without STACK_NAME (tools/stacks.py)."""
    create_hooks: bool = True
    """CreateLifecycleHooks=true (the default): the stack's custom resource puts the
    hooks, and refuses a hook of the name that it did not put."""


# --- the cluster --------------------------------------------------------------------------


def check_cluster(eks: Client, options: Options) -> tuple[list[Check], dict[str, Any] | None]:
    from botocore.exceptions import ClientError

    name = options.cluster_name
    try:
        cluster: dict[str, Any] = eks.describe_cluster(name=name)["cluster"]
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise
        fix = "aws eks list-clusters --region <region>  # then CLUSTER_NAME=<one of them>"
        return [Check(f"cluster {name}", Status.FAIL, "no such cluster in this region", fix)], None
    status = cluster.get("status", "")
    version = cluster.get("version", "?")
    found = Check(
        f"cluster {name}",
        Status.OK if status == "ACTIVE" else Status.FAIL,
        f"{status}, Kubernetes {version}",
        "" if status == "ACTIVE" else "wait until the cluster is ACTIVE",
    )
    return [found, check_access(cluster, options), check_endpoint(cluster, options)], cluster


def check_access(cluster: dict[str, Any], options: Options) -> Check:
    mode = (cluster.get("accessConfig") or {}).get("authenticationMode")
    what = "authentication mode"
    if mode is None:  # the API has answered with it since access entries exist
        return Check(
            what,
            Status.WARN,
            "not reported: access entries need API or API_AND_CONFIG_MAP",
            f"aws eks describe-cluster --name {options.cluster_name} --query cluster.accessConfig",
        )
    if not options.access_entry:
        return _mapped_by_hand(mode, options)
    if mode in ("API", "API_AND_CONFIG_MAP"):
        return Check(what, Status.OK, f"{mode}: the stack's access entry maps the function")
    return Check(
        what,
        Status.FAIL,
        f"{mode} does not take access entries, and the stack creates one",
        f"aws eks update-cluster-config --name {options.cluster_name} "
        "--access-config authenticationMode=API_AND_CONFIG_MAP   "
        f"(or deploy with CreateAccessEntry=false and map the role in aws-auth to {GROUP})",
    )


def _mapped_by_hand(mode: str, options: Options) -> Check:
    """CreateAccessEntry=false: the stack maps the function's role nowhere; the
    operator does, after the deploy (the role is the stack's): in aws-auth, which
    mode API never reads, or with an access entry like the stack's own. A warning,
    as the role to map does not exist before the deploy."""
    entry = (
        f"aws eks create-access-entry --cluster-name {options.cluster_name} "
        f"--principal-arn <the stack's RoleArn output> --type STANDARD --kubernetes-groups {GROUP}"
    )
    what = "authentication mode"
    if mode == "API":
        return Check(
            what,
            Status.WARN,
            "API, and CreateAccessEntry=false: the stack creates no access entry and "
            "aws-auth is not read in this mode, so nothing maps the function's role "
            "until you create its entry after the deploy",
            f"{entry}   (or deploy with CreateAccessEntry=true)",
        )
    if mode == "API_AND_CONFIG_MAP":
        return Check(
            what,
            Status.WARN,
            f"{mode}, and CreateAccessEntry=false: map the function's role in aws-auth "
            f"to group {GROUP}, or create its access entry, after the deploy",
            entry,
        )
    return Check(what, Status.WARN, f"{mode}: map the function's role in aws-auth to group {GROUP}")


_SUBNET_FIX = (
    'make deploy ... PARAMS="SubnetIds=subnet-a,subnet-b SecurityGroupIds=sg-..." '
    "(private subnets of the cluster's VPC, with a route to the AWS APIs)"
)


def check_endpoint(cluster: dict[str, Any], options: Options) -> Check:
    vpc = cluster.get("resourcesVpcConfig") or {}
    public = vpc.get("endpointPublicAccess", True)
    private = vpc.get("endpointPrivateAccess", False)
    cidrs = vpc.get("publicAccessCidrs") or ["0.0.0.0/0"]
    what = "API endpoint"
    if options.subnet_ids:
        if private:
            return Check(what, Status.OK, "private endpoint, reached from the function's subnets")
        return Check(
            what,
            Status.WARN,
            "the function runs in subnets but the endpoint is public only: its calls go "
            "through the subnets' NAT, whose address must be in the public access CIDRs",
        )
    if not public:
        return Check(
            what, Status.FAIL, "private only, and the function runs outside any VPC", _SUBNET_FIX
        )
    if "0.0.0.0/0" not in cidrs:
        return Check(
            what,
            Status.WARN,
            f"public, open only to {', '.join(cidrs)}: a function outside a VPC calls from "
            "AWS's own addresses, likely refused",
            _SUBNET_FIX,
        )
    return Check(what, Status.OK, "public: the function reaches it from outside a VPC")


def check_subnets(ec2: Client, cluster: dict[str, Any], options: Options) -> list[Check]:
    if not options.subnet_ids:
        return []
    from botocore.exceptions import ClientError

    vpc = (cluster.get("resourcesVpcConfig") or {}).get("vpcId", "")
    try:
        subnets = ec2.describe_subnets(SubnetIds=list(options.subnet_ids))["Subnets"]
    except ClientError as e:
        return [Check("subnets", Status.FAIL, str(e), "aws ec2 describe-subnets --region <region>")]
    elsewhere = [s["SubnetId"] for s in subnets if vpc and s.get("VpcId") != vpc]
    if elsewhere:
        return [
            Check(
                "subnets",
                Status.FAIL,
                f"{', '.join(elsewhere)} not in the cluster's VPC {vpc}",
                f"aws ec2 describe-subnets --filters Name=vpc-id,Values={vpc}",
            )
        ]
    return [Check("subnets", Status.OK, f"{len(subnets)} in the cluster's VPC {vpc}")]


# --- the node groups ------------------------------------------------------------------------


def check_groups(autoscaling: Client, options: Options, home: Home | None = None) -> list[Check]:
    home = home or Home("")
    checks = check_named_groups(autoscaling, options, home) if options.asg_names else []
    if options.asg_tag:
        checks += check_tagged_groups(autoscaling, options, home)
    return checks


def check_tagged_groups(autoscaling: Client, options: Options, home: Home) -> list[Check]:
    """The groups carrying AsgTag: another cluster's are left alone by the function
    (not blocking); none yet is a warning (groups may be tagged later)."""
    key, _, value = options.asg_tag.partition("=")
    groups = [
        g
        for page in autoscaling.get_paginator("describe_auto_scaling_groups").paginate(
            Filters=[{"Name": f"tag:{key}", "Values": [value]}]
        )
        for g in page["AutoScalingGroups"]
        if g["AutoScalingGroupName"] not in options.asg_names
    ]
    if not groups and not options.asg_names:
        return [
            Check(
                f"tag {options.asg_tag}",
                Status.WARN,
                "no Auto Scaling group carries it yet: nothing is drained until one does",
                "aws autoscaling create-or-update-tags --tags ResourceId=<group>,"
                f"ResourceType=auto-scaling-group,Key={key},Value={value},PropagateAtLaunch=false",
            )
        ]
    checks: list[Check] = []
    for group in groups:
        checks += _group(autoscaling, group, (options, home), tagged=True)
    return checks


def check_named_groups(autoscaling: Client, options: Options, home: Home) -> list[Check]:
    found = {
        g["AutoScalingGroupName"]: g
        for page in autoscaling.get_paginator("describe_auto_scaling_groups").paginate(
            AutoScalingGroupNames=list(options.asg_names)
        )
        for g in page["AutoScalingGroups"]
    }
    checks: list[Check] = []
    for name in options.asg_names:
        group = found.get(name)
        if group is None:
            checks.append(
                Check(
                    f"group {name}",
                    Status.FAIL,
                    "no such Auto Scaling group in this region",
                    "aws autoscaling describe-auto-scaling-groups --query "
                    "'AutoScalingGroups[].AutoScalingGroupName'",
                )
            )
            continue
        checks += _group(autoscaling, group, (options, home), tagged=False)
    return checks


def _group(
    autoscaling: Client, group: dict[str, Any], context: tuple[Options, Home], *, tagged: bool
) -> list[Check]:
    """A group's rows: whose it is (its cluster, an EKS managed node group), its hooks.
    A tagged group that the function leaves alone is one row, never blocking."""
    options, home = context
    name = group["AutoScalingGroupName"]
    hooks = autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=name)["LifecycleHooks"]
    tags = drainer_aws.tag_map(group.get("Tags", []))
    belongs = _belongs(name, tags, options.cluster_name)
    if tagged and belongs.status == Status.FAIL:
        return [Check(belongs.what, Status.OK, f"tagged, but {belongs.detail}: left alone")]
    nodegroup = managed.nodegroup(tags, (h["LifecycleHookName"] for h in hooks))
    if nodegroup and belongs.status != Status.FAIL:
        belongs = _managed(name, nodegroup, options, tagged=tagged)
        if tagged and not options.allow_managed:
            return [belongs]
    if belongs.status != Status.FAIL:  # a group the function would drain
        belongs = replace(belongs, group=name)
    return [belongs, _hooks(name, hooks, options, home)]


def _managed(name: str, nodegroup: str, options: Options, *, tagged: bool) -> Check:
    """An EKS managed node group's row: EKS drains it itself; our hook goes beside
    EKS's only when the operator asks (drainer/lifecycle/managed.py)."""
    what = f"group {name}"
    eks = f"EKS managed node group {nodegroup}"
    opt_in = "ALLOW_MANAGED_NODE_GROUPS=1 (parameter AllowManagedNodeGroups=true)"
    if options.allow_managed:
        return Check(
            what,
            Status.WARN,
            f"{eks}, our hook beside EKS's own as asked: {managed.BOTH_FIRE}",
            "leave managed node groups out unless you want both drains",
        )
    if tagged:
        return Check(
            what,
            Status.WARN,
            f"tagged, but {eks}: left alone, EKS drains its nodes itself",
            f"untag it, or to drain it too: {opt_in}",
        )
    return Check(
        what,
        Status.FAIL,
        f"{eks}: EKS drains its nodes itself on scale-in and updates, with its own "
        "hooks (leave them in place); the stack would refuse to hook it",
        f"leave it out of ASG_NAMES; or, to put our hook beside EKS's anyway, {opt_in} "
        "(preflight then says what happens when both hooks fire)",
    )


def _belongs(name: str, tags: dict[str, str], cluster: str) -> Check:
    what = f"group {name}"
    # The function's own reading of the tags (hooks.tag_admits), so that preflight
    # and the function agree on a group tagged for several clusters.
    tagged = drainer_aws.CLUSTER_NAME_TAG in tags or any(
        key.startswith(drainer_aws.CLUSTER_TAG_PREFIX) for key in tags
    )
    owner = (drainer_aws.cluster_name_for("", tags, cluster) or "") if tagged else ""
    if owner and owner != cluster:
        return Check(
            what,
            Status.FAIL,
            f"belongs to cluster {owner}, not {cluster}",
            f"leave it out of ASG_NAMES, or deploy a stack for {owner}",
        )
    if not owner:
        return Check(
            what,
            Status.WARN,
            f"no eks:cluster-name or kubernetes.io/cluster/{cluster} tag: cannot tell its "
            "cluster (the function uses ClusterName)",
            f"aws autoscaling create-or-update-tags --tags ResourceId={name},"
            f"ResourceType=auto-scaling-group,Key=eks:cluster-name,Value={cluster},"
            "PropagateAtLaunch=false",
        )
    return Check(what, Status.OK, f"self-managed, in cluster {cluster}")


def _hooks(name: str, hooks: list[dict[str, Any]], options: Options, home: Home) -> Check:
    ours = options.hook_name
    terminating = [
        h["LifecycleHookName"]
        for h in hooks
        if h.get("LifecycleTransition") == TERMINATING and h["LifecycleHookName"] != ours
    ]
    # EKS's own hooks are EKS's drain: never another tool to remove.
    eks = [n for n in (h["LifecycleHookName"] for h in hooks) if managed.is_eks_hook(n)]
    others = [n for n in terminating if not managed.is_eks_hook(n)]
    what = f"group {name} hooks"
    if others:
        return Check(
            what,
            Status.FAIL,
            f"other terminate hook(s) {', '.join(others)}: another tool completes or times "
            "out the same termination while the drain runs",
            f"remove that tool, then: aws autoscaling delete-lifecycle-hook "
            f"--auto-scaling-group-name {name} --lifecycle-hook-name {others[0]}",
        )
    mine = [h for h in hooks if h["LifecycleHookName"] == ours]
    found = (
        _whose_hook(name, mine[0], options, home)
        if mine
        else Check(what, Status.OK, "no other tool's terminate hook")
    )
    if eks:
        detail = f"{found.detail}; EKS's own {', '.join(sorted(eks))}: EKS's drain, left in place"
        found = replace(found, detail=detail)
    return replace(found, what=what)


# --- whose hook of our name -----------------------------------------------------------------


@dataclass(frozen=True)
class Home:
    """The stack the deploy acts on, as preflight finds it, and what its custom
    resource takes for its own (drainer/lifecycle/stack_hooks.py)."""

    name: str
    stack_id: str = ""
    """"" when it does not exist yet: the deploy is a Create, which adopts nothing."""
    named_before: frozenset[str] = frozenset()
    tagged_before: bool = False
    told: bool = False
    """STACK_NAME was given: another stack's hook can be no update's own."""
    cfn: Any = field(default=None, compare=False, repr=False)


def find_home(cfn: Client, options: Options) -> Home:
    """The stack make deploy would create or update: STACK_NAME, else the cluster's."""
    from tools import stacks

    name, _ = stacks.resolve(cfn, options.stack_name, options.cluster_name)
    told = bool(options.stack_name)
    stack = describe_stack(cfn, name)
    if stack is None or stack.get("StackStatus") in ("REVIEW_IN_PROGRESS", "DELETE_COMPLETE"):
        return Home(name, told=told, cfn=cfn)
    values = {p["ParameterKey"]: str(p.get("ParameterValue") or "") for p in stack["Parameters"]}
    named = {g.strip(" []'\"") for g in values.get("AsgNames", "").split(",")} - {""}
    tagged = bool(values.get("AsgTag", "").strip(" []'\""))
    return Home(name, str(stack["StackId"]), frozenset(named), tagged, told, cfn)


def _whose_hook(group: str, found: dict[str, Any], options: Options, home: Home) -> Check:
    """Our hook name on `group`: is it the stack's to keep? The custom resource's rule
    (HookSpec.made, from_0_1_0, stack_hooks._adoptable): this stack's (its metadata
    names it), or 0.1.0's ({"cluster_name"} only) on a group an update covered before;
    any other one (another stack's, 0.1.0's elsewhere, another tool's) is a warning:
    the stack's Create or Update may refuse it and roll back."""
    ours, cluster = options.hook_name, options.cluster_name
    fields = {"cluster_name": cluster, STACK_KEY: home.stack_id}
    spec = drainer_hooks.HookSpec(
        ours, 0, json.dumps({k: v for k, v in fields.items() if v}), owner=home.stack_id
    )
    there = f"hook {ours} already there"
    owner = drainer_hooks.owner_of(found)
    if home.stack_id and spec.made(found):
        return Check("", Status.OK, f"{there}, put by this stack ({home.name})")
    if not options.create_hooks:
        return _yours(found, options, home)
    if owner:
        return _another_stacks(group, owner, options, home)
    if spec.from_0_1_0(found):
        return _from_0_1_0(group, options, home)
    if not str(found.get("NotificationMetadata") or "").strip():
        return Check("", Status.OK, there)
    return Check(
        "",
        Status.WARN,
        f"{there}, not this stack's ({drainer_hooks.whose(found)}: another tool's or "
        f"another cluster's): the stack's custom resource refuses it, and {_ROLLS_BACK}",
        _delete_or_leave(group, ours),
    )


_ROLLS_BACK = (
    "a Create or Update that does not adopt it may fail and roll back (make deploy's "
    "staged deploy adopts 0.1.0's on the groups it names)"
)
"""A warning, never a block: what the stack makes of the hook depends on how it is
deployed (make deploy creates the stack with its hooks off, then turns them on)."""


def _yours(found: dict[str, Any], options: Options, home: Home) -> Check:
    """CreateLifecycleHooks=false: the hooks are the operator's; the function leaves
    the actions of one naming another stack or cluster to that one (admission.py)."""
    there = f"hook {options.hook_name} already there (CreateLifecycleHooks=false: yours)"
    owner = drainer_hooks.owner_of(found)
    metadata = str(found.get("NotificationMetadata") or "")
    cluster = drainer_aws.cluster_name_for(metadata, {}, "")
    if (owner and owner != home.stack_id) or (cluster and cluster != options.cluster_name):
        return Check(
            "",
            Status.WARN,
            f"{there}, but {drainer_hooks.whose(found)}: the function leaves its lifecycle "
            "actions to that deployment, and drains nothing on this group",
            f'put the hook with NotificationMetadata {{"cluster_name": '
            f'"{options.cluster_name}"}} (aws autoscaling put-lifecycle-hook), or '
            "deploy with CreateLifecycleHooks=true",
        )
    return Check("", Status.OK, there)


def _delete_or_leave(group: str, hook: str) -> str:
    return (
        f"aws autoscaling delete-lifecycle-hook --auto-scaling-group-name {group} "
        f"--lifecycle-hook-name {hook}   (once what put it no longer needs it), or leave "
        f"{group} out of ASG_NAMES and ASG_TAG"
    )


def _from_0_1_0(group: str, options: Options, home: Home) -> Check:
    """0.1.0's hook: an Update adopts it on a group the stack covered before."""
    there = (
        f"hook {options.hook_name} already there, put by 0.1.0 (its NotificationMetadata "
        f"names cluster {options.cluster_name} and no stack)"
    )
    if home.stack_id and (group in home.named_before or home.tagged_before):
        return Check("", Status.OK, f"{there}: this update of {home.name} adopts it")
    why = (
        f"{home.name} did not cover {group} before"
        if home.stack_id
        else f"{home.name} does not exist yet, and a Create adopts nothing"
    )
    return Check(
        "",
        Status.WARN,
        f"{there}: only an update of the stack that covered the group adopts it; {why}, "
        f"so {_ROLLS_BACK}",
        "update the 0.1.0 stack instead (STACK_NAME=<its name>), or "
        + _delete_or_leave(group, options.hook_name),
    )


def _another_stacks(group: str, owner: str, options: Options, home: Home) -> Check:
    """A hook whose metadata names a stack other than this one."""
    parts = owner.split("/")
    name = parts[1] if len(parts) > 2 else owner
    stack = _described(home.cfn, owner)
    live = stack is not None and stack.get("StackStatus") != "DELETE_COMPLETE"
    cluster = _cluster_of(stack) if live and stack is not None else ""
    there = f"hook {options.hook_name} already there, put by the stack {name}"
    if live and cluster == options.cluster_name and not home.told:
        return Check(
            "",
            Status.WARN,
            f"{there}, another stack of cluster {cluster}: an update of {name} keeps it, "
            f"but the stack {home.name} refuses it and {_ROLLS_BACK}",
            f"make deploy STACK_NAME={name} ... (make preflight --stack-name {name} "
            f"checks it), or first make undeploy STACK_NAME={name} YES=1 (its hooks go)",
        )
    state = f"of cluster {cluster}" if live else "that no longer exists"
    fix = (
        f"make undeploy STACK_NAME={name} YES=1 (its hooks go), or leave {group} out of "
        "ASG_NAMES and ASG_TAG"
        if live
        else _delete_or_leave(group, options.hook_name)
    )
    return Check(
        "",
        Status.WARN,
        f"{there}, {state}: the stack {home.name}'s custom resource refuses it, and {_ROLLS_BACK}",
        fix,
    )


def _described(cfn: Client, stack: str) -> dict[str, Any] | None:
    """The stack by name or ARN; None when it is not there or cannot be read."""
    from botocore.exceptions import ClientError

    if cfn is None:
        return None
    try:
        return describe_stack(cfn, stack)
    except ClientError:
        return None


def _cluster_of(stack: dict[str, Any]) -> str:
    from tools import stacks

    return stacks.cluster_of(stack)


# --- Kubernetes RBAC ------------------------------------------------------------------------


def grants(rules: Iterable[dict[str, Any]]) -> set[Permission]:
    """What RBAC rules grant, one (verb, group, resource) each, as the self-check asks."""
    return {
        (verb, group, resource)
        for rule in rules
        for group in rule.get("apiGroups") or [""]
        for resource in rule.get("resources") or []
        for verb in rule.get("verbs") or []
    }


def check_rbac(kube: Any) -> list[Check]:
    """The cluster's eks-node-drainer role and binding against k8s-rbac/ (as an admin)."""
    from drainer.errors import KubeNotFound

    (wanted,) = (d for d in rbac_documents() if d["kind"] == "ClusterRole")
    fix = "kubectl apply -f k8s-rbac/   (from this repository's root, as a cluster admin)"
    base = "/apis/rbac.authorization.k8s.io/v1"
    try:
        role = kube.request(
            "GET", f"{base}/clusterroles/{GROUP}", verb="get", resource="clusterroles"
        )
        binding = kube.request(
            "GET",
            f"{base}/clusterrolebindings/{GROUP}",
            verb="get",
            resource="clusterrolebindings",
        )
    except KubeNotFound:
        return [Check("k8s-rbac/", Status.FAIL, "not applied to the cluster", fix)]
    need = grants(wanted["rules"])
    has = grants(role.get("rules") or [])
    checks = []
    missing = sorted(need - has)
    extra = sorted(has - need)
    if missing:
        lacking = ", ".join(describe(p) for p in missing)
        checks.append(Check("RBAC role", Status.FAIL, f"lacks {lacking}", fix))
    elif extra:
        more = ", ".join(describe(p) for p in extra)
        checks.append(
            Check("RBAC role", Status.WARN, f"grants more than a drain needs: {more}", fix)
        )
    else:
        checks.append(Check("RBAC role", Status.OK, "exactly what a drain needs"))
    subjects = {(s.get("kind"), s.get("name")) for s in binding.get("subjects") or []}
    bound = binding.get("roleRef", {}).get("name") == GROUP and ("Group", GROUP) in subjects
    checks.append(
        Check("RBAC binding", Status.OK, f"group {GROUP} -> role {GROUP}")
        if bound
        else Check("RBAC binding", Status.FAIL, f"does not bind group {GROUP} to the role", fix)
    )
    return checks


# --- the kubeconfig is the cluster's -------------------------------------------------------

_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", re.DOTALL)


def certificates(pem: bytes) -> set[bytes]:
    """The DER bytes of each certificate in a PEM bundle (whitespace and order aside)."""
    return {base64.b64decode(b"".join(body.split())) for body in _PEM.findall(pem)}


def kubeconfig_cluster(path: str, context: str) -> tuple[str, str, bytes]:
    """The context's (name, server, CA PEM) as kubectl would pick them (b"" without a CA)."""
    from drainer.k8s import kubeconfig

    merged = kubeconfig.Merged(kubeconfig.files(path))
    name = context or merged.current
    if name not in merged.contexts:
        raise kubeconfig.KubeconfigError(f"context '{name}' is not in the kubeconfig")
    cluster_name = str(merged.contexts[name].value.get("cluster") or "")
    if cluster_name not in merged.clusters:
        raise kubeconfig.KubeconfigError(
            f"cluster '{cluster_name}' of context '{name}' is not in it"
        )
    entry = merged.clusters[cluster_name]
    server = str(entry.value.get("server") or "")
    if entry.value.get("certificate-authority-data"):
        return name, server, base64.b64decode(str(entry.value["certificate-authority-data"]))
    if entry.value.get("certificate-authority"):
        return (
            name,
            server,
            (entry.directory / str(entry.value["certificate-authority"])).read_bytes(),
        )
    return name, server, b""


def check_kubeconfig(cluster: dict[str, Any] | None, options: Options) -> Check:
    """Is the kubeconfig's context the named EKS cluster? Its certificate authority
    against the cluster's certificateAuthority.data: an SSH tunnel or a proxy
    (another server address, tls-server-name) still passes, another cluster does not.
    Without a CA in the kubeconfig, its server against the cluster's endpoint."""
    from drainer.k8s.kubeconfig import KubeconfigError

    what = "kubeconfig"
    name = options.cluster_name
    try:
        context, server, ca = kubeconfig_cluster(options.kubeconfig, options.context)
    except (KubeconfigError, OSError, ValueError) as e:
        return Check(what, Status.FAIL, f"cannot read {options.kubeconfig}: {e}")
    if cluster is None:
        return Check(what, Status.FAIL, f"context {context}: no cluster {name} to compare it with")
    fix = (
        f"aws eks update-kubeconfig --name {name} --region <region>, then "
        f"CONTEXT=<that context> (as aws eks names it: arn:...:cluster/{name})"
    )
    endpoint = str(cluster.get("endpoint") or "")
    if ca:
        theirs = certificates(
            base64.b64decode((cluster.get("certificateAuthority") or {}).get("data") or "")
        )
        if certificates(ca) & theirs:
            return Check(what, Status.OK, f"context {context} ({server}): cluster {name}'s CA")
        return Check(
            what,
            Status.FAIL,
            f"context {context} ({server}) is not cluster {name}: its certificate authority "
            "is another cluster's; the RBAC was not checked",
            fix,
        )
    if server.rstrip("/") == endpoint.rstrip("/"):
        return Check(what, Status.OK, f"context {context}: cluster {name}'s endpoint")
    return Check(
        what,
        Status.FAIL,
        f"context {context} has no certificate authority to compare, and its server {server} "
        f"is not cluster {name}'s endpoint {endpoint}; the RBAC was not checked",
        fix,
    )


# --- the whole ------------------------------------------------------------------------------


def run(aws: Aws, options: Options) -> list[Check]:
    checks, cluster = check_cluster(aws.client("eks"), options)
    if cluster is not None:
        checks += check_subnets(aws.client("ec2"), cluster, options)
    home = find_home(aws.client("cloudformation"), options)
    checks += check_groups(aws.client("autoscaling"), options, home)
    if not options.kubeconfig:
        return checks
    identity = check_kubeconfig(cluster, options)
    checks.append(identity)
    if identity.status == Status.FAIL:
        return checks
    rbac, readable = check_cluster_rbac(options)
    checks += rbac
    groups = [c.group for c in checks if c.group]
    if readable and groups:
        where = Where(options.kubeconfig, options.context, aws.region, options.profile)
        checks += check_plans(groups, where)
    return checks


def check_cluster_rbac(options: Options) -> tuple[list[Check], bool]:
    """k8s-rbac/ as applied to the cluster, and whether the cluster could be read
    at all: an identity that may not read RBAC (403) still reads the rest, and the
    groups are planned; an unreachable or unauthenticated API server is said once,
    here, and nothing else is read."""
    from drainer.errors import KubeError, KubeForbidden
    from drainer.k8s.kube import Kube

    try:
        kube = Kube.from_kubeconfig(options.kubeconfig, options.context or None)
        try:
            return check_rbac(kube), True
        finally:
            kube.close()
    except KubeError as e:
        failed = Check("k8s-rbac/", Status.FAIL, f"cannot check: {e}")
        return [failed], isinstance(e, KubeForbidden)


def table(checks: Sequence[Check]) -> str:
    width = max(len(c.what) for c in checks)
    lines = []
    for check in checks:
        lines.append(f"{check.status:<4}  {check.what:<{width}}  {check.detail}")
        if check.fix and check.status != Status.OK:
            lines.append(f"{'':<4}  {'':<{width}}  fix: {check.fix}")
    return "\n".join(lines)


def blocking(checks: Sequence[Check]) -> list[Check]:
    return [c for c in checks if c.status == Status.FAIL]


def parse_args(argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m tools.preflight", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--cluster-name", required=True, help="(make: CLUSTER_NAME)")
    parser.add_argument("--asg-names", default="", help="comma-separated (ASG_NAMES)")
    parser.add_argument("--asg-tag", default="", help="key=value (ASG_TAG)")
    parser.add_argument("--region", default="", help="default: the AWS CLI's (REGION)")
    parser.add_argument("--profile", default="")
    parser.add_argument("--hook-name", default="eks-node-drainer", help="LifecycleHookName")
    parser.add_argument("--subnet-ids", default="", help="SubnetIds, comma-separated")
    parser.add_argument(
        "--no-access-entry", action="store_true", help="CreateAccessEntry=false (aws-auth)"
    )
    parser.add_argument("--stack-name", default="", help="STACK_NAME: default the cluster's")
    parser.add_argument(
        "--no-lifecycle-hooks", action="store_true", help="CreateLifecycleHooks=false"
    )
    parser.add_argument("--kubeconfig", default="", help="check k8s-rbac/ too (KUBECONFIG)")
    parser.add_argument("--context", default="", help="kubeconfig context (CONTEXT)")
    parser.add_argument(
        "--allow-managed-node-groups",
        action="store_true",
        help="put our hook on EKS managed node groups too (ALLOW_MANAGED_NODE_GROUPS=1)",
    )
    args = parser.parse_args(argv)
    names = tuple(n for n in normalise_names(args.asg_names).split(",") if n)
    if not args.cluster_name.strip() or not (names or args.asg_tag.strip()):
        parser.error("CLUSTER_NAME and ASG_NAMES are required (ASG_TAG may stand for ASG_NAMES)")
    return Options(
        cluster_name=args.cluster_name.strip(),
        asg_names=names,
        asg_tag=args.asg_tag.strip(),
        region=args.region,
        profile=args.profile,
        hook_name=args.hook_name,
        subnet_ids=tuple(s for s in normalise_names(args.subnet_ids).split(",") if s),
        access_entry=not args.no_access_entry,
        kubeconfig=args.kubeconfig,
        context=args.context,
        allow_managed=args.allow_managed_node_groups,
        stack_name=args.stack_name.strip(),
        create_hooks=not args.no_lifecycle_hooks,
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    return run_tool(
        "preflight",
        lambda: _report(connect(options.region, options.profile, unchanged=""), options),
    )


def _report(aws: Aws, options: Options) -> int:
    checks = run(aws, options)
    print(f"preflight for cluster {options.cluster_name} in {aws.region} ({aws.account}):")
    print(table(checks))
    failed = blocking(checks)
    if failed:
        print(f"\n{len(failed)} check(s) block a deploy; fix them and run again.")
        return 1
    warned = any(c.status == Status.WARN for c in checks)
    print("\nready to deploy" + (" (read the warnings)" if warned else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
