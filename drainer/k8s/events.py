"""Kubernetes Events (events.k8s.io/v1): the drain told where `kubectl describe node`
and `kubectl get events` show it, without AWS access.

The Events' poster (`EventPoster`: the glossary keeps "record" for the node's
progress record) posts from a thread of its own, so a drain
never waits for an Event: `post` queues, the thread sends, `close`
gives the queue a moment to empty and lets the thread send the rest (and close the
client) after the drain's end.
An Event that repeats (the same object, reason, action and note) is one Event whose
series counts it, as client-go's recorder aggregates: its name is a hash of what
makes it the same (`event_name`), so the invocation a drain is handed over to, or
one posting at the same moment, finds it (409 AlreadyExists), reads it and counts
one more on the version read (a merge patch with its resourceVersion: the verbs are
the role's `create` and `patch`, no `get`). An Event gone with the server's TTL is
posted anew. A drain
posts at most EVENTS_PER_DRAIN pod Events (the rest are counted in `folded`, for
the node's end Event to say); an Event about the node (its start, cordon and end) is
never dropped. An Event the API refuses is a log line,
never a failed drain; after a 403 the poster stops trying (the role lacks
`create` and `patch` on events.events.k8s.io: k8s-rbac/ grants them).
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from drainer import logs
from drainer.errors import KubeConflict, KubeError, KubeForbidden, KubeNotFound
from drainer.k8s.kube import Kube

log = logging.getLogger(__name__)

CONTROLLER = "eks-node-drainer"
"""The Events' reportingController."""
EVENTS_PER_DRAIN = 200
"""The most pod Events one drain posts (a thousand-pod node tells the rest in the
log); the node's own Events are not counted."""
FLUSH_SECONDS = 0.5
"""How long `close` waits for queued Events before the drain's ending goes on (the
rest are sent after it, by the poster's thread)."""
NODE_EVENTS_NAMESPACE = "default"
"""Where a node's Events go (a node has no namespace; the kubelet's go here too)."""
NOTE_MAX = 1024
SERIES_TRIES = 3
"""Writes of one Event tried when another invocation's write comes first (409)."""
NAME_MAX = 253
_DIGEST_CHARS = 16
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass(frozen=True)
class Regarding:
    """The object an Event is about."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""

    def reference(self) -> dict[str, str]:
        ref = {"apiVersion": "v1", "kind": self.kind, "name": self.name}
        if self.namespace:
            ref["namespace"] = self.namespace
        if self.uid:
            ref["uid"] = self.uid
        return ref

    @property
    def event_namespace(self) -> str:
        return self.namespace or NODE_EVENTS_NAMESPACE


@dataclass(frozen=True)
class _Pending:
    regarding: Regarding
    reason: str
    action: str
    note: str
    warning: bool
    at: float


@dataclass(frozen=True)
class _Seen:
    """What this poster knows of a posted Event: its count and resourceVersion."""

    count: int
    version: str


_UNREAD = _Seen(0, "")
"""The Event exists (409 AlreadyExists) but is not read yet."""


def event_name(regarding: Regarding, reason: str, action: str, note: str, kind: str) -> str:
    """The same Event's name in every invocation: the object's name (cut to leave room)
    and a hash of the object (its uid too), reason, action, note, type and controller.
    A valid DNS subdomain of NAME_MAX characters at most."""
    same = (regarding.kind, regarding.namespace, regarding.name, regarding.uid)
    key = "\0".join((*same, reason, action, note, kind, CONTROLLER))
    digest = hashlib.sha256(key.encode()).hexdigest()[:_DIGEST_CHARS]
    prefix = regarding.name[: NAME_MAX - _DIGEST_CHARS - 1].rstrip(".-")
    if not _SUBDOMAIN.fullmatch(prefix):
        return digest
    return f"{prefix}.{digest}"


def _seen(event: Any) -> _Seen:
    """The count (1 without a series) and version of an Event the API answered with."""
    count = ((event.get("series") if isinstance(event, dict) else None) or {}).get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        count = 1
    return _Seen(count, str(((event or {}).get("metadata") or {}).get("resourceVersion") or ""))


def _one_more(seen: _Seen, at: float) -> dict[str, Any]:
    """The merge patch counting one more occurrence, on the version read (409 if not)."""
    patch: dict[str, Any] = {
        "series": {"count": seen.count + 1, "lastObservedTime": micro_time(at)}
    }
    if seen.version:
        patch["metadata"] = {"resourceVersion": seen.version}
    return patch


def _cut(note: str) -> str:
    """A note within the API's NOTE_MAX bytes of UTF-8, cut at a character; what UTF-8
    cannot hold (a lone surrogate, from a name or a message echoed in it) as "?"."""
    encoded = note.encode(errors="replace")
    if len(encoded) <= NOTE_MAX:
        return encoded.decode()
    return encoded[:NOTE_MAX].decode(errors="ignore")


def reporting_instance() -> str:
    """Who posts the Events: the Lambda function, or this host (the CLI)."""
    name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or socket.gethostname() or "local"
    return f"{CONTROLLER}-{name}"[:128]


def micro_time(seconds: float) -> str:
    """A MicroTime as the API writes it: RFC 3339 with microseconds, UTC."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EventPoster:
    def __init__(
        self,
        kube: Kube,
        *,
        instance: str = "",
        clock: Callable[[], float] = time.time,
        limit: int = EVENTS_PER_DRAIN,
    ) -> None:
        self._kube = kube
        self._instance = instance or reporting_instance()
        self._clock = clock
        self.limit = limit
        self._queue: queue.Queue[_Pending | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._series: dict[tuple[str, str], _Seen] = {}
        self._taken = 0
        self._closed = False
        self.folded = 0
        """Pod Events not posted because the drain reached its bound."""
        self.stopped = ""
        """Why the poster stopped posting (a 403), empty while it posts."""
        self.sent = 0
        self.failed = 0
        self._then: Callable[[], None] | None = None
        self._keys = logs.bound()
        """The invocation's log keys: the thread may log after it returned, when the
        container's next invocation has bound its own."""

    def post(
        self, regarding: Regarding, reason: str, action: str, note: str, *, warning: bool = False
    ) -> None:
        """Queue one Event; never blocks, never raises. A pod Event past the drain's
        bound is folded (counted, not posted); a node Event always goes."""
        with self._lock:
            if self.stopped or self._closed:
                return
            if regarding.kind != "Node":
                if self._taken >= self.limit:
                    self.folded += 1
                    return
                self._taken += 1
                if self._taken == self.limit:
                    log.info(
                        "%d pod Events recorded for this drain: the rest are in the log only",
                        self.limit,
                    )
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="k8s-events", daemon=True)
                self._thread.start()
        pending = _Pending(regarding, reason, action, _cut(note), warning, self._clock())
        self._queue.put(pending)

    def close(self, timeout: float = FLUSH_SECONDS, then: Callable[[], None] | None = None) -> None:
        """Post no more; give the queue `timeout` to empty, then call `then` (closing
        the client). Events still queued then are sent after, by the thread, which
        calls `then` itself once it is done: the drain's ending never waits longer."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._closed = True
            if thread is not None:
                self._queue.put(None)
                self._then = then
        if thread is None:
            if then is not None:
                then()
            return
        thread.join(timeout)

    def _run(self) -> None:
        try:
            self._send_all()
        finally:
            with self._lock:
                then, self._then = self._then, None
            if then is not None:
                then()

    def _send_all(self) -> None:
        while True:
            pending = self._queue.get()
            if pending is None:
                return
            if self.stopped:
                continue
            try:
                self._send(pending)
                self.sent += 1
            except KubeForbidden as e:
                self.stopped = str(e)
                log.warning(
                    "Kubernetes Events are not recorded: %s (k8s-rbac/ grants create and "
                    "patch on events.events.k8s.io); the drain goes on",
                    e,
                    extra=self._keys,
                )
            except (KubeError, OSError) as e:
                self.failed += 1
                log.info("a Kubernetes Event was not recorded: %s", e, extra=self._keys)

    def _send(self, pending: _Pending) -> None:
        """Create the Event, or count one more in its series: known here, or posted
        by an invocation before (409 AlreadyExists: read it). A 409 Conflict (another
        write came first) reads it again; a 404 (gone with the TTL) posts it anew."""
        type_ = "Warning" if pending.warning else "Normal"
        name = event_name(pending.regarding, pending.reason, pending.action, pending.note, type_)
        namespace = pending.regarding.event_namespace
        known = self._series.get((namespace, name))
        for tries_left in range(SERIES_TRIES - 1, -1, -1):
            try:
                self._series[(namespace, name)] = self._write(namespace, name, pending, known)
                return
            except KubeNotFound:
                if tries_left == 0:
                    raise
                known = None
            except KubeConflict:
                if tries_left == 0:
                    raise
                known = _UNREAD

    def _write(self, namespace: str, name: str, pending: _Pending, known: _Seen | None) -> _Seen:
        if known is None:
            return _seen(self._kube.create_event(namespace, self._event(namespace, name, pending)))
        if known is _UNREAD:
            # An empty merge patch changes nothing and answers the Event: a read with
            # the role's `patch`, which has no `get`.
            known = _seen(self._kube.patch_event(namespace, name, {}))
        return _seen(self._kube.patch_event(namespace, name, _one_more(known, pending.at)))

    def _event(self, namespace: str, name: str, pending: _Pending) -> dict[str, Any]:
        return {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(pending.at),
            "reportingController": CONTROLLER,
            "reportingInstance": self._instance,
            "action": pending.action,
            "reason": pending.reason,
            "regarding": pending.regarding.reference(),
            "note": pending.note,
            "type": "Warning" if pending.warning else "Normal",
        }
