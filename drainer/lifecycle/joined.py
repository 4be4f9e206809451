"""When a new node counts as joined, for the launch hook (drainer/lifecycle/launch.py):
when it can take pods, not only when it is Ready.

A node is Ready as soon as its kubelet says so, while the pods meant for it may
still be kept off: the cloud controller's `uninitialized` taint until it has
initialised the node, the node lifecycle controller's `not-ready`, `unreachable` and
`network-unavailable` taints, and the taints that CNI and CSI agents put on a node
at registration and remove once they run on it (LAUNCH_STARTUP_TAINTS). An instance
refresh that moves on while one of them is there terminates the next old node with
nowhere for its pods to go. A node cordoned when it registered (the kubelet's
`--register-schedulable=false`, someone's `kubectl cordon`) takes no pods either,
but that is someone's decision, as on the warm-pool path: it is told, and waited
for only with LAUNCH_WAIT_FOR_UNCORDON. A cordon the drainer's own record on the node
says a drain of ours set (an EC2 event's, e.g. a rebalance recommendation or a spot
interruption warning during the launch's wait: k8s/cordon.py) is that drain's: told
as such (`drain`), never waited for, and never advised to be undone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drainer import aws
from drainer.engine import pods
from drainer.k8s.cordon import ADDED_CORDON, added_by_drainer, progress_of
from drainer.k8s.kube import Kube
from drainer.k8s.nodes import find_node_object
from drainer.lifecycle import daemons
from drainer.lifecycle.launch_release import release_command
from drainer.lifecycle.settings import Settings

STARTUP_TAINTS = (
    "node.cloudprovider.kubernetes.io/uninitialized",
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/network-unavailable",
)
"""Taints a new node is always waited out of, whatever LAUNCH_STARTUP_TAINTS says:
the cloud controller's until it has initialised the node, and the node lifecycle
controller's while the node's conditions keep pods off."""
SHUTDOWN_TAINT = "node.cloudprovider.kubernetes.io/shutdown"
"""The cloud controller's taint on the node of a stopped instance, removed once the
instance runs again: a node back from the warm pool is not usable before."""


@dataclass(frozen=True)
class Look:
    """What one look at the instance's node found."""

    node: str = ""
    """Its name; "" before it registers."""
    uid: str = ""
    waiting_for: str = "its node to register"
    """What it still lacks, in words for the log; "" once it can take pods."""
    missing: str = "registration"
    """The same for the end line, short, each lack named, in the order they are
    looked at and joined by ", ": `registration`, or some of `ready`, `taint KEY`,
    `uncordon` and `daemonset pods`; "" once it can take pods."""
    cordoned: bool = False
    """spec.unschedulable: cordoned (by someone else, unless `drain` names a drain of ours)."""
    drain: str = ""
    """A new node cordoned by a drain of ours, as its record says: that drain, in words
    (drain_cordon); "" when the cordon is not the drainer's, or not looked at (restarted)."""


NOT_READY_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
"""The node lifecycle controller's taints on a node that is not Ready: while it is
not, they are that same lack, not another one."""


def look(
    kube: Kube,
    identity: aws.NodeIdentity,
    settings: Settings,
    *,
    restarted: bool,
    every: bool = True,
) -> Look:
    """Look at the instance's node once, naming every lack (Ready, each startup taint,
    the uncordon when waited for, its DaemonSet pods when waited for and the node is
    Ready: on a node that is not, they cannot be). `every` false (the wait's looks
    before its last): the DaemonSet pods only once nothing else lacks, so that a wait
    for a taint or the uncordon lists no pods twice a second. `restarted`: it comes
    back from the warm pool, its node must also have lost EC2's shutdown taint, and
    its cordon is the drain's that sent it there (the release undoes it), so never
    waited for."""
    found = find_node_object(
        kube, identity.private_dns_name, identity.hostname_candidates, identity.provider_id_suffix
    )
    if found is None:
        return Look()
    name = str(found["metadata"]["name"])
    uid = str(found["metadata"].get("uid") or "")
    cordoned = bool((found.get("spec") or {}).get("unschedulable"))
    drain = drain_cordon(found) if cordoned and not restarted else ""
    ready = pods.is_ready(found)
    lacks: list[tuple[str, str]] = [] if ready else [("to be Ready", "ready")]
    for taint in startup_taints(found, settings, restarted=restarted):
        if ready or taint not in NOT_READY_TAINTS:
            lacks.append((f"to lose the taint {taint}", f"taint {taint}"))
    if cordoned and settings.launch_wait_for_uncordon and not restarted and not drain:
        lacks.append(("to be uncordoned (LAUNCH_WAIT_FOR_UNCORDON)", "uncordon"))
    words = [f"node {name} {_and([w for w, _ in lacks])}"] if lacks else []
    if ready and settings.launch_wait_daemonsets and (every or not lacks):
        on_node, _ = kube.list_pods_on_node(name)
        waiting = sorted(
            pods.name(p) for p in on_node if pods.is_daemonset_pod(p) and not pods.is_ready(p)
        )
        waiting += daemons.owed(kube, found, on_node)  # those whose pod is not made yet
        if waiting:
            words.append(f"its DaemonSet pods to be Ready ({', '.join(waiting[:5])})")
            lacks.append(("", "daemonset pods"))
    missing = ", ".join(m for _, m in lacks)
    return Look(name, uid, ", and ".join(words), missing, cordoned, drain)


def drain_cordon(node: dict[str, Any]) -> str:
    """The drain of ours whose cordon the node carries, in words (its trigger and the
    phase its record says: "a rebalance-recommendation drain of eks-node-drainer (its
    record says cordoned)"), from the record it left (k8s/cordon.py: the record says
    the drainer added the cordon, as `release` reads it); "" when it is not ours."""
    if ADDED_CORDON not in added_by_drainer(node):
        return ""
    record = progress_of(node) or {}
    trigger = record.get("trigger")
    kind = f"{trigger} " if isinstance(trigger, str) and trigger else ""
    return f"a {kind}drain of eks-node-drainer (its record says {record.get('phase')})"


def _and(parts: list[str]) -> str:
    """The parts in words: a; a and b; a, b and c."""
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 2 else parts)


def startup_taints(
    node: dict[str, Any], settings: Settings, *, restarted: bool = False
) -> list[str]:
    """The taints on the node that keep a new node's pods off and that their owners
    remove in time (STARTUP_TAINTS, then LAUNCH_STARTUP_TAINTS, then the shutdown
    taint of a node back from the warm pool), in that order. The cordon's own taint
    (node.kubernetes.io/unschedulable) is the cordon's, told as such."""
    keys = {str(t.get("key")) for t in (node.get("spec") or {}).get("taints") or []}
    waited = [*STARTUP_TAINTS, *sorted(settings.launch_startup_taints)]
    if restarted:
        waited.append(SHUTDOWN_TAINT)
    return [key for key in waited if key in keys]


def advice(missing: str) -> str:
    """What an operator can do about a node that still lacked `missing` (Look.missing:
    one lack or several) at the timeout, for the notice: each lack's advice, once."""
    said = dict.fromkeys(_advice(one) for one in missing.split(", "))
    return " ".join(words for words in said if words)


def _advice(missing: str) -> str:
    if missing.startswith("taint "):
        key = missing.removeprefix("taint ")
        if key == STARTUP_TAINTS[0]:
            return (
                f"The cloud controller manager removes {key} once it has initialised the "
                "node: see that it runs and may read the instance."
            )
        if key == SHUTDOWN_TAINT:
            return (
                f"The cloud controller manager removes {key} once the instance back from "
                "the warm pool runs again: see that the instance runs and that the cloud "
                "controller manager runs and may read it."
            )
        if key in STARTUP_TAINTS:
            return (
                f"The node lifecycle controller removes {key} once the node's conditions "
                "allow: see the kubelet's and the CNI's health on the instance."
            )
        return (
            f"The agent that owns {key} (a CNI or CSI DaemonSet) removes it once it runs "
            "on the node: see its pod there; if nothing in this cluster removes it, take "
            "it out of LAUNCH_STARTUP_TAINTS."
        )
    if missing == "uncordon":
        return (
            "The node was cordoned when it registered (LAUNCH_WAIT_FOR_UNCORDON=true waits "
            "for the uncordon): see who cordons new nodes."
        )
    if missing == "daemonset pods":
        return "Its DaemonSet pods were not Ready (LAUNCH_WAIT_DAEMONSETS=true)."
    if missing == "registration":
        return (
            "The node never registered: see the instance's kubelet, its user data and its "
            "role's access to the cluster."
        )
    if missing == "ready":
        return (
            "The node registered but was never Ready: see its kubelet and its CNI on the "
            "instance (the Ready condition's reason, in kubectl describe node)."
        )
    return ""


def also_cordoned(node: str) -> str:
    """For the notice of a new node that timed out for want of something else, while
    cordoned with LAUNCH_WAIT_FOR_UNCORDON=false (the cordon was not waited for)."""
    return (
        f"The node is also cordoned, not by eks-node-drainer: it takes no pods until it is "
        f"uncordoned (kubectl uncordon {node}); LAUNCH_WAIT_FOR_UNCORDON=false, so the "
        "launch did not wait for that."
    )


def cordon_advice(node: str, *, from_warm_pool: bool) -> str:
    """What an operator can do about a node Ready but cordoned, not by the drainer,
    for the notice: a new one was cordoned when it registered; one back from the warm
    pool was cordoned before it went there, or by someone since (the launch's release
    leaves such a cordon, and LAUNCH_WAIT_FOR_UNCORDON does nothing for it)."""
    if from_warm_pool:
        return (
            f"The node takes no pods until it is uncordoned (kubectl uncordon {node}): it "
            "came back from the warm pool cordoned, not by eks-node-drainer (cordoned "
            "before it went into the warm pool, or by someone else since), so the launch "
            f"left the cordon; `{release_command(node)}` leaves it too."
        )
    return (
        f"The node takes no pods until it is uncordoned (kubectl uncordon {node}): it was "
        "cordoned, not by eks-node-drainer. LAUNCH_WAIT_FOR_UNCORDON=true makes a launch "
        "wait for the uncordon instead."
    )
