"""The simulator rests when nothing is due: a controller pass holds the store lock,
so a simulator that spins starves every API request (and a CPU core)."""

from __future__ import annotations

import time

from kubesim import KubeSim
from kubesim.api import is_pod_ready
from kubesim.testing import eventually
from testbed.workloads import node, workload


def test_running_pods__timers_fired__no_controller_passes_while_idle(sim: KubeSim) -> None:
    sim.apply(node("n1"))
    sim.apply(workload("Deployment", "web", replicas=5))
    eventually(lambda: len([p for p in sim.list("Pod") if is_pod_ready(p)]) == 5)
    sim.settle()
    passes = []
    reconcile = sim.simulator.reconcile

    def counted() -> None:
        passes.append(time.monotonic())
        reconcile()

    sim.simulator.reconcile = counted  # type: ignore[method-assign]
    time.sleep(0.3)

    assert len(passes) <= 2, f"{len(passes)} controller passes in 0.3 s with nothing to do"
