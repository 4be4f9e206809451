"""Node groups by tag, end to end through the real handler: the schedule's event
gives a tagged group its terminate hook, and that group's terminate event is then
drained; a group neither named nor tagged is left alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on

from .conftest import Invoke

SCHEDULE = Path(__file__).resolve().parents[1] / "events" / "schedule.json"
TAG_KEY, TAG_VALUE = "eks-node-drainer/enabled", "true"


def _by_tag(world: World) -> dict[str, Any]:
    """The function's settings as the stack sets them with AsgTag and no AsgNames."""
    return {
        "ALLOWED_ASGS": "",
        "ASG_TAG": f"{TAG_KEY}={TAG_VALUE}",
        "CREATE_LIFECYCLE_HOOKS": "true",
        "LIFECYCLE_HOOK_NAME": world.group.hook_name,
        "HEARTBEAT_TIMEOUT": "300",
    }


def _tag(world: World) -> None:
    world.autoscaling.create_or_update_tags(
        Tags=[
            {
                "ResourceId": world.group.asg_name,
                "ResourceType": "auto-scaling-group",
                "Key": TAG_KEY,
                "Value": TAG_VALUE,
                "PropagateAtLaunch": False,
            }
        ]
    )


def test_group_tagged_later__schedule_puts_its_hook__its_terminate_event_drained(
    world: World, invoke: Invoke
) -> None:
    group, hook = world.group.asg_name, world.group.hook_name
    world.autoscaling.delete_lifecycle_hook(AutoScalingGroupName=group, LifecycleHookName=hook)
    _tag(world)
    settings = _by_tag(world)

    synced = invoke(json.loads(SCHEDULE.read_text()), **settings)

    assert synced["result"] == "hooks_synced"
    assert synced["hooks_created"] == [group]
    (found,) = world.autoscaling.describe_lifecycle_hooks(AutoScalingGroupName=group)[
        "LifecycleHooks"
    ]
    assert found["LifecycleTransition"] == "autoscaling:EC2_INSTANCE_TERMINATING"
    assert found["DefaultResult"] == "CONTINUE"
    assert json.loads(found["NotificationMetadata"]) == {"cluster_name": world.cluster_name}

    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2)])
    summary = invoke(world.terminate(instance), **settings)

    assert summary["result"] == "drained"
    assert summary["lifecycle_result"] == "CONTINUE"
    assert summary["evicted"] == 2
    assert pods_on(world.cluster, node) == []
    (complete,) = world.completions()
    assert complete["LifecycleActionResult"] == "CONTINUE"


def test_group_neither_named_nor_tagged__action_left_alone__node_untouched(
    world: World, invoke: Invoke
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]

    summary = invoke(world.terminate(instance), **_by_tag(world))

    assert summary["result"] == "not_allowed"
    assert summary["lifecycle_result"] == "none"
    assert f"ASG_TAG {TAG_KEY}={TAG_VALUE} does not admit it" in summary["message"]
    assert world.completions() == []
    assert not world.cluster.client.get("Node", node)["spec"].get("unschedulable")
