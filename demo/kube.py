"""The demo's own view of the cluster: a small HTTPS client, as kubesim's admin.

Deliberately independent of the drainer's Kubernetes code (drainer.kube): the demo
checks what the drainer did, so it must not see the cluster through the drainer's
eyes. Plain http.client with the kubeconfig's CA and the admin token; list, watch
and the kubesim admin API are all it needs.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]


class KubeError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class Kube:
    """Requests to one API server as one user of a kubeconfig."""

    def __init__(self, kubeconfig: Path, user: str = "admin", timeout: float = 10.0) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        users = {u["name"]: u["user"] for u in config["users"]}
        self.server = str(cluster["server"])
        parsed = urllib.parse.urlsplit(self.server)
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or 443
        self.token = str(users[user]["token"])
        self.ca_pem = base64.b64decode(cluster["certificate-authority-data"]).decode()
        self.context = ssl.create_default_context(cadata=self.ca_pem)
        self.timeout = timeout

    def _connection(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            self.host, self.port, context=self.context, timeout=timeout
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
    ) -> Any:
        url = path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        connection = self._connection(self.timeout)
        try:
            connection.request(method, url, body=data, headers=headers)
            response = connection.getresponse()
            payload = response.read()
        finally:
            connection.close()
        if response.status >= 400:
            try:
                message = json.loads(payload).get("message", "")
            except ValueError:
                message = payload.decode(errors="replace")[:200]
            raise KubeError(response.status, f"{method} {path}: {message}")
        return json.loads(payload) if payload else None

    def admin(self, method: str, name: str, body: Any = None) -> Any:
        """kubesim's admin API (/kubesim/<name>), which only the admin token may call."""
        return self.request(method, f"/kubesim/{name}", body if body is not None else {})

    def apply(self, objects: list[Obj]) -> None:
        self.admin("POST", "apply", {"objects": objects})

    def patch(self, path: str, patch: Obj) -> Any:
        return self.request("PATCH", path, patch, content_type="application/merge-patch+json")

    def watch_lines(
        self, path: str, resource_version: str, seconds: int, keep: Callable[[Any], None]
    ) -> Iterator[Obj]:
        """Watch events of one collection, until the server ends the stream.

        `keep` receives the live connection, so another thread can close it.
        """
        query = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(seconds),
        }
        connection = self._connection(seconds + 10.0)
        keep(connection)
        try:
            connection.request(
                "GET",
                path + "?" + urllib.parse.urlencode(query),
                headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json"},
            )
            response = connection.getresponse()
            if response.status >= 400:
                raise KubeError(response.status, response.read().decode(errors="replace")[:200])
            while True:
                line = response.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            connection.close()


class Follower:
    """Keeps one collection in step with the server: a list, then watches.

    Delivers `on_sync(items)` after every (re)list and `on_event(type, object)` for
    each change, in the server's order. Reconnects after a broken stream and lists
    again after 410 Gone. Runs in a daemon thread until `stop()`.
    """

    def __init__(
        self,
        kube: Kube,
        path: str,
        on_sync: Callable[[list[Obj]], None],
        on_event: Callable[[str, Obj], None],
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.kube = kube
        self.path = path
        self._on_sync = on_sync
        self._on_event = on_event
        self._on_error = on_error
        self._stop = threading.Event()
        self._connection: Any = None
        self.synced = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch {path}", daemon=True)

    def start(self) -> Follower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        connection = self._connection
        if connection is not None and connection.sock is not None:
            with contextlib.suppress(OSError):
                connection.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(2.0)

    def _keep(self, connection: Any) -> None:
        self._connection = connection

    def _run(self) -> None:
        version = ""
        failures = 0
        while not self._stop.is_set():
            try:
                if not version:
                    listed = self.kube.request("GET", self.path)
                    version = str(listed["metadata"]["resourceVersion"])
                    self._on_sync(list(listed.get("items") or []))
                    self.synced.set()
                for event in self.kube.watch_lines(self.path, version, 60, self._keep):
                    if self._stop.is_set():
                        return
                    kind = str(event.get("type"))
                    obj = event.get("object") or {}
                    if kind == "ERROR":
                        version = ""  # 410 Gone (history compacted): list again
                        break
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if kind != "BOOKMARK":
                        self._on_event(kind, obj)
                failures = 0
            except (OSError, http.client.HTTPException, KubeError, ValueError) as e:
                if self._stop.is_set():
                    return
                failures += 1
                if self._on_error is not None and failures == 3:
                    self._on_error(f"watching {self.path} keeps failing: {e}")
                self._stop.wait(min(2.0, 0.1 * 2**failures))
                if isinstance(e, KubeError) and e.status == 410:
                    version = ""
