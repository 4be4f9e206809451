"""The CLI's start-up: from the fork of `python -m drainer` to its first request
arriving at the API server (kubesim's record of it, on this host's clock), as an
operator's drain begins. Issue 28's target: at most 0.15 s."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STARTUP_TARGET_SECONDS = 0.15


@dataclass(frozen=True)
class Startup:
    runs: list[float]

    @property
    def median(self) -> float:
        return float(statistics.median(self.runs))


def measure(runs: int = 5) -> Startup:
    """`release` of a node with nothing to undo (one read, then the answer): the
    first request is what the drain's would be, after the same imports and the same
    kubeconfig."""
    from kubesim import KubeSim
    from testbed.world import rbac_manifests

    seconds = []
    with KubeSim(cluster_name="bench") as sim:
        sim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        sim.apply(rbac_manifests())
        command = [
            sys.executable, "-m", "drainer", "release", "n1",
            "--kubeconfig", str(sim.kubeconfig), "--context", "drainer",
        ]  # fmt: skip
        # As installed (pip compiles the bytecode): the first run writes what the
        # source tree lacks, even when this shell says not to, and warms the page cache.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run(command, cwd=ROOT, env=env, capture_output=True, check=False)
        for _ in range(runs):
            before = len(sim.requests())
            started = time.time()
            done = subprocess.run(
                command, cwd=ROOT, env=env, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                raise RuntimeError(f"python -m drainer release failed: {done.stderr[-500:]}")
            first = min(r.at for r in sim.requests()[before:])
            seconds.append(first - started)
    return Startup(seconds)


def text(startup: Startup) -> str:
    runs = ", ".join(f"{s:.3f}" for s in startup.runs)
    return (
        f"CLI start-up: from the fork of `python -m drainer` to its first request at the "
        f"API server, median {startup.median:.3f} s ({runs})"
    )
