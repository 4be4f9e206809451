"""events.k8s.io/v1 Events, stored as the core v1 Events they are.

The real API server keeps one Event storage and serves it in both groups, converting
field by field (pkg/apis/events/v1, zz_generated.conversion.go): `regarding` is
core's `involvedObject`, `note` its `message`, `reportingController` its
`reportingComponent`, and core's `firstTimestamp`, `lastTimestamp`, `count` and
`source` are the new group's `deprecated*` fields. kubesim stores the core form, so
an Event written through events.k8s.io shows in `kubectl get events` and
`kubectl describe`, which read core v1 with field selectors on involvedObject."""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]

_RENAMED = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
    "deprecatedSource": "source",
}
_SAME = (
    "metadata",
    "eventTime",
    "series",
    "action",
    "reason",
    "related",
    "reportingInstance",
    "type",
)


def to_core(event: Obj) -> Obj:
    """An events.k8s.io/v1 Event as the core v1 Event stored."""
    core: Obj = {"apiVersion": "v1", "kind": "Event"}
    for key in _SAME:
        if key in event:
            core[key] = copy.deepcopy(event[key])
    for new, old in _RENAMED.items():
        if new in event:
            core[old] = copy.deepcopy(event[new])
    return core


def from_core(core: Obj) -> Obj:
    """A stored core v1 Event as events.k8s.io/v1 serves it."""
    event: Obj = {"apiVersion": "events.k8s.io/v1", "kind": "Event"}
    for key in _SAME:
        if key in core:
            event[key] = copy.deepcopy(core[key])
    for new, old in _RENAMED.items():
        if old in core:
            event[new] = copy.deepcopy(core[old])
    return event


def invalid(event: Obj) -> list[tuple[str, str]]:
    """What the real server's validation (ValidateEventCreate for events.k8s.io/v1)
    refuses: (field, message) for each field a new-style Event must have."""
    problems = []
    if not event.get("eventTime"):
        problems.append(("eventTime", "Required value"))
    for key in ("reportingController", "reportingInstance", "action", "reason"):
        value = event.get(key)
        if not value:
            problems.append((key, "Required value"))
        elif len(str(value)) > 128:
            problems.append((key, "Too long: may not be more than 128 bytes"))
    if len(str(event.get("note") or "").encode()) > 1024:
        problems.append(("note", "Too long: may not be more than 1024 bytes"))
    if event.get("type") not in ("Normal", "Warning"):
        problems.append(("type", f'Unsupported value: "{event.get("type")}"'))
    return problems
