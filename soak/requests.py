"""The drainer's requests to the Kubernetes API, as its own client sent them.

The handler builds its Kube client itself (Kube.for_cluster, in the container's
cache), so the log wraps the class's one request method for the length of a `with`
block, as bench.child's RecordingKube does for a drain run by hand; the real
apiserver keeps no request records for us, so both backends are counted this way
(kubesim's own records are the cross-check on kubesim)."""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bench.measure import verb_bucket


@dataclass(frozen=True)
class Sent:
    verb: str
    resource: str
    status: int


class RequestLog:
    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self._lock = threading.Lock()

    @contextmanager
    def recording(self) -> Iterator[RequestLog]:
        from drainer.errors import KubeError
        from drainer.k8s.client import Call
        from drainer.k8s.kube import Kube

        original = Kube._once
        log = self

        @functools.wraps(original)
        def once(kube: Kube, call: Call, bearer: str | None) -> Any:
            status = 200
            try:
                return original(kube, call, bearer)
            except KubeError as e:
                status = e.status
                raise
            finally:
                with log._lock:
                    log.sent.append(Sent(call.verb, call.resource, status))

        Kube._once = once  # type: ignore[method-assign,assignment]
        try:
            yield self
        finally:
            Kube._once = original  # type: ignore[method-assign]

    def total(self) -> int:
        with self._lock:
            return len(self.sent)

    def by_verb(self) -> dict[str, int]:
        with self._lock:
            counts = Counter(verb_bucket(s.verb, s.resource) for s in self.sent)
        return dict(sorted(counts.items()))

    def refused(self) -> int:
        """Evictions answered 429: refused by a budget (or throttled)."""
        with self._lock:
            return sum(1 for s in self.sent if s.resource == "pods/eviction" and s.status == 429)
