"""The demo's independent observer: what happened to the node, its pods, the
budgets and the volumes, seen from outside the function.

It mirrors pods, nodes, PodDisruptionBudgets and VolumeAttachments from watches
(as the cluster admin), reads the function's JSON log lines and the Auto Scaling
calls awssim recorded, and turns all three into event lines for the view. What the
function says happened to a pod comes from its drain events only (the `event`,
`pod`, `budget`, `reason` and `refusals` keys of the log contract, docs/reference.md
"Log contract"), never from the wording of a message. It also
keeps the record the summary is built from: each pod that was on the node when
the drain began (its fate, its replacement), the worst budget margin seen, the
volumes detached.

The budget check does not trust the drainer or the PDB's status counters: for
every change it counts the healthy pods (Ready, not terminating) each budget
selects, from the pods it watched, and compares them with the budget's
desiredHealthy. The lowest `healthy - desiredHealthy` seen is the budget's worst
margin; below zero means the budget was violated.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from demo.view import View

Obj = dict[str, Any]

EXCLUDE_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
PROGRESS_ANNOTATION = "eks-node-drainer/progress"


# Drain events shown as the function's message (the others have lines of their own
# above, or are what the demo's watch already shows: evictions, pods gone, cordon).
_SHOWN = frozenset(
    {
        "recordoned",
        "pod_appeared",
        "pod_under_several_budgets",
        "pod_goes_with_namespace",
        "pod_stuck",
        "critical_tier_started",
        "drain_stopped",
        "drain_released",
    }
)
_STYLES = {"ERROR": "error", "CRITICAL": "error", "WARNING": "warn"}


def key(obj: Obj) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace", "")
    return f"{namespace}/{metadata.get('name', '')}" if namespace else str(metadata.get("name"))


def controller(pod: Obj) -> dict[str, Any] | None:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def is_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def is_terminating(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def is_healthy(pod: Obj) -> bool:
    return is_ready(pod) and not is_terminating(pod)


def selects(selector: Obj | None, labels: dict[str, str] | None) -> bool:
    """A LabelSelector (matchLabels and matchExpressions) against labels."""
    if selector is None:
        return False
    labels = labels or {}
    for name, value in (selector.get("matchLabels") or {}).items():
        if labels.get(name) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        name, operator = expression.get("key", ""), expression.get("operator", "")
        values = expression.get("values") or []
        if operator == "In" and labels.get(name) not in values:
            return False
        if operator == "NotIn" and name in labels and labels[name] in values:
            return False
        if operator == "Exists" and name not in labels:
            return False
        if operator == "DoesNotExist" and name in labels:
            return False
    return True


def budget_margins(budgets: list[Obj], pods: list[Obj]) -> dict[str, tuple[int, int]]:
    """Per budget: (healthy pods it selects, counted from `pods`; its desiredHealthy)."""
    margins = {}
    for budget in budgets:
        status = budget.get("status") or {}
        if "desiredHealthy" not in status:
            continue
        namespace = budget["metadata"].get("namespace", "")
        selector = (budget.get("spec") or {}).get("selector")
        healthy = sum(
            1
            for pod in pods
            if pod["metadata"].get("namespace") == namespace
            and selects(selector, pod["metadata"].get("labels"))
            and is_healthy(pod)
        )
        margins[key(budget)] = (healthy, int(status["desiredHealthy"]))
    return margins


@dataclass
class PodFate:
    """A pod that was on the node when the drain began, and what became of it."""

    name: str
    uid: str
    owner_kind: str
    owner_uid: str
    daemon: bool
    critical: bool
    claims: list[str]
    evicted_at: float | None = None
    forced: bool = False
    with_node: bool = False
    """Terminated because the node was deleted, not by the drain."""
    gone_at: float | None = None
    blocked_by: set[str] = field(default_factory=set)
    """Budgets that refused its eviction (pod_refused events)."""
    drain_evicted: bool = False
    """The function logged pod_evicted for it."""
    drain_forced: bool = False
    """The function logged pod_force_deleted for it (TIMEOUT_POLICY=force)."""
    skipped: str = ""
    """Why the function left it alone (pod_skipped's reason)."""
    refusals: int = 0
    """Budget refusals it met, as the function counted them."""
    left: str = ""
    """Why it was still on the node when a drain ended unfinished (pod_left)."""
    replacement: str = ""
    replacement_uid: str = ""
    replacement_node: str = ""
    replacement_ready_at: float | None = None

    def as_dict(self, t0: float) -> dict[str, Any]:
        def rel(t: float | None) -> float | None:
            return None if t is None else round(t - t0, 2)

        return {
            "name": self.name,
            "owner": self.owner_kind or "none",
            "daemonset": self.daemon,
            "critical": self.critical,
            "evicted_at": rel(self.evicted_at),
            "forced": self.forced,
            "with_node": self.with_node,
            "gone_at": rel(self.gone_at),
            "blocked_by": sorted(self.blocked_by),
            "refusals": self.refusals,
            "skipped": self.skipped,
            "left": self.left,
            "replacement": self.replacement,
            "replacement_node": self.replacement_node,
            "replacement_ready_at": rel(self.replacement_ready_at),
        }


@dataclass
class Worst:
    margin: int
    healthy: int
    desired: int
    at: float


class Observer:
    """Mirrors the cluster, narrates changes, keeps the facts for the summary."""

    def __init__(
        self, view: View, clock: Callable[[], float] = time.monotonic, *, hook_follows: bool = False
    ) -> None:
        self.view = view
        self.clock = clock
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.pods: dict[str, Obj] = {}  # uid -> pod
        self.nodes: dict[str, Obj] = {}
        self.budgets: dict[str, Obj] = {}
        self.attachments: dict[str, Obj] = {}
        self.node = ""
        self.t0 = 0.0
        self.tracking = False
        self.checking_budgets = False
        self.fates: dict[str, PodFate] = {}  # uid -> fate
        self.baseline_uids: set[str] = set()
        self.worst: dict[str, Worst] = {}
        self.volumes: dict[str, str] = {}  # attachment name -> persistent volume
        self.detached: dict[str, float] = {}  # persistent volume -> when
        self.claims_of: dict[str, str] = {}  # persistent volume -> namespace/claim
        self.timed_out = False
        self.hook_follows = hook_follows
        """The terminate hook's invocation follows an EC2 event's drain (--spot, --health):
        its end line, which may come before that drain's own, evicted nothing itself."""
        self.node_deleted_at: float | None = None
        self.cordoned_at: float | None = None
        self.errors: list[str] = []
        self.origin_pods: dict[str, Obj] = {}  # uid -> the pod when the drain began
        self.completed_at: float | None = None
        self.left_at_completion: list[str] = []
        self.attached_at_completion: list[str] = []
        self._unschedulable: set[str] = set()
        self.summaries: list[dict[str, Any]] = []

    # -- setup ------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until `predicate()` (called under the lock) holds, or the timeout."""
        deadline = self.clock() + timeout
        with self.changed:
            while not predicate():
                left = deadline - self.clock()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 0.5))
        return True

    def all_ready(self) -> bool:
        """Every pod bound, Ready and not terminating (call under the lock)."""
        return bool(self.pods) and all(
            p["spec"].get("nodeName") and is_healthy(p) for p in self.pods.values()
        )

    def pods_on(self, node: str) -> list[Obj]:
        with self.lock:
            return sorted(
                (p for p in self.pods.values() if p["spec"].get("nodeName") == node), key=key
            )

    def begin(self, node: str) -> None:
        """The drain starts now: remember what is on `node`, check budgets from here."""
        with self.lock:
            self.node = node
            self.t0 = self.clock()
            self.baseline_uids = set(self.pods)
            for pod in self.pods.values():
                if pod["spec"].get("nodeName") != node or is_terminating(pod):
                    continue
                ref = controller(pod) or {}
                spec = pod.get("spec") or {}
                self.origin_pods[pod["metadata"]["uid"]] = pod
                self.fates[pod["metadata"]["uid"]] = PodFate(
                    name=key(pod),
                    uid=pod["metadata"]["uid"],
                    owner_kind=str(ref.get("kind", "")),
                    owner_uid=str(ref.get("uid", "")),
                    daemon=ref.get("kind") == "DaemonSet",
                    critical=spec.get("priorityClassName")
                    in ("system-cluster-critical", "system-node-critical"),
                    claims=[
                        v["persistentVolumeClaim"]["claimName"]
                        for v in spec.get("volumes") or []
                        if (v.get("persistentVolumeClaim") or {}).get("claimName")
                    ],
                )
            for name, attachment in self.attachments.items():
                spec = attachment.get("spec") or {}
                if spec.get("nodeName") == node:
                    self.volumes[name] = str((spec.get("source") or {}).get("persistentVolumeName"))
            self.tracking = True
            self.checking_budgets = True
            self._check_budgets()

    def end_budget_check(self, pods_on_node: list[Obj], attachments: list[Obj]) -> None:
        """The drain is over (the function returned): stop checking budgets, and note
        what was still on the node and attached to it, from a fresh list the caller
        made (a list, not the watch, so watch lag cannot hide or invent a pod)."""
        with self.lock:
            self.checking_budgets = False
            self.completed_at = self.clock()
            still = {p["metadata"]["uid"] for p in pods_on_node}
            self.left_at_completion = sorted(
                f.name for uid, f in self.fates.items() if not f.daemon and uid in still
            )
            attached = {
                str(((a.get("spec") or {}).get("source") or {}).get("persistentVolumeName"))
                for a in attachments
                if (a.get("spec") or {}).get("nodeName") == self.node
            }
            self.attached_at_completion = sorted(set(self.volumes.values()) & attached)

    def deleting_node(self) -> None:
        """The node is about to be deleted: pods that stop from now on die with it."""
        with self.lock:
            self.node_deleted_at = self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.t0

    # -- watches ----------------------------------------------------------------

    def sync_pods(self, items: list[Obj]) -> None:
        with self.changed:
            fresh = {p["metadata"]["uid"]: p for p in items}
            for uid, old in list(self.pods.items()):
                if uid not in fresh:
                    self._pod_event("DELETED", old)
            for pod in items:
                self._pod_event("MODIFIED" if pod["metadata"]["uid"] in self.pods else "ADDED", pod)
            self.changed.notify_all()

    def on_pod(self, kind: str, pod: Obj) -> None:
        with self.changed:
            self._pod_event(kind, pod)
            self.changed.notify_all()

    def _pod_event(self, kind: str, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        old = self.pods.get(uid)
        if kind == "DELETED":
            self.pods.pop(uid, None)
        else:
            self.pods[uid] = pod
        if self.tracking:
            self._narrate_pod(kind, old, pod)
        if self.checking_budgets:
            self._check_budgets()

    def _narrate_pod(self, kind: str, old: Obj | None, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        now = self.clock()
        fate = self.fates.get(uid)
        if fate is not None:
            was_terminating = old is not None and is_terminating(old)
            if kind != "DELETED" and is_terminating(pod) and not was_terminating:
                fate.evicted_at = now
                if self.node_deleted_at is not None:
                    fate.with_node = True
                    return
                grace = pod["metadata"].get("deletionGracePeriodSeconds")
                if self.timed_out:
                    fate.forced = True
                    verb = "deleted by the timeout policy"
                else:
                    verb = "evicted"
                self.view.line(
                    "k8s", f"{fate.name} {verb}: terminating (grace period {grace} s)", "info"
                )
            elif kind == "DELETED" and fate.gone_at is None:
                fate.gone_at = now
                if fate.evicted_at is None:
                    fate.evicted_at = now
                    fate.with_node = self.node_deleted_at is not None
                if fate.with_node:
                    self.view.line("k8s", f"{fate.name} gone with the node", "info")
                else:
                    took = now - fate.evicted_at
                    self.view.line("k8s", f"{fate.name} gone (stopped in {took:.1f} s)", "ok")
            return
        if uid in self.baseline_uids or kind == "DELETED":
            return
        # A new pod: the replacement of one that left the node?
        node = pod["spec"].get("nodeName", "")
        if is_healthy(pod):
            fate = self._replacement_for(pod)
            if fate is None:
                return
            fate.replacement = key(pod)
            fate.replacement_uid = uid
            fate.replacement_node = node
            fate.replacement_ready_at = now
            after = now - (fate.evicted_at or now)
            how = (
                "lost with the node" if fate.with_node else "deleted" if fate.forced else "evicted"
            )
            if fate.name == key(pod):
                what = f"recreated by its {fate.owner_kind or 'controller'}"
            else:
                what = f"replaces {fate.name}"
            self.view.line(
                "k8s", f"{key(pod)} Ready on {node} ({what}, {how} {after:.1f} s before)", "ok"
            )
        elif not node and uid not in self._unschedulable:
            conditions = (pod.get("status") or {}).get("conditions") or []
            if any(c.get("reason") == "Unschedulable" for c in conditions):
                self._unschedulable.add(uid)
                self.view.line("k8s", f"{key(pod)} cannot be scheduled: no node has room", "warn")

    def _replacement_for(self, pod: Obj) -> PodFate | None:
        """The evicted pod a new Ready pod replaces: the same name for a StatefulSet,
        else the earliest evicted pod of the same controller not yet replaced."""
        uid = pod["metadata"]["uid"]
        if any(f.replacement_uid == uid for f in self.fates.values()):
            return None
        ref = controller(pod) or {}
        waiting = [
            f
            for f in self.fates.values()
            if f.evicted_at is not None
            and not f.daemon
            and not f.replacement_uid
            and f.owner_uid
            and f.owner_uid == ref.get("uid")
            and (f.owner_kind != "StatefulSet" or f.name == key(pod))
        ]
        return min(waiting, key=lambda f: f.evicted_at or 0.0) if waiting else None

    def sync_nodes(self, items: list[Obj]) -> None:
        with self.changed:
            self.nodes = {n["metadata"]["name"]: n for n in items}
            self.changed.notify_all()

    def on_node(self, kind: str, node: Obj) -> None:
        with self.changed:
            name = node["metadata"]["name"]
            old = self.nodes.get(name)
            if kind == "DELETED":
                self.nodes.pop(name, None)
            else:
                self.nodes[name] = node
            if self.tracking and name == self.node:
                self._narrate_node(kind, old, node)
            self.changed.notify_all()

    def _narrate_node(self, kind: str, old: Obj | None, node: Obj) -> None:
        if kind == "DELETED":
            if self.node_deleted_at is None:
                self.node_deleted_at = self.clock()
            self.view.line("k8s", f"node {self.node} deleted", "info")
            return
        was = bool(((old or {}).get("spec") or {}).get("unschedulable"))
        now = bool((node.get("spec") or {}).get("unschedulable"))
        if now and not was:
            self.cordoned_at = self.clock()
            labels = node["metadata"].get("labels") or {}
            excluded = labels.get(EXCLUDE_LB_LABEL) == "true"
            extra = ", excluded from load balancers" if excluded else ""
            self.view.line("k8s", f"node {self.node} cordoned (unschedulable{extra})", "info")
        before = ((old or {}).get("metadata") or {}).get("annotations") or {}
        after = node["metadata"].get("annotations") or {}
        if after.get(PROGRESS_ANNOTATION) != before.get(PROGRESS_ANNOTATION):
            try:
                progress = json.loads(after.get(PROGRESS_ANNOTATION) or "{}")
            except ValueError:
                progress = {}
            if progress.get("phase") == "drained":
                self.view.line("k8s", f"node {self.node} annotated as drained", "ok")

    def sync_budgets(self, items: list[Obj]) -> None:
        with self.changed:
            self.budgets = {key(b): b for b in items}
            if self.checking_budgets:
                self._check_budgets()
            self.changed.notify_all()

    def on_budget(self, kind: str, budget: Obj) -> None:
        with self.changed:
            if kind == "DELETED":
                self.budgets.pop(key(budget), None)
            else:
                self.budgets[key(budget)] = budget
            if self.checking_budgets:
                self._check_budgets()
            self.changed.notify_all()

    def _check_budgets(self) -> None:
        margins = budget_margins(list(self.budgets.values()), list(self.pods.values()))
        now = self.clock()
        for name, (healthy, desired) in margins.items():
            margin = healthy - desired
            worst = self.worst.get(name)
            if worst is None or margin < worst.margin:
                self.worst[name] = Worst(margin, healthy, desired, now)
                if margin < 0:
                    why = " (by the timeout policy)" if self.timed_out else ""
                    self.view.line(
                        "k8s",
                        f"PodDisruptionBudget {name} violated{why}: {healthy} healthy, "
                        f"{desired} required",
                        "warn" if self.timed_out else "error",
                    )

    def sync_attachments(self, items: list[Obj]) -> None:
        with self.changed:
            self.attachments = {a["metadata"]["name"]: a for a in items}
            self.changed.notify_all()

    def on_attachment(self, kind: str, attachment: Obj) -> None:
        with self.changed:
            name = attachment["metadata"]["name"]
            if kind == "DELETED":
                self.attachments.pop(name, None)
            else:
                self.attachments[name] = attachment
            if self.tracking:
                spec = attachment.get("spec") or {}
                volume = str((spec.get("source") or {}).get("persistentVolumeName"))
                claim = self.claims_of.get(volume, "")
                label = f"volume {volume}" + (f" ({claim})" if claim else "")
                if kind == "DELETED" and name in self.volumes and volume not in self.detached:
                    self.detached[volume] = self.clock()
                    self.view.line("k8s", f"{label} detached from {self.node}", "ok")
                elif (
                    kind == "ADDED"
                    and volume in self.volumes.values()
                    and spec.get("nodeName") != self.node
                ):
                    self.view.line("k8s", f"{label} attached to {spec.get('nodeName')}", "ok")
            self.changed.notify_all()

    # -- the function's logs and the Auto Scaling calls ---------------------------

    def on_log(self, record: Obj) -> None:
        """One JSON log line of the function: a drain event (its `event` key) or a
        free-text line (shown when it warns or fails)."""
        event = str(record.get("event", ""))
        with self.changed:
            if event:
                self._on_event(event, record)
            else:
                self._on_text(record)
            self.changed.notify_all()

    def _fate(self, pod: str) -> PodFate | None:
        return next((f for f in self.fates.values() if f.name == pod), None)

    def _on_event(self, event: str, record: Obj) -> None:
        pod = str(record.get("pod", ""))
        budget = str(record.get("budget", ""))
        reason = str(record.get("reason", ""))
        fate = self._fate(pod) if pod else None
        if fate is not None:
            fate.refusals = max(fate.refusals, int(record.get("refusals") or 0))
        if event == "drain_finished":
            earlier = bool(self.summaries)
            self.summaries.append(dict(record))
            result = record.get("result")
            self.timed_out = self.timed_out or result == "timed_out"
            trigger = str(record.get("trigger") or "")
            lifecycle = record.get("lifecycle_result")
            hook = trigger in ("", "terminate-hook")
            if lifecycle in (None, "none") and not hook:  # an EC2 event's: no action of its own
                told = f"{trigger} drain finished: result {result}; the terminate hook's event "
                told += "completes the lifecycle action"
            elif (earlier or self.hook_follows) and hook and not record.get("evicted"):
                told = f"{trigger}: the node was already drained; lifecycle result {lifecycle}"
            else:
                told = f"drain finished: result {result}, lifecycle result {lifecycle}"
            self.view.line("lambda", told, "ok" if result == "drained" else "warn")
        elif event == "drain_started":
            self.view.line(
                "lambda",
                f"draining {record.get('node')}: {record.get('ordinary')} pods, then "
                f"{record.get('critical')} critical; {record.get('skipped')} left alone; "
                f"deadline {record.get('deadline')} ({record.get('deadline_source')})",
                "info",
            )
        elif event == "pod_skipped":
            if fate is not None:
                fate.skipped = reason
            self.view.line("lambda", f"{pod} left alone: {reason}", "info")
        elif event == "pod_evicted":
            if fate is not None:
                fate.drain_evicted = True
        elif event == "pod_refused":
            if fate is not None:
                fate.blocked_by.add(budget)
            self.view.line(
                "lambda",
                f"eviction of {pod} refused by PodDisruptionBudget {budget}; "
                "it retries as soon as the budget allows",
                "warn",
            )
        elif event == "pod_force_deleted":
            self.timed_out = True
            if fate is not None:
                fate.drain_forced = True
            self.view.line("lambda", f"{pod} deleted by TIMEOUT_POLICY=force", "warn")
        elif event == "pod_left":
            self.timed_out = True
            if fate is not None:
                fate.left = reason
            self.view.line("lambda", f"{pod} still on the node: {reason}", "warn")
        elif event in _SHOWN:
            level = str(record.get("level", "INFO")).upper()
            text = str(record.get("message", event))
            if level in ("ERROR", "CRITICAL"):
                self.errors.append(text)
            self.view.line("lambda", text, _STYLES.get(level, "info"))

    def _on_text(self, record: Obj) -> None:
        message = str(record.get("message", ""))
        level = str(record.get("level", "INFO")).upper()
        if level in ("ERROR", "CRITICAL"):
            self.errors.append(message)
            self.view.line("lambda", message, "error")
        elif level == "WARNING":
            self.view.line("lambda", message, "warn")
        elif "hand" in message or "found node" in message or "target group" in message:
            self.view.line("lambda", message, "info")

    def on_aws(self, text: str, style: str = "info") -> None:
        self.view.line("aws", text, style)

    # -- the live status line ---------------------------------------------------

    def status_text(self) -> str:
        with self.lock:
            if not self.tracking:
                return ""
            left = [
                p
                for p in self.pods.values()
                if p["spec"].get("nodeName") == self.node and p["metadata"]["uid"] in self.fates
            ]
            daemons = sum(1 for p in left if self.fates[p["metadata"]["uid"]].daemon)
            parts = [f"{self.elapsed():5.1f}s since scale-in"]
            if self.node_deleted_at is not None:
                parts.append("node deleted")
            else:
                parts.append(f"{len(left)} pods on the node ({daemons} DaemonSet)")
            margins = budget_margins(list(self.budgets.values()), list(self.pods.values()))
            for name, (healthy, desired) in sorted(margins.items()):
                parts.append(f"{name.split('/')[-1]} {healthy} healthy/{desired} needed")
            attached = sum(1 for n in self.volumes if n in self.attachments)
            if self.volumes:
                parts.append(f"volumes attached {attached} of {len(self.volumes)}")
            return " | ".join(parts)
