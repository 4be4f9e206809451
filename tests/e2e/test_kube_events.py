"""The drain told in Kubernetes Events (events.k8s.io/v1, reportingController
eks-node-drainer), as `kubectl describe node` and `kubectl get events` show them
through the core v1 API: on the node its start, cordon and end with what the Auto
Scaling group is told; on the pods each eviction, a budget's refusal once (not per
retry) and a deletion at the deadline. Never fatal: without the permission the
drain goes on and says so once."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from testbed import World
from testbed import workloads as w
from testbed.world import place_on, rbac_manifests, wait_until

from .conftest import Invoke, LogCapture


def _events(world: World, kind: str, name: str = "", node: str = "") -> list[dict[str, Any]]:
    """Core v1 Events about objects of `kind` (named `name`; of the drain of `node`),
    as kubectl reads them. The cluster is shared with earlier tests."""
    selector = f"involvedObject.kind={kind}" + (f",involvedObject.name={name}" if name else "")
    found = world.cluster.client.call("GET", "/api/v1/events", query={"fieldSelector": selector})[
        "items"
    ]
    return [
        e
        for e in found
        if e.get("reportingComponent") == "eks-node-drainer"
        and (not node or f"node {node}" in (e.get("message") or ""))
    ]


def _reasons(events: list[dict[str, Any]]) -> list[str]:
    return [e["reason"] for e in sorted(events, key=lambda e: e.get("eventTime") or "")]


def test_drain__node_and_pods_tell_the_story_in_events(
    world: World, invoke: Invoke, kubectl_binary: Path
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(
        world,
        node,
        [
            w.deployment("web", 3, startup=20.0),
            w.budget("web", {"app": "web"}, max_unavailable=1),
        ],
    )

    summary = invoke(world.terminate(instance))

    assert summary["result"] == "drained", summary
    # The last Events may still be on their way when the invocation returns.
    wait_until(lambda: "Drained" in _reasons(_events(world, "Node", node)), 10)
    wait_until(lambda: _reasons(_events(world, "Pod", node=node)).count("Evicted") == 3, 10)
    assert _reasons(_events(world, "Node", node)) == ["Cordoned", "DrainStarted", "Drained"]
    (drained,) = [e for e in _events(world, "Node", node) if e["reason"] == "Drained"]
    assert drained["message"] == (
        "every pod is gone: 3 evicted; the Auto Scaling group is told CONTINUE"
    )
    assert (
        drained["involvedObject"]["uid"]
        == world.cluster.client.get("Node", node)["metadata"]["uid"]
    )
    pods = _events(world, "Pod", node=node)
    assert _reasons(pods).count("Evicted") == 3
    refusals = [e for e in pods if e["reason"] == "EvictionRefusedByBudget"]
    assert summary["pdb_refusals"] >= len(refusals), "once per pod, not per retry"
    assert all(e["type"] == "Warning" for e in refusals)
    assert len({e["involvedObject"]["name"] for e in refusals}) == len(refusals)
    described = subprocess.run(
        [
            str(kubectl_binary),
            "--kubeconfig",
            str(world.cluster.kubeconfig),
            "describe",
            "node",
            node,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    print(described[described.index("Events:") :])
    for reason in ("DrainStarted", "Cordoned", "Drained"):
        assert reason in described.split("Events:")[1], reason
    listed = subprocess.run(
        [
            str(kubectl_binary),
            "--kubeconfig",
            str(world.cluster.kubeconfig),
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=Pod,reportingComponent=eks-node-drainer",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    print(listed)
    assert listed.count("Evicted") >= 3


def test_budget_never_allows__one_refusal_event_per_pod_and_deleted_at_the_deadline(
    world: World, invoke: Invoke
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(
        world,
        node,
        [
            w.deployment("db", 1, grace=10, labels={"app": "db"}),
            w.budget("db", {"app": "db"}, max_unavailable=0),
        ],
    )

    summary = invoke(world.spot_warning(instance, age=95))  # 10 s to the deadline

    assert summary["result"] == "timed_out", summary
    (pod,) = summary["forced_pods"]
    name = pod.split("/")[1]
    wait_until(lambda: "DrainTimedOut" in _reasons(_events(world, "Node", node)), 10)
    about = _events(world, "Pod", name, node=node)
    assert _reasons(about) == ["EvictionRefusedByBudget", "DeletedAtDeadline"]
    assert "PodDisruptionBudget default/db allows no disruption" in about[0]["message"]
    assert _reasons(_events(world, "Node", node))[-1] == "DrainTimedOut"


def _without_events_rule() -> list[dict[str, Any]]:
    manifests = rbac_manifests()
    for document in manifests:
        if document["kind"] == "ClusterRole":
            document["rules"] = [
                r for r in document["rules"] if r["apiGroups"] != ["events.k8s.io"]
            ]
    return manifests


@pytest.mark.parametrize("world", [{"rbac": _without_events_rule()}], indirect=True)
def test_without_the_events_rule__drain_goes_on__says_so_once(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 3)])

    summary = invoke(world.terminate(instance))

    assert summary["result"] == "drained", summary
    assert summary["evicted"] == 3
    wait_until(lambda: "Kubernetes Events are not recorded" in drainer_logs.text, 10)
    said = [m for m in drainer_logs.messages() if "Kubernetes Events are not recorded" in m]
    assert len(said) == 1, said
    assert "events.events.k8s.io" in said[0]
    assert _events(world, "Node", node) == []


@pytest.mark.parametrize("world", [{"node_capacity": 300}], indirect=True)
def test_drain_of_250_pods__the_end_event_is_told__saying_how_many_pod_events_were_folded(
    world: World, invoke: Invoke
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("crowd", 250)], timeout=120)

    summary = invoke(world.terminate(instance))

    assert summary["result"] == "drained", summary
    assert summary["evicted"] == 250
    wait_until(lambda: "Drained" in _reasons(_events(world, "Node", node)), 30)
    (drained,) = [e for e in _events(world, "Node", node) if e["reason"] == "Drained"]
    assert drained["message"] == (
        "every pod is gone: 250 evicted; the Auto Scaling group is told CONTINUE; "
        "50 pod Events not recorded (200 per drain: the log has each)"
    )
    assert _reasons(_events(world, "Node", node)) == ["Cordoned", "DrainStarted", "Drained"]
    assert _reasons(_events(world, "Pod", node=node)).count("Evicted") == 200


def test_node_annotated_do_not_disrupt__drained_anyway__says_so_once_in_log_and_event(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2)])
    world.cluster.patch(
        "Node", node, {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}
    )

    summary = invoke(world.terminate(instance))

    assert summary["result"] == "drained", summary
    assert summary["evicted"] == 2
    said = [
        r
        for r in drainer_logs.records()
        if "karpenter.sh/do-not-disrupt" in str(r.get("message", ""))
    ]
    assert [r["level"] for r in said] == ["WARNING"], said
    assert "the Auto Scaling group terminates the instance regardless" in said[0]["message"]
    assert "scale-in protection" in said[0]["message"]
    wait_until(lambda: "Drained" in _reasons(_events(world, "Node", node)), 10)
    (ignored,) = [e for e in _events(world, "Node", node) if e["reason"] == "DoNotDisruptIgnored"]
    assert ignored["type"] == "Warning"
    assert ignored["message"] == said[0]["message"]


def test_node_annotated_do_not_disrupt__a_drain_handed_over__not_said_again(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2)])
    now = int(time.time())
    under_way = {"phase": "draining", "trigger": "terminate-hook", "since": now - 900}
    under_way.update({"until": now + 2700, "added": ["cordon", "exclude-from-lb-label"]})
    world.cluster.patch(
        "Node",
        node,
        {
            "metadata": {
                "annotations": {
                    "karpenter.sh/do-not-disrupt": "true",
                    "eks-node-drainer/progress": json.dumps(under_way),
                }
            }
        },
    )

    summary = invoke(world.terminate(instance))

    assert summary["result"] == "drained", summary
    assert "karpenter.sh/do-not-disrupt" not in drainer_logs.text
    wait_until(lambda: "Drained" in _reasons(_events(world, "Node", node)), 10)
    assert "DoNotDisruptIgnored" not in _reasons(_events(world, "Node", node))
