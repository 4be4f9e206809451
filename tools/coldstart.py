"""How long a cold start spends importing the handler, with and without byte code.

    python -m tools.coldstart [--runs 7] [--modules drainer.handler,drainer.engine.drain,...]

Builds the zip for this machine's architecture twice (with and without .pyc),
unpacks each as Lambda does (/var/task is read-only, so a zip without .pyc
compiles every module on every cold start: PYTHONDONTWRITEBYTECODE=1 here), and
times importing the handler and what its first drain imports, in a fresh
interpreter of the runtime's version with only the unpacked zip and the runtime's
boto3 on sys.path. Prints the median and range.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from tools import package
from tools.runtime import (
    ROOT,
    find_runtime_python,
    host_arch,
    install_runtime_sdk,
    runtime_version,
)

# What a cold start imports before its first drain can talk to Kubernetes: the
# handler (at init), then, inside the first invocation, the drainer's client and
# engine and powertools' metrics (imported lazily; the JSON log lines are the
# drainer's own, drainer/logs.py).
DEFAULT_MODULES = (
    "drainer.handler,drainer.lifecycle.clients,drainer.engine.drain,aws_lambda_powertools.metrics"
)
_TIMER = """
import importlib, sys, time
sys.path[:0] = [{task!r}, {sdk!r}]
started = time.perf_counter()
for name in {modules!r}:
    importlib.import_module(name)
print(time.perf_counter() - started)
"""


def time_import(
    python: Path, task: Path, sdk: Path, modules: Sequence[str], runs: int
) -> list[float]:
    """Seconds to import `modules` in `runs` fresh interpreters (-S: no site-packages)."""
    code = _TIMER.format(task=str(task), sdk=str(sdk), modules=list(modules))
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    times = []
    for _ in range(runs):
        out = subprocess.run(
            [str(python), "-S", "-c", code], capture_output=True, text=True, env=env, check=True
        )
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.coldstart")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--modules", default=DEFAULT_MODULES, help="comma-separated")
    args = parser.parse_args(argv)
    version = runtime_version()
    python = find_runtime_python(version)
    if python is None:
        print(f"no python{version[0]}.{version[1]} to measure with", file=sys.stderr)
        return 1
    sdk = install_runtime_sdk(ROOT / "build" / "runtime-sdk", python, version)
    arch = host_arch()
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for bytecode in ("no", "yes"):
            zip_path = Path(tmp) / f"bytecode-{bytecode}" / "eks-node-drainer.zip"
            manifest = package.build(arch, zip_path, bytecode=bytecode, log=False)
            task = zip_path.parent / "task"
            with zipfile.ZipFile(zip_path) as zf:
                zf.extractall(task)
            times = time_import(python, task, sdk, args.modules.split(","), args.runs)
            results[bytecode] = times
            print(
                f"byte code {bytecode:3}: zip {manifest.size / 1e6:5.1f} MB, unpacked "
                f"{manifest.unpacked_size / 1e6:6.1f} MB; imports: median "
                f"{statistics.median(times):.3f} s, min {min(times):.3f}, max {max(times):.3f} "
                f"({args.runs} runs, python{version[0]}.{version[1]} {arch})"
            )
    saved = statistics.median(results["no"]) - statistics.median(results["yes"])
    print(f"byte code saves {saved:.3f} s of import per cold start")
    return 0


if __name__ == "__main__":
    sys.exit(main())
