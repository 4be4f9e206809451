"""The demo's own view of the cluster, as kubesim's admin.

Deliberately independent of the drainer's Kubernetes code (drainer.k8s): the demo
checks what the drainer did, so it must not see the cluster through the drainer's
eyes. It speaks through the test bed's client (testbed.cluster.ApiClient), as the
end-to-end scenarios do; `Follower` keeps a collection in step with the server.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import urllib3

from testbed.cluster import ApiClient, ApiError

Obj = dict[str, Any]


class Follower:
    """Keeps one collection in step with the server: a list, then watches.

    Delivers `on_sync(items)` after every (re)list and `on_event(type, object)` for
    each change, in the server's order. Reconnects after a broken stream and lists
    again after 410 Gone. Runs in a daemon thread until `stop()`.
    """

    def __init__(
        self,
        kube: ApiClient,
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
        self._response: urllib3.BaseHTTPResponse | None = None
        self.synced = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch {path}", daemon=True)

    def start(self) -> Follower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(OSError):
                response.shutdown()
        self._thread.join(2.0)

    def _keep(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response

    def _run(self) -> None:
        version = ""
        failures = 0
        while not self._stop.is_set():
            try:
                if not version:
                    listed = self.kube.call("GET", self.path)
                    version = str(listed["metadata"]["resourceVersion"])
                    self._on_sync(list(listed.get("items") or []))
                    self.synced.set()
                version = self._watch(version)
                failures = 0
            except (OSError, urllib3.exceptions.HTTPError, ApiError, ValueError) as e:
                if self._stop.is_set():
                    return
                failures += 1
                if self._on_error is not None and failures == 3:
                    self._on_error(f"watching {self.path} keeps failing: {e}")
                self._stop.wait(min(2.0, 0.1 * 2**failures))
                if isinstance(e, ApiError) and e.status == 410:
                    version = ""

    def _watch(self, version: str) -> str:
        """One watch from `version`: the version to go on from ("" to list again)."""
        for event in self.kube.watch_path(self.path, version, 60, keep=self._keep):
            if self._stop.is_set():
                break
            kind = str(event.get("type"))
            obj = event.get("object") or {}
            if kind == "ERROR":
                return ""  # 410 Gone (history compacted): list again
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind != "BOOKMARK":
                self._on_event(kind, obj)
        return version


def admin(kube: ApiClient, method: str, name: str, body: Obj | None = None) -> Any:
    """kubesim's admin API (/kubesim/<name>), which only the admin token may call;
    a GET's arguments go in its query (a GET's body is never read, and would be
    taken for the next request on the kept-alive connection)."""
    if method == "GET":
        return kube.call(method, f"/kubesim/{name}", query=body)
    return kube.call(method, f"/kubesim/{name}", body=body if body is not None else {})


def apply(kube: ApiClient, objects: list[Obj]) -> None:
    """Objects in kubesim's store as they are (no admission), through its admin API."""
    admin(kube, "POST", "apply", {"objects": objects})


def merge_patch(kube: ApiClient, path: str, patch: Obj) -> Any:
    return kube.call("PATCH", path, body=patch, content_type="application/merge-patch+json")
