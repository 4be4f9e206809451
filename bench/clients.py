"""The two drainers, each run as a process of its own through bench/launch.py:
our engine (`python -m bench.child drain`, as the kubeconfig's `drainer` user with
the RBAC of k8s-rbac/) and the real `kubectl drain` (as the admin).

On the real control plane, which keeps no request records for us, each client
logs its own requests: ours with `--records`, kubectl with `-v=6` (one line per
answer, with its round trip; bench.measure.kubectl_records reads them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = Path(__file__).resolve().parent / "launch.py"
OURS_USER = "drainer"  # the user of the kubeconfig's `drainer` context
KUBECTL_USER = "kubesim-admin"  # the user of its `admin` context
KUBECTL_FLAGS = ("--ignore-daemonsets", "--delete-emptydir-data", "--force")


@dataclass(frozen=True)
class Process:
    wall: float
    returncode: int
    timed_out: bool
    maxrss_mb: float
    cpu: float
    system_cpu: float
    """The kernel's share of `cpu`: system calls, and waking and parking threads."""
    switches: int
    """Voluntary context switches: how often a thread of the process waited (a lock,
    the GIL, a socket, a queue) and was woken; the kernel's share follows them."""
    output: str


WRAPPER: list[str] = []
"""What each client's command runs under (bench/instructions.py: valgrind's
callgrind); empty: the command itself."""


def launch(command: list[str], timeout: float, env: dict[str, str] | None = None) -> Process:
    """Run `command` through the launcher: wall time from fork to exit, its own peak RSS."""
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        output = Path(tmp) / "output"
        result = subprocess.run(
            [
                *(sys.executable, "-S", str(LAUNCHER), str(output), str(timeout), "--"),
                *WRAPPER,
                *command,
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            check=True,
        )
        figures = json.loads(result.stdout.strip().splitlines()[-1])
        text = output.read_text(errors="replace")
    return Process(
        wall=figures["wall"],
        returncode=figures["returncode"],
        timed_out=figures["timed_out"],
        maxrss_mb=figures["maxrss_kb"] / 1024,
        cpu=figures["user_cpu"] + figures["system_cpu"],
        system_cpu=figures["system_cpu"],
        switches=figures.get("switches", 0),
        output=text,
    )


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "AWS_"))}
    env.update(extra)
    return env


def run_ours(
    kubeconfig: Path,
    node: str,
    timeout: float,
    *,
    records: bool = False,
    settings: Mapping[str, str] | None = None,
) -> Process:
    """`settings`: environment variables of the Lambda's (EVICTION_CONCURRENCY...)
    for this drain, over the bench's own environment."""
    command = [
        sys.executable,
        "-m",
        "bench.child",
        "drain",
        "--kubeconfig",
        str(kubeconfig),
        "--context",
        "drainer",
        "--node",
        node,
        "--timeout",
        str(timeout),
        *(["--records"] if records else []),
    ]
    return launch(command, timeout + 30, _env(PYTHONPATH=str(ROOT), **(settings or {})))


def run_lookup(kubeconfig: Path, dns: str, instance: str, *, records: bool = False) -> Process:
    command = [
        sys.executable,
        "-m",
        "bench.child",
        "find-node",
        "--kubeconfig",
        str(kubeconfig),
        "--context",
        "drainer",
        "--dns",
        dns,
        "--instance-id",
        instance,
        *(["--records"] if records else []),
    ]
    return launch(command, 120, _env(PYTHONPATH=str(ROOT)))


def find_kubectl() -> Path | None:
    """kubectl on PATH; when it is gcloud's version dispatcher, the v1.32 binary
    beside it (the dispatcher would first ask the server for its version)."""
    found = shutil.which("kubectl")
    if found is None:
        return None
    real = Path(found).resolve()
    pinned = real.parent / "kubectl.1.32"
    return pinned if pinned.is_file() and os.access(pinned, os.X_OK) else real


def kubectl_version(kubectl: Path) -> str:
    try:
        out = subprocess.run(
            [str(kubectl), "version", "--client", "-o", "json"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
        return str(json.loads(out)["clientVersion"]["gitVersion"])
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return "unknown"


def run_kubectl(
    kubectl: Path, kubeconfig: Path, node: str, timeout: float, *, log_requests: bool = False
) -> Process:
    """`kubectl drain` with its own HOME and discovery cache, so every run starts
    cold (as a fresh CI job or Lambda would); `log_requests`: with -v=6."""
    with tempfile.TemporaryDirectory(prefix="bench-kubectl-") as home:
        command = [
            str(kubectl),
            "--kubeconfig",
            str(kubeconfig),
            "--context",
            "admin",
            "--cache-dir",
            str(Path(home) / "cache"),
            "drain",
            node,
            *KUBECTL_FLAGS,
            f"--timeout={int(timeout)}s",
            *(["-v=6"] if log_requests else []),
        ]
        return launch(command, timeout + 30, _env(HOME=home))


FLOOR = Path(__file__).resolve().parent / "floor.py"


def floor_env(kubeconfig: Path, directory: Path) -> dict[str, str]:
    """bench/floor.py's environment: the kubeconfig's `drainer` user (the RBAC of
    k8s-rbac/, as ours), read here by the drainer's own reader and handed over as its
    endpoint (its CA written into `directory`)."""
    from drainer.k8s import kubeconfig as reader

    endpoint = reader.load(str(kubeconfig), OURS_USER, clock=time.time).endpoint
    ca = endpoint.ca_file
    if endpoint.ca_pem:
        ca = str(directory / "ca.pem")
        Path(ca).write_text(endpoint.ca_pem)
    return _env(
        FLOOR_SERVER=endpoint.server, FLOOR_CA=ca, FLOOR_AUTHORIZATION=endpoint.authorization
    )


def run_floor(kubeconfig: Path, node: str, timeout: float) -> Process:
    """bench/floor.py under `python -S`: no site-packages, no drainer code."""
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp:
        env = floor_env(kubeconfig, Path(tmp))
        command = [sys.executable, "-S", str(FLOOR), node, "--timeout", str(timeout)]
        return launch(command, timeout + 30, env)
