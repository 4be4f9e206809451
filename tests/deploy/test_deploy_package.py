"""make package: the zip is reproducible, holds drainer/ and the pins only, and runs.

The zip is built for this machine's architecture (the test runs it) and once for
arm64 without byte code (to check the wheels chosen); the runtime's Python comes
from pyenv (tools.runtime.find_runtime_python), and the runtime's boto3 is
installed beside the zip, never in it.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import drainer
from testbed import lambdarie
from tools import package
from tools.runtime import (
    ROOT,
    find_runtime_python,
    host_arch,
    install_runtime_sdk,
    runtime_version,
)

from .cfn import Stack
from .conftest import ASGS, CLUSTER

RUNTIME = runtime_version()
RUNTIME_PYTHON = find_runtime_python(RUNTIME)
needs_runtime_python = pytest.mark.skipif(
    RUNTIME_PYTHON is None, reason=f"no python{RUNTIME[0]}.{RUNTIME[1]} (pyenv) to run the zip"
)


@dataclass(frozen=True)
class Built:
    path: Path
    manifest: package.Manifest
    names: list[str]

    def extract(self, target: Path) -> Path:
        with zipfile.ZipFile(self.path) as zf:
            zf.extractall(target)
        return target


def build(target: Path, arch: str, bytecode: str = "auto") -> Built:
    manifest = package.build(arch, target / "eks-node-drainer.zip", bytecode=bytecode, log=False)
    with zipfile.ZipFile(target / "eks-node-drainer.zip") as zf:
        names = zf.namelist()
    return Built(target / "eks-node-drainer.zip", manifest, names)


@pytest.fixture(scope="module")
def built() -> Built:
    """The zip the runtime tests run too (testbed/lambdarie builds it once per change)."""
    path = lambdarie.packaged_zip(host_arch())
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    return Built(path, package.read_manifest(path), names)


@pytest.fixture(scope="module")
def task(built: Built) -> Path:
    """The zip unpacked, as Lambda unpacks it into /var/task."""
    return lambdarie.task_root(built.manifest.architecture)


def test_two_builds_are_byte_for_byte_identical(built: Built, tmp_path: Path):
    again = build(tmp_path, host_arch())
    assert again.manifest.sha256 == built.manifest.sha256
    assert package.sha256(built.path) == built.manifest.sha256


def test_manifest_names_runtime_architecture_and_size(built: Built):
    manifest = json.loads(package.manifest_path(built.path).read_text())
    assert manifest["runtime"] == f"python{RUNTIME[0]}.{RUNTIME[1]}"
    assert manifest["architecture"] == host_arch()
    assert manifest["version"] == drainer.__version__
    assert manifest["size"] == built.path.stat().st_size
    # Lambda's limit for an unpacked function.
    assert manifest["unpacked_size"] < 250 * 1024 * 1024


def test_zip_holds_drainer_and_the_pinned_wheels_only(built: Built):
    tops = {name.split("/", 1)[0] for name in built.names}
    for excluded in (
        "boto3",
        "botocore",
        "s3transfer",
        "kubesim",
        "awssim",
        "tests",
        "tools",
        "bin",
    ):
        assert excluded not in tops
    assert not any(t.startswith(("boto3-", "botocore-", "s3transfer-")) for t in tops)
    shipped = {n for n in built.names if n.startswith("drainer/") and n.endswith(".py")}
    expected = {
        f"drainer/{p.relative_to(ROOT / 'drainer').as_posix()}"
        for p in (ROOT / "drainer").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert shipped == expected
    assert built.manifest.distributions == package.pinned_requirements()
    assert not [n for n in built.names if n.rsplit("/", 1)[-1] in ("RECORD", "INSTALLER")]
    assert not [n for n in built.names if "__pycache__" in n and ".cpython-311" in n]


def test_entries_are_sorted_with_fixed_times_and_modes(built: Built):
    assert built.names == sorted(built.names)
    with zipfile.ZipFile(built.path) as zf:
        infos = zf.infolist()
    assert {info.date_time for info in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert {info.external_attr >> 16 for info in infos} <= {0o100644, 0o100755}


@needs_runtime_python
def test_byte_code_is_the_runtimes(built: Built):
    tag = f"cpython-{RUNTIME[0]}{RUNTIME[1]}"
    pyc = [n for n in built.names if n.endswith(".pyc")]
    assert "drainer/__pycache__/handler." + tag + ".pyc" in pyc
    assert all(f".{tag}.pyc" in n for n in pyc)


def test_no_kubernetes_package_no_http_library_one_compiled_codec(built: Built):
    """The function talks to the API server over the standard library: the zip is
    drainer/, powertools and orjson (drainer/jsonio.py), whose one compiled module is
    the zip's architecture's."""
    tops = {n.split("/", 1)[0] for n in built.names}
    shipped = {t for t in tops if not t.endswith(".dist-info")} - {"__pycache__"}
    assert shipped == {
        "drainer",
        "aws_lambda_powertools",
        "jmespath",
        "typing_extensions.py",
        "orjson",
    }
    compiled = [n for n in built.names if n.endswith(".so")]
    machine = package.ARCHITECTURES[built.manifest.architecture]
    assert compiled == [f"orjson/orjson.cpython-{RUNTIME[0]}{RUNTIME[1]}-{machine}-linux-gnu.so"]
    # powertools' REST/GraphQL event handlers (their OpenAPI models): never imported.
    assert not [n for n in built.names if n.startswith("aws_lambda_powertools/event_handler/")]
    assert built.manifest.size < 3_000_000, built.manifest.size


def test_an_arm64_build__its_codec_compiled_for_arm64(tmp_path: Path):
    arm = build(tmp_path, "arm64", bytecode="no")
    assert arm.manifest.architecture == "arm64"
    compiled = [n for n in arm.names if n.endswith(".so")]
    assert compiled == [f"orjson/orjson.cpython-{RUNTIME[0]}{RUNTIME[1]}-aarch64-linux-gnu.so"]


def test_an_unpinned_dependency_stops_the_build(tmp_path: Path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("requests==2.34.2\n")  # urllib3, idna, ... come unpinned
    with pytest.raises(package.PackageError, match=r"not pinned.*urllib3"):
        package.build(
            "x86_64", tmp_path / "out.zip", bytecode="no", requirements=requirements, log=False
        )


def test_platform_tags_cover_the_runtimes_glibc():
    tags = package.platform_tags("arm64")
    assert tags[0] == "manylinux2014_aarch64"
    assert tags[-1] == "manylinux_2_34_aarch64"


# --- the zip under the runtime's Python -------------------------------------------------

_RUN_HANDLER = r"""
import json, sys
task, sdk, event_path = sys.argv[1:4]
sys.path[:0] = [task, sdk]

# Any AWS call would go through here: record it and refuse it.
import botocore.client
calls = []
def refuse(self, operation, params):
    calls.append(self.meta.service_model.service_name + ":" + operation)
    raise RuntimeError("no AWS call expected")
botocore.client.BaseClient._make_api_call = refuse

from drainer.handler import lambda_handler

class Context:
    function_name = "eks-node-drainer"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:eks-node-drainer"
    memory_limit_in_mb = 512
    aws_request_id = "1b3c2e5f-0000-4000-8000-000000000000"
    log_group_name = "/aws/lambda/eks-node-drainer"
    log_stream_name = "2026/11/22/[$LATEST]0123456789abcdef"
    def get_remaining_time_in_millis(self):
        return 900_000

with open(event_path) as f:
    result = lambda_handler(json.load(f), Context())

# What the first drain imports lazily must load too.
import aws_lambda_powertools.metrics, drainer.engine.drain, drainer.lifecycle.clients
names = ("drainer.handler", "aws_lambda_powertools", "botocore")
files = {m: sys.modules[m].__file__ for m in names}
print(json.dumps({"result": result, "calls": calls, "files": files,
                  "version": list(sys.version_info[:2])}))
"""


@pytest.fixture(scope="module")
def runtime_sdk() -> Iterator[Path]:
    assert RUNTIME_PYTHON is not None
    yield install_runtime_sdk(ROOT / "build" / "runtime-sdk", RUNTIME_PYTHON, RUNTIME)


@needs_runtime_python
def test_zip_runs_the_handler_on_a_test_notification_under_the_runtimes_python(
    task: Path, runtime_sdk: Path, tmp_path: Path
):
    """Imported from the unpacked zip alone (python -I -S: no site-packages), with the
    function's environment as the template sets it, and no credentials: the handler
    must skip the test notification without any AWS call."""
    assert RUNTIME_PYTHON is not None
    function = Stack(
        {"ClusterName": CLUSTER, "AsgNames": ",".join(ASGS), "CodeS3Bucket": "b", "CodeS3Key": "k"}
    )
    environment = function.resource("DrainerFunction")["Environment"]["Variables"]
    env = {k: str(v) for k, v in environment.items()} | {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "AWS_REGION": "eu-west-1",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_LAMBDA_FUNCTION_NAME": "eks-node-drainer",
        "AWS_EC2_METADATA_DISABLED": "true",
        "PYTHONDONTWRITEBYTECODE": "1",  # /var/task is read-only
    }
    event = ROOT / "tests" / "events" / "test-notification.json"
    run = subprocess.run(
        [
            str(RUNTIME_PYTHON),
            "-I",
            "-S",
            "-c",
            _RUN_HANDLER,
            str(task),
            str(runtime_sdk),
            str(event),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["version"] == list(RUNTIME)
    assert report["result"]["result"] == "skipped"
    assert "TEST_NOTIFICATION" in report["result"]["reason"]
    assert report["calls"] == []
    assert report["files"]["drainer.handler"].startswith(str(task))
    assert report["files"]["aws_lambda_powertools"].startswith(str(task))
    assert report["files"]["botocore"].startswith(str(runtime_sdk))
    assert "event skipped" in run.stdout + run.stderr  # the handler's JSON log line
