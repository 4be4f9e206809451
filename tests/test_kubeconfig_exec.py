"""Exec credential plugins' answers and commands kubectl takes, held to what client-go
does with them (plugin/pkg/client/auth/exec): a status with a client certificate and
an empty, null or real token; a bare command found on our PATH whatever PATH the
kubeconfig's `env` gives the plugin."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.sims import fast_sim_with_a_node  # noqa: F401  (the fixture `sim`)

from drainer.k8s import kubeconfig
from drainer.k8s.kube import Kube
from kubesim import KubeSim
from tests.support.clock import FakeClock

V1BETA1 = "client.authentication.k8s.io/v1beta1"


def _plugin(path: Path, status: dict[str, Any]) -> Path:
    """An executable plugin script printing `status`, run by this interpreter."""
    credential = {"apiVersion": V1BETA1, "kind": "ExecCredential", "status": status}
    path.write_text(f"#!{sys.executable}\nimport json\nprint(json.dumps({credential!r}))\n")
    path.chmod(0o755)
    return path


def _kubeconfig(directory: Path, sim: KubeSim, exec_spec: dict[str, Any]) -> Path:
    cluster = {"server": sim.url, "certificate-authority-data": sim.ca_data}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sim", "cluster": cluster}],
        "users": [{"name": "u", "user": {"exec": {"apiVersion": V1BETA1, **exec_spec}}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "u"}}],
        "current-context": "sim",
    }
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("token", ["", None], ids=["empty", "null"])
def test_exec_plugin_certificate_with_an_empty_or_null_token__the_certificate_used(
    sim: KubeSim, tmp_path: Path, token: str | None
) -> None:
    """client-go reads `"token": ""` and `"token": null` as no token, and takes the
    client certificate beside it (a plugin written in Python or Node may print them);
    this read them as a token the plugin failed to give."""
    cert, key = sim.tls.cert_pem.decode(), sim.tls.key_pem.decode()
    status = {"token": token, "clientCertificateData": cert, "clientKeyData": key}
    plugin = _plugin(tmp_path / "cert-plugin", status)

    loaded = kubeconfig.load(
        str(_kubeconfig(tmp_path, sim, {"command": str(plugin)})), None, clock=FakeClock()
    )

    assert Path(loaded.endpoint.cert_file).read_text() == cert
    assert Path(loaded.endpoint.key_file).read_text() == key
    assert loaded.token is not None and loaded.token.token() == ""  # no bearer to send


def test_exec_plugin_token_and_a_client_certificate__both_presented(
    sim: KubeSim, tmp_path: Path
) -> None:
    """client-go presents a plugin's client certificate and sends its token when it
    prints both (an mTLS front proxy before an API server that takes the token); this
    dropped the certificate."""
    cert, key = sim.tls.cert_pem.decode(), sim.tls.key_pem.decode()
    status = {"token": sim.admin_token, "clientCertificateData": cert, "clientKeyData": key}
    plugin = _plugin(tmp_path / "both-plugin", status)

    kube = Kube.from_kubeconfig(str(_kubeconfig(tmp_path, sim, {"command": str(plugin)})))

    assert Path(kube.transport.endpoint.cert_file).read_text() == cert
    assert kube.get_node("n1") is not None  # the token sent: kubesim admits it


def test_exec_plugin_bare_command__looked_up_on_our_path__not_the_path_env_gives_it(
    sim: KubeSim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """client-go finds a bare command on kubectl's own PATH (exec.Command) and only
    then gives the plugin the kubeconfig's env; this looked it up on the PATH of that
    env, and said the plugin was missing."""
    tools = tmp_path / "bin"
    tools.mkdir()
    _plugin(tools / "token-plugin", {"token": sim.admin_token})
    monkeypatch.setenv("PATH", f"{tools}:{Path(sys.executable).parent}:/usr/bin:/bin")
    spec = {"command": "token-plugin", "env": [{"name": "PATH", "value": str(tmp_path / "none")}]}

    kube = Kube.from_kubeconfig(str(_kubeconfig(tmp_path, sim, spec)))

    assert kube.get_node("n1") is not None
