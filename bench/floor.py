"""The floor: the least a client can do to empty a node, as a process of its own.

    FLOOR_SERVER=https://... FLOOR_CA=ca.pem FLOOR_AUTHORIZATION="Bearer ..." \\
        python -S bench/floor.py NODE [--connections 16] [--timeout 120]

Standard library only (run with -S: no site-packages, no drainer code): cordon, list
the node's pods once, send every eviction at once over `--connections` connections
(a 429 is sent again after a short pause, nothing else is retried), and wait on one
watch until the last pod (DaemonSet and mirror pods aside) is gone. No budget
logic, no tiers, no checks. What is left between this and our engine is what our
engine does beyond the server's own work (issue 28).

Prints one JSON line: {"evicted": n, "refused": n, "records": [[sent, answered,
method, path, status], ...], "work": {"user": s, "system": s, "switches": n},
"error": "..."}; times on this host's clock, a watch answered when its stream
opened; `work`: the CPU of the drain itself, from its first request to the node
emptied (getrusage before and after, the start-up apart). Exit 0 when the node was
emptied, 1 when not.
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import resource
import ssl
import sys
import threading
import time
import urllib.parse
from typing import Any

RETRY_PAUSE = 0.2  # seconds after a 429 (a budget's refusal, or the server's pacing)
CONNECTIONS = 16


class Api:
    def __init__(self, server: str, ca: str, authorization: str) -> None:
        url = urllib.parse.urlsplit(server)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.context = ssl.create_default_context(cafile=ca)
        self.headers = {
            "Authorization": authorization,
            "Accept": "application/json",
            "Content-Type": "application/json",
        }
        self.records: list[list[Any]] = []
        self.lock = threading.Lock()

    def connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=300)

    def call(
        self,
        conn: http.client.HTTPSConnection,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        sent = time.time()
        headers = {**self.headers, "Content-Type": content_type}
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        response = conn.getresponse()
        data = response.read()
        self._note(sent, method, path, response.status)
        return response.status, json.loads(data) if data else None

    def _note(self, sent: float, method: str, path: str, status: int) -> None:
        with self.lock:
            self.records.append([sent, time.time(), method, path, status])


def _counts(pod: dict[str, Any]) -> bool:
    metadata = pod.get("metadata") or {}
    if "kubernetes.io/config.mirror" in (metadata.get("annotations") or {}):
        return False
    return not any(o.get("kind") == "DaemonSet" for o in metadata.get("ownerReferences") or [])


def drain(api: Api, node: str, connections: int, timeout: float) -> dict[str, Any]:
    main = api.connect()
    status, _ = api.call(
        main,
        "PATCH",
        f"/api/v1/nodes/{node}",
        {"spec": {"unschedulable": True}},
        "application/strategic-merge-patch+json",
    )
    if status != 200:
        return {"error": f"cordon: HTTP {status}"}
    selector = urllib.parse.quote(f"spec.nodeName={node}")
    status, listed = api.call(main, "GET", f"/api/v1/pods?fieldSelector={selector}")
    if status != 200:
        return {"error": f"list: HTTP {status}"}
    pods = [p for p in listed["items"] if _counts(p)]
    left = {p["metadata"]["uid"] for p in pods}
    emptied = threading.Event()
    if not left:
        emptied.set()

    def watch() -> None:
        version = listed["metadata"]["resourceVersion"]
        path = (
            f"/api/v1/pods?watch=1&fieldSelector={selector}&resourceVersion={version}"
            "&allowWatchBookmarks=true"  # as client-go asks: a server that writes them
        )  # sees the stream closed when the process ends (kubesim records it then)
        conn = api.connect()
        sent = time.time()
        conn.request("GET", path, headers=api.headers)
        response = conn.getresponse()
        api._note(sent, "GET", path, response.status)
        for line in response:
            event = json.loads(line)
            pod = event.get("object") or {}
            if event.get("type") == "DELETED" and _counts(pod):
                left.discard(pod["metadata"]["uid"])
                if not left:
                    emptied.set()
                    return

    threading.Thread(target=watch, daemon=True).start()
    work: queue.Queue[dict[str, Any]] = queue.Queue()
    for pod in pods:
        work.put(pod)
    tally = {"evicted": 0, "refused": 0}
    errors: list[str] = []

    def evict() -> None:
        conn = api.connect()
        while True:
            try:
                pod = work.get_nowait()
            except queue.Empty:
                return
            name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
            body = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace},
            }
            path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"
            status, _ = api.call(conn, "POST", path, body)
            with api.lock:
                if status == 429:
                    tally["refused"] += 1
                elif status in (200, 201, 404):
                    tally["evicted"] += 1
                else:
                    errors.append(f"{namespace}/{name}: HTTP {status}")
            if status == 429:
                time.sleep(RETRY_PAUSE)
                work.put(pod)

    workers = [threading.Thread(target=evict, daemon=True) for _ in range(connections)]
    for worker in workers:
        worker.start()
    done = emptied.wait(timeout)
    return {
        **tally,
        "emptied": done,
        "error": "; ".join(errors[:5]) if errors else ("" if done else "timed out"),
    }


def work_usage(before: Any, after: Any) -> dict[str, float]:
    """The CPU (user, system) and voluntary context switches between two getrusage
    readings of this process: the drain's own, its start-up apart."""
    return {
        "user": after.ru_utime - before.ru_utime,
        "system": after.ru_stime - before.ru_stime,
        "switches": after.ru_nvcsw - before.ru_nvcsw,
    }


def main(argv: list[str]) -> int:
    node = argv[0]
    connections = (
        int(argv[argv.index("--connections") + 1]) if "--connections" in argv else CONNECTIONS
    )
    timeout = float(argv[argv.index("--timeout") + 1]) if "--timeout" in argv else 120.0
    api = Api(os.environ["FLOOR_SERVER"], os.environ["FLOOR_CA"], os.environ["FLOOR_AUTHORIZATION"])
    before = resource.getrusage(resource.RUSAGE_SELF)
    answer = drain(api, node, connections, timeout)
    answer["work"] = work_usage(before, resource.getrusage(resource.RUSAGE_SELF))
    with api.lock:
        answer["records"] = list(api.records)
    print(json.dumps(answer), flush=True)
    return 0 if answer.get("emptied") else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
