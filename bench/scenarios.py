"""The benchmark's scenarios: one cluster each, built fresh for every run, on
kubesim or on the real control plane (the same objects, through `Setup`).

Every drain scenario has one node to drain (named like an EKS node, after its
PrivateDnsName), a few other nodes with room for the replacements, a DaemonSet pod
on every node (left alone by both clients: --ignore-daemonsets, and our filters)
and RBAC from k8s-rbac/ for the `drainer` user. Durations are kubesim annotations
divided by the simulator's speed; `ideal` is in the same (real) seconds.

Why some scenarios use bare pods: scenario 2 puts 737 pods on one node. Had they
replicas, kubesim's ReplicaSet controller (a full pass over every pod, per
ReplicaSet, on every change) would create 737 replacements during the drain and
the benchmark would measure kubesim rather than the drainers. Bare pods cost both
clients exactly the same requests (evict, then wait), keep kubesim's work down and
let every pod have its own shutdown time. Scenario 1 (110 pods) and 3 (the budget)
use Deployments, where replacements matter.

On the real control plane (kube-apiserver, controller-manager, scheduler and etcd
with kwok, sharing this machine's cores with both clients and the benchmark) the
largest sizes are scaled down: see REAL_SIZES and Plan.notes.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from testbed import workloads as w
from testbed.world import is_pod_ready, rbac_manifests, wait_until

if TYPE_CHECKING:
    from kubesim import KubeSim
    from testbed.cluster import ApiClient

Obj = dict[str, Any]
ZONE = "us-east-1a"
DAEMONSET = "kube-proxy"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def dns_name(index: int) -> str:
    """An EKS-style node name: the instance's PrivateDnsName."""
    return f"ip-10-0-{index // 250}-{index % 250 + 4}.ec2.internal"


def instance_id(index: int) -> str:
    return f"i-0{index:016x}"


def node(name: str, index: int, capacity: int, *, hostname: str = "") -> Obj:
    """w.node of the bench's zone and instance ids, a Linux node."""
    labels = {"kubernetes.io/os": "linux"}
    return w.node(name, instance_id(index), ZONE, pods=capacity, hostname=hostname, labels=labels)


class Setup(Protocol):
    """What a scenario needs of a backend to build its cluster, as the admin."""

    backend: str
    poll: float
    """Seconds between two looks while waiting for the pods to be placed."""

    def apply(self, objects: Obj | list[Obj]) -> None: ...

    def pods(self) -> list[Obj]: ...

    def set_schedulable(self, nodes: Iterable[str], schedulable: bool) -> None: ...

    def settle(self) -> None: ...


class SimSetup:
    """kubesim, through its own store (no HTTP: no request records, and fast)."""

    backend = "kubesim"
    poll = 0.05

    def __init__(self, sim: KubeSim) -> None:
        self.sim = sim

    def apply(self, objects: Obj | list[Obj]) -> None:
        self.sim.apply(objects)

    def pods(self) -> list[Obj]:
        return self.sim.list("Pod")

    def set_schedulable(self, nodes: Iterable[str], schedulable: bool) -> None:
        from kubesim.api import NODES

        for name in nodes:
            node = self.sim.api.get(NODES, "", name)
            node["spec"]["unschedulable"] = not schedulable
            self.sim.api.update(NODES, node, "", name)

    def settle(self) -> None:
        self.sim.settle()


class ApiSetup:
    """The real control plane, through its API as the admin (its controllers,
    scheduler and kwok run on their own: nothing to settle)."""

    backend = "real"
    poll = 0.25

    def __init__(self, client: ApiClient) -> None:
        self.client = client

    def apply(self, objects: Obj | list[Obj]) -> None:
        self.client.apply(objects)

    def pods(self) -> list[Obj]:
        return self.client.list("Pod")

    def set_schedulable(self, nodes: Iterable[str], schedulable: bool) -> None:
        names = list(nodes)
        for name in names:
            self.client.patch(
                "Node", name, {"spec": {"unschedulable": None if schedulable else True}}
            )
        # The scheduler goes by the taint the node lifecycle controller adds and
        # removes a moment later: wait for it, so replacements find room at once.
        wait_until(lambda: all(self._tainted(n) != schedulable for n in names), 30, self.poll)

    def _tainted(self, name: str) -> bool:
        taints = self.client.get("Node", name).get("spec", {}).get("taints") or []
        return any(t.get("key") == UNSCHEDULABLE_TAINT for t in taints)

    def settle(self) -> None:
        return None


def _all_ready(pods: list[Obj]) -> bool:
    return all(is_pod_ready(p) and not p["metadata"].get("deletionTimestamp") for p in pods)


@dataclass(frozen=True)
class Prepared:
    """A cluster ready to drain: the node, and what should be gone from it."""

    node: str
    pods: int


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    pods: int
    ideal: float
    """The physical limit in real seconds: the pods' own shutdown and the pace the
    budgets allow, with evictions taking no time at all."""
    ideal_note: str
    timeout: float
    prepare: Callable[[Setup], Prepared]
    env: Mapping[str, str] = field(default_factory=dict)
    """Settings of our engine for this scenario: environment variables of its process."""
    tracked: str = ""
    """The `app` label of the pods whose going is the scenario's figure (RunResult.gone:
    from the cordon until the last of them is gone, as a watch sees it); "" for none."""
    stays: str = ""
    """The `app` label of pods that never go (their budget allows no disruption): both
    clients end on their timeout, and these are expected on the node afterwards."""
    forecast: bool = False
    """Paced by a budget: the plan runs right before each drain, its forecast printed
    beside the measured drain (bench/forecast.py)."""
    speed: float | None = None
    """The emulators' speed for this scenario (None: the bench's). A forecast compares
    real seconds, and the emulators divide the grace periods the plan reads by their
    speed: a scenario whose forecast bounds a pod's stop by its grace period runs at 1."""


def drain_cluster(
    sim: Setup,
    objects: list[Obj],
    *,
    pods: int,
    others: int = 3,
    other_capacity: int = 110,
    settle_timeout: float = 120.0,
) -> Prepared:
    """Nodes, RBAC and a DaemonSet; `objects` placed on the first node only."""
    sim.apply(rbac_manifests())
    target = dns_name(0)
    other_names = [dns_name(i) for i in range(1, others + 1)]
    sim.apply([node(target, 0, pods + 1)])  # +1: the DaemonSet's pod
    sim.apply([node(name, i, other_capacity) for i, name in enumerate(other_names, 1)])
    sim.apply(w.daemonset(DAEMONSET))
    sim.set_schedulable(other_names, False)
    try:
        sim.apply(objects)
        sim.settle()
        expected = pods + 1 + others

        def placed() -> bool:
            found = sim.pods()
            return len(found) == expected and _all_ready(found)

        wait_until(placed, settle_timeout, interval=sim.poll)
    finally:
        sim.set_schedulable(other_names, True)
    sim.settle()
    return Prepared(target, pods)


def many_pods(count: int, replicas_each: int, key: str = "1") -> Scenario:
    """Scenario 1 (and 7, larger): a full node of replicated pods that stop at once,
    no budget."""
    deployments = max(1, count // replicas_each)
    sizes = [
        count // deployments + (1 if i < count % deployments else 0) for i in range(deployments)
    ]

    def prepare(sim: Setup) -> Prepared:
        objects = [w.deployment(f"web-{i:02d}", n) for i, n in enumerate(sizes)]
        return drain_cluster(sim, objects, pods=count, other_capacity=count + 10)

    return Scenario(
        key,
        f"{count} pods, no PDB, stop at once",
        count,
        0.0,
        "pods stop at once: any time spent is overhead",
        120.0,
        prepare,
    )


CPU_PODS = (100, 400)
"""The CPU scenarios' sizes: the slope between them is the CPU each pod costs, the
start-up apart (issue 39, item 10)."""


def cpu_key(count: int) -> str:
    """The key of the CPU scenario of `count` pods: cpu100, cpu400."""
    return f"cpu{count}"


# The CPU scenarios run more often than the others: a drain's CPU moves by about
# 0.15 ms per pod from run to run, so the median of 3 could not tell 1.5x the floor's
# from 2x (issue 39, item 10). kubectl never runs them (its CPU is not the question).
CPU_RUNS = {cpu_key(pods): 7 for pods in CPU_PODS}


def cpu_pods(count: int) -> Scenario:
    """A node of `count` replicated pods that stop at once, drained by ours as the
    function drains (its log lines and Events: bench/child.py AS_DEPLOYED) and by the
    floor: CPU seconds per drain, for the slope per pod."""
    scenario = many_pods(count, 10, key=cpu_key(count))
    return dataclasses.replace(
        scenario,
        title=f"{count} pods, no PDB, as deployed (ETA, Events, JSON log): CPU per drain",
        env={"BENCH_AS_DEPLOYED": "1"},
    )


def slow_pods(count: int, speed: float, low: float = 1.0, high: float = 3.0) -> Scenario:
    """Scenario 2: the largest EKS node, every pod 1-3 s to stop (each its own)."""
    rng = random.Random(737)
    shutdowns = [round(rng.uniform(low, high), 2) for _ in range(count)]
    shutdowns[-1] = high  # the slowest one is evicted last in name order

    def prepare(sim: Setup) -> Prepared:
        target = dns_name(0)
        objects = [
            w.pod(f"batch-{i:04d}", node_name=target, shutdown=s, grace=30)
            for i, s in enumerate(shutdowns)
        ]
        return drain_cluster(sim, objects, pods=count)

    return Scenario(
        "2",
        f"{count} pods, each {low:g}-{high:g} s to stop",
        count,
        max(shutdowns) / speed,
        "the slowest pod's shutdown",
        300.0,
        prepare,
    )


def budgeted(replicas: int, startup: float, speed: float, stop: int = 1) -> Scenario:
    """Scenario 3: replicas under maxUnavailable 1; each replacement Ready after
    `startup` elsewhere before the next eviction may go; each pod stops in `stop`
    seconds, its whole grace period (what the plan bounds a pod's stop by)."""

    def prepare(sim: Setup) -> Prepared:
        objects = [
            w.deployment("api", replicas, startup=startup, shutdown=stop, grace=stop),
            w.budget("api", {"app": "api"}, max_unavailable=1),
        ]
        return drain_cluster(sim, objects, pods=replicas, settle_timeout=60 + startup)

    return Scenario(
        "3",
        f"{replicas} replicas, PDB maxUnavailable 1, replacement Ready in {startup:g} s, "
        f"each stopping in its {stop} s grace period",
        replicas,
        ((replicas - 1) * startup + stop) / speed,
        f"{replicas - 1} waits for a replacement to be Ready (the last pod needs none), "
        "then the last pod's stop",
        600.0,
        prepare,
        forecast=True,
        speed=speed,
    )


def spread(count: int, slowest: float, speed: float) -> Scenario:
    """Scenario 4: shutdown times spread evenly from 0 to `slowest`."""
    shutdowns = [round(slowest * i / max(1, count - 1), 2) for i in range(count)]

    def prepare(sim: Setup) -> Prepared:
        target = dns_name(0)
        objects = [
            w.pod(f"worker-{i:02d}", node_name=target, shutdown=s, grace=int(slowest) + 10)
            for i, s in enumerate(shutdowns)
        ]
        return drain_cluster(sim, objects, pods=count)

    return Scenario(
        "4",
        f"{count} pods, shutdown spread over 0-{slowest:g} s",
        count,
        max(shutdowns) / speed,
        "the slowest pod's shutdown",
        300.0,
        prepare,
    )


HEAD_OF_LINE_CONCURRENCY = 8
"""Scenario 6's EVICTION_CONCURRENCY: fewer than its budget-blocked pods."""


def head_of_line(blocked: int, free: int, speed: float, timeout: float) -> Scenario:
    """Scenario 6: `blocked` replicas under a budget that allows no disruption (more
    than the evictions our engine keeps in flight), listed before `free` replicas
    under no budget. The blocked pods never go: both clients stop on `timeout`. The
    figure is how soon the budget-free pods are gone: an engine that holds a worker
    per blocked pod never gets to them (head-of-line blocking)."""
    shutdown = 1.0

    def prepare(sim: Setup) -> Prepared:
        objects = [
            w.deployment("blocked", blocked),  # "blocked-*" lists before "free-*"
            w.budget("blocked", {"app": "blocked"}, max_unavailable=0),
            w.deployment("free", free, shutdown=shutdown),
        ]
        return drain_cluster(sim, objects, pods=blocked + free, other_capacity=blocked + free)

    return Scenario(
        "6",
        f"{blocked} pods under a PDB allowing no disruption, then {free} without one; "
        f"concurrency {HEAD_OF_LINE_CONCURRENCY}",
        free,
        shutdown / speed,
        "the budget-free pods' shutdown (the figure: cordon to the last of them gone)",
        timeout,
        prepare,
        env={"EVICTION_CONCURRENCY": str(HEAD_OF_LINE_CONCURRENCY)},
        tracked="free",
        stays="blocked",
        forecast=True,
    )


@dataclass(frozen=True)
class Lookup:
    """Scenario 5: a cluster of `nodes` nodes and the instance to find in it."""

    nodes: int
    naming: str  # "dns": nodes named after their PrivateDnsName; "custom": not
    target_index: int

    @property
    def target_dns(self) -> str:
        return dns_name(self.target_index)

    @property
    def target_instance(self) -> str:
        return instance_id(self.target_index)

    @property
    def expected(self) -> str:
        return self.node_name(self.target_index)

    def node_name(self, index: int) -> str:
        return dns_name(index) if self.naming == "dns" else f"worker-{index:05d}"

    def build(self, sim: Setup) -> float:
        """Create the nodes; seconds it took."""
        started = time.perf_counter()
        sim.apply(rbac_manifests())
        batch: list[Obj] = []
        for index in range(self.nodes):
            name = self.node_name(index)
            hostname = name if self.naming == "custom" else ""
            batch.append(node(name, index, 110, hostname=hostname))
            if len(batch) == 500:
                sim.apply(batch)
                batch = []
        sim.apply(batch)
        sim.settle()
        return time.perf_counter() - started


def lookups(nodes: int) -> list[Lookup]:
    # The custom-named target sorts last: the lookup has to page through them all.
    return [Lookup(nodes, "dns", nodes // 2), Lookup(nodes, "custom", nodes - 1)]


@dataclass(frozen=True)
class Plan:
    speed: float
    runs: int
    scenarios: tuple[Scenario, ...]
    lookup_nodes: int
    backend: str = "kubesim"
    notes: tuple[str, ...] = ()
    """What differs from the sizes above on this backend, and why."""


# The real control plane on this project's 2-core machine: every request goes through
# kube-apiserver and etcd, every pod through the scheduler, the controllers and kwok,
# all sharing the cores with both clients. 737 slow pods (and 5,000 nodes that kwok
# keeps heartbeating) would take long minutes per run and measure the machine more
# than the drainers: those two scale down, by mode.
REAL_SLOW_PODS = {"full": 200, "quick": 40}
REAL_LOOKUP_NODES = {"full": 1000, "quick": 200}


def plan(*, quick: bool, runs: int | None = None, backend: str = "kubesim") -> Plan:
    mode = "quick" if quick else "full"
    speed = 10.0 if quick else 1.0
    slow, nodes = (40, 500) if quick else (737, 5000)
    notes: list[str] = []
    if backend == "real":
        real_slow, real_nodes = REAL_SLOW_PODS[mode], REAL_LOOKUP_NODES[mode]
        if real_slow < slow:
            notes.append(
                f"scenario 2 on the real control plane: {real_slow} pods "
                f"instead of {slow} (2 cores shared by kube-apiserver, etcd, the "
                "controllers, kwok and both clients)"
            )
        if real_nodes < nodes:
            notes.append(
                f"scenario 5 on the real control plane: {real_nodes} nodes "
                f"instead of {nodes} (kwok keeps every node's status and lease fresh)"
            )
        slow, nodes = real_slow, real_nodes
    scenarios: tuple[Scenario, ...]
    if quick:
        scenarios = (
            many_pods(12, 4),
            slow_pods(slow, speed),
            budgeted(2, 2.0, 1.0),  # at 1x: see Scenario.speed
            spread(6, 20.0, speed),
            head_of_line(10, 4, speed, 3.0),
            many_pods(24, 8, key="7"),
        )
    else:
        scenarios = (
            many_pods(110, 11),
            slow_pods(slow, speed),
            budgeted(10, 1.0, 1.0),
            spread(30, 20.0, speed),
            head_of_line(40, 20, speed, 20.0),
            many_pods(500, 50, key="7"),
            *(cpu_pods(n) for n in CPU_PODS),
        )
    return Plan(speed, runs or (1 if quick else 3), scenarios, nodes, backend, tuple(notes))
