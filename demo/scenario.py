"""The demo's cluster: what runs where, and how long things take.

A small but realistic EKS cluster (durations in seconds at --speed 1; kubesim
divides them by the speed):

  kube-system/aws-node     DaemonSet, one pod per node (skipped by a drain)
  kube-system/coredns      2 replicas, priorityClassName system-cluster-critical,
                           PDB maxUnavailable 1; evicted last, so DNS works to the end
  shop/web                 nodes x pods-per-node replicas, PDB maxUnavailable 1:
                           evicted one at a time, each replacement Ready (3 s) first
  shop/db                  StatefulSet, 1 replica, a 10Gi gp3 volume (VolumeAttachment),
                           stops in 3 s, its volume detaches 3 s later
  default/adhoc-report     a bare pod with emptyDir: nothing recreates it
  shop/billing             (--stubborn-pdb) 1 replica with PDB minAvailable 1:
                           a budget that never allows an eviction

The node to be scaled in gets one of everything: the web replicas spread evenly,
then the other workloads are placed while the other nodes are cordoned for a
moment, then coredns scales to 2 so its second replica lands elsewhere.

With `tight_grace` (the demo's --plan) each pod's terminationGracePeriodSeconds is
its stop time rather than 30 s: the plan takes a pod's grace period as the time it
takes to stop (no drain has observed a shorter one yet), so its forecast can be
checked only against pods that stop when their grace period ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from testbed import workloads as w

Obj = dict[str, Any]

NAMESPACE = "shop"
CRITICAL = "system-cluster-critical"


@dataclass(frozen=True)
class Durations:
    """Simulated seconds, at --speed 1."""

    web_startup: float = 3.0
    web_shutdown: float = 2.0
    db_startup: float = 4.0
    db_shutdown: float = 3.0
    db_detach: float = 3.0
    dns_startup: float = 2.0
    dns_shutdown: float = 1.0
    report_shutdown: float = 1.0
    billing_startup: float = 2.0
    billing_shutdown: float = 1.0


@dataclass(frozen=True)
class Scenario:
    nodes: int = 3
    pods_per_node: int = 2
    stubborn_pdb: bool = False
    durations: Durations = Durations()
    tight_grace: bool = False
    """Each pod's grace period is its stop time (whole seconds), not the default 30 s."""

    def grace(self, shutdown: float) -> int:
        """terminationGracePeriodSeconds for a pod that stops in `shutdown` seconds."""
        return max(1, math.ceil(shutdown)) if self.tight_grace else 30

    @property
    def web_replicas(self) -> int:
        return self.nodes * self.pods_per_node


def with_annotations(obj: Obj, annotations: dict[str, str]) -> Obj:
    template = obj["spec"]["template"]
    template.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
    return obj


def _with_grace(obj: Obj, seconds: int) -> Obj:
    obj["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = seconds
    return obj


def spread(scenario: Scenario) -> list[Obj]:
    """Objects created while every node takes pods: they spread evenly."""
    d = scenario.durations
    daemon = with_annotations(
        w.daemonset("aws-node", namespace="kube-system"),
        {"kubesim.io/startup-seconds": "1"},
    )
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        daemon,
        w.deployment(
            "web",
            scenario.web_replicas,
            namespace=NAMESPACE,
            startup=d.web_startup,
            shutdown=d.web_shutdown,
            grace=scenario.grace(d.web_shutdown),
        ),
        w.budget("web", {"app": "web"}, namespace=NAMESPACE, max_unavailable=1),
    ]


def on_the_node(scenario: Scenario) -> list[Obj]:
    """Objects created while only the node to be scaled in takes pods."""
    d = scenario.durations
    objects = [
        w.deployment(
            "coredns",
            1,
            namespace="kube-system",
            startup=d.dns_startup,
            shutdown=d.dns_shutdown,
            grace=scenario.grace(d.dns_shutdown),
            priority_class=CRITICAL,
            labels={"k8s-app": "kube-dns"},
        ),
        w.budget("coredns", {"k8s-app": "kube-dns"}, namespace="kube-system", max_unavailable=1),
        _with_grace(
            w.statefulset(
                "db",
                1,
                namespace=NAMESPACE,
                startup=d.db_startup,
                shutdown=d.db_shutdown,
                detach=d.db_detach,
            ),
            scenario.grace(d.db_shutdown),
        ),
        w.pod(
            "adhoc-report",
            shutdown=d.report_shutdown,
            # None: the API server's default, as before --plan's tight_grace.
            grace=scenario.grace(d.report_shutdown) if scenario.tight_grace else None,
            emptydir=True,
        ),
    ]
    if scenario.stubborn_pdb:
        objects += [
            w.deployment(
                "billing",
                1,
                namespace=NAMESPACE,
                startup=d.billing_startup,
                shutdown=d.billing_shutdown,
                grace=scenario.grace(d.billing_shutdown),
            ),
            w.budget("billing", {"app": "billing"}, namespace=NAMESPACE, min_available=1),
        ]
    return objects


def node_object(name: str, instance_id: str, zone: str, instance_type: str) -> Obj:
    """A worker node as the kubelet of an EKS AMI registers it."""
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": instance_type,
        "topology.kubernetes.io/region": zone[:-1],
    }
    return w.node(name, instance_id, zone, pods=29, labels=labels)
