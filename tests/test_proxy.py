"""Proxies as kubectl uses them (drainer/k8s/proxy.py, under the transport): the
kubeconfig's proxy-url, else HTTPS_PROXY/HTTP_PROXY with NO_PROXY. The API server is
kubesim (TLS) behind a name only the test's proxy resolves, kube.proxied.test, so a
connection that does not go through the proxy fails."""

from __future__ import annotations

import base64
import http.client
import http.server
import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.proxy import ConnectProxy

from drainer.cli.main import main
from drainer.errors import FatalKubeError, KubeError
from drainer.k8s import kubeconfig
from drainer.k8s.kube import Kube
from drainer.k8s.proxy import ProxyRefused, uses_proxy
from drainer.k8s.transport import Endpoint, Transport, Unreachable
from kubesim import KubeSim, certs

PROXIED = "kube.proxied.test"


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    running = KubeSim()
    running.tls = certs.generate(hosts=(PROXIED, "0.0.0.0"))
    with running:
        running.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        yield running


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    hosts = {PROXIED: "127.0.0.1", "0.0.0.0": "127.0.0.1", "127.0.0.1": "127.0.0.1"}
    with ConnectProxy(hosts) as running:
        yield running


@pytest.fixture(autouse=True)
def no_proxy_from_the_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


def _kubeconfig(tmp_path: Path, sim: KubeSim, host: str = PROXIED, **cluster: Any) -> str:
    config = tmp_path / "kubeconfig"
    server = f"https://{host}:{sim.port}"
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "sim",
                "cluster": {"server": server, "certificate-authority-data": sim.ca_data, **cluster},
            }
        ],
        "users": [{"name": "u", "user": {"token": sim.admin_token}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "u"}}],
        "current-context": "sim",
    }
    config.write_text(yaml.safe_dump(document))
    return str(config)


def _connects(proxy: ConnectProxy) -> list[str]:
    return [target for method, target, _ in proxy.asked if method == "CONNECT"]


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "https_proxy"])
@pytest.mark.parametrize("scheme", ["http://", ""])
def test_https_proxy_in_the_environment__a_server_only_the_proxy_resolves_is_reached(
    sim: KubeSim,
    proxy: ConnectProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    scheme: str,
) -> None:
    monkeypatch.setenv(variable, scheme + proxy.url.removeprefix("http://"))

    kube = Kube.from_kubeconfig(_kubeconfig(tmp_path, sim))

    assert kube.get_node("n1") is not None
    assert _connects(proxy) == [f"{PROXIED}:{sim.port}"]


def test_without_the_proxy__the_name_does_not_resolve(sim: KubeSim, tmp_path: Path) -> None:
    """What today's code did with any proxy setting: connect directly, and fail."""
    endpoint = kubeconfig.load(_kubeconfig(tmp_path, sim), None, clock=time.time).endpoint

    with pytest.raises(Unreachable, match=PROXIED):
        Transport(endpoint, environ={}).send("GET", "/api/v1/nodes/n1", timeout=5.0)


def test_kubeconfig_proxy_url__used_without_the_environment__even_for_127_0_0_1(
    sim: KubeSim, proxy: ConnectProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kubectl applies a cluster's proxy-url to every request, loopback included;
    and it wins over HTTPS_PROXY and NO_PROXY."""
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "*")
    for host in (PROXIED, "127.0.0.1"):
        config = _kubeconfig(tmp_path, sim, host, **{"proxy-url": proxy.url})
        assert Kube.from_kubeconfig(config).get_node("n1") is not None

    assert _connects(proxy) == [f"{PROXIED}:{sim.port}", f"127.0.0.1:{sim.port}"]


@pytest.mark.parametrize(
    "no_proxy",
    [PROXIED, ".proxied.test", "proxied.test", "*.proxied.test", "example.com, KUBE.proxied.test"],
)
def test_no_proxy_names_the_server__it_goes_direct__the_proxy_never_asked(
    sim: KubeSim, proxy: ConnectProxy, tmp_path: Path, no_proxy: str
) -> None:
    endpoint = kubeconfig.load(_kubeconfig(tmp_path, sim), None, clock=time.time).endpoint
    environ = {"HTTPS_PROXY": proxy.url, "NO_PROXY": no_proxy}

    with pytest.raises(Unreachable) as raised:  # direct: the name resolves nowhere
        Transport(endpoint, environ=environ).send("GET", "/api/v1/nodes/n1", timeout=5.0)

    assert raised.value.where == f"{PROXIED}:{sim.port}"
    assert proxy.asked == []


def test_no_proxy_with_a_port_for_another_port__still_proxied(
    sim: KubeSim, proxy: ConnectProxy, tmp_path: Path
) -> None:
    endpoint = kubeconfig.load(_kubeconfig(tmp_path, sim), None, clock=time.time).endpoint
    environ = {"HTTPS_PROXY": proxy.url, "NO_PROXY": f"{PROXIED}:1"}

    answer = Transport(endpoint, environ=environ).send(
        "GET", "/api/v1/nodes/n1", bearer=sim.admin_token, timeout=5.0
    )

    assert answer.status == 200
    assert _connects(proxy) == [f"{PROXIED}:{sim.port}"]


@pytest.mark.parametrize(("no_proxy", "proxied"), [("", True), ("0.0.0.0/8", False)])
def test_no_proxy_cidr__an_address_in_it_goes_direct(
    sim: KubeSim, proxy: ConnectProxy, tmp_path: Path, no_proxy: str, proxied: bool
) -> None:
    """0.0.0.0 is not a loopback address (an environment proxy applies to it), yet a
    connection to it reaches the local host: both ways reach kubesim."""
    config = _kubeconfig(tmp_path, sim, "0.0.0.0")
    endpoint = kubeconfig.load(config, None, clock=time.time).endpoint
    environ = {"HTTPS_PROXY": proxy.url, "NO_PROXY": no_proxy}

    answer = Transport(endpoint, environ=environ).send(
        "GET", "/api/v1/nodes/n1", bearer=sim.admin_token, timeout=5.0
    )

    assert answer.status == 200
    assert _connects(proxy) == ([f"0.0.0.0:{sim.port}"] if proxied else [])


def test_credentials_in_the_proxy_url__reach_the_proxy_decoded(
    sim: KubeSim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ConnectProxy({PROXIED: "127.0.0.1"}, credentials="ops:p@ss:w/rd") as proxy:
        address = proxy.url.removeprefix("http://")
        monkeypatch.setenv("HTTPS_PROXY", f"http://ops:p%40ss%3Aw%2Frd@{address}")

        assert Kube.from_kubeconfig(_kubeconfig(tmp_path, sim)).get_node("n1") is not None

    [(_, _, headers)] = proxy.asked
    assert headers["Proxy-Authorization"] == "Basic " + base64.b64encode(b"ops:p@ss:w/rd").decode()


@pytest.mark.parametrize(
    ("userinfo", "refuse", "said"),
    [
        ("", 0, "407 Proxy Authentication Required (it asks for credentials"),
        ("ops:wrong-secret@", 0, "407 Proxy Authentication Required (the credentials in its"),
        ("ops:right@", 403, "403 Forbidden (the proxy does not allow this address"),
    ],
)
def test_proxy_refuses_the_tunnel__one_clear_error_naming_the_proxy__no_credentials(
    sim: KubeSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    userinfo: str,
    refuse: int,
    said: str,
) -> None:
    with ConnectProxy({PROXIED: "127.0.0.1"}, credentials="ops:right", refuse=refuse) as proxy:
        address = proxy.url.removeprefix("http://")
        monkeypatch.setenv("HTTPS_PROXY", f"http://{userinfo}{address}")
        kube = Kube.from_kubeconfig(_kubeconfig(tmp_path, sim))

        with pytest.raises(ProxyRefused) as raised:
            kube.get_node("n1")

    message = str(raised.value)
    assert isinstance(raised.value, FatalKubeError), "retrying will not change the answer"
    assert message.startswith(
        f"the proxy http://{address} (HTTPS_PROXY) refused a tunnel to {PROXIED}:{sim.port}: "
    )
    assert said in message
    assert "secret" not in message and "right" not in message
    assert len(proxy.asked) == 1, "asked once, not retried"


def test_tls_inside_the_tunnel__verified_against_the_cluster_ca(
    sim: KubeSim, proxy: ConnectProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other_ca = base64.b64encode(certs.generate().ca_pem).decode()
    config = _kubeconfig(tmp_path, sim, **{"certificate-authority-data": other_ca})
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)

    with pytest.raises(KubeError, match="does not verify against the cluster CA"):
        Kube.from_kubeconfig(config).get_node("n1")

    assert _connects(proxy) == [f"{PROXIED}:{sim.port}"]


class _Plain(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"kind":"Node","metadata":{"name":"n1"}}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_http_server_through_http_proxy__absolute_form_with_credentials() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Plain)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        with ConnectProxy({"plain.proxied.test": "127.0.0.1"}, credentials="a:b") as proxy:
            environ = {"HTTP_PROXY": proxy.url.replace("http://", "http://a:b@")}
            transport = Transport(Endpoint(f"http://plain.proxied.test:{port}"), environ=environ)
            answer = transport.send("GET", "/api/v1/nodes/n1", timeout=5.0)
            assert (answer.status, answer.read()[:13]) == (200, b'{"kind":"Node')
    finally:
        server.shutdown()
        server.server_close()
    [(method, target, headers)] = proxy.asked
    assert (method, target) == ("GET", f"http://plain.proxied.test:{port}/api/v1/nodes/n1")
    assert headers["Proxy-Authorization"] == "Basic " + base64.b64encode(b"a:b").decode()


@pytest.mark.parametrize(
    ("where", "url", "said"),
    [
        ("proxy-url", "socks5://127.0.0.1:1080", "proxy-url socks5://127.0.0.1:1080: a SOCKS"),
        ("proxy-url", "https://proxy.example:3128", "TLS to the proxy itself is not supported"),
        ("HTTPS_PROXY", "socks5h://u:secret@proxy.example", "HTTPS_PROXY socks5h://proxy"),
        ("proxy-url", "ftp://proxy.example", "not a proxy URL the drainer takes"),
    ],
)
def test_unsupported_proxy__the_cli_refuses_it_by_name__exit_2(
    sim: KubeSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
    url: str,
    said: str,
) -> None:
    if where == "HTTPS_PROXY":
        monkeypatch.setenv("HTTPS_PROXY", url)
        config = _kubeconfig(tmp_path, sim)
    else:
        config = _kubeconfig(tmp_path, sim, **{"proxy-url": url})
    out = io.StringIO()

    code = main(["drain", "--node", "n1", "--kubeconfig", config], stdout=out)

    said_all = out.getvalue() + capsys.readouterr().err
    assert code == 2, said_all
    assert said in said_all
    assert "secret" not in said_all


def test_cli_with_https_proxy__drains_the_node_behind_it(
    sim: KubeSim, proxy: ConnectProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    out = io.StringIO()

    code = main(["drain", "--node", "n1", "--kubeconfig", _kubeconfig(tmp_path, sim)], stdout=out)

    assert code == 0, out.getvalue()
    assert "node n1 drained" in out.getvalue()
    assert sim.get("Node", "n1")["spec"]["unschedulable"] is True
    assert set(_connects(proxy)) == {f"{PROXIED}:{sim.port}"}


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "proxied"),
    [
        ("localhost", 443, "", False),  # Go never proxies loopback from the environment
        ("127.0.0.5", 443, "", False),
        ("::1", 443, "", False),
        ("kube.example.com", 443, "", True),
        ("kube.example.com", 443, "*", False),
        ("kube.example.com", 443, "example.com", False),  # a name covers its subdomains
        ("notexample.com", 443, "example.com", True),
        ("example.com", 443, ".example.com", True),  # a suffix only its subdomains
        ("kube.example.com", 443, "*.example.com", False),
        ("kube.example.com", 443, "kube.example.com:443", False),
        ("kube.example.com", 6443, "kube.example.com:443", True),
        ("10.1.2.3", 443, "10.0.0.0/8", False),
        ("11.1.2.3", 443, "10.0.0.0/8", True),
        ("10.1.2.3", 443, "10.1.2.3", False),
        ("10.1.2.3", 443, "10.1.2.3:6443", True),
        ("fd00::1", 443, "fd00::/8", False),
        ("fd00::1", 443, "[fd00::1]:443", False),
        ("kube.example.com", 443, " , ,other.com", True),
    ],
)
def test_uses_proxy__as_gos_proxy_from_environment(
    host: str, port: int, no_proxy: str, proxied: bool
) -> None:
    assert uses_proxy(host, port, no_proxy) is proxied


def test_cli_behind_a_proxy_that_wants_credentials__exit_3_naming_the_proxy(
    sim: KubeSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with ConnectProxy({PROXIED: "127.0.0.1"}, credentials="ops:right") as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url.replace("http://", "http://ops:wrong@"))
        out = io.StringIO()

        code = main(
            ["drain", "--node", "n1", "--kubeconfig", _kubeconfig(tmp_path, sim)], stdout=out
        )

    said = out.getvalue() + capsys.readouterr().err
    assert code == 3, said
    assert f"the proxy {proxy.url} (HTTPS_PROXY) refused a tunnel" in said
    assert "407 Proxy Authentication Required" in said
    assert "wrong" not in said
    assert len(proxy.asked) == 1
