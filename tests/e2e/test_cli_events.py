"""A drain run by hand with the CLI, told in Kubernetes Events as the Lambda tells
its own (the same poster), on both backends: `kubectl describe node` shows a
teammate who drains the node (the kubeconfig user and the host) and how it ended.
Never fatal: an identity without the Events rule drains all the same and says so
once. A dry run writes no Event."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from testbed import World
from testbed import workloads as w
from testbed.world import drainer_may, place_on, wait_until

from .test_kube_events import _without_events_rule

ROOT = Path(__file__).resolve().parents[2]
USER = "drainer"
"""The kubeconfig user of the context `drainer`, on both backends."""
NOT_RECORDED = "Kubernetes Events are not recorded"


def _drain(
    world: World, tmp_path: Path, node: str, *flags: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(tmp_path))
    argv = [sys.executable, "-m", "drainer", "drain", node, "--ignore-daemonsets", *flags]
    argv += ["--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"]
    return subprocess.run(
        argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120, check=False
    )


def _node_events(world: World, node: str) -> list[dict[str, Any]]:
    """The drainer's core v1 Events about this node object (by its uid: the cluster
    is shared with earlier tests), oldest first, as kubectl describe reads them."""
    uid = world.cluster.get("Node", node)["metadata"]["uid"]
    selector = f"involvedObject.kind=Node,involvedObject.name={node}"
    found = world.cluster.client.call("GET", "/api/v1/events", query={"fieldSelector": selector})
    return sorted(
        (
            e
            for e in found["items"]
            if e.get("reportingComponent") == "eks-node-drainer"
            and e["involvedObject"].get("uid") == uid
        ),
        key=lambda e: e.get("eventTime") or "",
    )


def _reasons(world: World, node: str) -> list[str]:
    return [e["reason"] for e in _node_events(world, node)]


def test_cli_drain__start_and_end_events_name_the_user_and_host__dry_run_writes_none(
    world: World, tmp_path: Path, kubectl_binary: Path
) -> None:
    node = world.nodes[world.instance_ids[0]]
    place_on(world, node, [w.deployment("web", 2)])
    host = socket.gethostname()

    dry = _drain(world, tmp_path, node, "--dry-run")
    drained = _drain(world, tmp_path, node)

    assert dry.returncode == 0, dry.stderr
    assert drained.returncode == 0, drained.stdout + drained.stderr
    assert NOT_RECORDED not in drained.stderr
    wait_until(lambda: "Drained" in _reasons(world, node), 10)
    assert _reasons(world, node) == ["Cordoned", "DrainStarted", "Drained"], "none of the dry run"
    events = {e["reason"]: e for e in _node_events(world, node)}
    started = events["DrainStarted"]["message"]
    assert started.startswith(
        f"eks-node-drainer drains the node (begun by cli, kubeconfig user {USER} on host {host}): "
        "2 pods, then 0 critical, by "
    ), started
    assert "--timeout (3600 s)" in started
    assert events["Drained"]["message"] == "every pod is gone: 2 evicted"
    for event in events.values():
        assert event["reportingInstance"] == f"{USER}@{host}", event
    kubeconfig = str(world.cluster.kubeconfig)
    described = subprocess.run(
        [str(kubectl_binary), "--kubeconfig", kubeconfig, "describe", "node", node],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split("Events:")[1]
    print(described)
    # kubectl describe's From column shows the reportingController alone: the message
    # says who.
    assert f"kubeconfig user {USER} on host {host}" in described


@pytest.mark.parametrize("world", [{"rbac": _without_events_rule()}], indirect=True)
def test_cli_drain_without_the_events_rule__drains_all_the_same__one_warning(
    world: World, tmp_path: Path
) -> None:
    node = world.nodes[world.instance_ids[0]]
    place_on(world, node, [w.deployment("web", 3)])
    # The authorizer learns the new role a moment after it is written.
    wait_until(lambda: drainer_may(world.cluster, "create", "pods", "eviction"), 10)

    drained = _drain(world, tmp_path, node)

    assert drained.returncode == 0, drained.stdout + drained.stderr
    assert f"node {node} drained: 3 evicted" in drained.stdout
    said = [line for line in drained.stderr.splitlines() if NOT_RECORDED in line]
    assert len(said) == 1, drained.stderr
    assert "events.events.k8s.io" in said[0]
    assert "the drain goes on" in said[0]
    assert _node_events(world, node) == []
