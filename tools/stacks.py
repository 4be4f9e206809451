"""Which stack: one per cluster, named after it, and the stacks made before that.

A new stack's default name is `eks-node-drainer-<cluster>`, so that `make deploy
CLUSTER_NAME=staging` after prod makes a second stack instead of retargeting the
first. The function is named after the stack, and a function's name has at most 64
characters where a cluster's may have 100 (with '_', which a stack's name may not
have): a name that would not fit, or that had to change, is cut and ends in 8
characters of the cluster name's sha256, so that two clusters never share one.

A stack deployed before (named `eks-node-drainer`, for any cluster) keeps working:
`make deploy`, `make logs` and `make undeploy` find it by its ClusterName
parameter (docs/operations.md, "Several clusters and accounts").

A deploy updates only a stack of this template (refuse_foreign) and of its cluster
(refuse_cluster_change); a declined first deploy deletes the stack only when it
began it and no other deploy's change set waits on it (leave_declined).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

import yaml

from tools.common import DeployError, describe_stack

LEGACY = "eks-node-drainer"
"""The one default name of the stacks before 0.2.0, whatever their cluster."""
PREFIX = f"{LEGACY}-"
FUNCTION_NAME_LIMIT = 64
_HASH = 8

Client = Any


def default_stack_name(cluster: str) -> str:
    """eks-node-drainer-<cluster>, within the function name's 64 characters."""
    cleaned = re.sub(r"[^A-Za-z0-9-]", "-", cluster)
    name = f"{PREFIX}{cleaned}"
    if cleaned == cluster and len(name) <= FUNCTION_NAME_LIMIT:
        return name
    digest = hashlib.sha256(cluster.encode()).hexdigest()[:_HASH]
    room = FUNCTION_NAME_LIMIT - len(PREFIX) - len(digest) - 1
    return f"{PREFIX}{cleaned[:room].rstrip('-')}-{digest}"


def cluster_of(stack: Mapping[str, Any]) -> str:
    """The stack's ClusterName parameter ("" when it has none)."""
    for parameter in stack.get("Parameters", []):
        if parameter["ParameterKey"] == "ClusterName":
            return str(parameter["ParameterValue"])
    return ""


def for_cluster(cfn: Client, cluster: str) -> tuple[str, str]:
    """The stack of `cluster`: (its name, a note for the operator or "").
    eks-node-drainer-<cluster> when it exists or when no stack is there yet; the
    older eks-node-drainer when that one drains this cluster."""
    name = default_stack_name(cluster)
    if describe_stack(cfn, name) is not None:
        return name, ""
    legacy = describe_stack(cfn, LEGACY)
    if legacy is not None and cluster_of(legacy) == cluster:
        return LEGACY, (
            f"using stack {LEGACY}, deployed for cluster {cluster} before stacks were named "
            f"after their cluster (a new one would be {name}); STACK_NAME={LEGACY} says so"
        )
    return name, ""


def ours(cfn: Client) -> dict[str, str]:
    """Every stack of this region named eks-node-drainer or eks-node-drainer-*: its
    name -> its ClusterName."""
    found: dict[str, str] = {}
    paginator = cfn.get_paginator("describe_stacks")
    for page in paginator.paginate():
        for stack in page.get("Stacks", []):
            name = str(stack["StackName"])
            if name == LEGACY or name.startswith(PREFIX):
                found[name] = cluster_of(stack)
    return found


def resolve(cfn: Client, stack_name: str, cluster: str) -> tuple[str, str]:
    """The stack a tool acts on: STACK_NAME when given; else CLUSTER_NAME's
    (for_cluster); else the region's one stack of ours. (name, note)."""
    if stack_name:
        return stack_name, ""
    if cluster:
        return for_cluster(cfn, cluster)
    stacks = ours(cfn)
    if len(stacks) == 1:
        (name,) = stacks
        return name, ""
    if not stacks:
        return LEGACY, ""
    listed = ", ".join(f"{name} (cluster {c or '?'})" for name, c in sorted(stacks.items()))
    raise DeployError(
        f"several stacks of eks-node-drainer in this region: {listed}; name one with "
        "CLUSTER_NAME=<cluster> or STACK_NAME=<stack>",
        2,
    )


def refuse_cluster_change(stack_name: str, stack: Mapping[str, Any] | None, cluster: str) -> None:
    """A DeployError when the deploy would point an existing stack at another cluster
    (make deploy CHANGE_CLUSTER=1 allows it)."""
    before = cluster_of(stack or {})
    if stack is None or stack.get("StackStatus") == "REVIEW_IN_PROGRESS" or before in ("", cluster):
        return
    raise DeployError(
        f"stack {stack_name} drains cluster {before}; this deploy would retarget it to "
        f"{cluster}, and {before}'s nodes would go undrained. For a stack of {cluster}'s "
        f"own, leave STACK_NAME out (it is then {default_stack_name(cluster)}); to move "
        f"this stack to {cluster} on purpose: CHANGE_CLUSTER=1 (--change-cluster)",
        2,
    )


OUR_OUTPUTS = frozenset({"FunctionName", "Version"})
"""Outputs of template.yaml (its first versions had FunctionName alone)."""


class CfnLoader(yaml.SafeLoader):
    """Reads a CloudFormation template: intrinsic-function tags load as None."""


CfnLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def template_outputs(cfn: Client, stack_name: str) -> set[str]:
    """The output names the stack's template declares (a stack made from a change
    set, as moto makes it, reports no outputs)."""
    body = cfn.get_template(StackName=stack_name).get("TemplateBody", {})
    if isinstance(body, str):
        try:
            body = yaml.load(body, Loader=CfnLoader)  # noqa: S506 - a SafeLoader subclass
        except yaml.YAMLError:
            return set()
    outputs = body.get("Outputs") if isinstance(body, Mapping) else None
    return {str(key) for key in outputs} if isinstance(outputs, Mapping) else set()


def refuse_foreign(
    cfn: Client, stack_name: str, stack: Mapping[str, Any] | None, cluster: str
) -> None:
    """A DeployError when the stack is not one of this template's: no ClusterName
    parameter, or none of its outputs (a stack of another application, named by
    STACK_NAME), which a deploy would replace with the drainer's resources. A stack
    in REVIEW_IN_PROGRESS has no template yet (a first deploy waiting for its yes):
    this deploy's change set creates it."""
    if stack is None or stack.get("StackStatus") == "REVIEW_IN_PROGRESS":
        return
    keys = {str(p["ParameterKey"]) for p in stack.get("Parameters", [])}
    outputs = {str(o["OutputKey"]) for o in stack.get("Outputs", [])}
    if "ClusterName" in keys and (outputs or template_outputs(cfn, stack_name)) & OUR_OUTPUTS:
        return
    raise DeployError(
        f"stack {stack_name} is not one of eks-node-drainer's (it has no ClusterName parameter "
        "or no FunctionName output): this deploy would replace its resources with the "
        f"drainer's. Choose another STACK_NAME=<a new name>, or leave STACK_NAME out (the "
        f"cluster's stack is then {default_stack_name(cluster)}); nothing was built, uploaded "
        "or changed",
        2,
    )


def change_sets(cfn: Client, stack_name: str) -> list[str]:
    """The names of the change sets on the stack (for one in REVIEW_IN_PROGRESS: the
    first deploys waiting for their yes), but those being deleted."""
    summaries = cfn.list_change_sets(StackName=stack_name).get("Summaries", [])
    return [
        str(summary["ChangeSetName"])
        for summary in summaries
        if not str(summary.get("Status", "")).startswith("DELETE")
    ]


def review_note(cfn: Client, stack_name: str) -> str:
    """What a deploy says of a stack it finds in REVIEW_IN_PROGRESS: a first deploy
    waiting for its yes, or one that never ran."""
    waiting = ", ".join(change_sets(cfn, stack_name))
    if not waiting:
        return (
            f"stack {stack_name} is REVIEW_IN_PROGRESS with no change set (a first deploy "
            "that never ran): this deploy's change set creates it"
        )
    return (
        f"stack {stack_name} is REVIEW_IN_PROGRESS: another first deploy's change set(s) "
        f"({waiting}) wait for a yes; executing this deploy's creates the stack, and "
        "CloudFormation then deletes theirs"
    )


def leave_declined(
    cfn: Client, stack_name: str, change_set: str, *, creating: bool, made: bool
) -> str:
    """Delete a declined change set; for a new stack (`creating`) the stack too when
    this deploy began it (`made`) and no other change set is on it. What became of
    the stack, as the end of "stack <name> ...", for the operator."""
    cfn.delete_change_set(StackName=stack_name, ChangeSetName=change_set)
    if not creating:
        return "is as it was"
    others = ", ".join(name for name in change_sets(cfn, stack_name) if name != change_set)
    if made and not others:  # only this deploy's empty stack (REVIEW_IN_PROGRESS) was there
        cfn.delete_stack(StackName=stack_name)
        return "is as it was"
    if made:
        return (
            "stays REVIEW_IN_PROGRESS: another deploy put its change set(s) on it meanwhile "
            f"({others}), left for it"
        )
    if others:
        return (
            "is as it was: REVIEW_IN_PROGRESS, holding another deploy's change set(s) "
            f"({others}), left for it"
        )
    return (
        "is as it was: REVIEW_IN_PROGRESS, with no change set (a first deploy that never "
        f"ran); delete it with `aws cloudformation delete-stack --stack-name {stack_name}` "
        "if no deploy waits on it"
    )


def parameter_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """One line per parameter the change set sets: "Key: old -> new" for a change,
    "Key: value" for a new stack; unchanged ones left out."""
    if not before:
        return [f"{key}: {value}" for key, value in sorted(after.items())]
    return [
        f"{key}: {before.get(key, '(none)')} -> {value}"
        for key, value in sorted(after.items())
        if before.get(key) != value
    ]
