"""Find the Kubernetes node behind an EC2 instance.

In order of cost: the node named after the instance's PrivateDnsName (one GET, the
EKS default); nodes whose kubernetes.io/hostname label is the DNS name or its short
form (one filtered list); nodes whose spec.providerID ends with /<instance-id>
(a paged list of every node: clusters with custom node names).
"""

from __future__ import annotations

import logging
from typing import Any

from drainer.k8s.kube import Kube

log = logging.getLogger(__name__)
HOSTNAME_LABEL = "kubernetes.io/hostname"
KARPENTER_LABEL = "karpenter.sh/nodepool"
AUTO_MODE_LABEL = "eks.amazonaws.com/compute-type"


def other_manager(node: dict[str, Any]) -> str:
    """Who else manages this node and drains it on its own (Karpenter, EKS Auto
    Mode), in words; "" when it is a node of ours to drain."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if labels.get(KARPENTER_LABEL):
        return f"Karpenter ({KARPENTER_LABEL}={labels[KARPENTER_LABEL]})"
    if labels.get(AUTO_MODE_LABEL) == "auto":
        return f"EKS Auto Mode ({AUTO_MODE_LABEL}=auto)"
    return ""


def find_node(
    kube: Kube, private_dns_name: str, hostnames: tuple[str, ...], provider_id_suffix: str
) -> str | None:
    """The node's name, or None when no node matches (never joined, already gone)."""
    node = find_node_object(kube, private_dns_name, hostnames, provider_id_suffix)
    return None if node is None else str(node["metadata"]["name"])


def find_node_object(
    kube: Kube, private_dns_name: str, hostnames: tuple[str, ...], provider_id_suffix: str
) -> dict[str, Any] | None:
    """The node as the lookup read it (its record included), or None."""
    if private_dns_name:
        node = kube.get_node(private_dns_name)
        if node is not None and _same_machine(node, provider_id_suffix):
            return node
    if hostnames:
        selector = f"{HOSTNAME_LABEL} in ({','.join(hostnames)})"
        for node in kube.list_nodes(label_selector=selector):
            if _same_machine(node, provider_id_suffix):
                log.info("found node %s by its hostname label", node["metadata"]["name"])
                return node
    if provider_id_suffix:
        for node in kube.list_nodes():
            if str((node.get("spec") or {}).get("providerID", "")).endswith(provider_id_suffix):
                log.info("found node %s by its providerID", node["metadata"]["name"])
                return node
    return None


def _same_machine(node: dict[str, Any], provider_id_suffix: str) -> bool:
    """A node found by name is the instance's unless its providerID names another
    instance: a private DNS name is reused, and a new instance that registers under
    it is another machine, never drained for this one."""
    provider_id = str((node.get("spec") or {}).get("providerID") or "")
    if not provider_id or not provider_id_suffix or provider_id.endswith(provider_id_suffix):
        return True
    log.warning(
        "node %s belongs to another instance (providerID %s, not ...%s); not this instance's",
        node["metadata"]["name"],
        provider_id,
        provider_id_suffix,
    )
    return False
