"""The in-cluster configuration (drainer/k8s/incluster.py): with no kubeconfig file, a
CLI run in a pod reaches the API server of KUBERNETES_SERVICE_HOST/PORT with the
service account's token and CA, as kubectl does; the gcp and azure auth-providers are
refused as kubectl refuses them."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from support.sims import fast_sim_with_a_node  # noqa: F401  (the fixture `sim`)

from drainer.cli.main import main
from drainer.errors import KubeError
from drainer.k8s import incluster
from drainer.k8s.kube import Kube
from kubesim import KubeSim
from kubesim.auth import User

ADMIN = ("system:masters", "system:authenticated")


@pytest.fixture
def pod(sim: KubeSim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process as a pod sees itself: the service account mounted, the service's
    variables set, no kubeconfig anywhere."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("sa-token-1\n")
    (account / "ca.crt").write_bytes(sim.ca_pem)
    sim.authenticator.tokens["sa-token-1"] = User("system:serviceaccount:ops:drainer", ADMIN)
    monkeypatch.setattr(incluster, "SERVICE_ACCOUNT", account)
    where = urlsplit(sim.url)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", str(where.hostname))
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(where.port))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    return account


def test_no_kubeconfig_in_a_pod__the_service_account_is_used(sim: KubeSim, pod: Path) -> None:
    kube = Kube.from_kubeconfig()
    try:
        assert kube.get_node("n1") is not None
        assert kube.user == incluster.USER
    finally:
        kube.close()
    assert [r.user for r in sim.requests()] == ["system:serviceaccount:ops:drainer"]


def test_in_a_pod__the_rotated_token_is_read_again_after_a_401(sim: KubeSim, pod: Path) -> None:
    kube = Kube.from_kubeconfig()
    try:
        kube.get_node("n1")
        # The kubelet rotates the projected token; the old one stops working.
        (pod / "token").write_text("sa-token-2\n")
        sim.authenticator.tokens["sa-token-2"] = sim.authenticator.tokens.pop("sa-token-1")
        assert kube.get_node("n1") is not None
    finally:
        kube.close()


def test_cli_in_a_pod__drains_as_the_service_account(sim: KubeSim, pod: Path) -> None:
    out = io.StringIO()
    code = main(["release", "n1", "-o", "json"], stdout=out)
    assert code == 0, out.getvalue()
    assert json.loads(out.getvalue())["node"] == "n1"


def test_a_kubeconfig_file_wins_over_the_pod(sim: KubeSim, pod: Path, tmp_path: Path) -> None:
    """As kubectl: in-cluster only when no kubeconfig file is found."""
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(_config(sim, {"token": "not-a-known-token"})))
    kube = Kube.from_kubeconfig(str(config))
    try:
        with pytest.raises(KubeError, match=r"401|nauthorized"):
            kube.get_node("n1")
    finally:
        kube.close()


def test_an_explicit_missing_kubeconfig__refused_even_in_a_pod(pod: Path, tmp_path: Path) -> None:
    with pytest.raises(KubeError, match="no kubeconfig file at"):
        Kube.from_kubeconfig(str(tmp_path / "missing"))


@pytest.mark.parametrize(
    ("unset", "why"),
    [("KUBERNETES_SERVICE_HOST", "no service variable"), ("token", "no token mounted")],
)
def test_not_in_a_pod__no_kubeconfig_is_said(
    pod: Path, monkeypatch: pytest.MonkeyPatch, unset: str, why: str
) -> None:
    if unset == "token":
        (pod / "token").unlink()
    else:
        monkeypatch.delenv(unset)
    with pytest.raises(KubeError, match=r"no kubeconfig file at .*aws eks update-kubeconfig"):
        Kube.from_kubeconfig()


def test_ipv6_service_host__bracketed(pod: Path) -> None:
    endpoint, _ = incluster.load(
        lambda: 0.0, {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    )
    assert endpoint.server == "https://[fd00::1]:443"


# -- auth-providers ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "instead"),
    [("gcp", "gke-gcloud-auth-plugin"), ("azure", "kubelogin"), ("openstack", "exec")],
)
def test_removed_auth_providers__refused_by_name_exit_2(
    sim: KubeSim, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, instead: str
) -> None:
    config = tmp_path / "kubeconfig"
    user = {"auth-provider": {"name": name, "config": {"access-token": "t"}}}
    config.write_text(yaml.safe_dump(_config(sim, user)))
    out = io.StringIO()

    code = main(["release", "n1", "--kubeconfig", str(config), "-o", "json"], stdout=out)

    assert code == 2
    said = json.loads(out.getvalue())["message"]
    assert name in said and instead in said
    assert sim.requests() == []  # refused before any request


def _config(sim: KubeSim, user: Mapping[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "sim",
                "cluster": {"server": sim.url, "certificate-authority-data": sim.ca_data},
            }
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "u"}}],
        "current-context": "sim",
    }
