"""The Lambda cold start: import the handler and build what the first invocation
builds (settings from the environment, the boto3 clients, the Kubernetes client
with its EKS token source), under the runtime's Python, from the built zip, in
fresh interpreters; and the zip's size.

The zip measured is the one `make package` builds (tools/package.py), for this
machine's architecture: build/eks-node-drainer.zip when it is current and of that
architecture, else build/bench/eks-node-drainer-<arch>.zip built here with the same
builder (`make package` defaults to arm64, which this x86_64 machine cannot
import). The size target is checked on a current build of both architectures. As on
Lambda, /var/task is read-only (PYTHONDONTWRITEBYTECODE=1: the zip's own byte
code, nothing cached between runs) and boto3 comes from the runtime, not the zip
(tools.runtime.install_runtime_sdk, the versions pinned in requirements-dev.txt).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tools import package
from tools.runtime import (
    RuntimeUnavailable,
    find_runtime_python,
    host_arch,
    install_runtime_sdk,
    runtime_version,
)

ROOT = Path(__file__).resolve().parent.parent
DEPLOYED_ZIP = ROOT / "build" / "eks-node-drainer.zip"
BENCH_BUILD = ROOT / "build" / "bench"
TARGET_SECONDS = 0.5
TARGET_ZIP_MB = 30.0

# Runs in the runtime's Python with only the unpacked zip and the runtime's SDK on
# sys.path (-S: no site-packages). Prints the seconds of each phase as JSON.
_PROBE = """
import json, os, sys, time
sys.path[:0] = [{task!r}, {sdk!r}]
t0 = time.perf_counter()
import drainer.handler
t1 = time.perf_counter()
from drainer import aws, handler
from drainer.lifecycle.clients import eks_kube
settings = handler.load_settings(os.environ)
t2 = time.perf_counter()
session = aws.Session(region_name="us-east-1")  # what the handler builds
clients = aws.make_clients(session, "us-east-1")
t3 = time.perf_counter()
cluster = aws.ClusterInfo(
    name="bench", endpoint="https://127.0.0.1:1", certificate_authority_data={ca!r},
    status="ACTIVE", arn="arn:aws:eks:us-east-1:123456789012:cluster/bench",
)
kube = eks_kube(session, "us-east-1")(cluster, "bench", settings)
t4 = time.perf_counter()
from drainer.aws.eks import TokenSource
TokenSource(session, "bench", "us-east-1").token()
t5 = time.perf_counter()
print(json.dumps({{"import_handler": t1 - t0, "settings": t2 - t1, "boto3_clients": t3 - t2,
                  "kube_client": t4 - t3, "total": t4 - t0, "first_token": t5 - t4}}))
"""
PHASES = ("import_handler", "settings", "boto3_clients", "kube_client", "total", "first_token")


@dataclass
class ColdStart:
    runtime: str = ""
    arch: str = ""
    zip_path: str = ""
    zip_mb: float = 0.0
    unpacked_mb: float = 0.0
    zips: dict[str, float] = field(default_factory=dict)
    """Size in MB of a current build for each architecture, by "arch path"."""
    runs: int = 0
    phases: dict[str, list[float]] = field(default_factory=dict)
    median: dict[str, float] = field(default_factory=dict)
    importtime: list[tuple[str, float]] = field(default_factory=list)
    """Top-level packages by cumulative import seconds (python -X importtime)."""
    skipped: str = ""


def _stale(zip_path: Path) -> bool:
    if not zip_path.is_file() or not package.manifest_path(zip_path).is_file():
        return True
    built = zip_path.stat().st_mtime
    inputs = [ROOT / "requirements.txt", ROOT / "template.yaml", ROOT / "tools" / "package.py"]
    inputs += list((ROOT / "drainer").rglob("*.py"))
    return any(p.is_file() and p.stat().st_mtime > built for p in inputs)


def zip_for(arch: str, *, build: bool) -> Path | None:
    """A current zip for `arch`: `make package`'s if it is current and of that
    architecture, else the bench's own (built when `build`; else an older one)."""
    deployed_current = DEPLOYED_ZIP.is_file() and not _stale(DEPLOYED_ZIP)
    if deployed_current and package.read_manifest(DEPLOYED_ZIP).architecture == arch:
        return DEPLOYED_ZIP
    own = BENCH_BUILD / f"eks-node-drainer-{arch}.zip"
    if _stale(own):
        if not build:
            return own if own.is_file() else None
        package.build(arch, own, log=False)
    return own


def _probe_env(tmp: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(tmp),
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIABENCHBENCHBENCH0",
        "AWS_SECRET_ACCESS_KEY": "bench-secret-key-bench-secret-key-bench0",
        "AWS_SESSION_TOKEN": "bench-session-token",
        "AWS_LAMBDA_FUNCTION_NAME": "eks-node-drainer",
        "CLUSTER_NAME": "bench",
    }


def _importtime(stderr: str) -> list[tuple[str, float]]:
    """Import seconds spent in each top-level package's own modules (the `self`
    column of python -X importtime, summed by package), largest first."""
    totals: dict[str, float] = defaultdict(float)
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line[len("import time:") :].split("|")
        try:
            own = int(parts[0].strip())
        except ValueError:
            continue  # the header line
        totals[parts[2].strip().split(".")[0]] += own / 1e6
    return sorted(totals.items(), key=lambda item: -item[1])[:12]


def measure(runs: int, *, build: bool = True) -> ColdStart:
    result = ColdStart(arch=host_arch())
    try:
        for arch in sorted(package.ARCHITECTURES):
            built = zip_for(arch, build=build)
            if built is not None:
                label = f"{arch} {built.relative_to(ROOT)}"
                result.zips[label] = package.read_manifest(built).size / 1e6
    except package.PackageError as e:
        result.skipped = str(e)
        return result
    try:
        version = runtime_version()
        python = find_runtime_python(version)
        if python is None:
            result.skipped = f"no python{version[0]}.{version[1]} to run the zip with"
            return result
        result.runtime = f"python{version[0]}.{version[1]}"
        sdk = install_runtime_sdk(ROOT / "build" / "runtime-sdk", python, version)
        zip_path = zip_for(result.arch, build=build)
    except (RuntimeUnavailable, package.PackageError) as e:
        result.skipped = str(e)
        return result
    if zip_path is None:
        result.skipped = "no zip for this architecture (run `make bench` to build one)"
        return result
    manifest = package.read_manifest(zip_path)
    result.zip_path = str(zip_path.relative_to(ROOT))
    result.zip_mb = manifest.size / 1e6
    result.unpacked_mb = manifest.unpacked_size / 1e6
    with tempfile.TemporaryDirectory(prefix="bench-coldstart-") as tmp:
        task = Path(tmp) / "task"
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(task)
        code = _PROBE.format(task=str(task), sdk=str(sdk), ca=_ca_data())
        env = _probe_env(Path(tmp))
        phases: dict[str, list[float]] = {p: [] for p in PHASES}
        for _ in range(runs):
            out = subprocess.run(
                [str(python), "-S", "-c", code], capture_output=True, text=True, env=env, check=True
            )
            figures = json.loads(out.stdout.strip().splitlines()[-1])
            for phase in PHASES:
                phases[phase].append(float(figures[phase]))
        traced = subprocess.run(
            [str(python), "-S", "-X", "importtime", "-c", code],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    result.runs = runs
    result.phases = phases
    result.median = {p: statistics.median(v) for p, v in phases.items()}
    result.importtime = _importtime(traced.stderr)
    return result


def _ca_data() -> str:
    """A real CA certificate (the client loads it; it never connects)."""
    import base64

    from kubesim import certs

    return base64.b64encode(certs.generate().ca_pem).decode()
