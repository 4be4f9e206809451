"""The node behind an instance (drainer/k8s/nodes.py), against kubesim: by name, by
hostname label, by providerID; and never a node that belongs to another instance."""

from __future__ import annotations

from typing import Any

import pytest

from drainer.k8s.kube import Kube
from drainer.k8s.nodes import find_node, other_manager
from kubesim import KubeSim
from testbed.workloads import node

INSTANCE = "i-0123456789abcdef0"
OTHER = "i-0fffffffffffffff0"
DNS = "ip-10-0-1-23.ec2.internal"


def lookup(kube: Kube) -> str | None:
    return find_node(kube, DNS, (DNS, DNS.split(".", maxsplit=1)[0]), "/" + INSTANCE)


@pytest.mark.parametrize(
    ("case", "nodes", "found"),
    [
        ("by name", [node(DNS, instance=INSTANCE)], DNS),
        ("by hostname label", [node("worker-a", instance=INSTANCE, hostname=DNS)], "worker-a"),
        ("by providerID", [node("worker-b", instance=INSTANCE)], "worker-b"),
        ("no node", [node("worker-c", instance=OTHER)], None),
        # The DNS name reused by another instance: that node is another machine.
        ("name reused by another instance", [node(DNS, instance=OTHER)], None),
        (
            "name reused, the instance's node under another name",
            [node(DNS, instance=OTHER), node("worker-d", instance=INSTANCE)],
            "worker-d",
        ),
        (
            "hostname label of another instance",
            [node("worker-e", instance=OTHER, hostname=DNS)],
            None,
        ),
    ],
)
def test_find_node(
    sim: KubeSim, kube: Kube, case: str, nodes: list[dict[str, Any]], found: str | None
) -> None:
    sim.apply(nodes)

    assert lookup(kube) == found, case


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"karpenter.sh/nodepool": "general"}, "Karpenter (karpenter.sh/nodepool=general)"),
        ({"eks.amazonaws.com/compute-type": "auto"}, "EKS Auto Mode"),
        ({"eks.amazonaws.com/compute-type": "ec2"}, ""),
        ({"eks.amazonaws.com/nodegroup": "ng-1"}, ""),
        ({}, ""),
    ],
)
def test_other_manager__karpenter_and_auto_mode_nodes_are_not_ours(
    labels: dict[str, str], expected: str
) -> None:
    found = other_manager({"metadata": {"name": "n", "labels": labels}})

    assert found.startswith(expected) if expected else found == ""
