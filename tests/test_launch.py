"""The launch hook's decisions (drainer/lifecycle/launch.py): what a new node still
waits for, and what the Auto Scaling group is told."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support import objects

from drainer import aws
from drainer.k8s.cordon import PROGRESS_ANNOTATION
from drainer.k8s.kube import Kube
from drainer.lifecycle import launch
from kubesim import KubeSim
from kubesim.controllers import STARTUP
from testbed import workloads

INSTANCE = "i-0f1e2d3c4b5a69788"
NODE = "ip-10-0-1-23.ec2.internal"
IDENTITY = aws.NodeIdentity(INSTANCE, NODE, "us-east-1a")
NOW = 1_790_000_000.0


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim() as running:
        yield running


def _set_ready(sim: KubeSim, kind: str, name: str, ready: bool, namespace: str = "") -> None:
    current = sim.get(kind, name, namespace)
    current["status"] = {
        **(current.get("status") or {}),
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    resource = sim.resource_for(current)
    sim.api.update(resource, current, namespace, name, subresource="status")


def test_readiness__no_node__waits_for_it_to_register(sim: KubeSim, kube: Kube) -> None:
    assert launch._readiness(kube, IDENTITY, True) == ("", "its node to register")


def test_readiness__registered_not_ready__then_its_daemonset_pods__then_ready(
    sim: KubeSim, kube: Kube
) -> None:
    sim.apply(objects.node(NODE, instance=INSTANCE))
    _set_ready(sim, "Node", NODE, False)
    assert launch._readiness(kube, IDENTITY, True) == (NODE, f"node {NODE} to be Ready")

    _set_ready(sim, "Node", NODE, True)
    agent = workloads.daemonset("cni")
    agent["spec"]["template"]["metadata"]["annotations"] = {STARTUP: "3600"}  # Ready in an hour
    sim.apply(agent)
    cni = _one_pod(sim, "kube-system")
    sim.apply(objects.pod("web-1", node_name=NODE, annotations={STARTUP: "3600"}))
    name, waiting = launch._readiness(kube, IDENTITY, True)
    assert (name, waiting) == (NODE, f"its DaemonSet pods to be Ready (kube-system/{cni})")
    assert launch._readiness(kube, IDENTITY, False) == (NODE, ""), "not asked to wait for them"

    _set_ready(sim, "Pod", cni, True, "kube-system")
    ready = launch._readiness(kube, IDENTITY, True)
    assert ready == (NODE, ""), "a pod of no DaemonSet is not waited for"


def test_readiness__back_from_the_warm_pool__waits_for_the_shutdown_taint_to_go(
    sim: KubeSim, kube: Kube
) -> None:
    node = objects.node(NODE, instance=INSTANCE)
    node["spec"]["taints"] = [{"key": launch.SHUTDOWN_TAINT, "effect": "NoSchedule"}]
    sim.apply(node)
    _set_ready(sim, "Node", NODE, True)

    waiting = f"node {NODE} to lose the taint {launch.SHUTDOWN_TAINT}"
    assert launch._readiness(kube, IDENTITY, False, restarted=True) == (NODE, waiting)
    assert launch._readiness(kube, IDENTITY, False) == (NODE, ""), "a new node: not looked at"

    kube.patch_node(NODE, {"spec": {"taints": None}})
    assert launch._readiness(kube, IDENTITY, False, restarted=True) == (NODE, "")


def _drained(sim: KubeSim, phase: str, **record: Any) -> None:
    node = objects.node(NODE, instance=INSTANCE)
    node["spec"]["unschedulable"] = True
    annotation = {"phase": phase, "added": ["cordon"], **record}
    node["metadata"].setdefault("annotations", {})[PROGRESS_ANNOTATION] = json.dumps(annotation)
    sim.apply(node)


def test_release__back_from_the_warm_pool__only_what_the_drainer_added_undone(
    sim: KubeSim, kube: Kube
) -> None:
    _drained(sim, "drained", destination="warm-pool")
    joining = launch.Joining("joined", "Ready", NODE)

    released = launch._release(kube, joining, NOW - 3, lambda: NOW)

    assert released.released == ("uncordoned", f"removed annotation {PROGRESS_ANNOTATION}")
    said = f"node {NODE} is back from the warm pool, Ready and schedulable 3 s after the launch"
    assert released.message.startswith(said)
    assert not sim.get("Node", NODE)["spec"].get("unschedulable")


def test_release__no_record__nothing_done_nothing_kept(
    sim: KubeSim, kube: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    sim.apply(objects.node(NODE, instance=INSTANCE))  # it joined on its way into service
    joining = launch.Joining("joined", "Ready", NODE)

    with caplog.at_level(logging.INFO):
        assert launch._release(kube, joining, NOW, lambda: NOW) == joining
    assert "no eks-node-drainer record: nothing to release" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_release__a_drain_under_way__not_released(sim: KubeSim, kube: Kube) -> None:
    _drained(sim, "draining", trigger="scheduled-change", since=NOW - 10, until=NOW + 600)
    joining = launch.Joining("joined", "Ready", NODE)

    released = launch._release(kube, joining, NOW, lambda: NOW)

    assert released.released == ()
    assert "a scheduled-change drain is under way" in released.message
    assert sim.get("Node", NODE)["spec"].get("unschedulable"), "left to that drain"


def _one_pod(sim: KubeSim, namespace: str) -> str:
    """The name of the one pod the DaemonSet controller puts in `namespace`."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pods = sim.list("Pod", namespace)
        if pods:
            return str(pods[0]["metadata"]["name"])
        time.sleep(0.02)
    raise AssertionError("the DaemonSet controller made no pod")


@pytest.mark.parametrize(
    ("result", "on_timeout", "told"),
    [
        ("joined", "abandon", "CONTINUE"),
        ("not_joined", "abandon", "ABANDON"),
        ("not_joined", "continue", "CONTINUE"),
        ("failed", "abandon", "CONTINUE"),  # a broken drainer never stops launches
        ("not_allowed", "abandon", None),  # not our group: its action is left alone
    ],
)
def test_lifecycle_result(result: str, on_timeout: str, told: Any) -> None:
    assert launch._lifecycle_result(launch.Joining(result, ""), on_timeout) == told
