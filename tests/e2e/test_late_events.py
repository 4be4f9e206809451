"""EC2's events that come late, through the real handler on both backends.

Lambda's asynchronous queue keeps an event for up to six hours while the function is
throttled or failing, and a spot instance that stops or hibernates comes back. A
deadline taken from such an event is already past: it is no reason to delete pods
on an instance EC2 says is still running. The function checks the event against
EC2's state of the instance now (drainer/lifecycle/ec2_events.py: is_late,
restarted): awssim's instances were launched a day ago, and StartInstances moves
their LaunchTime as EC2 does (awssim/instances.py).
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from testbed import World
from testbed import workloads as w
from testbed.world import pods_on

from .conftest import Invoke, LogCapture, place_guarded
from .test_notices import Inbox, inbox  # noqa: F401 - the fixture
from .test_spot import _unschedulable


def _late(world: World, kind: str, instance: str) -> dict[str, Any]:
    if kind == "state-change":
        return world.state_change(instance, "stopping", age=15 * 60)
    return world.spot_warning(instance, age=10 * 60, action="stop")


@pytest.mark.parametrize("kind", ["state-change", "spot-interruption"])
def test_late_event__instance_still_running__budgets_respected_nothing_forced(
    world: World, invoke: Invoke, kind: str
) -> None:
    """Three replicas under maxUnavailable 0: the budget holds every one until the
    drain's own time (here this short invocation's) runs out; none is deleted."""
    instance = world.instance_ids[0]
    node = place_guarded(world, 3)

    summary = invoke(
        _late(world, kind, instance),
        timeout=10,
        HANDOVER_MARGIN_SECONDS=5,
        STATE_CHANGE_DRAIN="true",
        TIMEOUT_POLICY="force",
    )

    assert summary["result"] == "timed_out", summary
    assert summary["trigger"] == kind
    assert summary["forced"] == 0 and not summary["forced_pods"], summary
    assert summary["evicted"] == 0
    assert len(pods_on(world.cluster, node)) == 3, "a pod its budget protects was deleted"
    assert "came after EC2's moment to act" in summary["deadline_source"]
    assert f"instance {instance} is still running" in summary["deadline_source"]
    assert "force-deleted" not in summary["message"]
    assert "nothing deleted past its budget" in summary["message"]
    assert _unschedulable(world, node), "the node is cordoned: EC2 may still act"


def test_late_warning__instance_still_running__its_pods_evicted_as_budgets_allow(
    world: World, invoke: Invoke
) -> None:
    """Where the budget lets pods go, the late warning's drain goes through."""
    node = place_guarded(world, 2)
    world.cluster.apply([w.budget("guard", {"app": "guarded"}, max_unavailable=1)], replace=True)

    summary = invoke(world.spot_warning(world.instance_ids[0], age=10 * 60, action="stop"))

    assert summary["result"] == "drained", summary
    assert summary["evicted"] == 2 and summary["forced"] == 0
    assert pods_on(world.cluster, node) == []


def test_event_older_than_the_instances_last_start__left_alone_with_a_notice(
    world: World,
    invoke: Invoke,
    drainer_logs: LogCapture,
    inbox: Inbox,  # noqa: F811 - the fixture
) -> None:
    """A spot instance that stopped on its warning and was started again: the warning
    is about its earlier life. Its node now serves; nothing is cordoned or evicted."""
    instance = world.instance_ids[0]
    node = place_guarded(world, 3)
    ec2 = boto3.client("ec2", region_name=world.region)
    warning = world.spot_warning(instance, age=10 * 60, action="stop")
    ec2.stop_instances(InstanceIds=[instance])
    ec2.start_instances(InstanceIds=[instance])

    summary = invoke(warning, NOTIFICATION_TOPIC_ARN=inbox.topic)

    assert summary["result"] == "skipped", summary
    assert "which was started again at" in summary["reason"]
    assert "left alone" in summary["reason"]
    assert not _unschedulable(world, node)
    assert len(pods_on(world.cluster, node)) == 3
    assert drainer_logs.events("cordoned") == []
    (notice,) = inbox.notices()
    assert notice["Subject"] == (f"eks-node-drainer: {instance} left alone (late event)")
    assert "which was started again at" in notice["Message"]
