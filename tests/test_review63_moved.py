"""Review 63: a scheduled change whose window EC2 moved, without marking the old one
canceled. EC2 keeps one event per change: rescheduled (by AWS, or by the owner's
ModifyInstanceEventStartTime), DescribeInstanceStatus lists it at its new time and
nothing at the old. A chain of invocations draining toward the old window took "nothing
listed then" for no answer and drained on, its last step force-deleting the pods
budgets held at the old window, hours before EC2 acts; an update of the old window
delivered late (out of order) started such a chain too. EC2's event of the change's
kind pending at another time now says the window moved: the old window's drain ends
there, the node stays cordoned for the new one (the update's own drain)."""

from __future__ import annotations

import pytest
from test_review60_ec2 import _invoke, _node, _record, published, world
from test_review62_redelivery import _first, queued
from test_review63_second import _listed, _start

from awssim.instances import schedule_events
from drainer.lifecycle.late import ec2_code
from testbed import World

__all__ = ["published", "world"]


def test_window_moved_in_ec2__the_old_chain_ends__nothing_forced_at_the_old_window(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    node, change = _first(world, monkeypatch)
    step = queued(world)
    window = _start(change)
    instance = world.instance_ids[0]
    schedule_events(world.aws.account_id, world.region, instance, _listed((window + 7200, "")))

    later = _invoke(world, monkeypatch, step, lambda_seconds=10.0)

    assert later["result"] == "skipped", later
    assert "moved" in str(later.get("reason")), later
    assert not world.aws.pending_invocations(), "the old window's chain ends"
    assert _node(world, node)["spec"].get("unschedulable"), "cordoned for the new window"
    assert _record(world, node), "the record stays for the new window's drain"


def test_an_update_of_the_old_window_delivered_late__left_alone(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of order: the update that set the old window comes after EC2 moved it."""
    instance = world.instance_ids[0]
    change = world.scheduled_change([instance], starts_in=600)
    schedule_events(
        world.aws.account_id, world.region, instance, _listed((_start(change) + 7200, ""))
    )

    late = _invoke(world, monkeypatch, change, lambda_seconds=10.0)

    assert late["result"] == "skipped", late
    assert not world.aws.pending_invocations()
    assert not _node(world, world.nodes[instance])["spec"].get("unschedulable")


def test_window_listed_where_the_event_says__drained_as_before(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, change = _first(world, monkeypatch)
    step = queued(world)
    instance = world.instance_ids[0]
    schedule_events(world.aws.account_id, world.region, instance, _listed((_start(change), "")))

    later = _invoke(world, monkeypatch, step, lambda_seconds=10.0)

    assert later["result"] == "handed_over", later


@pytest.mark.parametrize(
    ("health", "ec2"),
    [
        ("AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", "instance-retirement"),
        ("AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED", "instance-retirement"),
        ("AWS_EC2_INSTANCE_STOP_SCHEDULED", "instance-stop"),
        ("AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED", "system-reboot"),
        ("AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED", "instance-reboot"),
        ("AWS_EC2_SYSTEM_MAINTENANCE_SCHEDULED", "system-maintenance"),
        ("AWS_EC2_INSTANCE_TERMINATION_SCHEDULED", ""),
    ],
)
def test_ec2_code__the_health_code_of_a_change_as_ec2_lists_it(health: str, ec2: str) -> None:
    """An unknown kind matches nothing: "moved" is never said of it."""
    assert ec2_code(health) == ec2
