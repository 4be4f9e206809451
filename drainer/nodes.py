"""Find the Kubernetes node behind an EC2 instance.

In order of cost: the node named after the instance's PrivateDnsName (one GET, the
EKS default); nodes whose kubernetes.io/hostname label is the DNS name or its short
form (one filtered list); nodes whose spec.providerID ends with /<instance-id>
(a paged list of every node: clusters with custom node names).
"""

from __future__ import annotations

import logging

from drainer.kube import Kube

log = logging.getLogger(__name__)
HOSTNAME_LABEL = "kubernetes.io/hostname"


def find_node(
    kube: Kube, private_dns_name: str, hostnames: tuple[str, ...], provider_id_suffix: str
) -> str | None:
    """The node's name, or None when no node matches (never joined, already gone)."""
    if private_dns_name:
        node = kube.get_node(private_dns_name)
        if node is not None:
            return str(node["metadata"]["name"])
    if hostnames:
        selector = f"{HOSTNAME_LABEL} in ({','.join(hostnames)})"
        for node in kube.list_nodes(label_selector=selector):
            log.info("found node %s by its hostname label", node["metadata"]["name"])
            return str(node["metadata"]["name"])
    if provider_id_suffix:
        for node in kube.list_nodes():
            if str((node.get("spec") or {}).get("providerID", "")).endswith(provider_id_suffix):
                log.info("found node %s by its providerID", node["metadata"]["name"])
                return str(node["metadata"]["name"])
    return None
