"""Server-side printing (meta.k8s.io/v1 Table), which `kubectl get` asks for."""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable
from typing import Any

from kubesim.store import Obj


def _age(obj: Obj) -> str:
    stamp = obj["metadata"].get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    seconds = int(time.time() - calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))
    if seconds < 120:
        return f"{max(seconds, 0)}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def _pod_cells(pod: Obj) -> list[Any]:
    status = _status(pod)
    containers: list[Obj] = status.get("containerStatuses") or []
    ready = sum(1 for c in containers if c.get("ready"))
    total = len(pod.get("spec", {}).get("containers") or [])
    phase = (
        "Terminating"
        if pod["metadata"].get("deletionTimestamp")
        else status.get("phase", "Pending")
    )
    return [
        pod["metadata"]["name"],
        f"{ready}/{total}",
        phase,
        str(sum(int(c.get("restartCount", 0)) for c in containers)),
        _age(pod),
        status.get("podIP") or "<none>",
        pod.get("spec", {}).get("nodeName") or "<none>",
    ]


def _node_cells(node: Obj) -> list[Any]:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready: Obj = next((c for c in conditions if c.get("type") == "Ready"), {})
    status = "Ready" if ready.get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    prefix = "node-role.kubernetes.io/"
    roles = sorted(
        k[len(prefix) :] for k in node["metadata"].get("labels") or {} if k.startswith(prefix)
    )
    version = (_status(node).get("nodeInfo") or {}).get("kubeletVersion", "")
    return [node["metadata"]["name"], status, ",".join(roles) or "<none>", _age(node), version]


def _status(obj: Obj) -> Obj:
    status: Obj = obj.get("status") or {}
    return status


def _spec(obj: Obj) -> Obj:
    spec: Obj = obj.get("spec") or {}
    return spec


def _or_na(value: Any) -> Any:
    return "N/A" if value is None else value


def _pdb_cells(budget: Obj) -> list[Any]:
    spec = _spec(budget)
    return [
        budget["metadata"]["name"],
        str(_or_na(spec.get("minAvailable"))),
        str(_or_na(spec.get("maxUnavailable"))),
        _status(budget).get("disruptionsAllowed", 0),
        _age(budget),
    ]


def _deployment_cells(deployment: Obj) -> list[Any]:
    status = _status(deployment)
    return [
        deployment["metadata"]["name"],
        f"{status.get('readyReplicas', 0)}/{_spec(deployment).get('replicas', 1)}",
        status.get("updatedReplicas", 0),
        status.get("availableReplicas", 0),
        _age(deployment),
    ]


def _replicaset_cells(replicaset: Obj) -> list[Any]:
    status = _status(replicaset)
    return [
        replicaset["metadata"]["name"],
        _spec(replicaset).get("replicas", 1),
        status.get("replicas", 0),
        status.get("readyReplicas", 0),
        _age(replicaset),
    ]


def _statefulset_cells(statefulset: Obj) -> list[Any]:
    ready = _status(statefulset).get("readyReplicas", 0)
    return [
        statefulset["metadata"]["name"],
        f"{ready}/{_spec(statefulset).get('replicas', 1)}",
        _age(statefulset),
    ]


def _daemonset_cells(daemonset: Obj) -> list[Any]:
    status = _status(daemonset)
    selector = (_spec(daemonset).get("template") or {}).get("spec", {}).get("nodeSelector") or {}
    return [
        daemonset["metadata"]["name"],
        status.get("desiredNumberScheduled", 0),
        status.get("currentNumberScheduled", 0),
        status.get("numberReady", 0),
        status.get("updatedNumberScheduled", 0),
        status.get("numberAvailable", 0),
        ",".join(f"{k}={v}" for k, v in selector.items()) or "<none>",
        _age(daemonset),
    ]


def _namespace_cells(namespace: Obj) -> list[Any]:
    return [
        namespace["metadata"]["name"],
        _status(namespace).get("phase", "Active"),
        _age(namespace),
    ]


def _attachment_cells(attachment: Obj) -> list[Any]:
    spec = _spec(attachment)
    return [
        attachment["metadata"]["name"],
        spec.get("attacher", ""),
        (spec.get("source") or {}).get("persistentVolumeName", ""),
        spec.get("nodeName", ""),
        bool(_status(attachment).get("attached")),
        _age(attachment),
    ]


def _claim_cells(claim: Obj) -> list[Any]:
    spec, status = _spec(claim), _status(claim)
    return [
        claim["metadata"]["name"],
        status.get("phase", "Pending"),
        spec.get("volumeName", ""),
        (status.get("capacity") or {}).get("storage", ""),
        ",".join(_ACCESS_MODES.get(m, m) for m in status.get("accessModes") or []),
        spec.get("storageClassName") or "<unset>",
        _age(claim),
    ]


def _event_cells(event: Obj) -> list[Any]:
    involved = event.get("involvedObject") or {}
    return [
        _age(event),
        event.get("type", ""),
        event.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        event.get("message", ""),
    ]


_ACCESS_MODES = {
    "ReadWriteOnce": "RWO",
    "ReadOnlyMany": "ROX",
    "ReadWriteMany": "RWX",
    "ReadWriteOncePod": "RWOP",
}

# kind -> columns (name, type, priority) and the function making one row's cells,
# following the real server's printers (pkg/printers/internalversion).
_PRINTERS: dict[str, tuple[list[tuple[str, str, int]], Callable[[Obj], list[Any]]]] = {
    "Pod": (
        [
            ("Name", "string", 0),
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            ("Age", "string", 0),
            ("IP", "string", 1),
            ("Node", "string", 1),
        ],
        _pod_cells,
    ),
    "Node": (
        [
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Roles", "string", 0),
            ("Age", "string", 0),
            ("Version", "string", 0),
        ],
        _node_cells,
    ),
    "PodDisruptionBudget": (
        [
            ("Name", "string", 0),
            ("Min Available", "string", 0),
            ("Max Unavailable", "string", 0),
            ("Allowed Disruptions", "integer", 0),
            ("Age", "string", 0),
        ],
        _pdb_cells,
    ),
    "Deployment": (
        [
            ("Name", "string", 0),
            ("Ready", "string", 0),
            ("Up-to-date", "integer", 0),
            ("Available", "integer", 0),
            ("Age", "string", 0),
        ],
        _deployment_cells,
    ),
    "ReplicaSet": (
        [
            ("Name", "string", 0),
            ("Desired", "integer", 0),
            ("Current", "integer", 0),
            ("Ready", "integer", 0),
            ("Age", "string", 0),
        ],
        _replicaset_cells,
    ),
    "StatefulSet": (
        [("Name", "string", 0), ("Ready", "string", 0), ("Age", "string", 0)],
        _statefulset_cells,
    ),
    "DaemonSet": (
        [
            ("Name", "string", 0),
            ("Desired", "integer", 0),
            ("Current", "integer", 0),
            ("Ready", "integer", 0),
            ("Up-to-date", "integer", 0),
            ("Available", "integer", 0),
            ("Node Selector", "string", 0),
            ("Age", "string", 0),
        ],
        _daemonset_cells,
    ),
    "Namespace": (
        [("Name", "string", 0), ("Status", "string", 0), ("Age", "string", 0)],
        _namespace_cells,
    ),
    "VolumeAttachment": (
        [
            ("Name", "string", 0),
            ("Attacher", "string", 0),
            ("PV", "string", 0),
            ("Node", "string", 0),
            ("Attached", "boolean", 0),
            ("Age", "string", 0),
        ],
        _attachment_cells,
    ),
    "PersistentVolumeClaim": (
        [
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Volume", "string", 0),
            ("Capacity", "string", 0),
            ("Access Modes", "string", 0),
            ("StorageClass", "string", 0),
            ("Age", "string", 0),
        ],
        _claim_cells,
    ),
    "Event": (
        [
            ("Last Seen", "string", 0),
            ("Type", "string", 0),
            ("Reason", "string", 0),
            ("Object", "string", 0),
            ("Message", "string", 0),
        ],
        _event_cells,
    ),
}
_DEFAULT: tuple[list[tuple[str, str, int]], Callable[[Obj], list[Any]]] = (
    [("Name", "string", 0), ("Age", "string", 0)],
    lambda obj: [obj["metadata"]["name"], _age(obj)],
)


def table(
    items: list[Obj], resource_version: str, query: dict[str, str], kind: str
) -> dict[str, Any]:
    columns, cells = _PRINTERS.get(kind, _DEFAULT)
    include = query.get("includeObject", "Metadata")
    rows = []
    for obj in items:
        if include == "Object":
            embedded: Any = obj
        elif include == "None":
            embedded = None
        else:
            embedded = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        row: dict[str, Any] = {"cells": cells(obj)}
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [
            {
                "name": name,
                "type": kind_,
                "format": "name" if name == "Name" else "",
                "description": "",
                "priority": priority,
            }
            for name, kind_, priority in columns
        ],
        "rows": rows,
    }
