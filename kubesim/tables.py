"""Server-side printing (meta.k8s.io/v1 Table), which `kubectl get` asks for."""

from __future__ import annotations

import calendar
import time
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
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
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
        0,
        _age(pod),
        status.get("podIP") or "<none>",
        pod.get("spec", {}).get("nodeName") or "<none>",
    ]


def _node_cells(node: Obj) -> list[Any]:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), {})
    status = "Ready" if ready.get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    return [node["metadata"]["name"], status, "<none>", _age(node), "v1.32.0"]


_COLUMNS: dict[str, list[tuple[str, str, int]]] = {
    "Pod": [
        ("Name", "string", 0),
        ("Ready", "string", 0),
        ("Status", "string", 0),
        ("Restarts", "integer", 0),
        ("Age", "string", 0),
        ("IP", "string", 1),
        ("Node", "string", 1),
    ],
    "Node": [
        ("Name", "string", 0),
        ("Status", "string", 0),
        ("Roles", "string", 0),
        ("Age", "string", 0),
        ("Version", "string", 0),
    ],
}


def _cells(kind: str, obj: Obj) -> list[Any]:
    if kind == "Pod":
        return _pod_cells(obj)
    if kind == "Node":
        return _node_cells(obj)
    return [obj["metadata"]["name"], _age(obj)]


def table(
    items: list[Obj], resource_version: str, query: dict[str, str], kind: str
) -> dict[str, Any]:
    columns = _COLUMNS.get(kind, [("Name", "string", 0), ("Age", "string", 0)])
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
        row: dict[str, Any] = {"cells": _cells(kind, obj)}
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
