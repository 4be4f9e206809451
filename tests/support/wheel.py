"""The wheel as an operator installs it: built from the sources (as `make wheel`
does) and pip-installed, with its dependencies from the package index, into a fresh
virtual environment of the base interpreter (none of .venv's packages).

Built once per change of the sources, pyproject.toml or the pins, under a lock the
test workers share; a warm run reuses it.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "wheel-test"
SOURCES = ("drainer", "pyproject.toml", "README.md", "LICENSE")
CONSTRAINTS = ROOT / "requirements-dev.txt"  # the versions the suite tests, -r requirements.txt


@dataclass(frozen=True)
class Installed:
    wheel: Path
    bin: Path
    """The venv's bin directory: the two commands are here, and nothing of .venv."""


def _files() -> list[Path]:
    found: list[Path] = []
    for name in SOURCES:
        path = ROOT / name
        found += sorted(p for p in path.rglob("*.py")) if path.is_dir() else [path]
    return found


def _key() -> str:
    digest = hashlib.sha256()
    for path in [*_files(), CONSTRAINTS, ROOT / "requirements.txt"]:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"{what} failed ({' '.join(argv)}); it needs the package index, as `make venv` "
            f"does:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )


def installed() -> Installed:
    """The built wheel installed into a fresh venv."""
    here = WORK / _key()
    WORK.mkdir(parents=True, exist_ok=True)
    with open(WORK / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wheels = sorted((here / "dist").glob("*.whl"))
        if (here / ".complete").is_file() and wheels:
            return Installed(wheels[0], here / "venv" / "bin")
        for old in WORK.iterdir():
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
        source = here / "src"  # a copy: the build's egg-info and build/lib stay out of the tree
        for path in _files():
            target = source / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        _run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
             "--no-build-isolation", "--wheel-dir", str(here / "dist"), str(source)],
            "building the wheel",
        )  # fmt: skip
        wheel = next((here / "dist").glob("*.whl"))
        base = Path(sys.base_prefix) / "bin" / "python3"
        _run([str(base), "-m", "venv", str(here / "venv")], "creating a fresh venv")
        _run(
            # --no-compile: pip would byte-compile every module of every dependency
            # (botocore's thousands) for 14 of the install's 30 s of CPU; the commands
            # compile what they import on their first run, as Python does.
            [str(here / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", "--no-compile", "--constraint", str(CONSTRAINTS),
             str(wheel)],
            "pip install of the wheel",
        )  # fmt: skip
        (here / ".complete").touch()
        return Installed(wheel, here / "venv" / "bin")
