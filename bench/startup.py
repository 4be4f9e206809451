"""The CLI's start-up: from the fork of `python -m drainer` to its first request
arriving at the API server (kubesim's record of it, on this host's clock), as an
operator's drain begins. Issue 28's target: at most 0.15 s."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STARTUP_TARGET_SECONDS = 0.15


@dataclass(frozen=True)
class Startup:
    runs: list[float]
    floor_runs: list[float] = field(default_factory=list)
    """bench/floor.py's, alternating with ours: the standard library alone (-S), its
    endpoint handed over in its environment (no kubeconfig to read, no arguments)."""

    @property
    def median(self) -> float:
        return float(statistics.median(self.runs))

    @property
    def floor_median(self) -> float | None:
        return float(statistics.median(self.floor_runs)) if self.floor_runs else None


def _first_request(sim: Any, command: list[str], env: dict[str, str]) -> float:
    """Seconds from the fork of `command` to its first request at kubesim."""
    before = len(sim.requests())
    started = time.time()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[1:4])} failed: {done.stderr[-500:]}")
    return float(min(r.at for r in sim.requests()[before:]) - started)


def measure(runs: int = 5) -> Startup:
    """`release` of a node with nothing to undo (one read, then the answer): the
    first request is what the drain's would be, after the same imports and the same
    kubeconfig. Beside it, alternating, the floor's start-up on an empty node."""
    from bench.clients import FLOOR, floor_env
    from kubesim import KubeSim
    from testbed.world import rbac_manifests

    ours, floor = [], []
    with KubeSim(cluster_name="bench") as sim, tempfile.TemporaryDirectory() as tmp:
        for name in ("n1", "n2"):
            sim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        sim.apply(rbac_manifests())
        command = [
            sys.executable, "-m", "drainer", "release", "n1",
            "--kubeconfig", str(sim.kubeconfig), "--context", "drainer",
        ]  # fmt: skip
        # As installed (pip compiles the bytecode): the first run writes what the
        # source tree lacks, even when this shell says not to, and warms the page cache.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run(command, cwd=ROOT, env=env, capture_output=True, check=False)
        floor_command = [sys.executable, "-S", str(FLOOR), "n2", "--timeout", "10"]
        environment = floor_env(sim.kubeconfig, Path(tmp))
        for _ in range(runs):
            ours.append(_first_request(sim, command, env))
            floor.append(_first_request(sim, floor_command, environment))
    return Startup(ours, floor)


def text(startup: Startup) -> str:
    runs = ", ".join(f"{s:.3f}" for s in startup.runs)
    line = (
        f"CLI start-up: from the fork of `python -m drainer` to its first request at the "
        f"API server, median {startup.median:.3f} s ({runs})"
    )
    floor = startup.floor_median
    if floor:
        line += (
            f"; the floor's (python -S bench/floor.py, its endpoint given): {floor:.3f} s, "
            f"ours/floor {startup.median / floor:.2f}x"
        )
    return line
