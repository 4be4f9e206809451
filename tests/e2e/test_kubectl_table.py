"""The same kubeconfig given to a real `kubectl get node N` and to our CLI's nearest
read-only equivalent (`release --node N --dry-run=client -o json`: one GET of the
node, nothing sent after it), with the same outcome each time (issue 38, item 2):
both succeed (kubectl prints node/N, ours names N in its one JSON document), or both
fail (kubectl exits non-zero; ours exits 2 or 3 with one JSON document and a
message). Where a proxy is in play, both must have asked the same proxy for the same
CONNECT tunnels, or neither any.

Each side runs as a person runs it: its own process, a clean environment (PATH, a
HOME of its own: kubectl caches discovery there; then the row's variables), the
current directory elsewhere than the kubeconfig's. The proxies are tests/support/
proxy.py's, on 127.0.0.1; the proxied server is kube.proxied.test, a name only the
proxies resolve (Go never proxies loopback addresses from the environment, while a
cluster's proxy-url always applies), with tls-server-name `localhost`, which both
backends' certificates name.

MATCHES is the table of rows that must agree. DIFFERENCES holds what the project
chose to do otherwise (docs/cli.md: insecure-skip-tls-verify, SOCKS and https://
proxies), each side's actual behaviour asserted, so a change on either side shows.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from support.cli_schema import problems
from support.proxy import ConnectProxy, Socks5Proxy

from kubesim import certs
from testbed import workloads as w
from testbed.cluster import Cluster

PROXIED = "kube.proxied.test"
NODE = "kubectl-table-node"
NOBODY = "impersonated-nobody"
REPO = Path(__file__).resolve().parents[2]
PROXY_AUTH = ("ops", "p@ss:w/rd")
"""The locked proxy's user and password (percent-encoded in URLs)."""
PROXY_AUTH_URL = "ops:p%40ss%3Aw%2Frd"
OURS = ["release", "--node", NODE, "--dry-run=client", "-o", "json"]
"""Our nearest read-only equivalent of `kubectl get node NODE`: one GET of the node."""
WORKERS = 6
"""Rows run side by side: a row whose server is unreachable costs ours its retries
(about 10 s) and kubectl none."""

PLUGIN = """#!{python}
import json, os, sys

info = json.loads(os.environ.get("KUBERNETES_EXEC_INFO") or "{{}}")
mode, *rest = sys.argv[1:]
if mode == "fail":
    sys.exit("table-plugin: no credentials today")
if mode == "env":
    token = os.environ.get("TABLE_TOKEN", "")
elif mode == "cluster-info":
    cluster = (info.get("spec") or {{}}).get("cluster") or {{}}
    if cluster.get("server") != rest[0] or not cluster.get("certificate-authority-data"):
        sys.exit(f"table-plugin: no cluster info: {{info}}")
    token = rest[1]
else:
    token = rest[0]
print(json.dumps({{
    "apiVersion": info.get("apiVersion") or "client.authentication.k8s.io/v1",
    "kind": "ExecCredential",
    "status": {{"token": token}},
}}))
"""


# -- what a row is built from --------------------------------------------------------


@dataclass
class Bench:
    """One row's cluster, files and proxies."""

    cluster: Cluster
    dir: Path
    """The row's own directory: its kubeconfig, token file, plugin copies."""
    cwd: Path
    """Where both commands run: not the kubeconfig's directory."""
    plugin_bin: Path
    """The directory holding `table-plugin`, for PATH."""
    proxy: ConnectProxy
    locked: ConnectProxy
    """A proxy that demands PROXY_AUTH."""
    socks: Socks5Proxy
    secure: ConnectProxy
    """An https:// proxy, its certificate signed by the cluster's CA."""

    @property
    def port(self) -> int:
        return int(urlsplit(self.cluster.url).port or 443)

    @property
    def direct(self) -> str:
        return self.cluster.url

    @property
    def proxied(self) -> str:
        return f"https://{PROXIED}:{self.port}"

    @property
    def plugin(self) -> Path:
        return self.plugin_bin / "table-plugin"

    def write(
        self,
        cluster: dict[str, Any] | None = None,
        user: dict[str, Any] | None = None,
        *,
        server: str = "",
        name: str = "kubeconfig",
    ) -> Path:
        """A kubeconfig of one context: the server (direct unless said), its CA as
        data, then `cluster`'s fields (None drops one); `user` (the admin's token
        unless said)."""
        fields = {"server": server or self.direct, "certificate-authority-data": self.ca_data}
        fields.update(cluster or {})
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "c", "cluster": {k: v for k, v in fields.items() if v is not None}}
            ],
            "users": [{"name": "u", "user": self.token if user is None else user}],
            "contexts": [{"name": "table", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "table",
        }
        path = self.dir / name
        path.write_text(yaml.safe_dump(document))
        return path

    def behind(self, proxy_url: str = "", **cluster: Any) -> Path:
        """A kubeconfig whose server only the proxies resolve."""
        fields: dict[str, Any] = {"tls-server-name": "localhost", **cluster}
        if proxy_url:
            fields["proxy-url"] = proxy_url
        return self.write(fields, server=self.proxied)

    @property
    def ca_data(self) -> str:
        return self.cluster.ca_data

    @property
    def token(self) -> dict[str, Any]:
        return {"token": self.cluster.admin_token}

    def plugin_user(
        self, *args: str, api: str = "v1", command: str = "", **more: Any
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "apiVersion": f"client.authentication.k8s.io/{api}",
            "command": command or str(self.plugin),
            "args": list(args) or ["token", self.cluster.admin_token],
        }
        if api == "v1":
            spec["interactiveMode"] = "Never"
        spec.update(more)
        return {"exec": {k: v for k, v in spec.items() if v is not None}}

    def copy_plugin(self, where: Path) -> None:
        (where / "bin").mkdir(parents=True, exist_ok=True)
        (where / "bin" / "table-plugin").write_text(self.plugin.read_text())
        (where / "bin" / "table-plugin").chmod(0o755)

    def client_certificate(self, *, as_data: bool = False) -> dict[str, Any]:
        """The admin as a client certificate (system:masters): as files beside the
        kubeconfig named relative to it, or as data."""
        assert self.cluster.plane is not None, "client certificates: the real backend only"
        cert, key = certs.client(self.cluster.plane.tls, "table-cert-user", ("system:masters",))
        if as_data:
            return {
                "client-certificate-data": base64.b64encode(cert).decode(),
                "client-key-data": base64.b64encode(key).decode(),
            }
        (self.dir / "pki").mkdir()
        (self.dir / "pki" / "user.crt").write_bytes(cert)
        (self.dir / "pki" / "user.key").write_bytes(key)
        return {"client-certificate": "pki/user.crt", "client-key": "pki/user.key"}


Build = Callable[[Bench], Path | None]
"""Writes the row's kubeconfig; the file to name with --kubeconfig (None: none named,
the row's KUBECONFIG says)."""
Env = Callable[[Bench], dict[str, str]]


@dataclass(frozen=True)
class Row:
    name: str
    build: Build
    ok: bool
    """Both succeed (True) or both fail (False)."""
    env: Env = lambda b: {}
    args: tuple[str, ...] = ()
    """Flags given to both command lines."""
    via: str = ""
    """The proxy (`proxy`, `locked`, `socks`, `secure`) both must ask for a tunnel; "":
    none asked."""
    only: str = ""
    """The backend the row runs on, when the other cannot answer it (the reason in
    the row's name)."""
    unreachable: bool = False
    """The server cannot be reached: ours retries for about 10 s (kubectl does not),
    so the row is started first."""


@dataclass(frozen=True)
class Difference:
    """A row where the project differs from kubectl on purpose: what each side does."""

    name: str
    build: Build
    kubectl_ok: bool
    ours_exit: int
    ours_says: str
    """A part of our message."""
    env: Env = lambda b: {}
    via: str = ""
    """The proxy kubectl asks (ours refuses before any request)."""


# -- the rows ------------------------------------------------------------------------


def _token_file(b: Bench) -> Path:
    (b.dir / "token").write_text(b.cluster.admin_token + "\n")
    return b.write(user={"tokenFile": "token"})  # relative: to the kubeconfig's directory


def _kubeconfig_list(b: Bench) -> None:
    b.write()


def _relative_plugin(b: Bench) -> Path:
    b.copy_plugin(b.dir)
    return b.write(user=b.plugin_user(command="./bin/table-plugin"))


def _user_in_another_file(b: Bench) -> None:
    """KUBECONFIG of two files: the cluster and context in one, the user (its plugin
    a ./bin command beside it) in the other, in a directory of its own."""
    users = b.dir / "users"
    b.copy_plugin(users)
    whole = yaml.safe_load(b.write(user=b.plugin_user(command="./bin/table-plugin")).read_text())
    user = {"apiVersion": "v1", "kind": "Config", "users": whole.pop("users")}
    (users / "kubeconfig").write_text(yaml.safe_dump(user))
    (b.dir / "kubeconfig").write_text(yaml.safe_dump(whole))


def _ca_data_and_file(b: Bench) -> Path:
    """The data to win, as client-go's message says it will (and the issue asks);
    yet kubectl's validation refuses the two together."""
    (b.dir / "other-ca.crt").write_bytes(certs.generate().ca_pem)
    return b.write({"certificate-authority": str(b.dir / "other-ca.crt")})


def _client_cert_data_and_file(b: Bench) -> Path:
    """Beside a token that works: only kubectl's refusal can fail it."""
    other = certs.generate()
    (b.dir / "user.crt").write_bytes(other.cert_pem)
    data = {
        "client-certificate": "user.crt",
        "client-certificate-data": base64.b64encode(other.cert_pem).decode(),
        "client-key-data": base64.b64encode(other.key_pem).decode(),
    }
    return b.write(user={**b.token, **data})


def _wrong_ca(b: Bench) -> Path:
    other = certs.generate().ca_pem
    return b.write({"certificate-authority-data": base64.b64encode(other).decode()})


def _https_proxy(b: Bench, proxy: str = "") -> dict[str, str]:
    return {"HTTPS_PROXY": proxy or b.proxy.url}


def _locked(b: Bench, userinfo: str) -> str:
    return b.locked.url.replace("http://", f"http://{userinfo}")


MATCHES: list[Row] = [
    Row("token", lambda b: b.write(), ok=True),
    Row("wrong token", lambda b: b.write(user={"token": "not-a-token"}), ok=False),
    Row("tokenFile, relative to the kubeconfig", _token_file, ok=True),
    Row(
        "tokenFile that does not exist",
        lambda b: b.write(user={"tokenFile": str(b.dir / "none")}),
        ok=False,
    ),
    Row(
        "KUBECONFIG lists a missing file, then the kubeconfig",
        _kubeconfig_list,
        ok=True,
        env=lambda b: {"KUBECONFIG": f"{b.dir / 'missing'}{os.pathsep}{b.dir / 'kubeconfig'}"},
    ),
    Row("--kubeconfig that does not exist", lambda b: b.dir / "no-such-kubeconfig", ok=False),
    Row("--context that is not there", lambda b: b.write(), ok=False, args=("--context", "gone")),
    Row(
        "a bogus certificate-authority file alone",
        lambda b: b.write(
            {"certificate-authority-data": None, "certificate-authority": str(b.dir / "nope")}
        ),
        ok=False,
    ),
    Row("a wrong CA", _wrong_ca, ok=False),
    Row(
        "tls-server-name not in the certificate",
        lambda b: b.write({"tls-server-name": "wrong.example"}),
        ok=False,
    ),
    Row(
        "the gcp auth-provider (removed)",
        lambda b: b.write(user={"auth-provider": {"name": "gcp", "config": {}}}),
        ok=False,
    ),
    # -- exec plugins
    Row("exec v1 token", lambda b: b.write(user=b.plugin_user()), ok=True),
    Row("exec v1beta1 token", lambda b: b.write(user=b.plugin_user(api="v1beta1")), ok=True),
    Row(
        "exec v1 without interactiveMode",
        lambda b: b.write(user=b.plugin_user(interactiveMode=None)),
        ok=False,
    ),
    Row(
        "exec provideClusterInfo",
        lambda b: b.write(
            user=b.plugin_user(
                "cluster-info", b.direct, b.cluster.admin_token, provideClusterInfo=True
            )
        ),
        ok=True,
    ),
    Row(
        "exec without provideClusterInfo (the plugin wants it)",
        lambda b: b.write(user=b.plugin_user("cluster-info", b.direct, b.cluster.admin_token)),
        ok=False,
    ),
    Row("exec plugin that fails", lambda b: b.write(user=b.plugin_user("fail")), ok=False),
    Row(
        "exec env entry",
        lambda b: b.write(
            user=b.plugin_user("env", env=[{"name": "TABLE_TOKEN", "value": b.cluster.admin_token}])
        ),
        ok=True,
    ),
    Row(
        "exec bare command name, on PATH",
        lambda b: b.write(user=b.plugin_user(command="table-plugin")),
        ok=True,
        env=lambda b: {"PATH": f"{b.plugin_bin}{os.pathsep}{os.environ.get('PATH', '')}"},
    ),
    Row(
        "exec bare command name, not on PATH",
        lambda b: b.write(user=b.plugin_user(command="table-plugin")),
        ok=False,
    ),
    Row("exec ./bin/plugin, beside the kubeconfig", _relative_plugin, ok=True),
    Row(
        "exec ./bin/plugin, beside the file of KUBECONFIG's that defined the user",
        _user_in_another_file,
        ok=True,
        env=lambda b: {
            "KUBECONFIG": f"{b.dir / 'kubeconfig'}{os.pathsep}{b.dir / 'users' / 'kubeconfig'}"
        },
    ),
    Row(
        "exec ./bin/plugin, only in the current directory",
        lambda b: b.write(user=b.plugin_user(command="./bin/table-plugin")),
        ok=False,
    ),
    # -- impersonation (kubesim ignores the headers: the real API server alone)
    Row(
        "kubeconfig `as` a user without rights",
        lambda b: b.write(user={**b.token, "as": NOBODY}),
        ok=False,
        only="real",
    ),
    Row(
        "--as a user without rights",
        lambda b: b.write(),
        ok=False,
        args=("--as", NOBODY),
        only="real",
    ),
    Row(
        "--as a user, --as-group system:masters",
        lambda b: b.write(),
        ok=True,
        args=("--as", NOBODY, "--as-group", "system:masters"),
        only="real",
    ),
    Row(
        "kubeconfig `as` with `as-groups` system:masters",
        lambda b: b.write(user={**b.token, "as": NOBODY, "as-groups": ["system:masters"]}),
        ok=True,
        only="real",
    ),
    Row(
        "--as over the kubeconfig's `as`: its as-groups stay",
        lambda b: b.write(user={**b.token, "as": NOBODY, "as-groups": ["system:masters"]}),
        ok=True,
        args=("--as", "another-nobody"),
        only="real",
    ),
    Row(
        "--as-group over the kubeconfig's as-groups",
        lambda b: b.write(user={**b.token, "as": NOBODY, "as-groups": ["system:masters"]}),
        ok=False,
        args=("--as-group", "team"),
        only="real",
    ),
    # -- client certificates (kubesim authenticates bearer tokens only)
    Row(
        "client certificate and key files, relative to the kubeconfig",
        lambda b: b.write(user=b.client_certificate()),
        ok=True,
        only="real",
    ),
    Row(
        "client certificate and key as data",
        lambda b: b.write(user=b.client_certificate(as_data=True)),
        ok=True,
        only="real",
    ),
    Row(
        "username and password (no API server takes them since 1.19)",
        lambda b: b.write(user={"username": "admin", "password": b.cluster.admin_token}),
        ok=False,
    ),
    # -- proxies
    Row("HTTPS_PROXY", lambda b: b.behind(), ok=True, env=_https_proxy, via="proxy"),
    Row(
        "https_proxy (lower case)",
        lambda b: b.behind(),
        ok=True,
        env=lambda b: {"https_proxy": b.proxy.url},
        via="proxy",
    ),
    Row(
        "HTTPS_PROXY without a scheme",
        lambda b: b.behind(),
        ok=True,
        env=lambda b: _https_proxy(b, b.proxy.url.removeprefix("http://")),
        via="proxy",
    ),
    Row(
        "HTTP_PROXY alone, for an https server",
        lambda b: b.behind(),
        ok=False,
        env=lambda b: {"HTTP_PROXY": b.proxy.url},
        unreachable=True,
    ),
    Row(
        "NO_PROXY names the server",
        lambda b: b.behind(),
        ok=False,
        env=lambda b: {**_https_proxy(b), "NO_PROXY": PROXIED},
        unreachable=True,
    ),
    Row(
        "NO_PROXY names its domain",
        lambda b: b.behind(),
        ok=False,
        env=lambda b: {**_https_proxy(b), "NO_PROXY": "proxied.test"},
        unreachable=True,
    ),
    Row(
        "NO_PROXY names other hosts",
        lambda b: b.behind(),
        ok=True,
        env=lambda b: {**_https_proxy(b), "NO_PROXY": "example.com,.other.test"},
        via="proxy",
    ),
    Row(
        "NO_PROXY names the server on another port",
        lambda b: b.behind(),
        ok=True,
        env=lambda b: {**_https_proxy(b), "NO_PROXY": f"{PROXIED}:1"},
        via="proxy",
    ),
    Row(
        "HTTPS_PROXY, loopback server (never proxied)",
        lambda b: b.write(),
        ok=True,
        env=_https_proxy,
    ),
    Row(
        "proxy-url, over HTTPS_PROXY and NO_PROXY=*",
        lambda b: b.behind(b.proxy.url),
        ok=True,
        env=lambda b: {"HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "*"},
        via="proxy",
    ),
    Row(
        "proxy-url, loopback server (always proxied)",
        lambda b: b.write({"proxy-url": b.proxy.url}),
        ok=True,
        via="proxy",
    ),
    Row(
        "proxy-url with the right credentials",
        lambda b: b.behind(_locked(b, PROXY_AUTH_URL + "@")),
        ok=True,
        via="locked",
    ),
    Row(
        "HTTPS_PROXY with the right credentials",
        lambda b: b.behind(),
        ok=True,
        env=lambda b: _https_proxy(b, _locked(b, PROXY_AUTH_URL + "@")),
        via="locked",
    ),
    Row(
        "HTTPS_PROXY with wrong credentials",
        lambda b: b.behind(),
        ok=False,
        env=lambda b: _https_proxy(b, _locked(b, "ops:wrong@")),
        via="locked",
    ),
    Row(
        "proxy-url without the credentials it wants",
        lambda b: b.behind(b.locked.url),
        ok=False,
        via="locked",
    ),
]

DIFFERENCES: list[Difference] = [
    # kubectl's validation refuses a field given both ways, in a message that says the
    # data will override; the issue asks for the data over the file: ours uses the
    # data and says so once on stderr.
    Difference(
        "certificate-authority-data (right) and a certificate-authority file (another CA)",
        _ca_data_and_file,
        kubectl_ok=False,
        ours_exit=0,
        ours_says="the data is used and the file ignored",
    ),
    Difference(
        "client-certificate-data and a client-certificate file, beside a token",
        _client_cert_data_and_file,
        kubectl_ok=False,
        ours_exit=0,
        ours_says="the data is used and the file ignored",
    ),
    Difference(
        "insecure-skip-tls-verify",
        lambda b: b.write({"certificate-authority-data": None, "insecure-skip-tls-verify": True}),
        kubectl_ok=True,
        ours_exit=2,
        ours_says="insecure-skip-tls-verify",
    ),
    Difference(
        "proxy-url socks5://",
        lambda b: b.behind(b.socks.url),
        kubectl_ok=True,
        ours_exit=2,
        ours_says="a SOCKS",
        via="socks",
    ),
    Difference(
        "proxy-url https:// (TLS to the proxy, then TLS inside it)",
        lambda b: b.write({"proxy-url": b.secure.url}),
        kubectl_ok=True,
        ours_exit=2,
        ours_says="TLS to the proxy itself is not supported",
        via="secure",
    ),
    Difference(
        "HTTPS_PROXY socks5://",
        lambda b: b.behind(),
        kubectl_ok=True,
        ours_exit=2,
        ours_says="HTTPS_PROXY socks5://",
        env=lambda b: {"HTTPS_PROXY": b.socks.url},
        via="socks",
    ),
]


# -- running both sides --------------------------------------------------------------


@dataclass
class Ran:
    """One side's run: exit status, output, the tunnels it asked of each proxy."""

    code: int
    out: str
    err: str
    tunnels: dict[str, set[str]] = field(default_factory=dict)

    def shown(self) -> str:
        return (
            f"exit {self.code}\n  stdout: {self.out.strip()}\n  stderr: {self.err.strip()[-1500:]}"
        )


@dataclass
class Table:
    """What every row shares: the cluster, kubectl, the plugin, a scratch root."""

    cluster: Cluster
    kubectl: Path
    root: Path
    proxy_tls: ssl.SSLContext

    @contextmanager
    def bench(self, name: str) -> Iterator[Bench]:
        here = self.root / "".join(c if c.isalnum() else "-" for c in name)
        (here / "cwd").mkdir(parents=True)
        hosts = {
            PROXIED: urlsplit(self.cluster.url).hostname or "127.0.0.1",
            "127.0.0.1": "127.0.0.1",
        }
        with ExitStack() as stack:
            proxy = stack.enter_context(ConnectProxy(hosts))
            locked = stack.enter_context(ConnectProxy(hosts, credentials=":".join(PROXY_AUTH)))
            socks = stack.enter_context(Socks5Proxy(hosts))
            secure = stack.enter_context(ConnectProxy(hosts, tls=self.proxy_tls))
            bench = Bench(
                self.cluster,
                here,
                here / "cwd",
                self.root / "plugin",
                proxy,
                locked,
                socks,
                secure,
            )
            bench.copy_plugin(here / "cwd")  # the decoy: ./bin resolves beside the kubeconfig
            yield bench

    def both(self, bench: Bench, build: Build, env: Env, args: tuple[str, ...]) -> tuple[Ran, Ran]:
        named = build(bench)
        where = ["--kubeconfig", str(named)] if named is not None else []
        extra = env(bench)
        get = ["get", "node", NODE, "-o", "name", "--request-timeout=20s"]
        kubectl = self._run(bench, "kubectl", [str(self.kubectl), *where, *get, *args], extra)
        ours = self._run(
            bench,
            "ours",
            [sys.executable, "-m", "drainer", *OURS, *where, *args],
            {"PYTHONPATH": str(REPO), **extra},
        )
        return kubectl, ours

    def _run(self, bench: Bench, side: str, argv: list[str], extra: dict[str, str]) -> Ran:
        home = bench.dir / f"home-{side}"
        home.mkdir()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **extra}
        for proxy in (bench.proxy, bench.locked, bench.secure):
            proxy.asked.clear()
        bench.socks.asked.clear()
        done = subprocess.run(
            argv, cwd=bench.cwd, env=env, capture_output=True, text=True, timeout=90, check=False
        )
        tunnels = {
            name: set(targets)
            for name, targets in (
                ("proxy", bench.proxy.connects()),
                ("locked", bench.locked.connects()),
                ("socks", bench.socks.asked),
                ("secure", bench.secure.connects()),
            )
            if targets
        }
        return Ran(done.returncode, done.stdout, done.stderr, tunnels)


def _kubectl_ok(ran: Ran) -> bool:
    return ran.code == 0 and ran.out.strip() == f"node/{NODE}"


def _ours(ran: Ran) -> tuple[bool | None, dict[str, Any]]:
    """(True: succeeded naming the node; False: failed as it should, exit 2 or 3 with
    one JSON document and a message; None: neither), and its document."""
    try:
        document = json.loads(ran.out)
    except ValueError:
        return None, {}
    if not isinstance(document, dict) or problems(document):
        return None, {}
    if ran.code == 0 and document.get("node") == NODE:
        return True, document
    if ran.code in (2, 3) and document.get("result") == "error" and document.get("message"):
        return False, document
    return None, document


def _tunnels_agree(kubectl: Ran, ours: Ran, via: str) -> str:
    """What is wrong with the tunnels both asked ("": both asked `via` for the same
    ones, or with no `via`, neither asked any proxy)."""
    if kubectl.tunnels != ours.tunnels:
        return f"tunnels differ: kubectl {kubectl.tunnels}, ours {ours.tunnels}"
    if set(kubectl.tunnels) != ({via} if via else set()):
        return f"tunnels {kubectl.tunnels}, expected {'through ' + via if via else 'none'}"
    return ""


def _judge(row: Row, kubectl: Ran, ours: Ran) -> str:
    """What is wrong with the row, with both sides' output ("": nothing)."""
    said, _ = _ours(ours)
    wrong = []
    if _kubectl_ok(kubectl) != row.ok:
        wrong.append(f"kubectl {'failed' if row.ok else 'succeeded'}")
    if said is None:
        wrong.append("ours neither named the node (exit 0) nor failed cleanly (exit 2/3, JSON)")
    elif said != row.ok:
        wrong.append(f"ours {'failed' if row.ok else 'succeeded'}")
    if tunnels := _tunnels_agree(kubectl, ours, row.via):
        wrong.append(tunnels)
    if not wrong:
        return ""
    return (
        f"{row.name} (expected both to {'succeed' if row.ok else 'fail'}): {'; '.join(wrong)}\n"
        f" kubectl {kubectl.shown()}\n ours {ours.shown()}"
    )


@pytest.fixture
def table(cluster: Cluster, kubectl_binary: Path, tmp_path: Path) -> Table:
    cluster.apply(w.node(NODE, "i-0abc1234567890def", "us-east-1a", pods=110))
    (tmp_path / "plugin").mkdir()
    plugin = tmp_path / "plugin" / "table-plugin"
    plugin.write_text(PLUGIN.format(python=sys.executable))
    plugin.chmod(0o755)
    return Table(cluster, kubectl_binary, tmp_path, _proxy_tls(cluster, tmp_path))


def _proxy_tls(cluster: Cluster, where: Path) -> ssl.SSLContext:
    """The https:// proxy's TLS: a certificate for 127.0.0.1 signed by the cluster's
    CA, since Go verifies such a proxy with the cluster's TLS settings."""
    material = cluster.plane.tls if cluster.plane is not None else cluster.kubesim.tls
    ca_key = serialization.load_pem_private_key(material.ca_key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    issuer = x509.load_pem_x509_certificate(material.ca_pem).subject
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "table-proxy")]))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (where / "proxy.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (where / "proxy.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(where / "proxy.crt", where / "proxy.key")
    return context


def _each(table: Table, rows: list[Any], run: Callable[[Any], str]) -> list[str]:
    with ThreadPoolExecutor(WORKERS) as pool:
        return [said for said in pool.map(run, rows) if said]


def test_kubectl_and_the_cli__same_kubeconfig__same_outcome(
    table: Table, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [row for row in MATCHES if row.only in ("", backend)]
    rows.sort(key=lambda row: not row.unreachable)
    began = time.monotonic()

    def run(row: Row) -> str:
        with table.bench(row.name) as bench:
            kubectl, ours = table.both(bench, row.build, row.env, row.args)
        return _judge(row, kubectl, ours)

    wrong = _each(table, rows, run)

    with capsys.disabled():
        left = len(MATCHES) - len(rows)
        print(
            f"\n{backend}: {len(rows)} rows in {time.monotonic() - began:.1f} s"
            + (f" ({left} only the other backend can answer)" if left else "")
        )
    assert not wrong, f"{len(wrong)} of {len(rows)} rows differ:\n\n" + "\n\n".join(wrong)


def test_kubectl_and_the_cli__intended_differences__each_side_as_documented(
    table: Table, backend: str
) -> None:
    def run(row: Difference) -> str:
        with table.bench(row.name) as bench:
            kubectl, ours = table.both(bench, row.build, row.env, ())
        said, document = _ours(ours)
        wrong = []
        if _kubectl_ok(kubectl) != row.kubectl_ok:
            wrong.append(f"kubectl {'failed' if row.kubectl_ok else 'succeeded'}")
        where = ours.err if row.ours_exit == 0 else str(document.get("message"))
        if (
            ours.code != row.ours_exit
            or said is not (row.ours_exit == 0)
            or row.ours_says not in where
        ):
            wrong.append(f"ours: not exit {row.ours_exit} saying {row.ours_says!r}")
        if set(kubectl.tunnels) != ({row.via} if row.via else set()):
            wrong.append(f"kubectl's tunnels {kubectl.tunnels}, expected through {row.via}")
        if ours.tunnels:
            wrong.append(f"ours asked a proxy before refusing: {ours.tunnels}")
        if not wrong:
            return ""
        return f"{row.name}: {'; '.join(wrong)}\n kubectl {kubectl.shown()}\n ours {ours.shown()}"

    wrong = _each(table, DIFFERENCES, run)

    assert not wrong, "\n\n".join(wrong)
