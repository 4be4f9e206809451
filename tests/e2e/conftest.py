"""End-to-end fixtures: kubesim over HTTPS with RBAC and EKS tokens, moto with the
awssim extension, and the real Lambda handler between them."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from drainer import handler, logs
from kubesim import KubeSim
from kubesim.api import is_pod_ready
from kubesim.store import Change
from testbed import LambdaContext, World

SPEED = 20.0


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(speed=SPEED, cluster_name="demo") as running:
        yield running


@pytest.fixture
def world(request: pytest.FixtureRequest, moto_aws: None, sim: KubeSim) -> World:
    """Parametrize indirectly with World keyword arguments to change it."""
    return World(sim, **getattr(request, "param", {}))


@dataclass
class LogCapture:
    stream: io.StringIO = field(default_factory=io.StringIO)

    @property
    def text(self) -> str:
        return self.stream.getvalue()

    def records(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.text.splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue
        return lines

    def messages(self) -> list[str]:
        return [str(r.get("message", "")) for r in self.records()]


@pytest.fixture
def drainer_logs() -> Iterator[LogCapture]:
    capture = LogCapture()
    logs.configure("DEBUG", stream=capture.stream)
    yield capture


Invoke = Callable[..., dict[str, Any]]


@pytest.fixture
def invoke(world: World, monkeypatch: pytest.MonkeyPatch, drainer_logs: LogCapture) -> Invoke:
    """Run the real handler on an event, with the world's settings plus overrides."""

    def run(event: dict[str, Any], timeout: float = 900.0, **env: Any) -> dict[str, Any]:
        for key, value in world.env(**env).items():
            monkeypatch.setenv(key, value)
        handler.reset()
        logs.configure("DEBUG", stream=drainer_logs.stream)
        return handler.lambda_handler(event, LambdaContext(timeout))

    return run


class BudgetWatcher:
    """An independent observer of every PodDisruptionBudget: it recomputes healthy
    pods from the pods themselves on every change and remembers the worst margin
    (healthy - desired) seen, so a test can assert the drain never went below."""

    def __init__(self, sim: KubeSim) -> None:
        self.sim = sim
        self.worst: dict[str, int] = {}
        self.active = False
        self._lock = threading.Lock()
        sim.store.add_hook(self._on_change)

    def start(self) -> None:
        with self.sim.store.lock:
            self.active = True
            self._check()

    def _on_change(self, change: Change) -> None:
        if self.active and change.resource.kind in ("Pod", "PodDisruptionBudget"):
            self._check()

    def _check(self) -> None:
        from kubesim.api import PDBS, PODS
        from kubesim.selectors import labels_match, selector_from_object

        for budget in self.sim.store.iter(PDBS):
            namespace = budget["metadata"]["namespace"]
            selector = selector_from_object(budget["spec"].get("selector"))
            healthy = sum(
                1
                for pod in self.sim.store.iter(PODS, namespace)
                if labels_match(selector, pod["metadata"].get("labels"))
                and is_pod_ready(pod)
                and not pod["metadata"].get("deletionTimestamp")
            )
            desired = int((budget.get("status") or {}).get("desiredHealthy", 0))
            key = f"{namespace}/{budget['metadata']['name']}"
            margin = healthy - desired
            with self._lock:
                self.worst[key] = min(self.worst.get(key, margin), margin)

    def violations(self) -> dict[str, int]:
        with self._lock:
            return {k: v for k, v in self.worst.items() if v < 0}


@pytest.fixture
def budgets(sim: KubeSim) -> BudgetWatcher:
    return BudgetWatcher(sim)
