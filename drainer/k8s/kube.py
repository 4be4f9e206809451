"""The one place that talks to the Kubernetes API: the calls the drainer makes
(nodes, pods, evictions, budgets, Events, volumes), on the request loop of
drainer.k8s.client, and the two ways to build a client (an EKS cluster with IAM
tokens; a kubeconfig, as kubectl reads it).

It sends requests through drainer.k8s.transport (http.client, TLS always verified
against the cluster CA, each request with its own bearer token, refreshed before it
ages out; no kubernetes package, whose import would cost every cold start), and
every failure reaches its caller as the drainer's own errors (drainer.k8s.status),
so nothing outside drainer.k8s sees an error of the wire's.

Objects are plain dicts parsed from JSON: the drain engine reads a handful of
fields, and building pydantic models for hundreds of pods would cost more than the
drain itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from drainer import __version__
from drainer.errors import (
    KubeError,
    KubeNotFound,
    TlsVerificationError,
)
from drainer.k8s import kubeconfig
from drainer.k8s.client import Client, Streams, TokenProvider
from drainer.k8s.impersonation import Impersonation
from drainer.k8s.transport import Endpoint, Transport

Obj = dict[str, Any]
PAGE_SIZE = 500
USER_AGENT = f"eks-node-drainer/{__version__}"


def _on_node(node: str, label_selector: str) -> dict[str, str]:
    query = {"fieldSelector": f"spec.nodeName={node}"}
    if label_selector:
        query["labelSelector"] = label_selector
    return query


class Kube(Client):
    """A small, typed-by-convention client for the calls the drainer makes."""

    # -- construction ---------------------------------------------------------

    @classmethod
    def for_cluster(
        cls,
        endpoint: str,
        ca_pem: bytes,
        token: TokenProvider,
        *,
        request_timeout: float = 10.0,
        pool_size: int = 32,
    ) -> Kube:
        """A client for an EKS cluster: its endpoint, its CA, an IAM token source."""
        if not ca_pem.strip():
            raise TlsVerificationError(
                "the cluster has no certificate authority data; refusing to connect"
            )
        # The CA in memory: no file to race over between concurrent clients.
        where = Endpoint(endpoint, ca_pem=ca_pem.decode("ascii", errors="replace"))
        transport = Transport(where, pool_size=pool_size, user_agent=USER_AGENT)
        return cls(transport, token, request_timeout=request_timeout)

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | None = None,
        context: str | None = None,
        *,
        request_timeout: float = 10.0,
        pool_size: int = 32,
        clock: Callable[[], float] = time.time,
        impersonate: Impersonation | None = None,
    ) -> Kube:
        """A client from a kubeconfig (static tokens, client certificates, exec plugins).

        A user whose exec plugin gives tokens (what `aws eks update-kubeconfig` writes)
        gets an ExecToken: the plugin runs again after a 401 and near the token's stated
        expiry (`clock` tells the time). The official loader's own hook never re-runs it
        on a 401, and re-runs it on every request within 5 minutes of the expiry."""
        try:
            loaded = kubeconfig.found(path, context, clock=clock, impersonate=impersonate)
            transport = Transport(loaded.endpoint, pool_size=pool_size, user_agent=USER_AGENT)
        except (kubeconfig.KubeconfigError, OSError, ValueError) as e:
            raise KubeError(
                f"cannot load kubeconfig {path or '(default)'} "
                f"context {context or '(current)'}: {e}"
            ) from e
        client = cls(
            transport,
            loaded.token,
            request_timeout=request_timeout,
            refused=kubeconfig.refused_advice(loaded.user, loaded.token),
        )
        client.user = loaded.user
        return client

    # -- the calls the drainer makes -------------------------------------------

    def get_node(self, name: str) -> Obj | None:
        try:
            node: Obj = self.request(
                "GET",
                f"/api/v1/nodes/{name}",
                verb="get",
                resource="nodes",
                what=f"get node {name}",
            )
        except KubeNotFound:
            return None
        return node

    def can_i(self, verb: str, group: str, resource: str) -> bool:
        """A SelfSubjectAccessReview (`kubectl auth can-i`): may this identity do it?
        `resource` may name a subresource: "pods/eviction"."""
        name, _, sub = resource.partition("/")
        review: Obj = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "verb": verb,
                    "group": group,
                    "resource": name,
                    **({"subresource": sub} if sub else {}),
                }
            },
        }
        answer: Obj = self.request(
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            body=review,
            verb="create",
            resource="selfsubjectaccessreviews",
            what=f"can I {verb} {resource}",
        )
        return bool((answer.get("status") or {}).get("allowed"))

    def list_nodes(self, *, label_selector: str = "", page_size: int = PAGE_SIZE) -> Iterator[Obj]:
        """All nodes, page by page (never one unbounded list); stop early at will."""
        query = {"labelSelector": label_selector or None}
        for page in self._pages("/api/v1/nodes", query, "nodes", page_size):
            yield from page.get("items") or []

    def _pages(
        self, path: str, query: Mapping[str, Any], resource: str, page_size: int = PAGE_SIZE
    ) -> Iterator[Obj]:
        """A list, one page (limit/continue) at a time."""
        token = None
        while True:
            params = {**query, "limit": str(page_size), "continue": token}
            page: Obj = self.request("GET", path, query=params, verb="list", resource=resource)
            yield page
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    def _list_all(
        self, path: str, resource: str, query: Mapping[str, Any] | None = None
    ) -> tuple[list[Obj], str]:
        """Every item, paged, and the first page's resourceVersion to watch from."""
        items: list[Obj] = []
        version = ""
        for page in self._pages(path, query or {}, resource):
            version = version or str((page.get("metadata") or {}).get("resourceVersion") or "")
            items.extend(page.get("items") or [])
        return items, version

    def patch_node(self, name: str, patch: Obj, *, dry_run: bool = False) -> Obj:
        node: Obj = self.request(
            "PATCH",
            f"/api/v1/nodes/{name}",
            query={"dryRun": "All"} if dry_run else None,
            body=patch,
            content_type="application/merge-patch+json",
            verb="patch",
            resource="nodes",
            what=f"patch node {name}",
        )
        return node

    def list_node(self, name: str) -> tuple[list[Obj], str]:
        """The node as a list of one (or none), and the resourceVersion to watch from."""
        return self._list_all("/api/v1/nodes", "nodes", {"fieldSelector": f"metadata.name={name}"})

    def watch_node(
        self,
        name: str,
        resource_version: str,
        timeout_seconds: int = 300,
        streams: Streams | None = None,
    ) -> Iterator[Obj]:
        return self.watch(
            "/api/v1/nodes",
            query={"fieldSelector": f"metadata.name={name}"},
            resource_version=resource_version,
            resource="nodes",
            timeout_seconds=timeout_seconds,
            streams=streams,
        )

    def list_pods(self) -> tuple[list[Obj], str]:
        """Every pod in the cluster, paged (the refresh plan's replacement times)."""
        return self._list_all("/api/v1/pods", "pods")

    def list_pods_in(self, namespace: str, off_node: str = "") -> tuple[list[Obj], str]:
        """The namespace's pods, paged (a drain's ETA: its workloads' replacement
        times); with `off_node`, only those not on that node."""
        query = {"fieldSelector": f"spec.nodeName!={off_node}"} if off_node else None
        return self._list_all(f"/api/v1/namespaces/{namespace}/pods", "pods", query)

    def pods_with_ip(self, ip: str, off_node: str) -> list[Obj]:
        """The pods whose IP is `ip` that are not on `off_node` (an evicted pod's IP
        given again elsewhere: drainer/lifecycle/targets.py)."""
        query = {"fieldSelector": f"status.podIP={ip},spec.nodeName!={off_node}"}
        return self._list_all("/api/v1/pods", "pods", query)[0]

    def list_pods_on_node(self, node: str, label_selector: str = "") -> tuple[list[Obj], str]:
        """The node's pods (paged; only those `label_selector` selects, when given)
        and the resourceVersion to watch from."""
        return self._list_all("/api/v1/pods", "pods", _on_node(node, label_selector))

    def watch_pods_on_node(
        self,
        node: str,
        resource_version: str,
        timeout_seconds: int = 300,
        streams: Streams | None = None,
        label_selector: str = "",
    ) -> Iterator[Obj]:
        return self.watch(
            "/api/v1/pods",
            query=_on_node(node, label_selector),
            resource_version=resource_version,
            resource="pods",
            timeout_seconds=timeout_seconds,
            streams=streams,
        )

    def evict(
        self, pod: Obj, *, grace_period_seconds: int | None = None, dry_run: bool = False
    ) -> None:
        """policy/v1 Eviction with a UID precondition: a pod recreated under the
        same name is never evicted by mistake."""
        metadata = pod["metadata"]
        delete_options: Obj = {"preconditions": {"uid": metadata["uid"]}}
        if grace_period_seconds is not None and grace_period_seconds >= 0:
            delete_options["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            # In the body (what the eviction acts on) and in the query (what admission
            # sees), as both must agree.
            delete_options["dryRun"] = ["All"]
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": metadata["name"], "namespace": metadata["namespace"]},
            "deleteOptions": delete_options,
        }
        self.request(
            "POST",
            f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}/eviction",
            query={"dryRun": "All"} if dry_run else None,
            body=body,
            verb="create",
            resource="pods/eviction",
            what=f"evict pod {metadata['namespace']}/{metadata['name']}",
        )

    def delete_pod(self, pod: Obj, *, grace_period_seconds: int) -> None:
        """Delete bypassing PodDisruptionBudgets (only for the `force` timeout policy)."""
        metadata = pod["metadata"]
        self.request(
            "DELETE",
            f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}",
            body={
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "gracePeriodSeconds": grace_period_seconds,
                "preconditions": {"uid": metadata["uid"]},
            },
            verb="delete",
            resource="pods",
            what=f"delete pod {metadata['namespace']}/{metadata['name']}",
        )

    def create_event(self, namespace: str, event: Obj) -> Obj:
        """Post an events.k8s.io/v1 Event (drainer/k8s/events.py)."""
        created: Obj = self.request(
            "POST",
            f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
            body=event,
            verb="create",
            resource="events.events.k8s.io",
            what=f"create event {namespace}/{event['metadata']['name']}",
        )
        return created

    def patch_event(self, namespace: str, name: str, patch: Obj) -> Obj:
        """Update an Event's series (one more occurrence of the same event)."""
        patched: Obj = self.request(
            "PATCH",
            f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}",
            body=patch,
            content_type="application/merge-patch+json",
            verb="patch",
            resource="events.events.k8s.io",
            what=f"patch event {namespace}/{name}",
        )
        return patched

    def list_daemonsets(self) -> tuple[list[Obj], str]:
        """Every DaemonSet in the cluster, paged (a new node's agents: the launch hook)."""
        return self._list_all("/apis/apps/v1/daemonsets", "daemonsets")

    def list_budgets(self) -> tuple[list[Obj], str]:
        return self._list_all("/apis/policy/v1/poddisruptionbudgets", "poddisruptionbudgets")

    def watch_budgets(
        self, resource_version: str, timeout_seconds: int = 300, streams: Streams | None = None
    ) -> Iterator[Obj]:
        return self.watch(
            "/apis/policy/v1/poddisruptionbudgets",
            resource_version=resource_version,
            resource="poddisruptionbudgets",
            timeout_seconds=timeout_seconds,
            streams=streams,
        )

    def get_claim(self, namespace: str, name: str) -> Obj | None:
        try:
            claim: Obj = self.request(
                "GET",
                f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}",
                verb="get",
                resource="persistentvolumeclaims",
            )
        except KubeNotFound:
            return None
        return claim

    def get_volume(self, name: str) -> Obj | None:
        """A PersistentVolume (the plan's zone check: k8s-rbac/plan/ grants the read)."""
        try:
            volume: Obj = self.request(
                "GET", f"/api/v1/persistentvolumes/{name}", verb="get", resource="persistentvolumes"
            )
        except KubeNotFound:
            return None
        return volume

    def list_volume_attachments(self) -> tuple[list[Obj], str]:
        return self._list_all("/apis/storage.k8s.io/v1/volumeattachments", "volumeattachments")

    def watch_volume_attachments(
        self, resource_version: str, timeout_seconds: int = 60, streams: Streams | None = None
    ) -> Iterator[Obj]:
        return self.watch(
            "/apis/storage.k8s.io/v1/volumeattachments",
            resource_version=resource_version,
            resource="volumeattachments",
            timeout_seconds=timeout_seconds,
            streams=streams,
        )
