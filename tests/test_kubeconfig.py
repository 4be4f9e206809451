"""A kubeconfig read without the kubernetes package (drainer/k8s/kubeconfig.py), and
the client built on it: what kubectl would connect with, against kubesim; the
kubernetes package only for what it alone reads (an auth-provider)."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drainer.cli.main import main
from drainer.errors import KubeError
from drainer.k8s import kubeconfig
from drainer.k8s.kube import Kube
from kubesim import KubeSim
from kubesim.auth import User
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import pods_on, wait_until

ROOT = Path(__file__).resolve().parents[1]
ADMIN = ("system:masters", "system:authenticated")


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(speed=20.0) as running:
        running.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        yield running


def _config(sim: KubeSim, user: dict[str, Any], **cluster: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "sim",
                "cluster": {"server": sim.url, "certificate-authority-data": sim.ca_data, **cluster},
            }
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "u"}}],
        "current-context": "sim",
    }


def test_cli_and_lambda_paths__no_kubernetes_package_imported(sim: KubeSim, tmp_path: Path) -> None:
    """Its import alone costs a cold start a quarter of a second or more (issue 28)."""
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(_config(sim, {"token": sim.admin_token})))
    (tmp_path / "ca.pem").write_bytes(sim.ca_pem)
    script = f"""
import sys
from drainer.cli import main
from drainer.k8s.kube import Kube
from drainer.k8s.auth import StaticToken
kube = Kube.from_kubeconfig({str(config)!r})
assert kube.get_node("n1") is not None
lambdas = Kube.for_cluster({sim.url!r}, open({str(tmp_path / "ca.pem")!r}, "rb").read(),
                           StaticToken({sim.admin_token!r}))
assert lambdas.get_node("n1") is not None
print(sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes"))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_merged_files__the_first_to_name_a_thing_wins__paths_from_their_own_file(
    sim: KubeSim, tmp_path: Path
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (second / "ca.pem").write_bytes(sim.ca_pem)
    (second / "token").write_text(sim.admin_token + "\n")
    # The first file names the context and a user "u" the second also names.
    (first / "config").write_text(
        yaml.safe_dump(
            {
                "current-context": "sim",
                "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "u"}}],
                "users": [{"name": "u", "user": {"tokenFile": "../b/token"}}],
            }
        )
    )
    (second / "config").write_text(
        yaml.safe_dump(
            {
                "current-context": "elsewhere",
                "clusters": [
                    {"name": "sim", "cluster": {"server": sim.url, "certificate-authority": "ca.pem"}}
                ],
                "users": [{"name": "u", "user": {"token": "not-this-one"}}],
            }
        )
    )
    path = f"{first / 'config'}:{second / 'config'}"

    loaded = kubeconfig.load(path, None, clock=time.time)
    kube = Kube.from_kubeconfig(path)

    assert loaded.endpoint.ca_file == str(second / "ca.pem")
    assert loaded.endpoint.authorization == f"Bearer {sim.admin_token}"
    assert kube.get_node("n1") is not None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"current-context": "nowhere"}, "context 'nowhere' is not in the kubeconfig"),
        ({"clusters": []}, "cluster 'sim' of context 'sim' is not in it"),
        ({"current-context": ""}, "no context given and no current-context set"),
    ],
)
def test_broken_kubeconfig__says_what_is_missing(
    sim: KubeSim, tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump({**_config(sim, {"token": "t"}), **change}))

    with pytest.raises(KubeError, match=message) as raised:
        Kube.from_kubeconfig(str(config))

    assert str(raised.value).startswith(f"cannot load kubeconfig {config} context (current): ")


def test_auth_provider__loaded_by_the_kubernetes_package(sim: KubeSim, tmp_path: Path) -> None:
    """The legacy OIDC helper, which only the package's loader reads: its id-token
    (unexpired, so no refresh) is the bearer token."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    token = ".".join([part({"alg": "none"}), part({"exp": time.time() + 3600}), "sig"])
    sim.authenticator.tokens[token] = User("oidc-user", ADMIN)
    provider = {
        "name": "oidc",
        "config": {"id-token": token, "idp-issuer-url": "https://issuer", "client-id": "c"},
    }
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(_config(sim, {"auth-provider": provider})))

    kube = Kube.from_kubeconfig(str(config))

    assert kube.get_node("n1") is not None
    assert [r.user for r in sim.requests()] == ["oidc-user"]


PLUGIN = """
import datetime, json, os, sys, time
here = sys.argv[1]
issued = os.path.join(here, "issued")
count = sum(1 for _ in open(issued)) if os.path.exists(issued) else 0
token = f"short-{count}"
with open(issued, "a") as f:
    f.write(f"{token} {time.time()}\\n")
expiry = datetime.datetime.fromtimestamp(time.time() + float(sys.argv[2]), datetime.timezone.utc)
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": {"token": token, "expirationTimestamp": expiry.isoformat()}}))
"""


class ShortTokens:
    """The API server's side of an exec plugin whose tokens last `lifetime` seconds:
    each token the plugin issued is accepted (as the drainer's user, with its RBAC)
    until its lifetime is over, then refused (401)."""

    def __init__(self, sim: KubeSim, directory: Path, lifetime: float) -> None:
        self.sim, self.directory, self.lifetime = sim, directory, lifetime
        self.issued: dict[str, float] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        users = self.sim.authenticator.tokens
        drainer = users[self.sim.drainer_token]
        while not self.stopped.wait(0.05):
            path = self.directory / "issued"
            for line in path.read_text().splitlines() if path.exists() else []:
                token, at = line.split()
                if token not in self.issued:
                    self.issued[token] = float(at)
                    users[token] = drainer
            for token, at in self.issued.items():
                if time.time() > at + self.lifetime:
                    users.pop(token, None)


def test_exec_plugin_tokens_expiring_every_3_s__a_24_s_drain_finishes(
    sim: KubeSim, tmp_path: Path
) -> None:
    """What `aws eks get-token` does to a long drain, faster: each token refused by
    the API server 3 s after it was issued, over a drain of 8 lifetimes."""
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(script), str(tmp_path), "3"],
        }
    }
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(_config(sim, user)))
    tokens = ShortTokens(sim, tmp_path, lifetime=3.0)
    tokens.thread.start()
    # Stopping takes 480 s at kubesim's speed 20: 24 s here.
    sim.apply([w.deployment("slow", 2, shutdown=480, grace=600)])
    cluster = Cluster.of_kubesim(sim)
    wait_until(lambda: len(pods_on(cluster, "n1")) == 2, timeout=20)
    out = io.StringIO()
    try:
        code = main(["drain", "n1", "--kubeconfig", str(config)], stdout=out)
    finally:
        tokens.stopped.set()

    assert code == 0, out.getvalue()
    assert pods_on(cluster, "n1") == []
    assert len(tokens.issued) >= 7, "a new token for each lifetime"
