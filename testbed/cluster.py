"""One interface over the two Kubernetes backends of the tests: kubesim and the real
control plane (or any cluster named by `E2E_KUBECONFIG`).

Scenarios set up and inspect the cluster through `Cluster`, which speaks only the
Kubernetes API as the admin, so the same scenario means the same on every backend.
What only kubesim can do (faults, request records, its store) is reached through
`Cluster.kubesim`, which a scenario that needs it marks `kubesim_only`.
"""

from __future__ import annotations

import base64
import builtins
import json
import ssl
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import urllib3
import yaml

from kubesim.resources import RESOURCES, Resource, for_kind

if TYPE_CHECKING:
    from kubesim import KubeSim
    from kubesim.auth import Authenticator
    from testbed.controlplane import ControlPlane

Obj = dict[str, Any]


class ApiError(Exception):
    """An error answer of the API server: its status, Status body and headers."""

    def __init__(self, status: int, body: Obj, headers: Mapping[str, str], what: str) -> None:
        message = body.get("message") if isinstance(body, dict) else None
        super().__init__(f"{what}: HTTP {status}: {message or body}")
        self.status = status
        self.body = body
        self.headers = dict(headers)

    @property
    def reason(self) -> str:
        return str(self.body.get("reason") or "")


def unreachable(error: BaseException) -> bool:
    """The API server was not there to answer: refused, reset, or still starting
    (a restart, testbed.controlplane's ControlPlane.restart)."""
    if isinstance(error, ApiError):
        return error.status in (500, 503)
    return isinstance(error, (urllib3.exceptions.HTTPError, OSError))


class Outage:
    """The harness's own loops (a watch, the storage emulator) ride out the API server
    restarting, but not for ever: `ride_out(error)` is true while `error` is the server
    unreachable and has been for under `limit` seconds; `over()` after an answer."""

    def __init__(self, limit: float = 30.0) -> None:
        self.limit = limit
        self._since: float | None = None

    def ride_out(self, error: BaseException) -> bool:
        if not unreachable(error):
            return False
        now = time.monotonic()
        if self._since is None:
            self._since = now
        return now - self._since < self.limit

    def over(self) -> None:
        self._since = None


def resource_of(kind: str) -> Resource:
    for resource in RESOURCES:
        if resource.kind == kind:
            return resource
    raise ValueError(f"unknown kind {kind}")


def _documents(objects: str | Obj | Iterable[Obj]) -> list[Obj]:
    if isinstance(objects, str):
        return [d for d in yaml.safe_load_all(objects) if d]
    if isinstance(objects, dict):
        if objects.get("kind") == "List":
            return list(objects.get("items") or [])
        return [objects]
    documents: list[Obj] = []
    for item in objects:
        documents.extend(_documents(item))
    return documents


NAMESPACE_WAIT = 60.0
"""How long apply waits, beyond its own timeout, for a namespace of the same name to
finish terminating (the real namespace controller takes seconds)."""


class ApiClient:
    """A small Kubernetes client as one bearer-token identity, for tests and tools."""

    def __init__(self, url: str, ca_pem: bytes, token: str, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.ca_pem = ca_pem
        self.token = token
        context = ssl.create_default_context(cadata=ca_pem.decode())
        self._pool = urllib3.PoolManager(
            ssl_context=context, maxsize=8, timeout=urllib3.Timeout(connect=5, read=timeout)
        )

    # -- raw --------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, dict[str, str], Any]:
        """(status, headers, decoded JSON body or None); never raises on a status."""
        params = {k: v for k, v in (query or {}).items() if v is not None}
        target = self.url + path + (f"?{urlencode(params)}" if params else "")
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        answer = self._pool.request(method, target, body=data, headers=headers, retries=False)
        try:
            decoded = json.loads(answer.data) if answer.data else None
        except ValueError:
            decoded = {"message": answer.data[:500].decode(errors="replace")}
        return answer.status, dict(answer.headers), decoded

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        status, headers, body = self.request(method, path, **kwargs)
        if status >= 400:
            raise ApiError(
                status, body if isinstance(body, dict) else {}, headers, f"{method} {path}"
            )
        return body

    # -- paths --------------------------------------------------------------------

    @staticmethod
    def path(resource: Resource, namespace: str = "", name: str = "", sub: str = "") -> str:
        base = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
        if resource.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{resource.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base

    # -- objects ------------------------------------------------------------------

    def apply(
        self, objects: str | Obj | Iterable[Obj], *, replace: bool = False, timeout: float = 20.0
    ) -> list[Obj]:
        """Create each object, in order; with `replace`, one that exists is replaced.
        A pod created right after its namespace may meet "service account not found"
        until the controller manager makes the default ServiceAccount: that one
        refusal is retried. A namespace of the same name that a previous test's
        clean-up is still deleting is waited for (clean_up does not wait for it)."""
        created = []
        for document in _documents(objects):
            resource = for_kind(str(document.get("apiVersion")), str(document.get("kind")))
            if resource is None:
                raise ValueError(
                    f"unknown kind {document.get('apiVersion')} {document.get('kind')}"
                )
            namespace = (document.get("metadata") or {}).get("namespace") or "default"
            deadline = time.monotonic() + timeout
            while True:
                try:
                    created.append(self.call("POST", self.path(resource, namespace), body=document))
                    break
                except ApiError as e:
                    if e.status == 409 and e.reason == "AlreadyExists" and replace:
                        created.append(self._replace(resource, namespace, document))
                        break
                    if e.status == 409 and self._terminating(resource, document):
                        if time.monotonic() > deadline + NAMESPACE_WAIT:
                            raise
                        time.sleep(0.2)
                        continue
                    waiting = e.status == 403 and "serviceaccount" in str(e).replace(" ", "")
                    if not waiting or time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        return created

    def _terminating(self, resource: Resource, document: Obj) -> bool:
        """A namespace of this name exists and is being deleted."""
        if resource.kind != "Namespace":
            return False
        try:
            current = self.call("GET", self.path(resource, "", document["metadata"]["name"]))
        except ApiError:
            return False
        return bool(current["metadata"].get("deletionTimestamp"))

    def _replace(self, resource: Resource, namespace: str, document: Obj) -> Obj:
        name = document["metadata"]["name"]
        current = self.call("GET", self.path(resource, namespace, name))
        updated = {**document, "metadata": {**document["metadata"]}}
        updated["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        result: Obj = self.call("PUT", self.path(resource, namespace, name), body=updated)
        return result

    def get(self, kind: str, name: str, namespace: str = "") -> Obj:
        resource = resource_of(kind)
        result: Obj = self.call("GET", self.path(resource, namespace or "default", name))
        return result

    def find(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        try:
            return self.get(kind, name, namespace)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def list(self, kind: str, namespace: str = "", **query: Any) -> list[Obj]:
        return self.list_with_version(kind, namespace, **query)[0]

    def list_with_version(
        self, kind: str, namespace: str = "", **query: Any
    ) -> tuple[builtins.list[Obj], str]:
        """Every item (paged) and the resourceVersion to watch from."""
        resource = resource_of(kind)
        items: builtins.list[Obj] = []
        token = None
        version = ""
        while True:
            page = self.call(
                "GET",
                self.path(resource, namespace),
                query={**query, "limit": 500, "continue": token},
            )
            items.extend(page.get("items") or [])
            version = version or str((page.get("metadata") or {}).get("resourceVersion") or "")
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items, version

    def patch(self, kind: str, name: str, patch: Obj, namespace: str = "", *, sub: str = "") -> Obj:
        resource = resource_of(kind)
        result: Obj = self.call(
            "PATCH",
            self.path(resource, namespace or "default", name, sub),
            body=patch,
            content_type="application/merge-patch+json",
        )
        return result

    def delete(self, kind: str, name: str, namespace: str = "", **options: Any) -> None:
        resource = resource_of(kind)
        try:
            self.call(
                "DELETE", self.path(resource, namespace or "default", name), body=options or None
            )
        except ApiError as e:
            if e.status != 404:
                raise

    def watch(
        self, kind: str, namespace: str = "", resource_version: str = "", timeout: int = 60
    ) -> Iterator[Obj]:
        """The events of one watch request, until the server ends it."""
        path = self.path(resource_of(kind), namespace)
        yield from self.watch_path(path, resource_version, timeout)

    def watch_path(
        self,
        path: str,
        resource_version: str = "",
        timeout: int = 60,
        *,
        keep: Callable[[urllib3.BaseHTTPResponse], None] | None = None,
    ) -> Iterator[Obj]:
        """The events of one watch request on a collection's path, until the server
        ends it; `keep` receives the open response, which another thread may
        `shutdown()` to end the watch at once."""
        query = {
            "watch": "true",
            "resourceVersion": resource_version or None,
            "timeoutSeconds": str(timeout),
            "allowWatchBookmarks": "true",
        }
        target = self.url + path + "?" + urlencode({k: v for k, v in query.items() if v})
        answer = self._pool.request(
            "GET",
            target,
            headers={"Authorization": f"Bearer {self.token}"},
            preload_content=False,
            timeout=urllib3.Timeout(connect=5, read=timeout + 10),
            retries=False,
        )
        if keep is not None:
            keep(answer)
        try:
            if answer.status >= 400:
                body = json.loads(answer.read() or b"{}")
                raise ApiError(answer.status, body, dict(answer.headers), f"watch {path}")
            buffer = b""
            for chunk in answer.stream(65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            answer.release_conn()


def admin_client(kubeconfig: Path, user: str = "admin", timeout: float = 10.0) -> ApiClient:
    """A client as `user` of a kubeconfig with token users (kubesim's, the control
    plane's): the first cluster's server and CA."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    users = {u["name"]: u["user"] for u in config["users"]}
    ca_pem = base64.b64decode(cluster["certificate-authority-data"])
    return ApiClient(str(cluster["server"]), ca_pem, str(users[user]["token"]), timeout=timeout)


class Cluster:
    """A running backend and an admin client for it.

    `backend` is "kubesim", "real" (the control plane built from Go modules) or
    "external" (E2E_KUBECONFIG)."""

    def __init__(
        self,
        backend: str,
        *,
        url: str,
        ca_pem: bytes,
        admin_token: str,
        drainer_token: str,
        cluster_name: str,
        kubeconfig: Path,
        authenticator: Authenticator | None,
        speed: float,
        sim: KubeSim | None = None,
        plane: ControlPlane | None = None,
    ) -> None:
        self.backend = backend
        self.url = url
        self.ca_pem = ca_pem
        self.admin_token = admin_token
        self.drainer_token = drainer_token
        self.cluster_name = cluster_name
        self.kubeconfig = kubeconfig
        self.authenticator = authenticator
        self.speed = speed
        self._sim = sim
        self.plane = plane
        self.client = ApiClient(url, ca_pem, admin_token)
        # What this test made, to remove it from a shared cluster afterwards.
        self.created: list[tuple[Resource, str, str]] = []
        self._identities = list(authenticator.identities) if authenticator else []
        self._max_token_age = authenticator.max_token_age if authenticator else 0.0

    @classmethod
    def _of_server(cls, backend: str, server: KubeSim | ControlPlane, **which: Any) -> Cluster:
        """kubesim and the control plane offer the same connection facts."""
        return cls(
            backend,
            url=server.url,
            ca_pem=server.ca_pem,
            admin_token=server.admin_token,
            drainer_token=server.drainer_token,
            cluster_name=server.cluster_name,
            kubeconfig=server.kubeconfig,
            authenticator=server.authenticator,
            speed=server.speed,
            **which,
        )

    @classmethod
    def of_kubesim(cls, sim: KubeSim) -> Cluster:
        return cls._of_server("kubesim", sim, sim=sim)

    @classmethod
    def of_control_plane(cls, plane: ControlPlane) -> Cluster:
        return cls._of_server("real", plane, plane=plane)

    @classmethod
    def of_kubeconfig(cls, path: Path, cluster_name: str) -> Cluster:
        """Any cluster, from a kubeconfig with token users in contexts `admin` and
        `drainer` (EKS tokens cannot be verified there: no authenticator)."""
        config = yaml.safe_load(path.read_text())
        contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
        users = {u["name"]: u.get("user") or {} for u in config.get("users") or []}
        clusters = {c["name"]: c["cluster"] for c in config.get("clusters") or []}
        missing = {"admin", "drainer"} - contexts.keys()
        if missing:
            raise ValueError(f"{path}: E2E_KUBECONFIG needs the contexts admin and drainer")
        admin = contexts["admin"]
        server = clusters[admin["cluster"]]
        ca = base64.b64decode(server.get("certificate-authority-data") or "")
        return cls(
            "external",
            url=server["server"],
            ca_pem=ca,
            admin_token=str(users[admin["user"]].get("token") or ""),
            drainer_token=str(users[contexts["drainer"]["user"]].get("token") or ""),
            cluster_name=cluster_name,
            kubeconfig=path,
            authenticator=None,
            speed=1.0,
        )

    @property
    def kubesim(self) -> KubeSim:
        """The emulator itself, for what only kubesim can do (faults, records)."""
        if self._sim is None:
            raise RuntimeError(
                f"this scenario needs kubesim, but runs on the {self.backend} backend: "
                "mark it kubesim_only with its reason"
            )
        return self._sim

    @property
    def ca_data(self) -> str:
        return base64.b64encode(self.ca_pem).decode()

    def check(self) -> None:
        """Raise if a component of the backend died."""
        if self.plane is not None:
            self.plane.check()

    def settle(self, timeout: float = 5.0) -> None:
        """Let kubesim's controllers catch up (the real ones run on their own)."""
        if self._sim is not None:
            self._sim.settle(timeout)

    # -- the admin's view, through the API ------------------------------------

    def apply(self, objects: str | Obj | Iterable[Obj], *, replace: bool = False) -> list[Obj]:
        created = self.client.apply(objects, replace=replace)
        for obj in created:
            resource = for_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
            if resource is not None:
                metadata = obj["metadata"]
                self.created.append((resource, metadata.get("namespace", ""), metadata["name"]))
        return created

    def clean_up(self, timeout: float = 60.0) -> None:
        """Remove what this test made from a shared cluster, so the next test starts
        clean: its objects (owners first, their pods with them), every pod left on its
        nodes (finalizers dropped, no grace), its nodes and namespaces; wait until
        they are gone. The EKS identities and token age go back as they were."""
        if self.authenticator is not None:
            self.authenticator.identities[:] = self._identities
            self.authenticator.max_token_age = self._max_token_age
        client = self.client
        made = list(reversed(self.created))
        self.created.clear()
        nodes = [name for resource, _, name in made if resource.kind == "Node"]
        namespaces = [name for resource, _, name in made if resource.kind == "Namespace"]
        for resource, namespace, name in made:
            if resource.kind in ("Node", "Namespace"):
                continue
            try:
                client.call(
                    "DELETE",
                    client.path(resource, namespace, name),
                    body={"propagationPolicy": "Background"},
                )
            except ApiError as e:
                if e.status != 404:
                    raise
        deadline = time.monotonic() + timeout
        while True:
            pods = [
                p
                for node in nodes
                for p in client.list("Pod", fieldSelector=f"spec.nodeName={node}")
            ]
            owners: list[Obj] = []
            if self.backend == "real":
                # The harness's cluster holds only test objects: wait until the garbage
                # collector has removed every owner too, or one may make a pod later.
                pods = client.list("Pod")
                for kind in ("ReplicaSet", "StatefulSet", "DaemonSet", "Deployment"):
                    owners.extend(client.list(kind))
            if not pods and not owners:
                break
            if time.monotonic() > deadline:
                names = [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods]
                raise TimeoutError(f"pods left after the test's clean-up: {names[:10]}")
            for pod in pods:
                self.force_delete(pod)
            time.sleep(0.2)
        for node in nodes:
            client.delete("Node", node)
        # Not waited for: a test that makes a namespace of the same name waits in apply.
        for namespace in namespaces:
            client.delete("Namespace", namespace)

    def force_delete(self, pod: Obj) -> None:
        """Gone at once, as pod garbage collection removes a pod: its finalizers
        dropped, deleted with no grace; already gone is fine."""
        metadata = pod["metadata"]
        namespace, name = metadata["namespace"], metadata["name"]
        try:
            if metadata.get("finalizers"):
                self.client.patch("Pod", name, {"metadata": {"finalizers": None}}, namespace)
            self.client.call(
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods/{name}",
                body={"gracePeriodSeconds": 0},
            )
        except ApiError as e:
            if e.status != 404:
                raise

    def get(self, kind: str, name: str, namespace: str = "") -> Obj:
        return self.client.get(kind, name, namespace)

    def find(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        return self.client.find(kind, name, namespace)

    def list(self, kind: str, namespace: str = "") -> list[Obj]:
        return self.client.list(kind, namespace)

    def patch(self, kind: str, name: str, patch: Obj, namespace: str = "") -> Obj:
        return self.client.patch(kind, name, patch, namespace)

    def delete(self, kind: str, name: str, namespace: str = "", **options: Any) -> None:
        self.client.delete(kind, name, namespace, **options)
