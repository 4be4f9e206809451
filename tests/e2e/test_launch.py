"""The launch lifecycle hook (LAUNCH_HOOK), through the real handler: a new
instance waits in Pending:Wait until its node has registered and is Ready, then
CONTINUE; a node that never comes gets LAUNCH_TIMEOUT_RESULT."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from support.metrics import emf_lines

from testbed import World, workloads
from testbed.world import pods_on, wait_until

from .conftest import Invoke, LogCapture, invoke_meanwhile
from .test_notices import Inbox
from .test_notices import inbox as notices_inbox

inbox = notices_inbox  # the fixture: an SNS topic read back through SQS

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
    node = world.nodes[instance]
    wait_until(lambda: _launch_events(world, node), 10)
    (told,) = _launch_events(world, node)
    assert (told["reason"], told["type"]) == ("Joined", "Normal")
    assert told["message"].endswith("; the Auto Scaling group is told CONTINUE")


def test_node_never_joins__abandon_by_default__continue_when_set(
    world: World, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    _, event = world.launch()

    summary = invoke(event, timeout=8, HANDOVER_MARGIN_SECONDS=5, **LAUNCH)

    assert summary["result"] == "not_joined", summary
    assert "still waiting for its node to register" in summary["message"]
    (complete,) = world.completions()
    assert complete["LifecycleActionResult"] == "ABANDON"
    (metrics,) = emf_lines(capsys.readouterr().out)
    counts = [metrics[name] for name in ("LaunchJoined", "LaunchNotJoined", "LaunchFailed")]
    assert counts == [[0], [1], [0]], "the dashboard counts a launch that never joined"
    assert metrics["Cluster"] == world.cluster_name

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


# Joined means it can take pods: Ready, the startup taints gone, and a cordon set at
# registration told (or waited for, when LAUNCH_WAIT_FOR_UNCORDON asks).

UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
CILIUM = "node.cilium.io/agent-not-ready"


def _register(
    world: World, instance: str, taints: tuple[str, ...] = (), *, cordoned: bool = False
) -> str:
    """The instance's node registers as a kubelet would: Ready, with `taints` (the
    cloud controller's, a CNI agent's) and cordoned when `cordoned` (the kubelet's
    --register-schedulable=false, or someone's kubectl cordon right after)."""
    node = world.add_node(instance)
    patch: dict[str, Any] = {}
    if taints:
        patch["taints"] = [{"key": key, "effect": "NoSchedule"} for key in taints]
    if cordoned:
        patch["unschedulable"] = True
    if patch:
        world.cluster.client.patch("Node", node, {"spec": patch})
    return node


def _untaint(world: World, node: str, key: str) -> None:
    """The taint's owner (the cloud controller, the agent) removes it."""
    taints = world.cluster.get("Node", node)["spec"].get("taints") or []
    kept = [t for t in taints if t.get("key") != key]
    world.cluster.client.patch("Node", node, {"spec": {"taints": kept or None}})


def _begun_ago(event: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The launch action's event, its time `seconds` ago: an action that has waited
    that long already (so a test reaches LAUNCH_TIMEOUT_SECONDS without waiting)."""
    at = datetime.fromtimestamp(time.time() - seconds, UTC)
    return {**event, "time": at.strftime("%Y-%m-%dT%H:%M:%SZ")}


def _launch_events(world: World, node: str) -> list[dict[str, Any]]:
    """The drainer's core v1 Events about the node."""
    selector = f"involvedObject.kind=Node,involvedObject.name={node}"
    found = world.cluster.client.call("GET", "/api/v1/events", query={"fieldSelector": selector})
    return [e for e in found["items"] if e.get("reportingComponent") == "eks-node-drainer"]


@pytest.mark.parametrize("taint", [UNINITIALIZED, CILIUM])
def test_ready_node_with_a_startup_taint__continue_only_once_the_taint_goes(
    world: World, invoke: Invoke, drainer_logs: LogCapture, taint: str
) -> None:
    instance, event = world.launch()
    node = _register(world, instance, (taint,))
    assert world.cluster.get("Node", node)["spec"]["taints"][0]["key"] == taint

    summary, untainted_at = invoke_meanwhile(
        invoke,
        event,
        drainer_logs,
        f"to lose the taint {taint}",
        lambda: _untaint(world, node, taint),
        **LAUNCH,
    )

    assert summary["result"] == "joined", summary
    (complete,) = world.completions()
    assert complete["LifecycleActionResult"] == "CONTINUE"
    assert complete["time"] >= untainted_at, "CONTINUE while the node could take no pods"


def test_node_cordoned_at_registration__continue_by_default__the_cordon_told(
    world: World, invoke: Invoke, inbox: Inbox
) -> None:
    instance, event = world.launch()
    node = _register(world, instance, cordoned=True)

    summary = invoke(event, NOTIFICATION_TOPIC_ARN=inbox.topic, **LAUNCH)

    assert summary["result"] == "joined", summary
    assert summary["cordoned"] is True
    assert "cordoned" in summary["message"] and "LAUNCH_WAIT_FOR_UNCORDON" in summary["message"]
    (complete,) = world.completions()
    assert complete["LifecycleActionResult"] == "CONTINUE"
    assert world.cluster.get("Node", node)["spec"].get("unschedulable"), "someone's decision"
    wait_until(lambda: _launch_events(world, node), 10)
    (told,) = _launch_events(world, node)
    assert (told["reason"], told["type"]) == ("JoinedCordoned", "Warning")
    assert "cordoned" in told["message"] and "told CONTINUE" in told["message"]
    (notice,) = inbox.notices()
    assert node in notice["Subject"] and "cordoned" in notice["Subject"]
    assert "takes no pods until it is uncordoned" in notice["Message"]


def test_node_cordoned_at_registration__waits_for_the_uncordon_when_asked(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    instance, event = world.launch()
    node = _register(world, instance, cordoned=True)

    summary, uncordoned_at = invoke_meanwhile(
        invoke,
        event,
        drainer_logs,
        "to be uncordoned",
        lambda: world.cluster.client.patch("Node", node, {"spec": {"unschedulable": None}}),
        LAUNCH_WAIT_FOR_UNCORDON="true",
        **LAUNCH,
    )

    assert summary["result"] == "joined", summary
    assert summary["cordoned"] is False
    (complete,) = world.completions()
    assert complete["LifecycleActionResult"] == "CONTINUE"
    assert complete["time"] >= uncordoned_at


def test_taint_that_never_clears__abandon_at_the_timeout__the_taint_named_everywhere(
    world: World, invoke: Invoke, inbox: Inbox
) -> None:
    """An instance refresh whose new nodes keep a CNI agent's taint: the launch is
    abandoned (the refresh goes no further) and the notice names the taint, rather
    than a CONTINUE that lets it terminate the next old node."""
    instance, event = world.launch()
    node = _register(world, instance, (CILIUM,))
    late = _begun_ago(event, 30)  # LAUNCH_TIMEOUT_SECONDS=30 has just passed

    summary = invoke(late, LAUNCH_TIMEOUT_SECONDS=30, NOTIFICATION_TOPIC_ARN=inbox.topic, **LAUNCH)

    assert summary["result"] == "not_joined", summary
    assert summary["waiting_for"] == f"taint {CILIUM}"
    assert f"to lose the taint {CILIUM}" in summary["message"]
    (complete,) = world.completions()
    assert complete["LifecycleActionResult"] == "ABANDON"
    wait_until(lambda: _launch_events(world, node), 10)
    (told,) = _launch_events(world, node)
    assert (told["reason"], told["type"]) == ("NotJoined", "Warning")
    assert CILIUM in told["message"] and "told ABANDON" in told["message"]
    (notice,) = inbox.notices()
    assert "ABANDON" in notice["Message"] and CILIUM in notice["Message"]
    assert "LAUNCH_STARTUP_TAINTS" in notice["Message"], "says what to change"

    # Told to continue instead: CONTINUE, still named.
    instance, event = world.launch()
    _register(world, instance, (UNINITIALIZED,))
    summary = invoke(
        _begun_ago(event, 30),
        LAUNCH_TIMEOUT_SECONDS=30,
        LAUNCH_TIMEOUT_RESULT="continue",
        **LAUNCH,
    )
    assert summary["lifecycle_result"] == "CONTINUE"
    assert summary["waiting_for"] == f"taint {UNINITIALIZED}"


def test_a_daemonset_kept_off_by_the_startup_taint__continue_only_once_its_pod_is_ready(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    """A DaemonSet whose pods do not tolerate the CNI agent's startup taint makes its
    pod on the node only once the taint is gone: the launch waits for that pod too
    (LAUNCH_WAIT_DAEMONSETS), not only for the pods already on the node; a DaemonSet of
    another node group owes the node nothing."""
    agent = workloads.workload("DaemonSet", "log-agent", namespace="kube-system", startup=40.0)
    other = workloads.workload("DaemonSet", "gpu-agent", namespace="kube-system")
    other["spec"]["template"]["spec"]["nodeSelector"] = {"role": "gpu"}
    world.cluster.apply([agent, other])
    instance, event = world.launch()
    node = _register(world, instance, (CILIUM,))

    summary, untainted_at = invoke_meanwhile(
        invoke,
        event,
        drainer_logs,
        f"to lose the taint {CILIUM}",
        lambda: _untaint(world, node, CILIUM),
        **LAUNCH,
    )

    assert summary["result"] == "joined", summary
    (pod,) = [
        p
        for p in pods_on(world.cluster, node)
        if p["metadata"]["ownerReferences"][0]["name"] == "log-agent"
    ]
    (ready,) = [c for c in pod["status"]["conditions"] if c["type"] == "Ready"]
    assert ready["status"] == "True"
    ready_at = datetime.strptime(ready["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=UTC
    )
    (complete,) = world.completions()
    assert complete["LifecycleActionResult"] == "CONTINUE"
    assert complete["time"] >= untainted_at
    assert complete["time"] >= ready_at.timestamp() - 1, "CONTINUE before the agent's pod was Ready"
    assert not [p for p in pods_on(world.cluster, node) if "gpu-agent" in p["metadata"]["name"]]
