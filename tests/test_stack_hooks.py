"""The stack owns its hooks (drainer/lifecycle/stack_hooks.py): the custom resource's
Create, Update and Delete against moto's Auto Scaling, answered to a local
ResponseURL. tests/deploy/test_deploy_custom_resource.py runs the same requests
through the Lambda runtime."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from support import cfn
from test_hooks import CLUSTER, HOOK, REGION, Account

from awssim import AwsSim
from drainer import handler, logs
from drainer.lifecycle import hooks, stack_hooks
from drainer.lifecycle.events import StackRequest, parse_event
from drainer.lifecycle.settings import Settings

LAUNCH = "eks-node-drainer-launch"
OURS = "eks-node-drainer-lifecycle-hooks"
"""The PhysicalResourceId of the stack cfn.STACK_ID's custom resource."""
PROPERTIES = {"ClusterName": CLUSTER, "AsgNames": "nodes-a,nodes-b", "LifecycleHookName": HOOK}


@pytest.fixture
def account(moto_aws: None) -> Iterator[Account]:
    yield Account()


@pytest.fixture
def answers() -> Iterator[cfn.ResponseServer]:
    with cfn.response_server() as server:
        yield server


def settings(**values: Any) -> Settings:
    defaults = {
        "cluster_name": CLUSTER,
        "allowed_asgs": ("nodes-a", "nodes-b"),
        "stack_id": cfn.STACK_ID,
    }
    return Settings(**(defaults | values))


def hooks_of(account: Account, group: str) -> dict[str, str]:
    found = account.autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=group)
    return {
        h["LifecycleHookName"]: h.get("NotificationMetadata", "") for h in found["LifecycleHooks"]
    }


def send(
    account: Account,
    answers: cfn.ResponseServer,
    kind: str,
    given: Settings,
    **more: Any,
) -> dict[str, Any]:
    properties = more.pop("properties", PROPERTIES)
    cloudformation = more.pop("cloudformation", None)
    event = cfn.request(kind, answers.next_url(), properties, **more)
    request = parse_event(event)
    assert isinstance(request, StackRequest)
    stack_hooks.handle(request, account.autoscaling, given, cloudformation)
    answer = answers.answers[-1]
    assert answer.path.startswith("/cloudformation-custom-resource-response/")
    assert answer.content_type in (None, ""), "a presigned S3 URL refuses a Content-Type"
    assert answer.body["RequestId"] == event["RequestId"]
    assert answer.body["StackId"] == event["StackId"]
    assert answer.body["LogicalResourceId"] == "LifecycleHooks"
    return answer.body


def test_create__hooks_put__then_delete__ours_gone__anothers_stays(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")
    account.group("nodes-b")
    account.group("elsewhere")
    account.put_hook("elsewhere")  # same name and metadata, a group the stack never named

    created = send(account, answers, "Create", settings())
    assert created["Status"] == "SUCCESS", created
    assert created["PhysicalResourceId"] == "eks-node-drainer-lifecycle-hooks"
    assert HOOK in hooks_of(account, "nodes-a") and HOOK in hooks_of(account, "nodes-b")
    # Another tool's hook of the same name on a group the stack covers.
    account.autoscaling.delete_lifecycle_hook(
        AutoScalingGroupName="nodes-b", LifecycleHookName=HOOK
    )
    account.put_hook("nodes-b", NotificationMetadata=json.dumps({"cluster_name": "other"}))

    deleted = send(
        account, answers, "Delete", settings(), physical_id=created["PhysicalResourceId"]
    )

    assert deleted["Status"] == "SUCCESS", deleted
    assert deleted["PhysicalResourceId"] == created["PhysicalResourceId"]
    assert hooks_of(account, "nodes-a") == {}
    assert HOOK in hooks_of(account, "nodes-b"), "another cluster's hook was deleted"
    assert HOOK in hooks_of(account, "elsewhere"), "a group the stack never covered"
    assert "left to their owners: nodes-b/eks-node-drainer" in deleted["Reason"]


def test_delete__a_group_deleted_since__success(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")
    account.group("nodes-b")
    send(account, answers, "Create", settings())
    account.autoscaling.delete_auto_scaling_group(AutoScalingGroupName="nodes-b", ForceDelete=True)

    deleted = send(account, answers, "Delete", settings(), physical_id=OURS)

    assert deleted["Status"] == "SUCCESS", deleted
    assert hooks_of(account, "nodes-a") == {}


def test_create__a_named_group_missing__failed_naming_it(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")

    created = send(account, answers, "Create", settings())

    assert created["Status"] == "FAILED"
    assert "no Auto Scaling group named nodes-b (check AsgNames)" in created["Reason"]


def test_update__launch_hook_off_and_hook_renamed__the_old_ones_deleted(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")
    account.group("nodes-b")
    send(account, answers, "Create", settings(launch_hook=True))
    assert set(hooks_of(account, "nodes-a")) == {HOOK, LAUNCH}

    updated = send(
        account,
        answers,
        "Update",
        settings(lifecycle_hook_name="drainer-v2", allowed_asgs=("nodes-a",)),
        old={**PROPERTIES, "LaunchHook": "true", "LaunchHookName": LAUNCH},
        physical_id="eks-node-drainer-lifecycle-hooks",
    )

    assert updated["Status"] == "SUCCESS", updated
    assert set(hooks_of(account, "nodes-a")) == {"drainer-v2"}
    assert hooks_of(account, "nodes-b") == {}, "a group no longer named keeps our hooks"


def test_update__a_named_group_deleted_since__success_saying_so(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")

    updated = send(account, answers, "Update", settings(), old=PROPERTIES, physical_id="x")

    assert updated["Status"] == "SUCCESS", updated
    assert "gone: nodes-b" in updated["Reason"]


def test_hooks_not_ours__nothing_touched(account: Account, answers: cfn.ResponseServer) -> None:
    account.group("nodes-a")
    account.put_hook("nodes-a")

    deleted = send(account, answers, "Delete", settings(create_lifecycle_hooks=False))

    assert deleted["Status"] == "SUCCESS"
    assert HOOK in hooks_of(account, "nodes-a")


def test_delete__after_create_lifecycle_hooks_turned_off__the_stacks_hooks_deleted(
    account: Account, answers: cfn.ResponseServer
) -> None:
    """An Update from CreateLifecycleHooks=true to false deletes the resource (its
    Condition), and its Delete comes with the setting already off: it answered
    SUCCESS, "the hooks are yours", and left the hooks it had put, naming the stack,
    to hold every later termination for its HeartbeatTimeout."""
    account.group("nodes-a")
    account.group("nodes-b")
    assert send(account, answers, "Create", settings())["Status"] == "SUCCESS"

    off = settings(create_lifecycle_hooks=False)
    deleted = send(account, answers, "Delete", off, physical_id=OURS)

    assert deleted["Status"] == "SUCCESS", deleted
    assert hooks_of(account, "nodes-a") == {} and hooks_of(account, "nodes-b") == {}


def test_delete__hooks_renamed_as_they_were_turned_off__the_names_it_put_deleted(
    account: Account, answers: cfn.ResponseServer
) -> None:
    """One Update turns CreateLifecycleHooks off and renames the hooks: the resource's
    Delete names the hooks it put (its properties), while the function's settings
    already say the new names. It deleted none and answered SUCCESS; the hooks it had
    put stayed, naming the stack, and held every termination and launch for their
    HeartbeatTimeout, their actions reaching no rule."""
    account.group("nodes-a")
    account.group("nodes-b")
    put = settings(launch_hook=True)
    properties = {**PROPERTIES, "LaunchHook": "true", "LaunchHookName": LAUNCH}
    assert send(account, answers, "Create", put, properties=properties)["Status"] == "SUCCESS"
    assert set(hooks_of(account, "nodes-a")) == {HOOK, LAUNCH}
    account.put_hook("nodes-b", LifecycleHookName="someone-elses")  # not this stack's

    renamed = settings(
        create_lifecycle_hooks=False,
        lifecycle_hook_name="someone-elses",
        launch_hook_name="drainer-launch-v2",
    )
    deleted = send(account, answers, "Delete", renamed, properties=properties, physical_id=OURS)

    assert deleted["Status"] == "SUCCESS", deleted
    assert hooks_of(account, "nodes-a") == {}
    assert set(hooks_of(account, "nodes-b")) == {"someone-elses"}
    assert "deleted 4 hook(s)" in deleted["Reason"], deleted["Reason"]


@pytest.mark.parametrize(("kind", "status"), [("Create", "FAILED"), ("Delete", "SUCCESS")])
def test_settings_unreadable__answered_not_left_to_time_out(
    kind: str,
    status: str,
    answers: cfn.ResponseServer,
    moto_aws: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLUSTER_NAME", CLUSTER)
    monkeypatch.setenv("HEARTBEAT_TIMEOUT", "ten minutes")
    handler.reset()
    event = cfn.request(kind, answers.next_url(), PROPERTIES, physical_id="x")

    handler.lambda_handler(event, None)

    (answer,) = answers.answers
    assert answer.body["Status"] == status
    assert "HEARTBEAT_TIMEOUT" in answer.body["Reason"]


def test_an_answer_too_long__cut_to_what_cloudformation_accepts(
    account: Account, answers: cfn.ResponseServer
) -> None:
    many = tuple(f"missing-{i:03}-{'x' * 40}" for i in range(200))

    created = send(account, answers, "Create", settings(allowed_asgs=many))

    assert created["Status"] == "FAILED"
    raw = json.dumps(answers.answers[-1].body).encode()
    assert len(raw) <= 4096


# --- ownership: the stack deletes only what it put (issue 37, item 2) -------------------

V0_1_0_METADATA = json.dumps({"cluster_name": CLUSTER})
"""A hook's NotificationMetadata as 0.1.0 wrote it (drainer/lifecycle/hooks.py at
d183d0a: HookSpec.from_settings), naming the cluster and no stack. A stack of today
writes the same when it has no STACK_ID."""


def own_stack() -> tuple[Any, str]:
    """The function's own stack in moto's CloudFormation (a client, its id): what
    DescribeStacks answers the custom resource and the hook sync."""
    import boto3

    cloudformation = boto3.client("cloudformation", region_name="us-east-1")
    stack_id = cloudformation.create_stack(
        StackName="eks-node-drainer",
        TemplateBody=json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}),
    )["StackId"]
    return cloudformation, str(stack_id)


def owner_of(account: Account, group: str, name: str = HOOK) -> str | None:
    """The stack a hook's metadata names ("" none), None when there is no such hook."""
    metadata = hooks_of(account, group).get(name)
    if metadata is None:
        return None
    parsed = json.loads(metadata)
    assert parsed["cluster_name"] == CLUSTER, "the drain reads the cluster from this key"
    return str(parsed.get("stack_id", ""))


def other_stack(**values: Any) -> Settings:
    return settings(stack_id=cfn.OTHER_STACK_ID, **values)


def test_hooks_put__their_metadata_names_the_stack__a_drain_still_reads_the_cluster(
    account: Account, answers: cfn.ResponseServer
) -> None:
    from drainer import aws

    account.group("nodes-a")
    account.group("nodes-b")

    created = send(account, answers, "Create", settings(launch_hook=True))

    assert created["Status"] == "SUCCESS", created
    assert owner_of(account, "nodes-a") == cfn.STACK_ID
    assert owner_of(account, "nodes-b", LAUNCH) == cfn.STACK_ID
    metadata = hooks_of(account, "nodes-a")[HOOK]
    assert aws.cluster_name_for(metadata, {}, "") == CLUSTER


def test_failed_create__its_rollback_delete__leaves_another_stacks_hook(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")
    account.put_hook("nodes-a", NotificationMetadata=V0_1_0_METADATA)  # another stack's

    created = send(account, answers, "Create", settings())  # nodes-b: no such group
    deleted = send(
        account, answers, "Delete", settings(), physical_id=created["PhysicalResourceId"]
    )

    assert created["Status"] == "FAILED"
    assert "no Auto Scaling group named nodes-b" in created["Reason"]
    assert deleted["Status"] == "SUCCESS", deleted
    assert deleted["PhysicalResourceId"] == created["PhysicalResourceId"]
    assert hooks_of(account, "nodes-a") == {HOOK: V0_1_0_METADATA}, "another stack's hook"


def test_create__a_hook_of_the_name_already_there__failed_naming_it__not_adopted(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")
    account.group("nodes-b")
    first = send(
        account,
        answers,
        "Create",
        other_stack(allowed_asgs=("nodes-a",)),
        stack_id=cfn.OTHER_STACK_ID,
    )
    assert first["Status"] == "SUCCESS", first

    second = send(account, answers, "Create", settings())
    rollback = send(account, answers, "Delete", settings(), physical_id=OURS)

    assert second["Status"] == "FAILED"
    assert f"nodes-a already has a lifecycle hook {HOOK}" in second["Reason"]
    assert "eks-node-drainer-b" in second["Reason"], "it says whose hook it is"
    assert hooks_of(account, "nodes-b") == {}, "a failed create put a hook"
    assert rollback["Status"] == "SUCCESS", rollback
    assert owner_of(account, "nodes-a") == cfn.OTHER_STACK_ID, "the first stack's hook"


def test_two_stacks_on_one_cluster__deleting_one__the_others_hooks_stay(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")
    account.group("nodes-b")
    first = send(
        account,
        answers,
        "Create",
        other_stack(allowed_asgs=("nodes-a",)),
        stack_id=cfn.OTHER_STACK_ID,
    )
    second = send(
        account,
        answers,
        "Create",
        settings(allowed_asgs=("nodes-b",)),
        properties={**PROPERTIES, "AsgNames": "nodes-b"},
    )
    assert (first["Status"], second["Status"]) == ("SUCCESS", "SUCCESS"), (first, second)

    # The second stack's Delete, also one forged to name the first stack's group.
    deleted = send(
        account,
        answers,
        "Delete",
        settings(allowed_asgs=("nodes-a", "nodes-b")),
        physical_id=OURS,
    )

    assert deleted["Status"] == "SUCCESS", deleted
    assert hooks_of(account, "nodes-b") == {}
    assert owner_of(account, "nodes-a") == cfn.OTHER_STACK_ID


def test_update_naming_a_group_never_covered__its_hook_stays__rollback_too(
    account: Account, answers: cfn.ResponseServer
) -> None:
    for group in ("nodes-a", "nodes-b", "nodes-c"):
        account.group(group)
    account.put_hook("nodes-c", NotificationMetadata=V0_1_0_METADATA)  # another stack's
    send(account, answers, "Create", settings())
    moved = {**PROPERTIES, "AsgNames": "nodes-a,nodes-c"}

    updated = send(
        account,
        answers,
        "Update",
        settings(allowed_asgs=("nodes-a", "nodes-c")),
        properties=moved,
        old=PROPERTIES,
        physical_id=OURS,
    )
    # CloudFormation's rollback: the old properties back, the ones that failed as old.
    rolled_back = send(account, answers, "Update", settings(), old=moved, physical_id=OURS)

    assert updated["Status"] == "FAILED"
    assert f"nodes-c already has a lifecycle hook {HOOK}" in updated["Reason"]
    assert rolled_back["Status"] == "SUCCESS", rolled_back
    assert owner_of(account, "nodes-a") == owner_of(account, "nodes-b") == cfn.STACK_ID
    assert hooks_of(account, "nodes-c") == {HOOK: V0_1_0_METADATA}, "another stack's hook"


def test_update_keeps_its_id__a_cleanup_delete_of_an_older_id_deletes_nothing(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")
    account.group("nodes-b")
    created = send(account, answers, "Create", settings())

    updated = send(
        account,
        answers,
        "Update",
        settings(heartbeat_timeout=900),
        old=PROPERTIES,
        physical_id=created["PhysicalResourceId"],
    )
    # Had an answer changed the id, CloudFormation would delete the old one after the
    # update: that Delete is the old resource's, not this stack's hooks'.
    cleanup = send(account, answers, "Delete", settings(), physical_id="LifecycleHooks-1A2B3C")

    assert updated["Status"] == "SUCCESS", updated
    assert updated["PhysicalResourceId"] == created["PhysicalResourceId"] == OURS
    assert cleanup["Status"] == "SUCCESS", cleanup
    assert owner_of(account, "nodes-a") == owner_of(account, "nodes-b") == cfn.STACK_ID


def test_hooks_of_0_1_0__adopted_on_update__then_deleted_with_the_stack(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")
    account.group("nodes-b")
    account.put_hook("nodes-a", NotificationMetadata=V0_1_0_METADATA)
    account.put_hook("nodes-b", NotificationMetadata=V0_1_0_METADATA)

    updated = send(account, answers, "Update", settings(), old=PROPERTIES, physical_id=OURS)
    adopted = {group: owner_of(account, group) for group in ("nodes-a", "nodes-b")}
    deleted = send(account, answers, "Delete", settings(), physical_id=OURS)

    assert updated["Status"] == "SUCCESS", updated
    assert (
        "adopted from 0.1.0: nodes-a/eks-node-drainer, nodes-b/eks-node-drainer"
        in (updated["Reason"])
    )
    assert adopted == {"nodes-a": cfn.STACK_ID, "nodes-b": cfn.STACK_ID}
    assert deleted["Status"] == "SUCCESS", deleted
    assert "deleted 2 hook(s)" in deleted["Reason"]
    assert hooks_of(account, "nodes-a") == hooks_of(account, "nodes-b") == {}


def test_hooks_of_0_1_0__on_a_group_the_old_properties_never_named__not_adopted(
    account: Account, answers: cfn.ResponseServer
) -> None:
    account.group("nodes-a")
    account.group("nodes-b")
    account.put_hook("nodes-a", NotificationMetadata=V0_1_0_METADATA)
    account.put_hook("nodes-b", NotificationMetadata=V0_1_0_METADATA)  # another stack's

    updated = send(
        account,
        answers,
        "Update",
        settings(),
        old={**PROPERTIES, "AsgNames": "nodes-a"},
        physical_id=OURS,
    )

    assert updated["Status"] == "FAILED"
    assert f"nodes-b already has a lifecycle hook {HOOK}" in updated["Reason"]
    assert hooks_of(account, "nodes-b") == {HOOK: V0_1_0_METADATA}


def test_hooks_of_0_1_0__old_asg_tag__adopted_only_on_the_groups_it_tagged(
    account: Account, answers: cfn.ResponseServer
) -> None:
    """The old properties had an AsgTag: a 0.1.0 hook on a group that tag admitted is
    this stack's earlier version's, adopted. One on a group the tag never admitted,
    named by this Update for the first time, was adopted as well (the tag counted
    for every group): another deployment's hook, which the stack's Delete then took."""
    account.group("nodes-a")
    account.group("nodes-b")  # untagged: another deployment's 0.1.0 hook
    account.tagged("tagged-x")
    for group in ("nodes-b", "tagged-x"):
        account.put_hook(group, NotificationMetadata=V0_1_0_METADATA)
    old = {**PROPERTIES, "AsgNames": "nodes-a", "AsgTag": TAGGED["AsgTag"]}
    now = settings(allowed_asgs=("nodes-a", "nodes-b"), asg_tag=TAGGED["AsgTag"])
    properties = {**old, "AsgNames": "nodes-a,nodes-b"}

    updated = send(
        account, answers, "Update", now, properties=properties, old=old, physical_id=OURS
    )

    assert updated["Status"] == "FAILED", updated
    assert f"nodes-b already has a lifecycle hook {HOOK}" in updated["Reason"]
    assert "tagged-x" not in updated["Reason"], "the tagged group's hook is adoptable"
    assert hooks_of(account, "nodes-b") == {HOOK: V0_1_0_METADATA}

    account.autoscaling.delete_lifecycle_hook(
        AutoScalingGroupName="nodes-b", LifecycleHookName=HOOK
    )
    again = send(account, answers, "Update", now, properties=properties, old=old, physical_id=OURS)

    assert again["Status"] == "SUCCESS", again
    assert "adopted from 0.1.0: tagged-x/eks-node-drainer" in again["Reason"]
    assert owner_of(account, "tagged-x") == owner_of(account, "nodes-b") == cfn.STACK_ID


def _instance_of(account: Account, group: str) -> str:
    account.autoscaling.set_desired_capacity(AutoScalingGroupName=group, DesiredCapacity=1)
    described = account.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    return str(described["AutoScalingGroups"][0]["Instances"][0]["InstanceId"])


def test_delete_while_an_instance_waits_on_the_hook__kept__its_drain_not_cut_short(
    account: Account, answers: cfn.ResponseServer
) -> None:
    """Auto Scaling ends a deleted hook's outstanding actions at once, a termination's
    with CONTINUE: a stack deleted while a scale-in drained had its hook deleted and
    the instance terminated mid-drain, its pods stopped with it. Kept now, the Delete
    failed naming the instance; deleting the stack again once it is done goes on."""
    account.group("nodes-a")
    account.group("nodes-b")
    assert send(account, answers, "Create", settings())["Status"] == "SUCCESS"
    instance = _instance_of(account, "nodes-a")
    sim = AwsSim(region=REGION)
    token = sim.begin_termination("nodes-a", instance, HOOK)

    deleted = send(account, answers, "Delete", settings(), physical_id=OURS)

    assert deleted["Status"] == "FAILED", deleted
    assert (
        f"nodes-a/{HOOK}: 1 instance(s) wait on it: {instance} (Terminating:Wait)"
        in (deleted["Reason"])
    )
    assert "Delete the stack again once no instance waits on them" in deleted["Reason"]
    assert "by hand" not in deleted["Reason"]
    assert HOOK in hooks_of(account, "nodes-a")
    assert sim.calls("hook_deleted") == []
    assert [a["closed_at"] for a in sim.actions() if a["token"] == token] == [None]

    account.autoscaling.complete_lifecycle_action(
        AutoScalingGroupName="nodes-a",
        LifecycleHookName=HOOK,
        LifecycleActionToken=token,
        LifecycleActionResult="CONTINUE",
    )
    again = send(account, answers, "Delete", settings(), physical_id=OURS)

    assert again["Status"] == "SUCCESS", again
    assert hooks_of(account, "nodes-a") == hooks_of(account, "nodes-b") == {}


def test_delete__an_instance_that_cannot_be_asked__may_wait__the_hook_kept(
    account: Account, answers: cfn.ResponseServer
) -> None:
    """Auto Scaling throttles the heartbeat that asks whether the waiting instance
    waits on the hook: it may, so the hook is kept (deleting it would end the wait)."""
    account.group("nodes-a")
    account.group("nodes-b")
    assert send(account, answers, "Create", settings())["Status"] == "SUCCESS"
    instance = _instance_of(account, "nodes-a")
    sim = AwsSim(region=REGION)
    sim.begin_termination("nodes-a", instance, HOOK)
    sim.fail_next("heartbeat", "Throttling", count=20)

    deleted = send(account, answers, "Delete", settings(), physical_id=OURS)

    assert deleted["Status"] == "FAILED", deleted
    assert f"{instance} (Terminating:Wait), not asked" in deleted["Reason"], deleted["Reason"]
    assert HOOK in hooks_of(account, "nodes-a")
    assert sim.calls("hook_deleted") == []


def test_rename_while_an_instance_drains_on_the_old_hook__update_fails__its_rollback_succeeds(
    account: Account, answers: cfn.ResponseServer
) -> None:
    """An Update renaming the hook while an instance waits on the old one fails (the
    old one kept); its rollback deletes the new one, which that instance does not
    wait on: each hook is asked (a heartbeat named by the instance), not the group's
    instances counted, which failed the rollback too."""
    account.group("nodes-a")
    account.group("nodes-b")
    assert send(account, answers, "Create", settings())["Status"] == "SUCCESS"
    sim = AwsSim(region=REGION)
    sim.begin_termination("nodes-a", _instance_of(account, "nodes-a"), HOOK)
    renamed = {**PROPERTIES, "LifecycleHookName": "drainer-v2"}
    new = settings(lifecycle_hook_name="drainer-v2")

    updated = send(
        account, answers, "Update", new, properties=renamed, old=PROPERTIES, physical_id=OURS
    )
    rollback = send(account, answers, "Update", settings(), old=renamed, physical_id=OURS)

    assert updated["Status"] == "FAILED", updated
    assert f"nodes-a/{HOOK}: 1 instance(s) wait on it" in updated["Reason"]
    assert rollback["Status"] == "SUCCESS", rollback
    assert set(hooks_of(account, "nodes-a")) == set(hooks_of(account, "nodes-b")) == {HOOK}
    assert sim.calls("hook_deleted") == []


def test_update_turning_the_launch_hook_off_while_a_launch_waits__the_launch_not_abandoned(
    account: Account, answers: cfn.ResponseServer
) -> None:
    """A launch hook deleted with a launch waiting on it is ended with ABANDON: the new
    instance terminated. The Update fails instead (a group it still covers), naming
    the launch; the rollback keeps the hook."""
    account.group("nodes-a")
    account.group("nodes-b")
    on = settings(launch_hook=True)
    properties = {**PROPERTIES, "LaunchHook": "true", "LaunchHookName": LAUNCH}
    assert send(account, answers, "Create", on, properties=properties)["Status"] == "SUCCESS"
    sim = AwsSim(region=REGION)
    token = sim.begin_launch("nodes-b", _instance_of(account, "nodes-b"), LAUNCH)

    updated = send(account, answers, "Update", settings(), old=properties, physical_id=OURS)

    assert updated["Status"] == "FAILED", updated
    assert "(Pending:Wait)" in updated["Reason"] and "ABANDON" in updated["Reason"]
    assert LAUNCH in hooks_of(account, "nodes-b")
    assert [a["result"] for a in sim.actions() if a["token"] == token] == [None]


@pytest.mark.parametrize("kind", ["Create", "Update", "Delete"])
def test_a_request_from_another_stack__refused__nothing_touched(
    account: Account, answers: cfn.ResponseServer, kind: str
) -> None:
    account.group("nodes-a")
    account.group("nodes-b")
    send(account, answers, "Create", settings())

    forged = send(
        account,
        answers,
        kind,
        settings(heartbeat_timeout=900),
        old={**PROPERTIES, "AsgNames": "nodes-a,nodes-b"},
        physical_id=OURS,
        stack_id=cfn.OTHER_STACK_ID,
    )

    assert forged["Status"] == "FAILED"
    assert "eks-node-drainer-b" in forged["Reason"] and "not this function's" in forged["Reason"]
    for group in ("nodes-a", "nodes-b"):
        assert owner_of(account, group) == cfn.STACK_ID
        hook = account.hook(group)
        assert hook is not None and hook["HeartbeatTimeout"] == 600


def test_delete_while_the_create_still_runs__no_hook_left(
    account: Account, answers: cfn.ResponseServer
) -> None:

    cloudformation, stack_id = own_stack()
    account.group("nodes-a")
    account.group("nodes-b")
    ours = settings(stack_id=stack_id)
    deletes: list[dict[str, Any]] = []

    def cancelled_meanwhile(**_: Any) -> None:
        # CloudFormation cancels the Create (another resource failed, or the stack is
        # deleted) and sends the Delete while the Create's invocation still runs.
        if deletes:
            return
        cloudformation.delete_stack(StackName=stack_id)
        deletes.append(send(account, answers, "Delete", ours, physical_id=OURS, stack_id=stack_id))

    account.autoscaling.meta.events.register(
        "after-call.autoscaling.PutLifecycleHook", cancelled_meanwhile
    )

    created = send(
        account, answers, "Create", ours, stack_id=stack_id, cloudformation=cloudformation
    )

    assert deletes and deletes[0]["Status"] == "SUCCESS", deletes
    assert created["Status"] == "FAILED"
    assert "DELETE_COMPLETE" in created["Reason"]
    assert hooks_of(account, "nodes-a") == hooks_of(account, "nodes-b") == {}


def test_an_unexpected_exception__answered_failed_with_its_text(
    answers: cfn.ResponseServer,
    moto_aws: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Account().group("nodes-a")
    monkeypatch.setenv("CLUSTER_NAME", CLUSTER)
    monkeypatch.setenv("ALLOWED_ASGS", "nodes-a")
    monkeypatch.setenv("STACK_ID", cfn.STACK_ID)
    handler.reset()

    def broken(*_: Any, **__: Any) -> Any:
        raise KeyError("LifecycleHooks")  # a bug, not an AWS error

    monkeypatch.setattr(hooks, "sync_hooks", broken)
    event = cfn.request("Create", answers.next_url(), PROPERTIES)
    log = io.StringIO()
    logs.configure("INFO", stream=log)
    try:
        handler.lambda_handler(event, None)
    finally:
        handler.reset()
        logs.configure("INFO", stream=sys.stdout)

    (answer,) = answers.answers
    assert answer.body["Status"] == "FAILED"
    assert "KeyError" in answer.body["Reason"] and "LifecycleHooks" in answer.body["Reason"]
    assert answer.body["PhysicalResourceId"] == OURS
    lines = [json.loads(line) for line in log.getvalue().splitlines()]
    (error,) = [line for line in lines if line["message"].endswith("unexpected error")]
    assert error["level"] == "ERROR"
    assert "Traceback" in error["exception"] and "KeyError" in error["exception"]


TAGGED = {**PROPERTIES, "AsgNames": "nodes-a", "AsgTag": "eks-node-drainer/enabled=true"}


def test_update_dropping_asg_tag__its_groups_hooks_deleted(
    account: Account, answers: cfn.ResponseServer
) -> None:
    """An Update from AsgTag=k=v to no tag: the groups that only the tag covered
    kept this stack's hooks, which the function then refused to answer (their group
    no longer admitted): each termination there waited HeartbeatTimeout, undrained.
    The old tag's policy still stands during the Update (removed in its cleanup)."""
    account.group("nodes-a")
    account.tagged("tagged-x")
    tagged = settings(allowed_asgs=("nodes-a",), asg_tag=TAGGED["AsgTag"])
    assert send(account, answers, "Create", tagged, properties=TAGGED)["Status"] == "SUCCESS"
    assert owner_of(account, "tagged-x") == cfn.STACK_ID

    untagged = {**TAGGED, "AsgTag": ""}
    updated = send(
        account,
        answers,
        "Update",
        settings(allowed_asgs=("nodes-a",)),
        properties=untagged,
        old=TAGGED,
        physical_id=OURS,
    )

    assert updated["Status"] == "SUCCESS", updated
    assert owner_of(account, "nodes-a") == cfn.STACK_ID
    assert hooks_of(account, "tagged-x") == {}, "a group no longer tagged keeps our hook"
    assert "tagged-x/eks-node-drainer" in updated["Reason"]


def test_update_changing_asg_tag__a_hook_it_may_no_longer_delete__said__not_failed(
    account: Account, answers: cfn.ResponseServer
) -> None:
    """The tag's policy names the new tag by the time the Update runs: the old tag's
    groups refuse the deletion. A rollback would not help, so the Update succeeds and
    names the hooks to delete by hand."""
    from awssim.apifaults import api_faults

    account.tagged("tagged-x")
    old = {**TAGGED, "AsgNames": ""}
    first = settings(allowed_asgs=(), asg_tag=old["AsgTag"])
    assert send(account, answers, "Create", first, properties=old)["Status"] == "SUCCESS"
    moved = {**old, "AsgTag": "eks-node-drainer/enabled=yes"}
    region = account.autoscaling.meta.region_name
    api_faults("123456789012", region).fail_next(
        "autoscaling", "DeleteLifecycleHook", "AccessDenied"
    )

    updated = send(
        account,
        answers,
        "Update",
        settings(allowed_asgs=(), asg_tag=moved["AsgTag"]),
        properties=moved,
        old=old,
        physical_id=OURS,
    )

    assert updated["Status"] == "SUCCESS", updated
    assert owner_of(account, "tagged-x") == cfn.STACK_ID
    assert "tagged-x/eks-node-drainer" in updated["Reason"]
    assert "delete-lifecycle-hook" in updated["Reason"]


def test_update_dropping_asg_tag__its_groups_cannot_be_listed__said__not_failed(
    account: Account, answers: cfn.ResponseServer
) -> None:
    """The old tag's groups could not be listed (throttled, refused): the Update
    failed after everything else was done, and CloudFormation rolled it back."""
    from awssim.apifaults import api_faults

    account.group("nodes-a")
    account.tagged("tagged-x")
    tagged = settings(allowed_asgs=("nodes-a",), asg_tag=TAGGED["AsgTag"])
    assert send(account, answers, "Create", tagged, properties=TAGGED)["Status"] == "SUCCESS"
    region = account.autoscaling.meta.region_name
    # The third DescribeAutoScalingGroups: the listing of the old tag's groups.
    api_faults("123456789012", region).fail_next(
        "autoscaling", "DescribeAutoScalingGroups", "AccessDenied", after=2
    )

    updated = send(
        account,
        answers,
        "Update",
        settings(allowed_asgs=("nodes-a",)),
        properties={**TAGGED, "AsgTag": ""},
        old=TAGGED,
        physical_id=OURS,
    )

    assert updated["Status"] == "SUCCESS", updated
    assert "could not be listed" in updated["Reason"], updated["Reason"]
    assert owner_of(account, "tagged-x") == cfn.STACK_ID, "left, and said"
