"""`make undeploy`: delete the stack, then any lifecycle hook of its function left.

    python -m tools.undeploy [--stack-name eks-node-drainer] [--region eu-west-1] [--yes]

The stack owns its hooks: deleting it runs its custom resource's Delete
(drainer/lifecycle/stack_hooks.py), which removes them. This reads the function's
settings first (the groups by name and tag, the hook's name, the cluster), deletes
the stack and waits until it is gone, then deletes whatever hook of the stack's is
still there: a stack deployed before the custom resource had none, and a Delete
may have failed. Ours: named LIFECYCLE_HOOK_NAME (and LAUNCH_HOOK_NAME), its
NotificationMetadata as the function writes it (hooks.remove_hooks, the custom
resource's own rule). A hook of the same name that another tool made is left,
with a line saying so; with CREATE_LIFECYCLE_HOOKS false every hook is yours and
none is deleted.

Without --yes (make: YES=1) it only says what it would delete.

Exit status: 0 done (or the dry run), 1 an AWS call failed or the stack did not
delete, 2 bad arguments, 3 no region or credentials, 4 no such stack.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from drainer import aws as drainer_aws
from drainer.errors import AwsError, SettingsError
from drainer.lifecycle import hooks
from drainer.lifecycle.settings import Settings
from tools.deploy import (
    Aws,
    DeployError,
    connect,
    describe_stack,
    function_name,
    run_tool,
    stack_outputs,
    wait_for_stack,
)

Client = Any
Say = Callable[[str], None]


@dataclass(frozen=True)
class Options:
    stack_name: str = "eks-node-drainer"
    region: str = ""
    profile: str = ""
    yes: bool = False
    poll_seconds: float = 5.0


@dataclass(frozen=True)
class Plan:
    """What undeploy deletes: the stack, and the hooks that are the stack's."""

    stack_id: str
    settings: Settings
    hooks: tuple[str, ...]
    """Groups whose hook this stack's function made."""
    others: dict[str, str]
    """Groups with a hook of the same name that is not this stack's, and why."""
    launch_hooks: tuple[str, ...] = ()
    """Groups whose launch hook (LAUNCH_HOOK) this stack's function made."""


def the_stack(cfn: Client, stack_name: str) -> dict[str, Any]:
    stack = describe_stack(cfn, stack_name)
    if stack is None:
        raise DeployError(f"no stack {stack_name} in this region; nothing to undeploy", 4)
    return stack


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
    try:
        return Settings.from_env(environment)
    except SettingsError as e:
        raise DeployError(f"function {name}'s settings do not read: {e}", 1) from e


def plan(aws: Aws, stack_name: str) -> Plan:
    stack = the_stack(aws.client("cloudformation"), stack_name)
    settings = function_settings(aws.client("lambda"), stack)
    if not settings.create_lifecycle_hooks:  # CreateLifecycleHooks=false: the hooks are yours
        return Plan(str(stack["StackId"]), settings, (), {})
    autoscaling = aws.client("autoscaling")
    spec = hooks.HookSpec.from_settings(settings)
    try:
        covered, _ = hooks.covered_groups(autoscaling, settings)
    except AwsError as e:
        raise DeployError(f"cannot list the tagged groups, nothing deleted: {e}", 1) from e
    ours: list[str] = []
    others: dict[str, str] = {}
    for group in covered:
        try:
            found = drainer_aws.describe_hook(autoscaling, group, spec.name)
        except AwsError as e:
            others[group] = f"not read: {e}"
            continue
        if found is None:
            continue
        if spec.made(found):
            ours.append(group)
        else:
            cluster = drainer_aws.cluster_name_for(
                str(found.get("NotificationMetadata", "")), {}, ""
            )
            others[group] = f"its NotificationMetadata names {cluster or 'no cluster'}"
    launch: list[str] = []
    if settings.launch_hook:
        for group in covered:
            with contextlib.suppress(AwsError):  # left as it is: not known to be ours
                found = drainer_aws.describe_hook(autoscaling, group, settings.launch_hook_name)
                if found is not None and spec.made(found):
                    launch.append(group)
    return Plan(str(stack["StackId"]), settings, tuple(ours), others, tuple(launch))


def undeploy(aws: Aws, options: Options, say: Say) -> int:
    found = plan(aws, options.stack_name)
    hook = found.settings.lifecycle_hook_name
    say(f"stack {options.stack_name} ({aws.region}), cluster {found.settings.cluster_name}")
    say(f"hook {hook} on {len(found.hooks)} group(s): {', '.join(found.hooks) or 'none'}")
    launch = found.settings.launch_hook_name
    if found.launch_hooks:
        say(
            f"launch hook {launch} on {len(found.launch_hooks)} group(s): "
            f"{', '.join(found.launch_hooks)}"
        )
    for group, why in sorted(found.others.items()):
        say(f"left alone: {hook} on {group} ({why})")
    if not options.yes:
        say(
            "dry run: nothing deleted. Run again with --yes (make undeploy YES=1) to delete "
            "the stack, then these hooks"
        )
        return 0
    cfn = aws.client("cloudformation")
    since = time.time()
    say(f"deleting stack {options.stack_name}")
    cfn.delete_stack(StackName=options.stack_name)
    status = wait_for_stack(cfn, found.stack_id, since, options.poll_seconds, say)
    if status != "DELETE_COMPLETE":
        say(f"the stack ended {status}; the hooks stay until it is gone (fix, then run again)")
        return 1
    # The stack's custom resource (drainer/lifecycle/stack_hooks.py) deleted its hooks
    # with the stack; what is left is a stack's from before it, or a Delete that failed.
    names = {hook, launch} if found.launch_hooks else {hook}
    removal = hooks.remove_hooks(
        aws.client("autoscaling"),
        found.settings,
        names,
        groups=set(found.hooks) | set(found.launch_hooks),
    )
    for group, name in removal.removed:
        say(f"deleted {'hook' if name == hook else 'launch hook'} {name} on {group}")
    for what, error in sorted(removal.failed.items()):
        say(f"could not delete {what}: {error}")
    if not removal.removed and not removal.failed and (found.hooks or found.launch_hooks):
        say("the stack's custom resource had deleted its hooks already")
    say("left: the RBAC objects (kubectl delete -f k8s-rbac/) and the code bucket")
    return 1 if removal.failed else 0


def parse_args(argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m tools.undeploy", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--stack-name", default="eks-node-drainer", help="(make: STACK_NAME)")
    parser.add_argument("--region", default="", help="default: the AWS CLI's (REGION)")
    parser.add_argument("--profile", default="", help="AWS profile (default: AWS_PROFILE)")
    parser.add_argument("--yes", action="store_true", help="delete; without it, a dry run (YES)")
    args = parser.parse_args(argv)
    return Options(args.stack_name, args.region, args.profile, args.yes)


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)

    def body() -> int:
        aws = connect(options.region, options.profile, unchanged="nothing was deleted")
        return undeploy(aws, options, lambda line: print(line, flush=True))

    return run_tool("undeploy", body, interrupted="the stack and hooks are as the last line says")


if __name__ == "__main__":
    sys.exit(main())
