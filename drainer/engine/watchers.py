"""Live views of the API kept by one list and one watch each, instead of polling.

`PodTracker` tracks the pods of one node: the drain asks it whether a pod is gone
(NotFound or a new UID under the same name) and sees pods that land on the node
mid-drain. `NodeTracker` tracks the node itself, so an uncordon by someone else is
seen at once. `BudgetTracker` tracks the PodDisruptionBudgets, so an eviction
refused by a budget is retried the moment the budget allows a disruption again, not
on a blind timer.

A drain hands all its trackers one Condition: every change any of them sees wakes
the one loop that decides what to do next (so does an eviction's answer, unless
its worker takes the loop's turn: relay.py), but an update of a pod already on its
way out, which the loop takes in at its next turn.

A watch that breaks is re-listed and re-watched after a short backoff; a
410 Gone re-lists after a short pause. That re-list is the polling fallback: nothing
is missed, because the list is the truth and the watch resumes from its
resourceVersion. A watch that ends (or says 410) at once, with no event, is paced
by the same backoff, growing while it keeps doing so, as client-go's reflector
does: a server or proxy that ends every watch at once is not asked again in a
tight loop. A watch that ran its course is re-opened at once.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from drainer.backoff import Backoff
from drainer.engine import pods
from drainer.engine.pods import Pod, PodKey
from drainer.errors import FatalKubeError, KubeError, KubeGone, KubeTooManyRequests
from drainer.k8s.client import Streams
from drainer.k8s.kube import Kube, Obj

log = logging.getLogger(__name__)

BRIEF_WATCH = 1.0
"""A watch that ends sooner than this with no event (not even a bookmark) ended at
once: paced as a failure, not re-opened at once (client-go's reflector's rule)."""


class _Tracker:
    """List, then watch from the list's resourceVersion, until stopped."""

    name = "tracker"
    relist = Backoff(first=0.25, cap=5.0)

    def __init__(
        self,
        kube: Kube,
        *,
        rng: random.Random | None = None,
        watch_timeout: int = 240,
        cond: threading.Condition | None = None,
    ) -> None:
        self.kube = kube
        self.cond = cond or threading.Condition()
        self.error: KubeError | None = None
        self.listed = False
        """True once a list has been applied: the view is the API's, not empty."""
        self._stop = threading.Event()
        self._watching = False
        self._streams = Streams()
        self._thread: threading.Thread | None = None
        self._rng = rng or random.Random()  # noqa: S311 - jitter
        self._watch_timeout = watch_timeout
        self._opened = 0.0  # monotonic: when the last watch was opened
        self._events = 0  # the events the last watch brought

    # Subclasses: the list, the watch, and how to apply what they return.
    def _list(self) -> tuple[list[Obj], str]:
        raise NotImplementedError

    def _watch(self, resource_version: str) -> Iterator[Obj]:
        raise NotImplementedError

    def _replace(self, items: list[Obj]) -> None:
        raise NotImplementedError

    def _apply(self, kind: str, obj: Obj) -> None:
        raise NotImplementedError

    def _news(self, kind: str, obj: Obj) -> bool:
        """Whether the loop must look at this event at once (before it is applied; hold
        `cond`). Else it takes it in at its next turn, which comes within MAX_WAIT
        (drainer/engine/context.py) whatever happens."""
        return True

    def start(self, items: list[Obj] | None = None, resource_version: str = "") -> None:
        """Start tracking; pass a list already made to save one request."""
        if items is not None:
            with self.cond:
                self._replace(items)
                self.listed = True
        self._thread = threading.Thread(
            target=self._run,
            args=(resource_version if items is not None else "",),
            name=self.name,
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._streams.close_all()
        with self.cond:
            self.cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    @property
    def synced(self) -> bool:
        """Listed and watching, with no error since: changes will be seen."""
        return self._watching and self.error is None

    def _changed(self) -> None:
        self.cond.notify_all()

    def _list_and_watch(self, resource_version: str) -> str:
        """List when there is no version to watch from, then apply the watch's events
        until the server ends it or the tracker stops; the last version seen."""
        if not resource_version:
            items, resource_version = self._list()
            with self.cond:
                self._replace(items)
                self.listed = True
                self._changed()
        with self.cond:
            self._watching = True
            self.error = None  # listed and watching again: an unexpected error is behind it
        self._opened, self._events = time.monotonic(), 0
        for event in self._watch(resource_version):
            self._events += 1
            if self._stop.is_set():
                break
            obj = event.get("object") or {}
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if version:
                resource_version = str(version)
            if event.get("type") == "BOOKMARK":
                continue
            kind = str(event.get("type"))
            with self.cond:
                news = self._news(kind, obj)
                self._apply(kind, obj)
                if news:
                    self._changed()
        return resource_version

    def _brief(self) -> bool:
        """The last watch ended at once, with no event: a server or proxy that ends
        every watch so must not be asked again in a tight loop."""
        return not self._events and time.monotonic() - self._opened < BRIEF_WATCH

    def _pause(self, failures: int, what: str) -> int:
        """Wait before re-opening the watch (or re-listing) after one that ended at
        once or said 410: `failures` counts the brief ones in a row (1 after a watch
        that ran its course: a short first pause). Its new count."""
        failures = failures + 1 if self._brief() else 1
        delay = self.relist.delay(failures - 1, self._rng)
        if what:
            log.info("%s: %s in %.1f s", self.name, what, delay)
        else:
            log.debug(
                "%s: the watch ended at once, with no event; re-opening it in %.1f s",
                self.name,
                delay,
            )
        self._stop.wait(delay)  # stopped: the loop ends
        return failures

    def _run(self, resource_version: str) -> None:
        failures = 0
        while not self._stop.is_set():
            self._opened, self._events = time.monotonic(), 0
            try:
                resource_version = self._list_and_watch(resource_version)
                # The server ended the watch normally: resume from where it was, at
                # once unless it ended at once.
                failures = self._pause(failures, "") if self._brief() else 0
            except KubeGone:
                self._watching = False
                resource_version = ""
                failures = self._pause(failures, "watch history expired; re-listing")
            except FatalKubeError as e:
                with self.cond:
                    self.error = e
                    self._changed()
                return
            except KubeError as e:
                if self._stop.is_set():
                    return
                failures += 1
                self._watching = False
                retry_after = e.retry_after if isinstance(e, KubeTooManyRequests) else None
                delay = self.relist.delay(failures, self._rng, retry_after)
                level = logging.DEBUG if e.said else logging.WARNING  # the client said it
                log.log(level, "%s: %s; re-listing in %.1f s", self.name, e, delay)
                resource_version = ""
                if self._stop.wait(delay):
                    return
            except Exception as e:  # a tracker must not die silently: report and re-list
                if self._stop.is_set():
                    return
                log.exception("%s: unexpected error; re-listing", self.name)
                self._watching = False
                with self.cond:
                    self.error = KubeError(f"{self.name}: unexpected error: {e}")
                resource_version = ""
                if self._stop.wait(1.0):
                    return


class PodTracker(_Tracker):
    """The pods on one node, as the API server has them right now.

    `leaving(key, uid)` (hold `cond`): the drain has this pod on its way out (its
    eviction sent or accepted, terminating, stuck). An update of such a pod wakes
    nobody: the loop takes it in at its next turn (within MAX_WAIT). On a real API
    server a pod evicted sends three or four updates before its end, and each woke
    the loop to find nothing to do (issue 39, item 10). A pod new on the node, one
    gone, one under a new UID, and any change of a pod still to evict wake it at once."""

    def __init__(
        self,
        kube: Kube,
        node: str,
        label_selector: str = "",
        leaving: Callable[[PodKey, str], bool] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(kube, **kwargs)
        self.node = node
        self.label_selector = label_selector
        self._leaving = leaving
        self.name = f"pods-on-{node}"
        self._present: dict[PodKey, Pod] = {}
        self._touched: set[PodKey] = set()

    def _list(self) -> tuple[list[Obj], str]:
        return self.kube.list_pods_on_node(self.node, self.label_selector)

    def _watch(self, resource_version: str) -> Iterator[Obj]:
        return self.kube.watch_pods_on_node(
            self.node, resource_version, self._watch_timeout, self._streams, self.label_selector
        )

    def _replace(self, items: list[Obj]) -> None:
        old = self._present
        self._present = {pods.key(p): p for p in items}
        self._touched |= old.keys() | self._present.keys()

    def _news(self, kind: str, obj: Obj) -> bool:
        # A new UID under the name is news: `leaving` knows the pod by its UID.
        key = pods.key(obj)
        if kind != "MODIFIED" or self._leaving is None or key not in self._present:
            return True
        return not self._leaving(key, pods.uid(obj))

    def _apply(self, kind: str, obj: Obj) -> None:
        key = pods.key(obj)
        if kind == "DELETED":
            current = self._present.get(key)
            if current is not None and pods.uid(current) == pods.uid(obj):
                del self._present[key]
        elif kind in ("ADDED", "MODIFIED"):
            self._present[key] = obj
        self._touched.add(key)

    def take_changed(self) -> set[PodKey]:
        """The pods that changed since the last call (hold `cond`): a drain of 700
        pods looks at what moved, not at every pod on every event."""
        changed, self._touched = self._touched, set()
        return changed

    def get(self, key: PodKey) -> Pod | None:
        """The pod under this name now, whatever its UID (hold `cond`)."""
        return self._present.get(key)

    def gone(self, pod: Pod) -> bool:
        """NotFound, or the name now belongs to another pod (a new UID): kubectl's test."""
        current = self._present.get(pods.key(pod))
        return current is None or pods.uid(current) != pods.uid(pod)

    def pods(self) -> list[Pod]:
        """Every pod on the node now (hold `cond`)."""
        return list(self._present.values())

    def current(self, pod: Pod) -> Pod | None:
        """The latest version of this very pod (same UID), if it is still there."""
        current = self._present.get(pods.key(pod))
        if current is None or pods.uid(current) != pods.uid(pod):
            return None
        return current


class BudgetTracker(_Tracker):
    """Every PodDisruptionBudget's disruptionsAllowed, kept current by a watch."""

    name = "budgets"

    def __init__(self, kube: Kube, **kwargs: Any) -> None:
        super().__init__(kube, **kwargs)
        self._budgets: dict[tuple[str, str], Obj] = {}
        self._versions: dict[tuple[str, str], int] = {}

    def _list(self) -> tuple[list[Obj], str]:
        return self.kube.list_budgets()

    def _watch(self, resource_version: str) -> Iterator[Obj]:
        return self.kube.watch_budgets(resource_version, self._watch_timeout, self._streams)

    def _key(self, obj: Obj) -> tuple[str, str]:
        return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]

    def _replace(self, items: list[Obj]) -> None:
        old = self._budgets
        self._budgets = {self._key(b): b for b in items}
        # A re-list is a change to every budget it shows, and to every one gone since.
        for key in old.keys() | self._budgets.keys():
            self._versions[key] = self._versions.get(key, 0) + 1

    def _apply(self, kind: str, obj: Obj) -> None:
        key = self._key(obj)
        if kind == "DELETED":
            self._budgets.pop(key, None)
        else:
            self._budgets[key] = obj
        self._versions[key] = self._versions.get(key, 0) + 1

    def allowed(self, namespace: str, name: str) -> int | None:
        budget = self._budgets.get((namespace, name))
        if budget is None:
            return None
        return int((budget.get("status") or {}).get("disruptionsAllowed") or 0)

    def seen(self, namespace: str, name: str) -> int:
        """A counter that moves whenever this budget changes."""
        with self.cond:
            return self._versions.get((namespace, name), 0)

    def matching(self, pod: Pod) -> list[str]:
        """Names of the budgets whose selector matches the pod (for error messages)."""
        labels = pod["metadata"].get("labels") or {}
        names = []
        with self.cond:
            for (namespace, name), budget in self._budgets.items():
                if namespace != pod["metadata"].get("namespace"):
                    continue
                if selects((budget.get("spec") or {}).get("selector"), labels):
                    names.append(f"{namespace}/{name}")
        return sorted(names)


class NodeTracker(_Tracker):
    """One node, to see it uncordoned (or deleted) while it is being drained."""

    def __init__(self, kube: Kube, node: str, **kwargs: Any) -> None:
        super().__init__(kube, **kwargs)
        self.node_name = node
        self.name = f"node-{node}"
        self.node: Obj | None = None

    def _list(self) -> tuple[list[Obj], str]:
        return self.kube.list_node(self.node_name)

    def _watch(self, resource_version: str) -> Iterator[Obj]:
        return self.kube.watch_node(
            self.node_name, resource_version, self._watch_timeout, self._streams
        )

    def _replace(self, items: list[Obj]) -> None:
        self.node = items[0] if items else None

    def _apply(self, kind: str, obj: Obj) -> None:
        self.node = None if kind == "DELETED" else obj

    def uncordoned(self) -> bool:
        """The node exists and is schedulable again (hold `cond`)."""
        return self.node is not None and not (self.node.get("spec") or {}).get("unschedulable")

    def replaced(self, uid: str) -> str:
        """The UID of a node of this name that is not the one whose UID is `uid`
        (deleted, and another machine registered under the name); "" while the
        node is ours or gone (hold `cond`)."""
        if self.node is None or not uid:
            return ""
        current = str((self.node.get("metadata") or {}).get("uid") or "")
        return current if current and current != uid else ""


class AttachmentTracker(_Tracker):
    """The VolumeAttachments of the cluster, to see a node's volumes detach."""

    name = "volumeattachments"

    def __init__(self, kube: Kube, **kwargs: Any) -> None:
        super().__init__(kube, **kwargs)
        self._attachments: dict[str, Obj] = {}

    def _list(self) -> tuple[list[Obj], str]:
        return self.kube.list_volume_attachments()

    def _watch(self, resource_version: str) -> Iterator[Obj]:
        return self.kube.watch_volume_attachments(
            resource_version, self._watch_timeout, self._streams
        )

    def _replace(self, items: list[Obj]) -> None:
        self._attachments = {a["metadata"]["name"]: a for a in items}

    def _apply(self, kind: str, obj: Obj) -> None:
        if kind == "DELETED":
            self._attachments.pop(obj["metadata"]["name"], None)
        else:
            self._attachments[obj["metadata"]["name"]] = obj

    def attached(self, node: str, volumes: set[str]) -> dict[str, str]:
        """Attachment name -> volume, for those of `volumes` still attached to `node`."""
        found = {}
        for name, attachment in self._attachments.items():
            spec = attachment.get("spec") or {}
            volume = (spec.get("source") or {}).get("persistentVolumeName")
            if spec.get("nodeName") == node and volume in volumes:
                found[name] = volume
        return found


def selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    checks: dict[str, Callable[[dict[str, Any]], bool]] = {
        "In": lambda e: labels.get(e["key"]) in (e.get("values") or []),
        "NotIn": lambda e: labels.get(e["key"]) not in (e.get("values") or []),
        "Exists": lambda e: e["key"] in labels,
        "DoesNotExist": lambda e: e["key"] not in labels,
    }

    def unknown(_: dict[str, Any]) -> bool:
        return False

    return all(
        checks.get(e.get("operator", ""), unknown)(e)
        for e in selector.get("matchExpressions") or []
    )
