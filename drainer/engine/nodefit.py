"""Whether a pod's spec lets it onto a node, as the scheduler's filters and the
DaemonSet controller read it: its nodeSelector, its required node affinity, and its
tolerations of the node's NoSchedule and NoExecute taints. Read by the plan (where
an evicted pod can go) and by the launch hook (which DaemonSets owe a new node a pod).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Spec = Mapping[str, Any]

EFFECTS = ("NoSchedule", "NoExecute")
"""The taint effects that keep a pod off a node (PreferNoSchedule only discourages)."""


def tolerated(taint: Mapping[str, Any], spec: Spec) -> bool:
    """One of the spec's tolerations matches `taint` (v1.Toleration.ToleratesTaint)."""
    for t in spec.get("tolerations") or []:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (
            taint.get("value") or ""
        ):
            return True
    return False


def wrong_labels(spec: Spec, labels: Mapping[str, str]) -> dict[str, str]:
    """The spec's nodeSelector entries the node's labels do not have."""
    selector = spec.get("nodeSelector") or {}
    return {k: v for k, v in selector.items() if labels.get(k) != v}


def affinity_admits(spec: Spec, labels: Mapping[str, str], name: str) -> bool:
    """requiredDuringSchedulingIgnoredDuringExecution: any term, all its expressions."""
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    return terms_admit(required.get("nodeSelectorTerms") or [], labels, name)


def terms_admit(terms: Iterable[Mapping[str, Any]], labels: Mapping[str, str], name: str) -> bool:
    """Node selector terms (a pod's required node affinity, a volume's): any term, all
    its expressions; no terms admit every node, and an empty term none (Kubernetes:
    "nil or empty term selects no objects")."""
    terms = list(terms)
    if not terms:
        return True
    fields = {"metadata.name": name}
    return any(
        (term.get("matchExpressions") or term.get("matchFields"))  # an empty term: no node
        and all(_matches(e, labels) for e in term.get("matchExpressions") or [])
        and all(_matches(e, fields) for e in term.get("matchFields") or [])
        for term in terms
    )


def _matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator = expression.get("key", ""), expression.get("operator")
    values = [str(v) for v in expression.get("values") or []]
    have = labels.get(key)
    if operator == "In":
        return have in values
    if operator == "NotIn":
        return have not in values
    if operator == "Exists":
        return have is not None
    if operator == "DoesNotExist":
        return have is None
    if operator in ("Gt", "Lt") and have is not None and values:
        try:
            return int(have) > int(values[0]) if operator == "Gt" else int(have) < int(values[0])
        except ValueError:
            return False
    return False


def fits(spec: Spec, node: Mapping[str, Any]) -> bool:
    """The spec's nodeName (when set), nodeSelector, required node affinity and
    tolerations let it onto `node` (resources apart)."""
    metadata = node.get("metadata") or {}
    labels = metadata.get("labels") or {}
    name = str(metadata.get("name") or "")
    taints = (node.get("spec") or {}).get("taints") or []
    return (
        spec.get("nodeName") in (None, "", name)
        and not wrong_labels(spec, labels)
        and affinity_admits(spec, labels, name)
        and all(tolerated(t, spec) for t in taints if t.get("effect") in EFFECTS)
    )
