"""The hook keeper (drainer/lifecycle/hooks.py) against moto: which groups get the terminate
hook, which are left alone, and that a sync with nothing to do writes nothing.

The PutLifecycleHook calls are recorded by a botocore event handler on the real
client (before-parameter-build), so "untouched" means no call was made, not merely
that the hook came out the same.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from drainer.lifecycle import admission, hooks
from drainer.lifecycle.settings import Settings

REGION = "us-east-1"
CLUSTER = "prod"
TAG = "eks-node-drainer/enabled=true"
HOOK = "eks-node-drainer"


class Account:
    """Auto Scaling groups in moto, and the PutLifecycleHook calls the keeper made."""

    def __init__(self) -> None:
        self.autoscaling = boto3.client("autoscaling", region_name=REGION)
        boto3.client("ec2", region_name=REGION).create_launch_template(
            LaunchTemplateName="nodes",
            LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "m5.large"},
        )
        self.puts: list[dict[str, Any]] = []
        self.autoscaling.meta.events.register(
            "before-parameter-build.autoscaling.PutLifecycleHook", self._record
        )

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        self.puts.append(params)

    def group(self, name: str, **tags: str) -> str:
        self.autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=name,
            LaunchTemplate={"LaunchTemplateName": "nodes", "Version": "$Latest"},
            MinSize=0,
            MaxSize=1,
            DesiredCapacity=0,
            AvailabilityZones=[f"{REGION}a"],
            Tags=[
                {
                    "ResourceId": name,
                    "ResourceType": "auto-scaling-group",
                    "Key": key,
                    "Value": value,
                    "PropagateAtLaunch": False,
                }
                for key, value in tags.items()
            ],
        )
        return name

    def tagged(self, name: str, **more: str) -> str:
        return self.group(name, **{"eks-node-drainer/enabled": "true", **more})

    def put_hook(self, asg_name: str, **overrides: Any) -> None:
        params = {
            "AutoScalingGroupName": asg_name,
            "LifecycleHookName": HOOK,
            "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
            "HeartbeatTimeout": 600,
            "DefaultResult": "CONTINUE",
            "NotificationMetadata": json.dumps({"cluster_name": CLUSTER}),
            **overrides,
        }
        self.autoscaling.put_lifecycle_hook(**params)
        self.puts.clear()

    def hook(self, asg_name: str) -> dict[str, Any] | None:
        found = self.autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=asg_name)
        hooks_ = [h for h in found["LifecycleHooks"] if h["LifecycleHookName"] == HOOK]
        return hooks_[0] if hooks_ else None

    def put_groups(self) -> list[str]:
        return sorted(p["AutoScalingGroupName"] for p in self.puts)


@pytest.fixture
def account(moto_aws: None) -> Iterator[Account]:
    yield Account()


def settings(**values: Any) -> Settings:
    defaults: dict[str, Any] = {"cluster_name": CLUSTER, "asg_tag": TAG}
    return Settings(**(defaults | values))


def test_tagged_group_without_a_hook__gets_one_as_the_template_made_them(
    account: Account,
) -> None:
    account.tagged("nodes-a")

    sync = hooks.sync_hooks(account.autoscaling, settings(), "schedule")

    assert sync.created == ("nodes-a",)
    hook = account.hook("nodes-a")
    assert hook is not None
    assert hook["LifecycleTransition"] == "autoscaling:EC2_INSTANCE_TERMINATING"
    assert hook["HeartbeatTimeout"] == 600
    assert hook["DefaultResult"] == "CONTINUE"
    assert json.loads(hook["NotificationMetadata"]) == {"cluster_name": CLUSTER}


def test_untagged_group__no_hook(account: Account) -> None:
    account.group("other-nodes")
    account.group("wrong-value", **{"eks-node-drainer/enabled": "false"})

    sync = hooks.sync_hooks(account.autoscaling, settings())

    assert sync.covered == ()
    assert account.puts == []
    assert account.hook("other-nodes") is None
    assert account.hook("wrong-value") is None


@pytest.mark.parametrize(
    "cluster_tag",
    [{"eks:cluster-name": "staging"}, {"kubernetes.io/cluster/staging": "owned"}],
    ids=["eks-cluster-name", "kubernetes-io-cluster"],
)
def test_tagged_group_of_another_cluster__skipped_saying_why(
    account: Account, cluster_tag: dict[str, str]
) -> None:
    account.tagged("staging-nodes", **cluster_tag)
    account.tagged("prod-nodes", **{"eks:cluster-name": CLUSTER})

    sync = hooks.sync_hooks(account.autoscaling, settings())

    assert sync.covered == ("prod-nodes",)
    assert sync.skipped == {"staging-nodes": "tagged for cluster staging, not prod"}
    assert account.put_groups() == ["prod-nodes"]
    assert account.hook("staging-nodes") is None


def test_hook_with_a_wrong_heartbeat__updated__a_correct_one__untouched(
    account: Account,
) -> None:
    account.tagged("drifted")
    account.tagged("correct")
    account.put_hook("drifted", HeartbeatTimeout=300)
    account.put_hook("correct")

    sync = hooks.sync_hooks(account.autoscaling, settings())

    assert sync.updated == {"drifted": ["HeartbeatTimeout"]}
    assert sync.created == ()
    assert account.put_groups() == ["drifted"]
    drifted = account.hook("drifted")
    assert drifted is not None and drifted["HeartbeatTimeout"] == 600


def test_second_sync__nothing_to_do__no_put_at_all(account: Account) -> None:
    for name in ("nodes-a", "nodes-b"):
        account.tagged(name)
    hooks.sync_hooks(account.autoscaling, settings())
    account.puts.clear()

    sync = hooks.sync_hooks(account.autoscaling, settings())

    assert account.puts == []
    assert (sync.created, sync.updated) == ((), {})
    assert sync.covered == ("nodes-a", "nodes-b")


def test_sixty_tagged_groups__all_covered__no_limit(account: Account) -> None:
    names = [account.tagged(f"nodes-{i:02}") for i in range(60)]

    sync = hooks.sync_hooks(account.autoscaling, settings())

    assert sync.covered == tuple(names)
    assert sorted(sync.created) == names
    assert all(account.hook(name) is not None for name in names)


def test_named_groups__covered_with_the_tagged_ones(account: Account) -> None:
    account.group("named-a")
    account.group("named-b")
    account.tagged("tagged")

    sync = hooks.sync_hooks(
        account.autoscaling, settings(allowed_asgs=frozenset({"named-a", "named-b"}))
    )

    assert sync.covered == ("named-a", "named-b", "tagged")
    assert account.put_groups() == ["named-a", "named-b", "tagged"]


def test_named_groups_only__no_tag_listing(account: Account) -> None:
    account.group("named-a")
    account.tagged("tagged-but-no-tag-configured")

    sync = hooks.sync_hooks(
        account.autoscaling, settings(asg_tag="", allowed_asgs=frozenset({"named-a"}))
    )

    assert sync.covered == ("named-a",)
    assert account.hook("tagged-but-no-tag-configured") is None


def test_hook_name_and_heartbeat_come_from_the_settings(account: Account) -> None:
    account.tagged("nodes")

    hooks.sync_hooks(
        account.autoscaling, settings(lifecycle_hook_name="drain", heartbeat_timeout=900)
    )

    found = account.autoscaling.describe_lifecycle_hooks(AutoScalingGroupName="nodes")
    (hook,) = found["LifecycleHooks"]
    assert (hook["LifecycleHookName"], hook["HeartbeatTimeout"]) == ("drain", 900)


def test_create_lifecycle_hooks_false__touches_nothing(account: Account) -> None:
    account.tagged("nodes-a")
    account.group("named")

    sync = hooks.sync_hooks(
        account.autoscaling,
        settings(create_lifecycle_hooks=False, allowed_asgs=frozenset({"named"})),
    )

    assert sync.result()["result"] == "hooks_not_managed"
    assert account.puts == []
    assert account.hook("nodes-a") is None and account.hook("named") is None


def test_one_groups_error__the_others_still_get_their_hooks(
    account: Account, caplog: pytest.LogCaptureFixture
) -> None:
    account.tagged("nodes-a")
    account.tagged("nodes-b")

    def refuse_nodes_a(params: dict[str, Any], **_: Any) -> None:
        if params["AutoScalingGroupName"] == "nodes-a":
            from botocore.exceptions import ClientError

            raise ClientError(
                {"Error": {"Code": "AccessDenied", "Message": "no"}}, "PutLifecycleHook"
            )

    account.autoscaling.meta.events.register(
        "before-parameter-build.autoscaling.PutLifecycleHook", refuse_nodes_a
    )

    with caplog.at_level(logging.INFO, logger="drainer.lifecycle.hooks"):
        sync = hooks.sync_hooks(account.autoscaling, settings(), "schedule")

    assert sync.created == ("nodes-b",)
    assert "grant autoscaling:PutLifecycleHook" in sync.failed["nodes-a"]
    assert account.hook("nodes-b") is not None
    (line,) = [r for r in caplog.records if r.name == "drainer.lifecycle.hooks"]
    assert line.levelno == logging.ERROR
    assert line.getMessage().startswith("hook sync (schedule): 2 group(s) covered, 1 hook(s)")
    assert line.__dict__["failed"] == sync.failed
    assert line.__dict__["hooks_created"] == ["nodes-b"]


def test_summary_line__one_json_line_of_what_was_done(
    account: Account, caplog: pytest.LogCaptureFixture
) -> None:
    account.tagged("nodes-a")
    account.tagged("staging", **{"eks:cluster-name": "staging"})

    with caplog.at_level(logging.INFO, logger="drainer.lifecycle.hooks"):
        hooks.sync_hooks(account.autoscaling, settings(), "api:CreateOrUpdateTags")

    (line,) = [r for r in caplog.records if r.name == "drainer.lifecycle.hooks"]
    fields = line.__dict__
    assert fields["event"] == "hooks_synced"
    assert fields["trigger"] == "api:CreateOrUpdateTags"
    assert fields["covered"] == ["nodes-a"]
    assert fields["hooks_created"] == ["nodes-a"]
    assert fields["skipped"] == {"staging": "tagged for cluster staging, not prod"}
    assert fields["failed"] == {}


def test_sync__a_group_tagged_for_two_other_clusters__gets_no_hook(account: Account) -> None:
    """Cluster tags that name other clusters only: the group was taken for
    CLUSTER_NAME's (its name assumed where the tags picked none), and got our hook."""
    account.tagged(
        "shared-nodes",
        **{"kubernetes.io/cluster/staging": "owned", "kubernetes.io/cluster/dev": "owned"},
    )

    sync = hooks.sync_hooks(account.autoscaling, settings(), "api:CreateOrUpdateTags")

    assert account.hook("shared-nodes") is None
    assert sync.skipped["shared-nodes"] == "tagged for cluster dev, staging, not prod"


@pytest.mark.parametrize(
    ("tags", "admitted", "why"),
    [
        ({"eks-node-drainer/enabled": "true"}, True, ""),
        ({"eks-node-drainer/enabled": "true", "eks:cluster-name": CLUSTER}, True, ""),
        ({"eks-node-drainer/enabled": "yes"}, False, "not tagged eks-node-drainer/enabled=true"),
        ({}, False, "not tagged eks-node-drainer/enabled=true"),
        (
            {"eks-node-drainer/enabled": "true", "eks:cluster-name": "staging"},
            False,
            "tagged for cluster staging, not prod",
        ),
        (
            {
                "eks-node-drainer/enabled": "true",
                "kubernetes.io/cluster/staging": "owned",
                "kubernetes.io/cluster/prod": "owned",
            },
            True,
            "",
        ),
        (  # several cluster tags, none prod's: neither's to take (prod was assumed)
            {
                "eks-node-drainer/enabled": "true",
                "kubernetes.io/cluster/staging": "owned",
                "kubernetes.io/cluster/dev": "owned",
            },
            False,
            "tagged for cluster dev, staging, not prod",
        ),
    ],
)
def test_tag_admits(tags: dict[str, str], admitted: bool, why: str) -> None:
    assert admission.tag_admits(tags, settings()) == (admitted, why)


# --- through the Lambda handler -----------------------------------------------------------


@pytest.mark.parametrize("fixture", ["api-create-auto-scaling-group", "schedule"])
def test_handler__sync_event__the_new_tagged_group_gets_its_hook(
    account: Account,
    monkeypatch: pytest.MonkeyPatch,
    load_event: Callable[[str], dict[str, Any]],
    fixture: str,
) -> None:
    from drainer import handler

    account.tagged("eks-workers-c", **{"eks:cluster-name": "prod-eu"})
    monkeypatch.setenv("CLUSTER_NAME", "prod-eu")
    monkeypatch.setenv("ASG_TAG", TAG)
    handler.reset()
    try:
        answer = handler.lambda_handler(load_event(fixture), None)
    finally:
        handler.reset()

    assert answer["result"] == "hooks_synced"
    assert answer["hooks_created"] == ["eks-workers-c"]
    hook = account.hook("eks-workers-c")
    assert hook is not None
    assert json.loads(hook["NotificationMetadata"]) == {"cluster_name": "prod-eu"}


def _launch_hook(account: Account, asg_name: str) -> dict[str, Any] | None:
    found = account.autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=asg_name)
    named = [h for h in found["LifecycleHooks"] if h["LifecycleHookName"] == "nodes-ready"]
    return named[0] if named else None


def test_launch_hook_on__both_hooks_kept__second_sync_writes_nothing(account: Account) -> None:
    account.tagged("nodes-a")
    wanted = settings(launch_hook=True, launch_hook_name="nodes-ready")

    sync = hooks.sync_hooks(account.autoscaling, wanted, "deploy")

    assert sync.created == ("nodes-a", "nodes-a/nodes-ready")
    launch = _launch_hook(account, "nodes-a")
    assert launch is not None
    assert launch["LifecycleTransition"] == "autoscaling:EC2_INSTANCE_LAUNCHING"
    assert launch["DefaultResult"] == "CONTINUE", "a broken function must not stop launches"
    assert json.loads(launch["NotificationMetadata"]) == {"cluster_name": CLUSTER}
    account.puts.clear()
    again = hooks.sync_hooks(account.autoscaling, wanted, "schedule")
    assert (again.created, again.updated, account.puts) == ((), {}, [])


def test_launch_hook_off__no_launch_hook(account: Account) -> None:
    account.tagged("nodes-a")

    hooks.sync_hooks(account.autoscaling, settings(launch_hook_name="nodes-ready"))

    assert _launch_hook(account, "nodes-a") is None
    assert account.hook("nodes-a") is not None


# --- whose hook: the stack that put it (issue 37, item 2) -------------------------------

STACK = "arn:aws:cloudformation:us-east-1:123456789012:stack/eks-node-drainer/5b3f4c60"
OTHER_STACK = "arn:aws:cloudformation:us-east-1:123456789012:stack/eks-node-drainer-b/0c1d2e3f"


def test_sync__the_hooks_it_puts_name_the_stack__another_stacks_hook_left_saying_so(
    account: Account, caplog: pytest.LogCaptureFixture
) -> None:
    account.tagged("nodes-a")
    account.tagged("nodes-b")
    theirs = json.dumps({"cluster_name": CLUSTER, "stack_id": OTHER_STACK})
    account.put_hook("nodes-b", NotificationMetadata=theirs, HeartbeatTimeout=900)

    with caplog.at_level(logging.INFO, logger="drainer.lifecycle.hooks"):
        sync = hooks.sync_hooks(account.autoscaling, settings(stack_id=STACK), "schedule")

    assert sync.created == ("nodes-a",)
    hook = account.hook("nodes-a")
    assert hook is not None
    assert json.loads(hook["NotificationMetadata"]) == {"cluster_name": CLUSTER, "stack_id": STACK}
    left = account.hook("nodes-b")
    assert left is not None and (left["NotificationMetadata"], left["HeartbeatTimeout"]) == (
        theirs,
        900,
    ), "another stack's hook was rewritten"
    assert sync.not_ours == {
        "nodes-b": "its NotificationMetadata names the stack eks-node-drainer-b"
    }
    assert "1 not ours" in caplog.text


def test_listing_fails__nothing_put__not_even_on_a_named_managed_node_group(
    account: Account,
) -> None:
    # An EKS managed node group named in ALLOWED_ASGS without ALLOW_MANAGED_NODE_GROUPS:
    # a sync leaves it to EKS. When Auto Scaling's listing fails (throttled after
    # botocore's retries), the sync cannot tell a managed group from another, or a
    # group that is gone: it puts nothing, says why, and the next sync does the work.
    account.group("mng", **{"eks:nodegroup-name": "mng"})
    named = settings(asg_tag="", allowed_asgs=frozenset({"mng"}))
    assert "mng" in hooks.sync_hooks(account.autoscaling, named).skipped

    def throttled(**_: Any) -> None:
        from botocore.exceptions import ClientError

        raise ClientError(
            {"Error": {"Code": "Throttling", "Message": "Rate exceeded"}},
            "DescribeAutoScalingGroups",
        )

    account.autoscaling.meta.events.register(
        "before-parameter-build.autoscaling.DescribeAutoScalingGroups", throttled
    )
    sync = hooks.sync_hooks(account.autoscaling, named, "schedule")

    assert "Rate exceeded" in sync.failed["(listing)"]
    assert sync.covered == ()
    assert account.puts == [], "our terminate hook put beside EKS's on a managed node group"
