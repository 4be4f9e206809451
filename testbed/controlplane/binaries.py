"""Where the control plane's binaries are, building them first when they are not."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

BUILD_SCRIPT = Path(__file__).resolve().parent / "build.sh"
NAMES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd", "kwok")


class ControlPlaneBuildError(RuntimeError):
    """The binaries are missing and could not be built."""


def binaries(*, build: bool = True) -> Path:
    """The directory holding the binaries named in NAMES.

    With `build`, runs build.sh, which returns at once when they are cached and
    otherwise builds them (the first time: tens of minutes). Without it, a missing
    build is an error that says how to make one."""
    if shutil.which("go") is None:
        where = _where()
        if where is not None:
            return where
        raise ControlPlaneBuildError(
            "the real control plane is not built and Go is not on PATH: install Go >= 1.24 "
            "(https://go.dev/dl/), then run `make controlplane`"
        )
    if not build:
        where = _where()
        if where is None:
            raise ControlPlaneBuildError(
                "the real control plane is not built yet: run `make controlplane`"
            )
        return where
    done = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ControlPlaneBuildError(
            f"building the control plane failed (bash {BUILD_SCRIPT}):\n{done.stderr[-4000:]}"
        )
    return Path(done.stdout.strip().splitlines()[-1])


def _where() -> Path | None:
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--where"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode != 0:
        return None
    return Path(done.stdout.decode().strip())
