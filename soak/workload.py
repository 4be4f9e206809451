"""The soak's workload: a realistic mix for a node group of `nodes` nodes and about
`pods` pods. Web services behind budgets of every kind, a StatefulSet quorum with
volumes, DNS in the critical tier, two node agents (DaemonSets) and batch pods.

Times are simulated seconds (kubesim annotations, divided by the backend's speed).
kubesim has no Job controller, so the batch pods are bare pods with emptyDir
scratch space: evicted with a warning, and nothing recreates them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from soak.pacing import Pace, Replaced
from testbed import workloads as w

Obj = dict[str, Any]

CRITICAL = "system-cluster-critical"


@dataclass(frozen=True)
class Service:
    """One workload, named after its pods' `app` label."""

    name: str
    kind: str  # Deployment, StatefulSet, DaemonSet or Pod (bare batch pods)
    replicas: int  # for a DaemonSet: per node
    namespace: str = "default"
    startup: float = 0.0
    shutdown: float = 0.0
    max_unavailable: int | str | None = None
    min_available: int | str | None = None
    critical: bool = False

    @property
    def budgeted(self) -> bool:
        return self.max_unavailable is not None or self.min_available is not None

    def allowed(self) -> int | None:
        """Disruptions the budget allows with every pod Ready, as the disruption
        controller computes them (percentages round up), or None: no budget."""
        if not self.budgeted:
            return None
        n = self.replicas
        if self.max_unavailable is not None:
            return _scaled(self.max_unavailable, n)
        assert self.min_available is not None
        return n - _scaled(self.min_available, n)

    def pace(self) -> Pace:
        replaced = {
            "Deployment": Replaced.AT_EVICTION,
            "StatefulSet": Replaced.AFTER_EXIT,
        }.get(self.kind, Replaced.NEVER)
        return Pace(self.startup, self.shutdown, self.allowed(), replaced, self.critical)

    @property
    def grace(self) -> int:
        """Its pods' terminationGracePeriodSeconds: their whole stop, so that the plan,
        which bounds a pod's stop by its grace period, knows it (soak/forecast.py)."""
        return max(1, math.ceil(self.shutdown))

    def objects(self) -> list[Obj]:
        if self.kind == "DaemonSet":
            return [w.daemonset(self.name, namespace=self.namespace)]
        if self.kind == "Pod":
            return [
                w.pod(
                    f"{self.name}-{i}",
                    namespace=self.namespace,
                    shutdown=self.shutdown,
                    grace=self.grace,
                    emptydir=True,
                    labels={"app": self.name},
                )
                for i in range(self.replicas)
            ]
        if self.kind == "StatefulSet":
            made = w.statefulset(
                self.name,
                self.replicas,
                namespace=self.namespace,
                startup=self.startup,
                shutdown=self.shutdown,
                detach=1.0,
            )
            made["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = self.grace
        else:
            made = w.deployment(
                self.name,
                self.replicas,
                namespace=self.namespace,
                startup=self.startup,
                shutdown=self.shutdown,
                grace=self.grace,
                priority_class=CRITICAL if self.critical else "",
            )
        objects = [made]
        if self.budgeted:
            objects.append(
                w.budget(
                    self.name,
                    {"app": self.name},
                    namespace=self.namespace,
                    max_unavailable=self.max_unavailable,
                    min_available=self.min_available,
                )
            )
        return objects


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, int):
        return value
    return math.ceil(int(value.rstrip("%")) * total / 100)


def mix(nodes: int, pods: int, times: float = 1.0) -> list[Service]:
    """About `pods` pods on `nodes` nodes: 2 node agents per node, DNS, a quorum of 5,
    one batch pod per node, and the rest web replicas in four services whose budgets
    pace the drains differently (a percentage, a count, minAvailable, one at a time),
    each allowing at least one disruption. `times` scales their start and stop times
    (whole seconds, at least 1: a refresh short enough for a test at speed 1)."""
    services = _mix(nodes, pods)
    if times == 1:
        return services

    def scaled(seconds: float) -> float:
        return float(max(1, round(seconds * times))) if seconds else 0.0

    return [
        dataclasses.replace(s, startup=scaled(s.startup), shutdown=scaled(s.shutdown))
        for s in services
    ]


def _mix(nodes: int, pods: int) -> list[Service]:
    agents = 2 * nodes
    dns = max(2, nodes // 8)
    quorum = 5
    batch = nodes
    web = pods - agents - dns - quorum - batch
    if web < 4 * 4:
        raise ValueError(f"{pods} pods leave too few web replicas on {nodes} nodes")
    frontend, api, cart = round(web * 0.35), round(web * 0.30), round(web * 0.20)
    search = web - frontend - api - cart
    return [
        Service(
            "web-frontend", "Deployment", frontend, startup=8, shutdown=5, max_unavailable="10%"
        ),
        Service("web-api", "Deployment", api, startup=12, shutdown=10, max_unavailable=3),
        Service(
            "web-cart",
            "Deployment",
            cart,
            startup=10,
            shutdown=5,
            min_available=cart - max(1, cart // 10),
        ),
        Service("web-search", "Deployment", search, startup=6, shutdown=3, max_unavailable=1),
        Service("db", "StatefulSet", quorum, startup=15, shutdown=10, max_unavailable=1),
        Service(
            "coredns",
            "Deployment",
            dns,
            namespace="kube-system",
            startup=5,
            shutdown=2,
            max_unavailable=1,
            critical=True,
        ),
        Service("aws-node", "DaemonSet", 1, namespace="kube-system"),
        Service("kube-proxy", "DaemonSet", 1, namespace="kube-system"),
        Service("batch", "Pod", batch, shutdown=15),
    ]


def objects(services: list[Service]) -> list[Obj]:
    return [obj for service in services for obj in service.objects()]
