"""The packaged function as Lambda runs it: the zip of `make package`, unpacked as
Lambda unpacks it, started by the runtime interface client (`awslambdaric`, what
AWS's Python base images run) under the runtime's Python, behind the AWS Lambda
Runtime Interface Emulator (`aws-lambda-rie`, built from its Go module by
build.sh beside this file).

What comes from template.yaml and nothing else: the runtime's Python version
(`Runtime:`), the handler string (`Handler:`), the timeout (`Timeout:`, which a
test may shorten), the memory size and the function's environment with every
parameter at its default (demo/template.py reads them). The emulator passes the
timeout to the runtime as the invocation's deadline and ends an invocation that
outlives it, as Lambda does.

    with LambdaRie.start(env={...}, timeout=20) as function:
        invocation = function.invoke(event)
        invocation.result, invocation.report, invocation.lines

Nothing here reaches the internet: the emulator listens on 127.0.0.1 only, and the
function's AWS is whatever AWS_ENDPOINT_URL the caller gives it (awssim's server).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from demo import template
from testbed.processes import die_with_parent, free_port
from tools import package
from tools.runtime import (
    RuntimeUnavailable,
    find_runtime_python,
    host_arch,
    install_runtime_sdk,
    runtime_version,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BUILD_SCRIPT = HERE / "build.sh"
WORK = ROOT / "build" / "lambdarie"
FUNCTION_NAME = "eks-node-drainer"
REGION = "us-east-1"
_INVOKE_PATH = "/2015-03-31/functions/function/invocations"
_REPORT = re.compile(r"^REPORT RequestId: (\S+)\t(.*)$")
_INIT = re.compile(r"INIT REPORT\(durationMs: ([0-9.]+)\)")
_RTDONE = re.compile(r"INVOKE RTDONE\(status: (\w+).*duration: ([0-9.]+)ms\)")


class RieUnavailable(RuntimeError):
    """The emulator, the runtime's Python or the zip cannot be had; says what to do."""


def rie_binary() -> Path:
    """aws-lambda-rie, built by build.sh the first time (seconds), cached after."""
    if shutil.which("go") is None:
        where = subprocess.run(
            ["bash", str(BUILD_SCRIPT), "--where"], capture_output=True, text=True, check=False
        )
        if where.returncode == 0:
            return Path(where.stdout.strip())
        raise RieUnavailable(
            "aws-lambda-rie is not built and Go is not on PATH: install Go >= 1.24 "
            "(https://go.dev/dl/), then run `make lambdarie`"
        )
    done = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RieUnavailable(
            f"building aws-lambda-rie failed (bash {BUILD_SCRIPT}):\n{done.stderr}"
        )
    return Path(done.stdout.strip().splitlines()[-1])


def _sources_key(arch: str) -> str:
    digest = hashlib.sha256(arch.encode())
    for path in sorted((ROOT / "drainer").rglob("*.py")):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    for path in (package.REQUIREMENTS, package.TEMPLATE, Path(package.__file__)):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@contextmanager
def _locked() -> Iterator[None]:
    """One builder at a time: the test workers share build/lambdarie."""
    WORK.mkdir(parents=True, exist_ok=True)
    with open(WORK / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def packaged_zip(arch: str | None = None) -> Path:
    """The zip `make package` builds for `arch` (default: this machine's), with its
    manifest beside it; built once per change of drainer/, requirements.txt, the
    template or the packager (tests/deploy/test_deploy_package.py checks this one)."""
    arch = arch or host_arch()
    zip_path = WORK / f"eks-node-drainer-{arch}-{_sources_key(arch)}.zip"
    with _locked():
        if zip_path.is_file() and package.manifest_path(zip_path).is_file():
            return zip_path
        for old in WORK.glob(f"eks-node-drainer-{arch}-*"):  # an older key's zip and task
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink()
        try:
            package.build(arch, zip_path, bytecode="auto", log=False)
        except package.PackageError as e:
            raise RieUnavailable(f"`make package ARCH={arch}` failed: {e}") from e
    return zip_path


def task_root(arch: str | None = None) -> Path:
    """packaged_zip() unpacked, as Lambda unpacks it into /var/task."""
    zip_path = packaged_zip(arch)
    task = zip_path.with_suffix("")
    with _locked():
        if (task / ".complete").is_file():
            return task
        with zipfile.ZipFile(zip_path) as zf:
            zf.extractall(task)
            for info in zf.infolist():  # extractall drops the modes
                mode = info.external_attr >> 16
                if mode:
                    (task / info.filename).chmod(mode & 0o777)
        (task / ".complete").write_text(zip_path.name)
        return task


def runtime_python() -> Path:
    version = runtime_version()
    python = find_runtime_python(version)
    if python is None:
        raise RieUnavailable(
            f"no python{version[0]}.{version[1]} (template.yaml's Runtime:) on this machine: "
            f"install it (pyenv install {version[0]}.{version[1]}) or set RUNTIME_PYTHON"
        )
    return python


def runtime_dir(python: Path) -> Path:
    """Lambda's /var/runtime: awslambdaric and boto3 & co. at their pins."""
    try:
        return install_runtime_sdk(ROOT / "build" / "runtime-sdk", python, runtime_version())
    except RuntimeUnavailable as e:
        raise RieUnavailable(str(e)) from e


@dataclass
class Invocation:
    """One invocation as the emulator answered and logged it."""

    request_id: str
    status: int
    body: Any
    lines: list[str] = field(default_factory=list)
    report: dict[str, str] = field(default_factory=dict)
    """The REPORT line's fields: Duration, Billed Duration, Init Duration, ..."""
    init_ms: float | None = None
    """The runtime's start-up (the emulator's INIT REPORT), on a cold start only."""
    runtime_ms: float | None = None
    """The handler's time (the emulator's INVOKE RTDONE); None when it was killed."""
    peak_rss_mb: float | None = None
    """The runtime process's peak resident memory (VmHWM) once the invocation ended:
    the emulator's "Max Memory Used" only repeats the memory size."""

    @property
    def error(self) -> dict[str, Any] | None:
        """The runtime's error answer ({"errorType", "errorMessage"}), or None."""
        if isinstance(self.body, dict) and "errorType" in self.body:
            return self.body
        return None

    @property
    def result(self) -> dict[str, Any]:
        assert self.error is None, f"the invocation failed: {self.error}\n" + "\n".join(self.lines)
        assert isinstance(self.body, dict), self.body
        return self.body

    def records(self) -> list[dict[str, Any]]:
        """The function's JSON log lines."""
        found = []
        for line in self.lines:
            if line.startswith("{"):
                try:
                    found.append(json.loads(line))
                except ValueError:
                    continue
        return found

    @property
    def timed_out(self) -> bool:
        return (
            any("Task timed out" in line for line in self.lines)
            or (self.error or {}).get("errorType") == "Sandbox.Timedout"
        )


class LambdaRie:
    """One function, one execution environment: the emulator and the runtime it starts."""

    def __init__(self, process: subprocess.Popen[str], url: str, timeout: float) -> None:
        self.process = process
        self.url = url
        self.timeout = timeout
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, name="aws-lambda-rie", daemon=True)
        self._reader.start()

    @classmethod
    @contextmanager
    def start(
        cls,
        env: Mapping[str, str],
        *,
        timeout: float | None = None,
        handler: str | None = None,
        cluster_name: str = "demo",
        asg_name: str = "",
    ) -> Iterator[LambdaRie]:
        """The function with template.yaml's configuration, `env` over its environment
        (AWS_ENDPOINT_URL, credentials, settings), `timeout` over its Timeout and
        `handler` over its Handler (a test of a wrong one)."""
        function = template.from_template(template.TEMPLATE, cluster_name, asg_name)
        python = runtime_python()
        runtime = runtime_dir(python)
        task = task_root()
        binary = rie_binary()
        seconds = int(timeout if timeout is not None else function.timeout_seconds)
        port, api_port = free_port(), free_port()
        environment = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "en_US.UTF-8",
            "TZ": ":UTC",
            "HOME": str(WORK),
            # What Lambda sets for a function (the emulator adds the Runtime API's).
            "LAMBDA_TASK_ROOT": str(task),
            "LAMBDA_RUNTIME_DIR": str(runtime),
            "PYTHONPATH": f"{task}:{runtime}",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_LAMBDA_FUNCTION_NAME": FUNCTION_NAME,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_mb),
            "AWS_LAMBDA_FUNCTION_TIMEOUT": str(seconds),
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{FUNCTION_NAME}",
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
            "AWS_EC2_METADATA_DISABLED": "true",
            **function.environment,
            **env,
        }
        command = [
            str(binary),
            "--runtime-interface-emulator-address",
            f"127.0.0.1:{port}",
            "--runtime-api-address",
            f"127.0.0.1:{api_port}",
            # -s: no user site-packages; the pyenv interpreter's own site-packages
            # hold pip only. The handler is the last argument, as the emulator reads it.
            str(python),
            "-s",
            "-m",
            "awslambdaric",
            handler if handler is not None else function.handler,
        ]
        process = subprocess.Popen(
            command,
            cwd=task,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            preexec_fn=die_with_parent,  # noqa: PLW1509 (only prctl, no locks)
        )
        running = cls(process, f"http://127.0.0.1:{port}{_INVOKE_PATH}", seconds)
        try:
            running._wait_listening(port)
            yield running
        finally:
            running.stop()

    def _wait_listening(self, port: int, within: float = 10.0) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RieUnavailable("aws-lambda-rie exited:\n" + "\n".join(self.lines[-20:]))
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.02)
        raise RieUnavailable(f"aws-lambda-rie did not listen on 127.0.0.1:{port} in {within} s")

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(5)
        self._reader.join(5)

    def invoke(self, event: Any, *, raw: bytes | None = None) -> Invocation:
        """Invoke synchronously, as the Runtime API would; `raw` sends bytes as they are."""
        request_id = str(uuid.uuid4())
        first = len(self.lines)
        body = raw if raw is not None else json.dumps(event).encode()
        request = urllib.request.Request(
            self.url, data=body, method="POST", headers={"X-Amzn-RequestId": request_id}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout + 60) as answer:
                status, payload = answer.status, answer.read()
        except urllib.error.HTTPError as e:
            status, payload = e.code, e.read()
        lines = self._until_report(request_id, first)
        try:
            parsed: Any = json.loads(payload) if payload else None
        except ValueError:
            parsed = payload.decode(errors="replace")
        invocation = Invocation(request_id, status, parsed, lines)
        for line in lines:
            report = _REPORT.match(line)
            if report:
                invocation.report = dict(
                    part.split(": ", 1) for part in report.group(2).split("\t") if ": " in part
                )
            if (init := _INIT.search(line)) is not None:
                invocation.init_ms = float(init.group(1))
            if (done := _RTDONE.search(line)) is not None:
                invocation.runtime_ms = float(done.group(2))
        invocation.peak_rss_mb = self._runtime_peak_rss_mb()
        return invocation

    def _until_report(self, request_id: str, first: int, within: float = 10.0) -> list[str]:
        """This invocation's lines: from where it began to its REPORT line."""
        deadline = time.monotonic() + within
        with self._changed:
            while not any(
                line.startswith(f"REPORT RequestId: {request_id}") for line in self.lines[first:]
            ):
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    break
                self._changed.wait(left)
            return list(self.lines[first:])

    def _runtime_peak_rss_mb(self) -> float | None:
        """VmHWM of the emulator's child (the runtime's Python), if it is still there."""
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                text = status.read_text()
            except OSError:
                continue
            if re.search(rf"^PPid:\s+{self.process.pid}$", text, re.MULTILINE) is None:
                continue
            found = re.search(r"^VmHWM:\s+(\d+) kB", text, re.MULTILINE)
            if found:
                return int(found.group(1)) / 1024
        return None
