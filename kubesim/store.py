"""The object store: versioned objects, a bounded change history, and watchers.

One lock guards everything, like etcd's single revision counter: every write gets
the next resourceVersion, and watchers replay the history after the version they
ask for. A version older than the retained history answers 410 Gone, as the real
server does after compaction.
"""

from __future__ import annotations

import copy
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubesim import errors
from kubesim.resources import Resource

Obj = dict[str, Any]
ChangeHook = Callable[["Change"], None]


def now_iso(epoch: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if epoch is None else epoch))


@dataclass(frozen=True)
class Change:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    resource: Resource
    obj: Obj
    old: Obj | None


class Store:
    def __init__(self, history: int = 100_000) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {}
        self._rv = 1
        self._history: deque[Change] = deque(maxlen=history)
        self._compacted_rv = 1  # history holds every change with rv > this
        self._hooks: list[ChangeHook] = []

    # -- versions and history -------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def add_hook(self, hook: ChangeHook) -> None:
        self._hooks.append(hook)

    def compact(self) -> None:
        """Forget the whole history: watches from any older version get 410 Gone."""
        with self.lock:
            self._history.clear()
            self._compacted_rv = self._rv

    def changes_since(self, rv: int) -> list[Change]:
        """Changes after `rv`; raises 410 when the history no longer reaches back that far."""
        with self.lock:
            oldest = self._history[0].rv - 1 if self._history else self._rv
            oldest = max(oldest, self._compacted_rv)
            if rv < oldest:
                raise errors.ApiError(
                    410,
                    f"too old resource version: {rv} ({oldest + 1})",
                    reason="Expired",
                )
            if not self._history or self._history[-1].rv <= rv:
                return []
            # History is ordered by rv: walk back from the end.
            result = []
            for change in reversed(self._history):
                if change.rv <= rv:
                    break
                result.append(change)
            result.reverse()
            return result

    def snapshot(self, resource: Resource, namespace: str, rv: int) -> list[Obj]:
        """The objects of `resource` as they were at `rv` (stored objects, no copies,
        sorted); 410 when the history no longer reaches back that far."""
        with self.lock:
            changes = self.changes_since(rv)
            state = {
                key: obj
                for key, obj in self._bucket(resource).items()
                if not namespace or key[0] == namespace
            }
            for change in reversed(changes):
                if change.resource is not resource:
                    continue
                metadata = change.obj["metadata"]
                key = (
                    metadata.get("namespace", "") if resource.namespaced else "",
                    metadata["name"],
                )
                if namespace and key[0] != namespace:
                    continue
                if change.type == "ADDED":
                    state.pop(key, None)
                elif change.old is not None:
                    state[key] = change.old
            return [state[key] for key in sorted(state)]

    def _record(self, kind: str, resource: Resource, obj: Obj, old: Obj | None) -> None:
        change = Change(self._rv, kind, resource, obj, old)
        self._history.append(change)
        if self._history.maxlen and len(self._history) == self._history.maxlen:
            self._compacted_rv = self._history[0].rv - 1
        for hook in self._hooks:
            hook(change)
        self.changed.notify_all()

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    # -- reads ----------------------------------------------------------------

    def _bucket(self, resource: Resource) -> dict[tuple[str, str], Obj]:
        return self._objects.setdefault(resource.key, {})

    def peek(self, resource: Resource, namespace: str, name: str) -> Obj | None:
        """The stored object itself (no copy): callers must hold the lock and not mutate."""
        return self._bucket(resource).get((namespace, name))

    def get(self, resource: Resource, namespace: str, name: str) -> Obj:
        with self.lock:
            obj = self.peek(resource, namespace, name)
            if obj is None:
                raise errors.not_found(resource.plural, name, resource.group)
            return copy.deepcopy(obj)

    def iter(self, resource: Resource, namespace: str = "") -> Iterator[Obj]:
        """Stored objects (no copies), sorted by namespace and name; hold the lock."""
        bucket = self._bucket(resource)
        for key in sorted(bucket):
            if namespace and key[0] != namespace:
                continue
            yield bucket[key]

    def count(self, resource: Resource) -> int:
        return len(self._bucket(resource))

    # -- writes ---------------------------------------------------------------

    def create(self, resource: Resource, obj: Obj) -> Obj:
        with self.lock:
            metadata = obj.setdefault("metadata", {})
            namespace = metadata.get("namespace", "") if resource.namespaced else ""
            if not resource.namespaced:
                metadata.pop("namespace", None)
            name = metadata.get("name", "")
            bucket = self._bucket(resource)
            if (namespace, name) in bucket:
                raise errors.already_exists(resource.plural, name, resource.group)
            metadata["uid"] = metadata.get("uid") or str(uuid.uuid4())
            metadata["creationTimestamp"] = now_iso()
            metadata["resourceVersion"] = self._next_rv()
            obj["apiVersion"] = resource.api_version
            obj["kind"] = resource.kind
            stored = copy.deepcopy(obj)
            bucket[(namespace, name)] = stored
            self._record("ADDED", resource, stored, None)
            return copy.deepcopy(stored)

    def check_version(self, resource: Resource, obj: Obj, expect_rv: str | None) -> None:
        """409 when `expect_rv` is given and is not the stored object's version."""
        metadata = obj["metadata"]
        namespace = metadata.get("namespace", "") if resource.namespaced else ""
        old = self._bucket(resource).get((namespace, metadata["name"]))
        if old is None:
            raise errors.not_found(resource.plural, metadata["name"], resource.group)
        if expect_rv and expect_rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(
                resource.plural,
                metadata["name"],
                "the object has been modified; please apply your changes to the latest "
                "version and try again",
                resource.group,
            )

    def update(self, resource: Resource, obj: Obj, *, expect_rv: str | None = None) -> Obj:
        """Replace the stored object. `expect_rv` ("" or None = unconditional) guards races."""
        with self.lock:
            metadata = obj["metadata"]
            namespace = metadata.get("namespace", "") if resource.namespaced else ""
            name = metadata["name"]
            self.check_version(resource, obj, expect_rv)
            bucket = self._bucket(resource)
            old = bucket[(namespace, name)]
            # Immutable metadata stays as stored.
            for key in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ):
                if key in old["metadata"]:
                    metadata[key] = old["metadata"][key]
                else:
                    metadata.pop(key, None)
            if resource.namespaced:
                metadata["namespace"] = namespace
            obj["apiVersion"] = resource.api_version
            obj["kind"] = resource.kind
            if obj == old:
                return copy.deepcopy(old)  # a no-op write keeps its version, as in the real server
            metadata["resourceVersion"] = self._next_rv()
            stored = copy.deepcopy(obj)
            bucket[(namespace, name)] = stored
            self._record("MODIFIED", resource, stored, old)
            return copy.deepcopy(stored)

    def set_deletion(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        *,
        timestamp: str,
        grace: int,
        mutate: Callable[[Obj], None] | None = None,
    ) -> Obj:
        """Mark an object as terminating (the only way to set deletionTimestamp);
        `mutate` changes it further in the same write."""
        with self.lock:
            bucket = self._bucket(resource)
            old = bucket[(namespace, name)]
            new = copy.deepcopy(old)
            if mutate is not None:
                mutate(new)
            new["metadata"]["deletionTimestamp"] = timestamp
            new["metadata"]["deletionGracePeriodSeconds"] = grace
            new["metadata"]["resourceVersion"] = self._next_rv()
            bucket[(namespace, name)] = new
            self._record("MODIFIED", resource, new, old)
            return copy.deepcopy(new)

    def remove(self, resource: Resource, namespace: str, name: str) -> Obj:
        with self.lock:
            bucket = self._bucket(resource)
            old = bucket.pop((namespace, name), None)
            if old is None:
                raise errors.not_found(resource.plural, name, resource.group)
            gone = copy.deepcopy(old)
            gone["metadata"]["resourceVersion"] = self._next_rv()
            self._record("DELETED", resource, gone, old)
            return copy.deepcopy(gone)

    def wait(self, timeout: float) -> None:
        """Block until a change or the timeout; hold the lock when calling."""
        self.changed.wait(timeout)
