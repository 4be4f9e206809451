"""`make undeploy`: delete the stack, then any lifecycle hook of its function left.

    python -m tools.undeploy [--cluster-name prod | --stack-name eks-node-drainer-prod]
        [--region eu-west-1] [--yes]

The stack owns its hooks: deleting it runs its custom resource's Delete
(drainer/lifecycle/stack_hooks.py), which removes them. This reads the function's
settings first (the groups by name and tag, the hook's name, the cluster), deletes
the stack and waits until it is gone, then deletes whatever hook of the stack's is
still there: a Delete may have failed. Ours: named LIFECYCLE_HOOK_NAME (and
LAUNCH_HOOK_NAME), its NotificationMetadata naming this stack's ARN
(hooks.remove_hooks, the custom resource's own rule). A hook of the same name that
another stack, 0.1.0 or another tool made is left, with a line saying so; with
CREATE_LIFECYCLE_HOOKS false every hook is yours and none is deleted.

Besides the covered groups it looks, as the custom resource's Delete does
(hooks.find_ours_elsewhere), on every other group of the region but those tagged
for another cluster without ASG_TAG's key (one untagged by hand: the function's role
may no longer delete there, the operator's credentials can), one
DescribeLifecycleHooks a group, for at most LOOK_SECONDS; the groups it had no time
to look at are named.

Without --yes (make: YES=1) it only says what it would delete. Which stack:
`--stack-name`, else `--cluster-name`'s (tools/stacks.py), else the region's one
stack of ours.

With --cluster-name, a stack whose ClusterName is another cluster's (one named by
--stack-name too, or one of the cluster's default name moved with CHANGE_CLUSTER)
is not deleted, nor shown as to be: exit 2, naming both clusters.

Exit status: 0 done (or the dry run), 1 an AWS call failed or the stack did not
delete, 2 bad arguments (or a stack of another cluster than --cluster-name's), 3 no
region or credentials, 4 no such stack.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import ClientError

from drainer.errors import AwsError, SettingsError
from drainer.lifecycle import hooks
from drainer.lifecycle.hooks_removal import HookRemoval
from drainer.lifecycle.settings import Settings
from tools.common import Aws, DeployError, connect, describe_stack, run_tool
from tools.deploy import function_name, stack_outputs, wait_for_stack

Client = Any
Say = Callable[[str], None]

LOOK_SECONDS = 150.0
"""How long undeploy looks for the stack's hooks on the groups it does not cover."""
UNCOVERED = "the stack does not cover"


@dataclass(frozen=True)
class Options:
    stack_name: str = ""
    region: str = ""
    profile: str = ""
    yes: bool = False
    poll_seconds: float = 5.0
    cluster_name: str = ""
    """Find the stack by its cluster when no stack name is given."""
    look_seconds: float = LOOK_SECONDS
    """How long to look for the stack's hooks on the groups it does not cover."""


@dataclass(frozen=True)
class Plan:
    """What undeploy deletes: the stack, and the hooks that are the stack's."""

    stack_id: str
    settings: Settings
    ours: HookRemoval = field(default_factory=HookRemoval)
    """The dry run of hooks.remove_hooks on the covered groups: the stack's hooks
    (terminate and launch), those another tool made, those that could not be read."""
    elsewhere: hooks.HookSearch = field(default_factory=hooks.HookSearch)
    """The stack's hooks on the region's other groups (hooks.find_ours_elsewhere),
    and the groups not looked at."""
    unlisted: str = ""
    """Why the other groups could not be listed; "" when they were."""


def the_stack(cfn: Client, stack_name: str) -> dict[str, Any]:
    stack = describe_stack(cfn, stack_name)
    if stack is None:
        raise DeployError(f"no stack {stack_name} in this region; nothing to undeploy", 4)
    return stack


def other_cluster(cfn: Client, stack_name: str, cluster: str) -> str:
    """Why not to delete the stack, when CLUSTER_NAME is given and the stack drains
    another cluster (STACK_NAME=drainer-test CLUSTER_NAME=staging, drainer-test
    draining prod-eu); "" when it is the cluster's, or none was given."""
    from tools.stacks import cluster_of, default_stack_name

    if not cluster:
        return ""
    drains = cluster_of(the_stack(cfn, stack_name))
    if drains == cluster:
        return ""
    return (
        f"stack {stack_name} drains cluster {drains or '(none: it has no ClusterName)'}, "
        f"not {cluster}: nothing deleted. To delete {stack_name}, name it alone "
        f"(STACK_NAME={stack_name} without CLUSTER_NAME); {cluster}'s own stack is found "
        f"with CLUSTER_NAME={cluster} alone (by default {default_stack_name(cluster)})"
    )


def function_settings(lambda_client: Client, stack: dict[str, Any]) -> Settings:
    """The settings the stack's function runs with (its environment)."""
    name = function_name(stack_outputs(stack), str(stack["StackName"]))
    try:
        config = lambda_client.get_function_configuration(FunctionName=name)
    except ClientError as e:
        raise DeployError(
            f"cannot read function {name}'s settings ({e}); delete the stack with `aws "
            "cloudformation delete-stack` and the hooks with `aws autoscaling "
            "delete-lifecycle-hook`",
            1,
        ) from e
    variables = (config.get("Environment") or {}).get("Variables") or {}
    environment = {str(k): str(v) for k, v in variables.items()}
    if environment.get("LAUNCH_HOOK_NAME") == environment.get("LIFECYCLE_HOOK_NAME"):
        # Deployed before the two names had to differ (the settings refuse the pair
        # now): its one hook name is LIFECYCLE_HOOK_NAME's, found by this stack's
        # metadata whichever transition it has.
        environment.pop("LAUNCH_HOOK_NAME", None)
    try:
        return Settings.from_env(environment)
    except SettingsError as e:
        raise DeployError(f"function {name}'s settings do not read: {e}", 1) from e


def plan(aws: Aws, stack_name: str, look_seconds: float = LOOK_SECONDS) -> Plan:
    stack = the_stack(aws.client("cloudformation"), stack_name)
    # Ours: the hooks whose metadata names this stack (hooks.HookSpec.made), whatever
    # the function's environment says.
    settings = replace(function_settings(aws.client("lambda"), stack), stack_id=stack["StackId"])
    if not settings.create_lifecycle_hooks:  # CreateLifecycleHooks=false: the hooks are yours
        return Plan(str(stack["StackId"]), settings)
    autoscaling = aws.client("autoscaling")
    try:
        covered, _ = hooks.covered_groups(autoscaling, settings)
    except AwsError as e:
        raise DeployError(f"cannot list the tagged groups, nothing deleted: {e}", 1) from e
    names = (settings.lifecycle_hook_name, settings.launch_hook_name)
    found = hooks.remove_hooks(
        autoscaling, settings, itertools.product(covered, names), dry_run=True
    )
    deadline = time.monotonic() + look_seconds
    try:
        elsewhere = hooks.find_ours_elsewhere(autoscaling, settings, covered, deadline)
    except AwsError as e:
        return Plan(str(stack["StackId"]), settings, found, unlisted=str(e))
    return Plan(str(stack["StackId"]), settings, found, elsewhere)


def show(found: Plan, kind: Callable[[str], str], say: Say) -> None:
    """What undeploy deletes after the stack, what it leaves, what it did not see."""
    terminate = found.settings.lifecycle_hook_name
    for name in dict.fromkeys((terminate, found.settings.launch_hook_name)):
        groups = [g for g, n in found.ours.removed if n == name]
        if groups or name == terminate:
            say(f"{kind(name)} {name} on {len(groups)} group(s): {', '.join(groups) or 'none'}")
        groups = [g for g, n in found.elsewhere.ours if n == name]
        if groups:
            say(f"{kind(name)} {name} on {len(groups)} group(s) {UNCOVERED}: {', '.join(groups)}")
    for (group, name), why in sorted(found.ours.left.items()):
        say(f"left alone: {name} on {group} ({why})")
    for (group, name), error in sorted(found.ours.failed.items()):
        waited = (group, name) in found.ours.waiting
        say(f"left alone: {name} on {group} ({'' if waited else 'not read: '}{error})")
    unlooked = found.elsewhere.unlooked
    if unlooked:
        shown = ", ".join(unlooked[:20]) + (", ..." if len(unlooked) > 20 else "")
        say(
            f"{len(unlooked)} group(s) {UNCOVERED} not looked at: {shown} (out of time, or "
            "their hooks unreadable); a hook of the stack's there stays: look with `aws "
            "autoscaling describe-lifecycle-hooks --auto-scaling-group-name GROUP`"
        )
    if found.unlisted:
        say(
            f"the groups {UNCOVERED} could not be listed ({found.unlisted}): a hook of the "
            "stack's there stays (aws autoscaling describe-lifecycle-hooks)"
        )


def undeploy(aws: Aws, options: Options, say: Say) -> int:
    from tools import stacks

    stack_name, note = stacks.resolve(
        aws.client("cloudformation"), options.stack_name, options.cluster_name
    )
    if note:
        say(note)
    other = other_cluster(aws.client("cloudformation"), stack_name, options.cluster_name)
    if other:
        say(other)
        return 2
    found = plan(aws, stack_name, options.look_seconds)
    terminate = found.settings.lifecycle_hook_name

    def kind(name: str) -> str:
        return "hook" if name == terminate else "launch hook"

    say(f"stack {stack_name} ({aws.region}), cluster {found.settings.cluster_name}")
    show(found, kind, say)
    if not options.yes:
        say(
            "dry run: nothing deleted. Run again with --yes (make undeploy YES=1) to delete "
            "the stack, then these hooks"
        )
        return 0
    cfn = aws.client("cloudformation")
    since = time.time()
    say(f"deleting stack {stack_name}")
    cfn.delete_stack(StackName=stack_name)
    status = wait_for_stack(cfn, found.stack_id, since, options.poll_seconds, say)
    if status != "DELETE_COMPLETE":
        say(f"the stack ended {status}; the hooks stay until it is gone (fix, then run again)")
        return 1
    # The stack's custom resource (drainer/lifecycle/stack_hooks.py) deleted its hooks
    # with the stack; what is left is a stack's from before it, or a Delete that failed.
    # With the operator's credentials: also where the function's role may not delete
    # (a group untagged by hand), which the Delete could only name.
    expected = (*found.ours.removed, *found.elsewhere.ours)
    removal = hooks.remove_hooks(aws.client("autoscaling"), found.settings, expected)
    for group, name in removal.removed:
        where = f" (a group {UNCOVERED})" if (group, name) in found.elsewhere.ours else ""
        say(f"deleted {kind(name)} {name} on {group}{where}")
    for (group, name), error in sorted(removal.failed.items()):
        say(f"could not delete {name} on {group}: {error}")
    if expected and not removal.removed and not removal.failed:
        say("the stack's custom resource had deleted its hooks already")
    say("left: the RBAC objects (kubectl delete -f k8s-rbac/) and the code bucket")
    return 1 if removal.failed else 0


def parse_args(argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m tools.undeploy", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--stack-name", default="", help="(make: STACK_NAME)")
    parser.add_argument("--cluster-name", default="", help="its stack's (make: CLUSTER_NAME)")
    parser.add_argument("--region", default="", help="default: the AWS CLI's (REGION)")
    parser.add_argument("--profile", default="", help="AWS profile (default: AWS_PROFILE)")
    parser.add_argument("--yes", action="store_true", help="delete; without it, a dry run (YES)")
    args = parser.parse_args(argv)
    return Options(
        args.stack_name, args.region, args.profile, args.yes, cluster_name=args.cluster_name
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)

    def body() -> int:
        aws = connect(options.region, options.profile, unchanged="nothing was deleted")
        return undeploy(aws, options, lambda line: print(line, flush=True))

    return run_tool("undeploy", body, interrupted="the stack and hooks are as the last line says")


if __name__ == "__main__":
    sys.exit(main())
