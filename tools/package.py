"""Build the Lambda zip, reproducibly: `python -m tools.package [--arch arm64]`.

The zip holds drainer/ and the wheels pinned in requirements.txt, installed for
the function's runtime (the `Runtime:` of template.yaml, so the two cannot
disagree) and architecture, from binary wheels only. What it leaves out, and why:

- boto3, botocore, s3transfer: the Lambda runtime provides them (a bundled copy
  would shadow the runtime's and grow the zip by ~25 MB);
- bin/ (console scripts with this machine's interpreter path in their shebang),
  __pycache__ of the build machine's Python, and the install-time files of
  dist-info (RECORD, INSTALLER, REQUESTED, direct_url.json), which vary with the
  pip that wrote them and are read only by pip uninstall.

Every installed distribution must be pinned in requirements.txt: an unpinned one
(a new transitive dependency) stops the build instead of shipping whatever version
the index had that day.

Byte code: with `--bytecode yes` the runtime's own Python (pyenv's 3.13 here)
compiles every module with unchecked-hash .pyc files, so a cold start on the
read-only /var/task loads instead of compiling (tools/coldstart.py measures it).
`auto` (the default) compiles when that Python is found and says so when not.

Reproducible: entries sorted, timestamps fixed (SOURCE_DATE_EPOCH, default
1980-01-01), permissions normalised; two builds from the same inputs on the same
machine give the same sha256. The manifest beside the zip
(build/eks-node-drainer.json) records runtime, architecture, sha256, size and the
distributions, and tools.deploy checks it against the stack's Architecture.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from drainer import __version__
from tools.runtime import (
    RUNTIME_SDK,
    RuntimeUnavailable,
    find_runtime_python,
    pip_install_wheels,
    runtime_version,
)

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"
REQUIREMENTS = ROOT / "requirements.txt"
SOURCE_PACKAGE = ROOT / "drainer"
DEFAULT_OUTPUT = ROOT / "build" / "eks-node-drainer.zip"
ARCHITECTURES = {"arm64": "aarch64", "x86_64": "x86_64"}
# Lambda's Python 3.12+ runtimes run on Amazon Linux 2023: glibc 2.34.
RUNTIME_GLIBC = (2, 34)
_DIST_INFO_NOISE = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")
UNUSED = ("aws_lambda_powertools/event_handler",)
"""Parts of the pinned wheels the function never imports (it uses powertools'
Metrics only; nothing they import reaches the REST/GraphQL event handlers, whose
OpenAPI models were a fifth of the zip): left out."""
# zlib's default: half the time of level 9 for a zip 1% larger.
COMPRESSLEVEL = 6
_DEFAULT_EPOCH = 315532800  # 1980-01-01T00:00:00Z, the earliest time a zip can hold


class PackageError(Exception):
    """The zip cannot be built as asked; the message says why and what to do."""


@dataclass(frozen=True)
class Manifest:
    """What was built, written as JSON beside the zip."""

    zip: str
    runtime: str
    architecture: str
    sha256: str
    size: int
    unpacked_size: int
    files: int
    bytecode: bool
    distributions: dict[str, str]
    version: str = ""
    """eks-node-drainer's version: drainer.__version__ of the sources zipped."""


def platform_tags(arch: str) -> list[str]:
    """Every manylinux tag the runtime can load, oldest first, for pip --platform."""
    machine = ARCHITECTURES[arch]
    tags = [f"manylinux2014_{machine}"]  # pip expands this to manylinux2010/1 too
    tags += [f"manylinux_2_{minor}_{machine}" for minor in range(17, RUNTIME_GLIBC[1] + 1)]
    return tags


def pinned_requirements(requirements: Path = REQUIREMENTS) -> dict[str, str]:
    """name -> version of every `name==version` line, names normalised (PEP 503)."""
    pins = {}
    for line in requirements.read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if not text or text.startswith("-"):
            continue
        name, sep, version = text.partition("==")
        if not sep:
            raise PackageError(f"{requirements}: {text!r} is not pinned with ==")
        pins[normalise(name)] = version.strip()
    return pins


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def install_requirements(
    staging: Path, arch: str, version: tuple[int, int], requirements: Path = REQUIREMENTS
) -> None:
    """pip install the pinned wheels for the runtime into `staging` (no byte code)."""
    python_version = f"{version[0]}.{version[1]}"
    result = pip_install_wheels(
        staging, version, ["-r", str(requirements)], platforms=platform_tags(arch)
    )
    if result.returncode != 0:
        raise PackageError(
            f"pip could not install {requirements.name} for python{python_version} "
            f"{arch} from binary wheels:\n{result.stderr.strip()}"
        )


def installed_distributions(staging: Path) -> dict[str, str]:
    """name -> version of every *.dist-info in `staging`."""
    found = {}
    for dist_info in staging.glob("*.dist-info"):
        name, _, version = dist_info.name.removesuffix(".dist-info").rpartition("-")
        found[normalise(name)] = version
    return found


def prune(staging: Path) -> None:
    """Remove what the runtime provides and what only varies between builds."""
    for top in list(staging.iterdir()):
        dist_name = normalise(top.name.split("-", 1)[0]) if "-" in top.name else ""
        if top.name in RUNTIME_SDK or dist_name in RUNTIME_SDK or top.name == "bin":
            shutil.rmtree(top) if top.is_dir() else top.unlink()
    for unused in UNUSED:
        shutil.rmtree(staging / unused, ignore_errors=True)
    for cache in sorted(staging.rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache)
    for dist_info in staging.glob("*.dist-info"):
        for noise in _DIST_INFO_NOISE:
            (dist_info / noise).unlink(missing_ok=True)


def copy_source(staging: Path, source: Path = SOURCE_PACKAGE) -> None:
    """The drainer package, its .py files only (and py.typed)."""
    target = staging / source.name
    for path in sorted(source.rglob("*")):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        if path.suffix != ".py" and path.name != "py.typed":
            continue
        destination = target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)


def compile_bytecode(staging: Path, python: Path) -> None:
    """Unchecked-hash .pyc for every module: deterministic, and never re-validated
    against the read-only sources Lambda unpacks."""
    result = subprocess.run(
        [
            str(python),
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            "-d",
            "/var/task",
            str(staging),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONHASHSEED": "0", "SOURCE_DATE_EPOCH": str(_DEFAULT_EPOCH)},
    )
    # compileall exits 1 when a file does not compile for this Python (some packages
    # ship Python 2 test files); the runtime would fail on those the same way, so
    # only a failure in drainer/ matters.
    if result.returncode != 0 and "drainer" in result.stdout + result.stderr:
        raise PackageError(f"byte-compiling drainer/ failed:\n{result.stdout}{result.stderr}")


def _files(staging: Path) -> Iterable[Path]:
    return sorted(
        (p for p in staging.rglob("*") if p.is_file()),
        key=lambda p: p.relative_to(staging).as_posix(),
    )


def write_zip(staging: Path, output: Path, epoch: int) -> tuple[int, int]:
    """Sorted entries, fixed times and modes; returns (files, unpacked bytes)."""
    stamp = time.gmtime(max(epoch, _DEFAULT_EPOCH))[:6]
    count = unpacked = 0
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_suffix(".zip.partial")
    with zipfile.ZipFile(
        partial, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=COMPRESSLEVEL
    ) as zf:
        for path in _files(staging):
            info = zipfile.ZipInfo(path.relative_to(staging).as_posix(), date_time=stamp)
            mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            info.external_attr = (0o100000 | mode) << 16
            info.create_system = 3  # Unix, so the modes above are honoured on extraction
            info.compress_type = zipfile.ZIP_DEFLATED
            data = path.read_bytes()
            zf.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=COMPRESSLEVEL)
            count += 1
            unpacked += len(data)
    partial.replace(output)
    return count, unpacked


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_path(zip_path: Path) -> Path:
    return zip_path.with_suffix(".json")


def read_manifest(zip_path: Path) -> Manifest:
    raw = json.loads(manifest_path(zip_path).read_text())
    return Manifest(**raw)


def build(
    arch: str,
    output: Path = DEFAULT_OUTPUT,
    *,
    bytecode: str = "auto",
    template: Path = TEMPLATE,
    requirements: Path = REQUIREMENTS,
    source: Path = SOURCE_PACKAGE,
    log: bool = True,
) -> Manifest:
    """Build `output` and its manifest; PackageError says what went wrong."""
    if arch not in ARCHITECTURES:
        raise PackageError(f"architecture must be one of {sorted(ARCHITECTURES)}, not {arch!r}")
    if bytecode not in ("auto", "yes", "no"):
        raise PackageError(f"bytecode must be auto, yes or no, not {bytecode!r}")
    try:
        version = runtime_version(template)
    except RuntimeUnavailable as e:
        raise PackageError(str(e)) from e
    runtime = f"python{version[0]}.{version[1]}"
    python = find_runtime_python(version) if bytecode != "no" else None
    if bytecode == "yes" and python is None:
        raise PackageError(
            f"no {runtime} interpreter to compile byte code with: install it (pyenv install "
            f"{version[0]}.{version[1]}) or set RUNTIME_PYTHON, or build with --bytecode no"
        )
    if bytecode == "auto" and python is None and log:
        print(f"package: no {runtime} found, building without byte code", file=sys.stderr)

    staging = output.parent / f"{output.stem}-{arch}-staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        install_requirements(staging, arch, version, requirements)
        prune(staging)
        pins = pinned_requirements(requirements)
        installed = installed_distributions(staging)
        unpinned = sorted(f"{n}=={v}" for n, v in installed.items() if pins.get(n) != v)
        if unpinned:
            raise PackageError(
                f"installed but not pinned in {requirements.name}: {', '.join(unpinned)}; "
                "pin every transitive dependency exactly"
            )
        copy_source(staging, source)
        if python is not None:
            compile_bytecode(staging, python)
        epoch = int(os.environ.get("SOURCE_DATE_EPOCH", _DEFAULT_EPOCH))
        files, unpacked = write_zip(staging, output, epoch)
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    manifest = Manifest(
        zip=output.name,
        runtime=runtime,
        architecture=arch,
        sha256=sha256(output),
        size=output.stat().st_size,
        unpacked_size=unpacked,
        files=files,
        bytecode=python is not None,
        distributions=dict(sorted(installed.items())),
        version=__version__,
    )
    manifest_path(output).write_text(json.dumps(asdict(manifest), indent=2) + "\n")
    if log:
        print(
            f"package: {output} eks-node-drainer {manifest.version} {runtime} {arch} "
            f"{manifest.size / 1e6:.1f} MB "
            f"({unpacked / 1e6:.1f} MB unpacked, {files} files, byte code "
            f"{'yes' if manifest.bytecode else 'no'}) sha256 {manifest.sha256}"
        )
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.package", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--arch", default="arm64", choices=sorted(ARCHITECTURES))
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--bytecode", default="auto", choices=("auto", "yes", "no"))
    args = parser.parse_args(argv)
    try:
        build(args.arch, args.output, bytecode=args.bytecode)
    except PackageError as e:
        print(f"package: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
