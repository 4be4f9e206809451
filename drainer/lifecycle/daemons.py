"""Which DaemonSets owe a new node a pod they have not made yet.

LAUNCH_WAIT_DAEMONSETS waits for a new node's DaemonSet pods to be Ready. The pods
already on the node are not all of them: a DaemonSet whose pods do not tolerate a
startup taint (an agent's, drainer/lifecycle/joined.py) gets its pod only once the
taint is gone, a moment later, and a look in that moment would see nothing to wait
for. So every DaemonSet whose pod template the node admits, as the DaemonSet
controller reads it (its nodeSelector, required node affinity, and tolerations with
those the controller adds to its pods), and that has no pod on the node yet, is
waited for as well.

Listing DaemonSets takes the rule k8s-rbac/ grants for it; without it (the role not
applied again since) the launch waits for the pods on the node only, as before, and
says so once per container.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from drainer.engine import nodefit, pods
from drainer.errors import KubeForbidden
from drainer.k8s.kube import Kube

log = logging.getLogger(__name__)

Obj = dict[str, Any]

DAEMON_TOLERATIONS: tuple[Obj, ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
"""What the DaemonSet controller adds to every pod it makes (and, to a hostNetwork
pod's, NETWORK_UNAVAILABLE)."""
NETWORK_UNAVAILABLE: Obj = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}


REFUSED_FOR = 300.0
"""Seconds a refused list (403) is not asked again: the role is not applied again
within one launch's looks, twice a second."""


class _Said:
    unlisted = False
    """The DaemonSets could not be listed, and a warning said so (once a container)."""
    refused_at = float("-inf")
    """When the last list was refused (time.monotonic)."""


_SAID = _Said()


def owed(kube: Kube, node: Obj, on_node: Iterable[Obj]) -> list[str]:
    """ "namespace/name: no pod yet" for each DaemonSet that owes `node` a pod and has
    none among `on_node` (the node's pods now), sorted; [] when the DaemonSets cannot
    be listed (said once; not asked again for REFUSED_FOR seconds)."""
    if time.monotonic() - _SAID.refused_at < REFUSED_FOR:
        return []
    try:
        sets, _ = kube.list_daemonsets()
    except KubeForbidden as e:
        _SAID.refused_at = time.monotonic()
        if not _SAID.unlisted:
            _SAID.unlisted = True
            log.warning(
                "cannot list DaemonSets (%s): a new node's DaemonSet pods are waited for only "
                "once they are on it; kubectl apply -f k8s-rbac/ to wait for every DaemonSet "
                "that owes it a pod",
                e,
            )
        return []
    there = {
        str(ref.get("uid"))
        for pod in on_node
        if not pods.is_terminating(pod)
        for ref in pod["metadata"].get("ownerReferences") or []
        if ref.get("kind") == "DaemonSet"
    }
    return sorted(
        f"{ds['metadata'].get('namespace', '')}/{ds['metadata']['name']}: no pod yet"
        for ds in sets
        if not ds["metadata"].get("deletionTimestamp")
        and str(ds["metadata"].get("uid")) not in there
        and nodefit.fits(_as_made(ds), node)
    )


def _as_made(daemonset: Obj) -> Obj:
    """The spec of the pod the controller would make: the template's, with the
    tolerations it adds."""
    spec = dict(((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {})
    added = [*DAEMON_TOLERATIONS, *([NETWORK_UNAVAILABLE] if spec.get("hostNetwork") else [])]
    spec["tolerations"] = [*(spec.get("tolerations") or []), *added]
    return spec
