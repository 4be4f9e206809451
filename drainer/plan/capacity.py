"""Whether each evicted pod fits on some schedulable node left: the nodes neither
cordoned nor being planned, node by node (requests of cpu, memory and the pod
count against allocatable less what the pods already there request, taints with
NoSchedule/NoExecute against tolerations, nodeSelector, required node affinity,
host ports; and, among the pods around it, required pod affinity and
anti-affinity and DoNotSchedule topology spread: drainer/plan/topology.py). Pods
are placed in the plan's order, each consuming the room of the node it lands on
and counting among the pods of its domain: a first fit, a note on whether the
drain will wait for new nodes, not the scheduler's scoring."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from drainer.engine import nodefit, pods
from drainer.engine.pods import Pod
from drainer.plan.topology import Rules, Topology
from drainer.plan.volumes import Held, Volumes, held

Node = dict[str, Any]

_SUFFIX = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
    "E": 1e18,
}  # fmt: skip
_TERMINAL = ("Succeeded", "Failed")


def quantity(value: object) -> float:
    """A Kubernetes quantity ("500m", "1.5", "128Mi", "1e3") as a number."""
    text = str(value).strip()
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * _SUFFIX[suffix]
    return float(text)


@dataclass(frozen=True)
class Request:
    cpu: float = 0.0
    memory: float = 0.0

    @classmethod
    def of(cls, pod: Pod) -> Request:
        """What the scheduler counts: the containers' requests summed, or the largest
        init container's where larger."""
        spec = pod.get("spec") or {}

        def each(containers: Iterable[dict[str, Any]]) -> list[Request]:
            found = []
            for c in containers:
                asked = (c.get("resources") or {}).get("requests") or {}
                found.append(cls(quantity(asked.get("cpu", 0)), quantity(asked.get("memory", 0))))
            return found

        running = each(spec.get("containers") or [])
        init = each(spec.get("initContainers") or [])
        cpu = max([sum(r.cpu for r in running), *(r.cpu for r in init)])
        memory = max([sum(r.memory for r in running), *(r.memory for r in init)])
        return cls(cpu, memory)


def _ports(pod: Pod) -> set[tuple[int, str]]:
    return {
        (int(p["hostPort"]), str(p.get("protocol") or "TCP"))
        for c in (pod.get("spec") or {}).get("containers") or []
        for p in c.get("ports") or []
        if p.get("hostPort")
    }


@dataclass
class Room:
    """One node's free room, as the placements consume it."""

    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    cpu: float
    memory: float
    pods: float
    ports: set[tuple[int, str]] = field(default_factory=set)

    @classmethod
    def of(cls, node: Node, there: list[Pod]) -> Room:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        asked = [Request.of(p) for p in there]
        taints = (node.get("spec") or {}).get("taints") or []
        return cls(
            str(node["metadata"]["name"]),
            dict(node["metadata"].get("labels") or {}),
            [t for t in taints if t.get("effect") in nodefit.EFFECTS],
            quantity(allocatable.get("cpu", 0)) - sum(r.cpu for r in asked),
            quantity(allocatable.get("memory", 0)) - sum(r.memory for r in asked),
            quantity(allocatable.get("pods", 110)) - len(there),
            set().union(*(_ports(p) for p in there)),
        )

    def refuses(self, pod: Pod) -> str:
        """Why the pod cannot land here ("": it can)."""
        spec = pod.get("spec") or {}
        taint = next((t for t in self.taints if not nodefit.tolerated(t, spec)), None)
        if taint is not None:
            return f"taint {_taint(taint)}"
        wrong = self._wrong_labels(spec)
        if wrong:
            return "nodeSelector " + ",".join(f"{k}={v}" for k, v in sorted(wrong.items()))
        if not nodefit.affinity_admits(spec, self.labels, self.name):
            return "required node affinity"
        if _ports(pod) & self.ports:
            return "host port " + ",".join(f"{p}/{q}" for p, q in sorted(_ports(pod) & self.ports))
        return self.short(Request.of(pod))

    def _wrong_labels(self, spec: dict[str, Any]) -> dict[str, str]:
        return nodefit.wrong_labels(spec, self.labels)

    def selected(self, pod: Pod) -> bool:
        """The pod's nodeSelector and required node affinity admit this node."""
        spec = pod.get("spec") or {}
        admitted = nodefit.affinity_admits(spec, self.labels, self.name)
        return admitted and not self._wrong_labels(spec)

    def tolerated(self, pod: Pod) -> bool:
        """The pod tolerates the node's NoSchedule/NoExecute taints."""
        spec = pod.get("spec") or {}
        return all(nodefit.tolerated(t, spec) for t in self.taints)

    def short(self, asked: Request) -> str:
        lacking = []
        if asked.cpu > self.cpu + 1e-9:
            lacking.append("cpu")
        if asked.memory > self.memory + 0.5:
            lacking.append("memory")
        if self.pods < 1:
            lacking.append("pods")
        return "" if not lacking else "not enough " + ", ".join(lacking)

    def take(self, pod: Pod) -> None:
        asked = Request.of(pod)
        self.cpu -= asked.cpu
        self.memory -= asked.memory
        self.pods -= 1
        self.ports |= _ports(pod)


def _taint(taint: dict[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def _held_off(holds: list[Held], room: Room) -> str:
    """Why the pod's volumes keep it off the node ("": they do not)."""
    for h in holds:
        if h.terms and not nodefit.terms_admit(h.terms, room.labels, room.name):
            return f"volume {h.volume} of claim {h.claim} ({h.zone or 'its node affinity'})"
    return ""


class Capacity:
    """The schedulable nodes left while the planned ones drain, and their room."""

    def __init__(
        self,
        nodes: Iterable[Node],
        cluster_pods: Iterable[Pod],
        planned: set[str],
        volumes: Volumes | None = None,
    ):
        """`volumes`: the PersistentVolumes behind the pods' claims (None: not checked)."""
        on: dict[str, list[Pod]] = {}
        for pod in cluster_pods:
            where = (pod.get("spec") or {}).get("nodeName")
            phase = (pod.get("status") or {}).get("phase")
            if where and phase not in _TERMINAL:
                on.setdefault(str(where), []).append(pod)
        self.nodes = {str(n["metadata"]["name"]): n for n in nodes}
        self.rooms = [
            Room.of(n, on.get(name, []))
            for name, n in self.nodes.items()
            if not (n.get("spec") or {}).get("unschedulable") and name not in planned
        ]
        everywhere = {name: Room.of(n, []) for name, n in self.nodes.items()}
        cordoned = {
            n for n, node in self.nodes.items() if (node.get("spec") or {}).get("unschedulable")
        }
        self.topology = Topology(self.nodes, on, everywhere, cordoned)
        self.topology.leaving(planned)
        self.volumes = volumes

    def leaving(self, names: Iterable[str]) -> None:
        """These nodes take nothing from now on (a refresh's next batch is drained),
        and their pods no longer count among the pods around a replacement."""
        gone = set(names)
        self.rooms = [room for room in self.rooms if room.name not in gone]
        self.topology.leaving(gone)

    def replaced(self, names: Iterable[str]) -> None:
        """A refresh's new instances for these nodes: as they were, empty (the same
        launch template gives the same allocatable, labels and taints)."""
        self.rooms += [Room.of(self.nodes[n], []) for n in names if n in self.nodes]
        self.topology.reopened(names)

    def place(self, pod: Pod) -> str | None:
        """The first node that takes the pod, its room consumed; None: no node can
        take it, and `fix` says what is short."""
        rules, holds = self._rules(pod), held(pod, self.volumes)
        for room in self.rooms:
            if not room.refuses(pod) and not _held_off(holds, room) and not rules.refuses(room):
                room.take(pod)
                self.topology.took(room.name, pod)
                return room.name
        return None

    def _rules(self, pod: Pod) -> Rules:
        return self.topology.rules(pod, _owner(pod))

    def why(self, pod: Pod) -> tuple[str, str]:
        """Why the pod fits on no node left, and the fix: a volume bound to a zone
        (or nodes) with no schedulable node left, else what the nodes lack."""
        who = _owner(pod)
        for h in held(pod, self.volumes):
            if h.terms and not any(
                nodefit.terms_admit(h.terms, r.labels, r.name) for r in self.rooms
            ):
                return _stranded(h, who)
        return "no node can take it", self.fix(pod)

    def fix(self, pod: Pod) -> str:
        """What would let the pod land: named after what the nodes lack."""
        who = _owner(pod)
        if not self.rooms:
            return f"add a schedulable node for {who} (every node left is cordoned or planned)"
        rules, holds = self._rules(pod), held(pod, self.volumes)
        why = {
            room.name: room.refuses(pod) or _held_off(holds, room) or rules.refuses(room)
            for room in self.rooms
        }
        if all(w.startswith("not enough") for w in why.values()):
            asked = Request.of(pod)
            need = [f"{_cpu(asked.cpu)} CPU"] if asked.cpu else []
            need += [f"{_memory(asked.memory)} memory"] if asked.memory else []
            most = max(self.rooms, key=lambda r: (r.cpu, r.memory))
            free = f"the most free on one node: {_cpu(max(0.0, most.cpu))} CPU, "
            free += f"{_memory(max(0.0, most.memory))} memory, {max(0, int(most.pods))} pod(s)"
            what = " and ".join(need) or "room for one more pod"
            return f"add a node with {what} free, or lower {who}'s requests ({free})"
        kinds = sorted({w for w in why.values() if not w.startswith("not enough")})
        between = rules.fixes(why.values())
        if between:
            return "; or ".join(between) + f" ({'; '.join(kinds)} on the nodes left)"
        return (
            f"add a node that {who} can land on ({'; '.join(kinds)} refuse it on every node "
            f"left), or change {who}'s tolerations, nodeSelector or affinity to match one"
        )


def _stranded(h: Held, who: str) -> tuple[str, str]:
    """A volume that admits no node left: the blocker's reason and fix."""
    if h.zone:
        reason = f"its PersistentVolumeClaim {h.claim} is bound to volume {h.volume} in zone "
        reason += f"{h.zone}, where no schedulable node is left"
        fix = f"add a node in zone {h.zone} first (a node group with a subnet in {h.zone}), "
        fix += f"or move {who}'s data to a volume in a zone that keeps nodes"
        return reason, fix
    reason = f"its PersistentVolumeClaim {h.claim} is bound to volume {h.volume}, whose node "
    reason += "affinity admits no schedulable node left"
    fix = f"add a node that volume {h.volume}'s node affinity admits, or move {who}'s data "
    return reason, fix + "to a volume other nodes can mount"


def _owner(pod: Pod) -> str:
    ref = pods.controller(pod)
    return str(ref.get("name")) if ref is not None else str(pod["metadata"]["name"])


def _cpu(cores: float) -> str:
    return f"{cores:g}" if cores >= 1 or cores == 0 else f"{round(cores * 1000)}m"


def _memory(size: float) -> str:
    for suffix in ("Gi", "Mi", "Ki"):
        if size >= _SUFFIX[suffix]:
            return f"{size / _SUFFIX[suffix]:.3g}{suffix}"
    return f"{size:g}"
