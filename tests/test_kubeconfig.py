"""A kubeconfig read without the kubernetes package (drainer/k8s/kubeconfig.py), and
the client built on it: what kubectl would connect with, against kubesim; the
kubernetes package only for what it alone reads (an auth-provider)."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.sims import fast_sim_with_a_node  # noqa: F401  (the fixture `sim`)

from drainer.cli.main import main
from drainer.errors import CredentialsUnavailable, KubeError, TlsVerificationError
from drainer.k8s import kubeconfig
from drainer.k8s.kube import Kube
from kubesim import KubeSim
from kubesim.auth import User
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import is_pod_ready, pods_on, rbac_manifests, set_schedulable, wait_until
from tests.support.clock import FakeClock

ROOT = Path(__file__).resolve().parents[1]
ADMIN = ("system:masters", "system:authenticated")


def _config(sim: KubeSim, user: dict[str, Any], **cluster: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "sim",
                "cluster": {
                    "server": sim.url,
                    "certificate-authority-data": sim.ca_data,
                    **cluster,
                },
            }
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "u"}}],
        "current-context": "sim",
    }


def test_cli_and_lambda_paths__no_kubernetes_package_imported__the_cli_no_urllib3(
    sim: KubeSim, tmp_path: Path
) -> None:
    """Importing the kubernetes package costs a cold start a quarter of a second or
    more, and urllib3 the CLI about 0.09 s before its first request (issue 28)."""
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(_config(sim, {"token": sim.admin_token})))
    (tmp_path / "ca.pem").write_bytes(sim.ca_pem)
    script = f"""
import json, sys
from drainer.cli import main
from drainer.k8s.kube import Kube
kube = Kube.from_kubeconfig({str(config)!r})
assert kube.get_node("n1") is not None
cli = sorted(m for m in sys.modules if m.split(".")[0] in ("kubernetes", "urllib3"))

class Token:
    def token(self): return {sim.admin_token!r}
    def invalidate(self): pass

lambdas = Kube.for_cluster({sim.url!r}, open({str(tmp_path / "ca.pem")!r}, "rb").read(), Token())
assert lambdas.get_node("n1") is not None
both = sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes")
print(json.dumps([cli, both]))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[], []]


def test_merged_files__the_first_to_name_a_thing_wins__paths_from_their_own_file(
    sim: KubeSim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
                    {
                        "name": "sim",
                        "cluster": {"server": sim.url, "certificate-authority": "ca.pem"},
                    }
                ],
                "users": [{"name": "u", "user": {"token": "not-this-one"}}],
            }
        )
    )
    path = f"{first / 'config'}:{second / 'config'}"

    loaded = kubeconfig.load(path, None, clock=time.time)
    monkeypatch.setenv("KUBECONFIG", path)  # a list: KUBECONFIG's, as in kubectl
    kube = Kube.from_kubeconfig()

    assert loaded.endpoint.ca_file == str(second / "ca.pem")
    assert loaded.token is not None and loaded.token.token() == sim.admin_token
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


def test_kubeconfig_not_yaml__says_which_file_and_where(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\nclusters: [\n  - name: a\n contexts:\n")

    with pytest.raises(KubeError) as raised:
        Kube.from_kubeconfig(str(config))

    assert f"{config} does not read as YAML" in str(raised.value)
    assert "line 3" in str(raised.value)


@pytest.mark.parametrize("key", ["user", "cluster", "context"])
def test_kubeconfig_entry_not_a_mapping__says_which_one__not_a_traceback(
    sim: KubeSim, tmp_path: Path, key: str
) -> None:
    document = _config(sim, {"token": "t"})
    document[f"{key}s"][0][key] = "u"  # a string where kubectl wants a mapping
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(document))

    with pytest.raises(KubeError) as raised:
        Kube.from_kubeconfig(str(config))

    assert f"{config}: the {key} " in str(raised.value) and "is not a mapping" in str(raised.value)


def test_kubeconfig_a_symbolic_link__relative_paths_from_the_links_directory(
    sim: KubeSim, tmp_path: Path
) -> None:
    """A dotfiles manager's ~/.kube/config, a link to the real file elsewhere: kubectl
    reads a relative certificate-authority from ~/.kube (client-go's
    ResolveLocalPaths does not follow the link), and so does the drainer. It read it
    from the link's target's directory: another file, or none."""
    kube_dir, dotfiles = tmp_path / "home" / ".kube", tmp_path / "dotfiles"
    kube_dir.mkdir(parents=True)
    dotfiles.mkdir()
    (kube_dir / "ca.pem").write_bytes(sim.ca_pem)
    document = _config(sim, {"token": sim.admin_token}, **{"certificate-authority": "ca.pem"})
    del document["clusters"][0]["cluster"]["certificate-authority-data"]
    (dotfiles / "config").write_text(yaml.safe_dump(document))
    (kube_dir / "config").symlink_to(dotfiles / "config")

    kube = Kube.from_kubeconfig(str(kube_dir / "config"))
    try:
        assert kube.get_node("n1") is not None
    finally:
        kube.close()


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


def _oidc_token(exp: float, sub: str) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return ".".join([part({"alg": "none"}), part({"exp": exp, "sub": sub}), "sig"])


def test_oidc_auth_provider__id_token_read_again_near_its_expiry_and_after_a_401(
    sim: KubeSim, tmp_path: Path
) -> None:
    """Not frozen at the drain's start: the id-token kubectl (or a login helper) writes
    back to the kubeconfig when it refreshes it is read again before the old one's
    `exp`, and at once when the API server refuses the old one."""
    now = time.time()
    first, second, third = (_oidc_token(now + 600 * n, f"s{n}") for n in (1, 2, 3))
    for n, token in enumerate((first, second, third), 1):
        sim.authenticator.tokens[token] = User(f"oidc-user-{n}", ADMIN)
    config = tmp_path / "kubeconfig"

    def written(token: str) -> None:
        provider = {
            "name": "oidc",
            "config": {"id-token": token, "idp-issuer-url": "https://issuer", "client-id": "c"},
        }
        config.write_text(yaml.safe_dump(_config(sim, {"auth-provider": provider})))

    written(first)
    clock = FakeClock(now)
    kube = Kube.from_kubeconfig(str(config), clock=clock)
    kube.get_node("n1")
    written(second)  # refreshed by another kubectl
    kube.get_node("n1")  # the first is still good: kept
    clock.advance(600 - 5)  # within the margin before its exp
    kube.get_node("n1")
    written(third)
    del sim.authenticator.tokens[second]  # revoked before its time: a 401
    kube.get_node("n1")

    assert [r.user for r in sim.requests() if r.user] == [
        "oidc-user-1", "oidc-user-1", "oidc-user-2", "oidc-user-3"
    ]  # fmt: skip


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


class ShortTokens(dict[str, User]):
    """The API server's tokens, and those of an exec plugin that last `lifetime`
    seconds: each token the plugin issued (its `issued` file) is the drainer's user,
    with its RBAC, until its lifetime is over, then refused (401)."""

    def __init__(self, sim: KubeSim, directory: Path, lifetime: float) -> None:
        super().__init__(sim.authenticator.tokens)
        self.drainer = sim.authenticator.tokens[sim.drainer_token]
        self.issued = directory / "issued"
        self.lifetime = lifetime
        self.seen: set[str] = set()

    def _live(self, token: object) -> bool:
        lines = self.issued.read_text().splitlines() if self.issued.exists() else []
        for line in lines:
            name, at = line.split()
            if name == token:
                self.seen.add(name)
                return time.time() <= float(at) + self.lifetime
        return False

    def __contains__(self, token: object) -> bool:
        return super().__contains__(token) or self._live(token)

    def __getitem__(self, token: str) -> User:
        return super().__getitem__(token) if super().__contains__(token) else self.drainer


def test_exec_plugin_tokens_expiring_every_2_s__a_drain_paced_by_a_budget_finishes(
    sim: KubeSim, tmp_path: Path
) -> None:
    """What `aws eks get-token` does to a long drain, faster: each token refused by
    the API server 2 s after it was issued, while a budget paces the evictions of 12
    pods, one each time a replacement is Ready (2 s): a drain of about 25 s, its
    evictions and its watches carried by a dozen tokens in turn."""
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(script), str(tmp_path), "2"],
        }
    }
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(_config(sim, user)))
    sim.apply(rbac_manifests())  # the tokens are the drainer's: k8s-rbac/ grants it a drain
    tokens = ShortTokens(sim, tmp_path, lifetime=2.0)
    sim.authenticator.tokens = tokens
    cluster = Cluster.of_kubesim(sim)
    sim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}})
    set_schedulable(cluster, ["n2"], False)
    # Ready 40 s after it starts at kubesim's speed 20: 2 s here.
    sim.apply(
        [w.deployment("api", 12, startup=40), w.budget("api", {"app": "api"}, max_unavailable=1)]
    )
    wait_until(lambda: sum(is_pod_ready(p) for p in pods_on(cluster, "n1")) == 12, timeout=20)
    set_schedulable(cluster, ["n2"], True)
    out = io.StringIO()
    began = time.monotonic()

    code = main(["drain", "n1", "--kubeconfig", str(config)], stdout=out)

    assert code == 0, out.getvalue()
    assert pods_on(cluster, "n1") == []
    took = time.monotonic() - began
    assert took >= 20, "a drain paced by the budget, outliving many tokens"
    assert len(tokens.seen) >= 8, f"a new token as each one aged out: {sorted(tokens.seen)}"


@pytest.mark.parametrize(
    ("where", "field"),
    [("cluster", "certificate-authority"), ("user", "client-certificate"), ("user", "client-key")],
)
def test_a_field_as_data_and_as_a_file__the_data_wins__said_once(
    sim: KubeSim, tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str, field: str
) -> None:
    """As client-go's own message says ("-data will override"): the file is not even
    read (kubectl itself refuses the kubeconfig: tests/e2e/test_kubectl_table.py)."""
    both = {field: "nowhere.pem", f"{field}-data": base64.b64encode(sim.ca_pem).decode()}
    user = {"token": sim.admin_token, **(both if where == "user" else {})}
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(_config(sim, user, **(both if where == "cluster" else {}))))

    endpoint = kubeconfig.load(str(config), None, clock=time.time).endpoint

    said = [r.getMessage() for r in caplog.records if "the data is used" in r.getMessage()]
    assert len(said) == 1 and f"both {field}-data and {field}" in said[0]
    used = {
        "certificate-authority": endpoint.ca_pem.encode,
        "client-certificate": lambda: Path(endpoint.cert_file).read_bytes(),
        "client-key": lambda: Path(endpoint.key_file).read_bytes(),
    }[field]()
    assert used == sim.ca_pem  # the data's, not the file's (which does not exist)
    if where == "cluster":
        assert endpoint.ca_file == ""


def test_ca_data_wrong_and_ca_file_right__the_file_is_not_trusted(
    sim: KubeSim, tmp_path: Path
) -> None:
    """Not both trusted: the data overrides the file (a CA of the file alone would
    let a server the kubeconfig's data does not name pass)."""
    from kubesim import certs

    other = certs.generate("another-ca").ca_pem
    (tmp_path / "right.pem").write_bytes(sim.ca_pem)
    fields = {"certificate-authority": "right.pem",
              "certificate-authority-data": base64.b64encode(other).decode()}  # fmt: skip
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(_config(sim, {"token": sim.admin_token}, **fields)))
    kube = Kube.from_kubeconfig(str(config))

    with pytest.raises(TlsVerificationError):
        kube.get_node("n1")


def test_exec_plugin_printing_without_end__cut_at_the_output_limit__killed__memory_bounded(
    sim: KubeSim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 8 << 20
    monkeypatch.setattr(kubeconfig, "EXEC_OUTPUT_LIMIT_BYTES", limit)
    pid_file = tmp_path / "pid"
    endless = (
        "import os, sys\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "piece = b'x' * 65536\n"
        "while True:\n"
        "    sys.stdout.buffer.write(piece)\n"
    )
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": ["-c", endless],
            "interactiveMode": "Never",
        }
    }
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(_config(sim, user)))
    tracemalloc.start()
    try:
        with pytest.raises(CredentialsUnavailable) as raised:
            kubeconfig.load(str(config), None, clock=time.time)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert "printed more than the 8 MiB limit on a plugin's output" in str(raised.value)
    assert peak < 2 * limit, f"{peak / 2**20:.0f} MiB held"
    with pytest.raises(ProcessLookupError):  # killed, and waited for
        os.kill(int(pid_file.read_text()), 0)


@pytest.mark.parametrize("field", ["certificate-authority", "client-certificate", "client-key"])
def test_a_file_the_kubeconfig_names_missing__the_error_names_it(
    sim: KubeSim, tmp_path: Path, field: str
) -> None:
    """As kubectl ("unable to read client-cert /x/c.pem ..."): the ssl module's own
    error was a bare "[Errno 2] No such file or directory", naming no file."""
    (tmp_path / "ca.pem").write_bytes(sim.ca_pem)
    (tmp_path / "c.pem").write_bytes(sim.tls.cert_pem)
    (tmp_path / "k.pem").write_bytes(sim.tls.key_pem)
    user = {"token": sim.admin_token, "client-certificate": "c.pem", "client-key": "k.pem"}
    config = _config(sim, user, **{"certificate-authority-data": None})
    config["clusters"][0]["cluster"]["certificate-authority"] = "ca.pem"
    missing = {"certificate-authority": "ca.pem", "client-certificate": "c.pem"}
    (tmp_path / missing.get(field, "k.pem")).unlink()
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))

    with pytest.raises(KubeError) as raised:
        Kube.from_kubeconfig(str(path))

    assert f"{field} {tmp_path / missing.get(field, 'k.pem')}" in str(raised.value)
