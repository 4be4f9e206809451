"""testbed/world.py's set-up waits: when a scenario's workload never becomes Ready,
the timeout says which pods and workloads it waited for (a fresh-clone run once
failed with only "last: False")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubesim import KubeSim
from testbed import World
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import not_ready, place_on


@pytest.fixture
def world(moto_aws: None) -> Iterator[World]:
    with KubeSim(speed=20) as running:
        yield World(Cluster.of_kubesim(running), size=2)


def test_place_on__a_workload_never_ready__the_timeout_names_its_pods(world: World) -> None:
    node = world.nodes[world.instance_ids[0]]
    slow = w.deployment("slow", 2, startup=3600)

    with pytest.raises(AssertionError) as raised:
        place_on(world, node, [slow, w.deployment("quick", 1)], timeout=1.0)

    message = str(raised.value)
    assert message.count("pod default/slow-") == 2, message
    assert f"on {node}" in message, message
    assert "Deployment slow (" in message, message
    assert "quick" not in message, message
    # the other nodes take pods again, as after a placement that worked
    others = [n for n in world.nodes.values() if n != node]
    assert not any(world.cluster.get("Node", n)["spec"].get("unschedulable") for n in others)


def test_not_ready__nothing_once_every_pod_and_replica_is_ready(world: World) -> None:
    node = world.nodes[world.instance_ids[0]]
    web = w.deployment("web", 2)

    place_on(world, node, [web])

    assert not_ready(world.cluster, [web]) == []
