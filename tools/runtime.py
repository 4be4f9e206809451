"""The Lambda runtime's Python, here: its version, its interpreter, its AWS SDK.

The function's Python version is the `Runtime:` of template.yaml and nothing else,
so the zip, the byte code and the tests cannot drift from what Lambda runs. The
runtime provides boto3/botocore/s3transfer and their dependencies; to run the zip
as Lambda would, tests and tools/coldstart.py install the versions pinned in
requirements-dev.txt into a directory of their own (never into the zip) with
`install_runtime_sdk`.
"""

from __future__ import annotations

import fcntl
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"
DEV_REQUIREMENTS = ROOT / "requirements-dev.txt"
RUNTIME_SDK = ("boto3", "botocore", "s3transfer")  # never shipped in the zip (tools/package.py)
# What the runtime has beside them (botocore's dependencies): installed with them.
RUNTIME_SDK_DEPENDENCIES = ("python-dateutil", "six", "urllib3", "jmespath")
# The runtime interface client AWS's Python base images run (`python -m awslambdaric
# <handler>`), with its two dependencies: the Lambda runtime has it in /var/runtime
# beside boto3, so the tests that run the zip under the Runtime Interface Emulator
# (testbed/lambdarie) install it beside the SDK, never into the zip.
RUNTIME_INTERFACE_CLIENT = (
    "awslambdaric==4.2.2",
    "simplejson==4.3.0",
    "snapshot-restore-py==1.0.0",
)
_RUNTIME_LINE = re.compile(r"^\s+Runtime:\s+python(\d+)\.(\d+)\s*$", re.MULTILINE)


class RuntimeUnavailable(Exception):
    """The runtime's Python or SDK cannot be had; the message says what to do."""


def runtime_version(template: Path = TEMPLATE) -> tuple[int, int]:
    """The Python version of the function's `Runtime:` in the template."""
    found = {(int(a), int(b)) for a, b in _RUNTIME_LINE.findall(template.read_text())}
    if len(found) != 1:
        raise RuntimeUnavailable(
            f"{template} must name exactly one python3.N Runtime, found {sorted(found)}"
        )
    return found.pop()


def host_arch() -> str:
    """The function's architecture (template.yaml's names) that this machine runs."""
    return "arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64"


def find_runtime_python(version: tuple[int, int]) -> Path | None:
    """An interpreter of `version`: $RUNTIME_PYTHON, pythonX.Y on PATH, or pyenv's."""
    wanted = f"{version[0]}.{version[1]}"
    candidates: list[Path] = []
    if os.environ.get("RUNTIME_PYTHON"):
        candidates.append(Path(os.environ["RUNTIME_PYTHON"]))
    on_path = shutil.which(f"python{wanted}")
    if on_path:
        candidates.append(Path(on_path))
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += sorted(
        (pyenv_root / "versions").glob(f"{wanted}.*/bin/python{wanted}"), reverse=True
    )
    for candidate in candidates:
        if candidate.is_file() and python_version(candidate) == version:
            return candidate
    return None


def python_version(python: Path) -> tuple[int, int] | None:
    """(major, minor) of an interpreter; None when it does not run."""
    try:
        out = subprocess.run(
            [str(python), "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return (int(out[0]), int(out[1]))


def sdk_pins(requirements: Path = DEV_REQUIREMENTS) -> list[str]:
    """The `name==version` lines of the runtime-provided SDK and its dependencies in
    requirements-dev.txt and the requirements.txt it includes."""
    wanted = (*RUNTIME_SDK, *RUNTIME_SDK_DEPENDENCIES)
    pins: dict[str, str] = {}
    for path in (requirements, requirements.parent / "requirements.txt"):
        for line in path.read_text().splitlines():
            text = line.split("#", 1)[0].strip()
            name = re.split(r"[=<>!~ ]", text, maxsplit=1)[0].lower()
            if name in wanted:
                pins.setdefault(name, text)
    if len(pins) != len(wanted):
        raise RuntimeUnavailable(f"{requirements} must pin each of {', '.join(wanted)}")
    return list(pins.values())


def pip_install_wheels(
    target: Path,
    version: tuple[int, int],
    specs: list[str],
    *,
    platforms: list[str] | None = None,
    no_deps: bool = False,
) -> subprocess.CompletedProcess[str]:
    """pip install binary wheels for the runtime's Python `version` into `target`,
    without byte code (the zip and the runtime's SDK copy compile their own): the
    one install recipe of the zip (tools/package.py) and of the runtime's SDK.
    `platforms` restricts the wheels to those tags (cross-installing for Lambda)."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--only-binary=:all:",
        "--python-version",
        f"{version[0]}.{version[1]}",
    ]
    if platforms:
        command += ["--implementation", "cp", "--abi", f"cp{version[0]}{version[1]}"]
        command += [arg for tag in platforms for arg in ("--platform", tag)]
    if no_deps:
        command.append("--no-deps")
    command += ["--target", str(target), *specs]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def install_runtime_sdk(target: Path, python: Path, version: tuple[int, int]) -> Path:
    """boto3 & co. and the runtime interface client as the runtime provides them:
    pinned, byte-compiled, in `target`.

    Reused when `target` already holds them (a marker file names the pins); two
    test workers asking at once take turns (a lock beside `target`).
    """
    pins = [*sdk_pins(), *RUNTIME_INTERFACE_CLIENT]
    marker = target / ".installed"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file() and marker.read_text() == "\n".join(pins):
            return target
        return _install(target, python, version, pins)


def _install(target: Path, python: Path, version: tuple[int, int], pins: list[str]) -> Path:
    marker = target / ".installed"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    install = pip_install_wheels(target, version, pins, no_deps=True)
    if install.returncode != 0:
        raise RuntimeUnavailable(f"could not install {' '.join(pins)}:\n{install.stderr.strip()}")
    # The runtime's SDK is precompiled; compile this copy too, so it costs a cold
    # start what it costs on Lambda.
    subprocess.run(
        [str(python), "-m", "compileall", "-q", "-j", "0", str(target)],
        capture_output=True,
        check=False,
    )
    marker.write_text("\n".join(pins))
    return target
