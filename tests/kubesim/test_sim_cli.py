"""`python -m kubesim serve`: URL first on stdout once ready, kubeconfig written, clean
stop on SIGTERM and SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from kubesim.testing import find_kubectl

REPO = Path(__file__).resolve().parents[2]


def _serve(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str, Path]:
    kubeconfig = tmp_path / "kube" / "config"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubesim",
            "serve",
            "--kubeconfig",
            str(kubeconfig),
            "--port",
            "0",
            *extra,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    return process, url, kubeconfig


def _list(kubeconfig: Path, method: str) -> Any:
    api_client = k8s_config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
    try:
        core: Any = k8s.CoreV1Api(api_client)
        return getattr(core, method)()
    finally:
        api_client.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_cli_serve__url_first_kubeconfig_written__stops_on_signal(
    tmp_path: Path, signum: int
) -> None:
    process, url, kubeconfig = _serve(tmp_path)
    try:
        assert url.startswith("https://127.0.0.1:")
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["current-context"] == "admin"
        assert {c["name"] for c in config["contexts"]} == {"admin", "drainer"}
        assert config["clusters"][0]["cluster"]["server"] == url
        assert kubeconfig.stat().st_mode & 0o077 == 0
        namespaces = _list(kubeconfig, "list_namespace")
        assert "default" in [n.metadata.name for n in namespaces.items]

        process.send_signal(signum)
        returncode = process.wait(timeout=10)
    finally:
        process.kill()
        process.wait()

    assert returncode == 0
    assert process.stderr is not None
    assert "Traceback" not in process.stderr.read()


def test_cli_serve__apply_manifest_at_start(tmp_path: Path) -> None:
    manifest = tmp_path / "nodes.yaml"
    manifest.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n")

    process, _, kubeconfig = _serve(tmp_path, "--apply", str(manifest), "--speed", "10")
    try:
        nodes = _list(kubeconfig, "list_node")
        process.terminate()
        process.wait(timeout=10)
    finally:
        process.kill()
        process.wait()

    assert [n.metadata.name for n in nodes.items] == ["n1"]


def test_cli__no_command__usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kubesim"], cwd=REPO, capture_output=True, text=True, check=False
    )

    assert result.returncode == 2
    assert "usage:" in result.stderr


def test_find_kubectl__not_on_path__uses_cached_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    cached = tmp_path / "kubectl"
    cached.write_text("#!/bin/sh\n")
    cached.chmod(0o755)

    assert find_kubectl(tmp_path) == cached
    assert find_kubectl(tmp_path / "nothing-here") is None


def test_find_kubectl__on_path__preferred(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    on_path = bin_dir / "kubectl"
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))

    assert find_kubectl(tmp_path / "cache") == on_path
