"""The launch lifecycle hook (LAUNCH_HOOK), through the real handler: a new
instance waits in Pending:Wait until its node has registered and is Ready, then
CONTINUE; a node that never comes gets LAUNCH_TIMEOUT_RESULT."""

from __future__ import annotations

from testbed import World

from .conftest import Invoke, LogCapture, invoke_meanwhile

LAUNCH = {"LAUNCH_HOOK": "true"}


def test_new_instance__continue_only_once_its_node_is_ready(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    instance, event = world.launch()

    # The node registers while the function waits for it, as a kubelet would.
    summary, joined_at = invoke_meanwhile(
        invoke,
        event,
        drainer_logs,
        "waiting for its node to register",
        lambda: world.add_node(instance),
        **LAUNCH,
    )

    assert summary["result"] == "joined", summary
    assert summary["trigger"] == "launch-hook"
    assert summary["node"] == world.nodes[instance]
    (complete,) = world.completions()
    assert complete["LifecycleActionResult"] == "CONTINUE"
    assert complete["LifecycleActionToken"] == event["detail"]["LifecycleActionToken"]
    assert complete["time"] >= joined_at, "completed before the node was there"
    (action,) = [a for a in world.aws.actions() if a["instance_id"] == instance]
    assert action["closed_by"] == "complete"


def test_node_never_joins__abandon_by_default__continue_when_set(
    world: World, invoke: Invoke
) -> None:
    _, event = world.launch()

    summary = invoke(event, timeout=8, HANDOVER_MARGIN_SECONDS=5, **LAUNCH)

    assert summary["result"] == "not_joined", summary
    assert "still waiting for its node to register" in summary["message"]
    (complete,) = world.completions()
    assert complete["LifecycleActionResult"] == "ABANDON"

    _, event = world.launch()
    summary = invoke(
        event, timeout=8, HANDOVER_MARGIN_SECONDS=5, LAUNCH_TIMEOUT_RESULT="continue", **LAUNCH
    )
    assert summary["lifecycle_result"] == "CONTINUE"


def test_launch_hook_off__action_left_alone(world: World, invoke: Invoke) -> None:
    _, event = world.launch()

    summary = invoke(event)

    assert summary == {"result": "skipped", "reason": "launch lifecycle action: LAUNCH_HOOK is off"}
    assert world.completions() == []


def test_instance_into_the_warm_pool__continue_at_once(world: World, invoke: Invoke) -> None:
    """A warm pool's instance is stopped once warmed: no node will be Ready."""
    _, event = world.launch()
    event["detail"]["Destination"] = "WarmPool"

    summary = invoke(event, **LAUNCH)

    assert summary["result"] == "joined", summary
    assert "goes to the warm pool" in summary["message"]
    (complete,) = world.completions()
    assert complete["LifecycleActionResult"] == "CONTINUE"
