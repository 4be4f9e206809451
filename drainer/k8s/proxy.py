"""Which proxy a request to the API server goes through, chosen as kubectl chooses it,
and the CONNECT tunnel through it.

client-go applies a cluster's `proxy-url` to every request (even to localhost);
without one it takes the environment's through Go's ProxyFromEnvironment:
HTTPS_PROXY for an https server, HTTP_PROXY for an http one (upper case before lower
case), never for localhost or a loopback address, and not for a host NO_PROXY names
(a name, which also covers its subdomains; a suffix `.example.com` or
`*.example.com`; an IP; a CIDR; any of them with `:port`; `*` for every host).

Only http:// proxies are supported. An https server is reached through a CONNECT
tunnel, inside which TLS to the API server is verified as it is without a proxy;
an http server through absolute-form requests. Credentials in the proxy's URL go as
Proxy-Authorization Basic; they never appear in a message. A SOCKS proxy and TLS to
the proxy itself (an https:// proxy URL) are refused by name (ProxyError).
"""

from __future__ import annotations

import http.client
import socket
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from drainer.errors import FatalKubeError
from drainer.k8s.deadline import TimedResponse, Timing


class ProxyError(ValueError):
    """A proxy setting the drainer does not take; names the setting, never credentials."""


class ProxyRefused(FatalKubeError):
    """The proxy refused the tunnel (407, 403): asking again will not change its mind."""


@dataclass(frozen=True)
class Proxy:
    """An http:// proxy, where it was set, and its Proxy-Authorization header."""

    host: str
    port: int
    origin: str
    """The setting that named it: proxy-url, HTTPS_PROXY, https_proxy, HTTP_PROXY..."""
    authorization: str = ""

    def __repr__(self) -> str:  # never the credentials
        return f"Proxy({self.named!r})"

    @property
    def named(self) -> str:
        """The proxy in messages: "proxy http://host:port (HTTPS_PROXY)"."""
        return f"proxy http://{_netloc(self.host, self.port)} ({self.origin})"


def choose(server: str, proxy_url: str, environ: Mapping[str, str]) -> Proxy | None:
    """The proxy for requests to `server`, or None to connect directly: the
    kubeconfig's `proxy_url` when set, else the environment's."""
    if proxy_url:
        return parse(proxy_url, "proxy-url")
    url = urllib.parse.urlsplit(server)
    name = "HTTPS_PROXY" if url.scheme == "https" else "HTTP_PROXY"
    origin = name if environ.get(name) else name.lower()
    value = environ.get(origin)
    if not value:
        return None
    no_proxy = environ.get("NO_PROXY") or environ.get("no_proxy") or ""
    port = url.port or (443 if url.scheme == "https" else 80)
    if not uses_proxy(url.hostname or "", port, no_proxy):
        return None
    return parse(value, origin)


ENVIRONMENT = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")
"""The environment's proxy variables, in the order Go reads them."""


def parse(value: str, origin: str) -> Proxy:
    """A proxy URL as Go reads one (no scheme: http://); ProxyError when unsupported."""
    url = urllib.parse.urlsplit(value)
    if not url.scheme or not url.netloc:
        url = urllib.parse.urlsplit("http://" + value)
    scheme = url.scheme.lower()
    try:
        host, port = url.hostname or "", url.port
    except ValueError as e:
        raise ProxyError(f"{origin}: the proxy URL has no valid port ({e})") from e
    shown = f"{origin} {scheme}://{_netloc(host, port or 0) if port else host}"
    if scheme in ("socks5", "socks5h"):
        raise ProxyError(
            f"{shown}: a SOCKS proxy is not supported; give an HTTP proxy (http://), "
            "which the drainer tunnels through with CONNECT"
        )
    if scheme == "https":
        raise ProxyError(
            f"{shown}: TLS to the proxy itself is not supported; give the proxy as "
            "http:// (the API server's TLS still runs end to end inside the tunnel)"
        )
    if scheme != "http" or not host:
        raise ProxyError(f"{shown}: not a proxy URL the drainer takes (http://host:port)")
    authorization = ""
    if url.username is not None:
        import base64  # only with credentials in the proxy URL

        pair = f"{urllib.parse.unquote(url.username)}:{urllib.parse.unquote(url.password or '')}"
        authorization = "Basic " + base64.b64encode(pair.encode()).decode()
    return Proxy(host, port or 80, origin, authorization)


def uses_proxy(host: str, port: int, no_proxy: str) -> bool:
    """Go's httpproxy.useProxy: whether an environment proxy applies to host:port."""
    import ipaddress  # only with a proxy in the environment

    host = host.lower()
    if host == "localhost":
        return False
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None and ip.is_loopback:
        return False
    for entry in no_proxy.split(","):
        pattern = entry.strip().lower()
        if pattern == "*":
            return False
        if not pattern:
            continue
        if "/" in pattern:
            try:
                network = ipaddress.ip_network(pattern, strict=False)
            except ValueError:
                continue
            if ip is not None and ip in network:
                return False
            continue
        if _matches(pattern, host, ip, str(port)):
            return False
    return True


def _matches(pattern: str, host: str, ip: object, port: str) -> bool:
    """One NO_PROXY entry (not a CIDR) against the request's host and port."""
    import ipaddress

    name, wanted_port = _split_host_port(pattern)
    if not name or (wanted_port and wanted_port != port):
        return False
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        pass  # a name or a suffix
    else:
        return address == ip
    if name.startswith("*."):
        name = name[1:]
    if name.startswith("."):
        return host.endswith(name)
    return host == name or host.endswith("." + name)


def _split_host_port(pattern: str) -> tuple[str, str]:
    if pattern.startswith("["):
        name, _, rest = pattern[1:].partition("]")
        return name, rest[1:] if rest.startswith(":") else ""
    if pattern.count(":") == 1:
        name, _, port = pattern.partition(":")
        return name, port
    return pattern, ""  # a name, an IPv4 address, or a bare IPv6 address


def tunnel(
    sock: socket.socket, proxy: Proxy, host: str, port: int, *, timing: Timing | None = None
) -> None:
    """Ask the proxy for a tunnel to host:port on `sock` (connected to the proxy), its
    answer read by the request's deadline (`timing`). ProxyRefused on 407 or 403;
    OSError on any other answer; DeadlineExceeded past the deadline."""
    target = _netloc(host, port)
    request = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
    if proxy.authorization:
        request += f"Proxy-Authorization: {proxy.authorization}\r\n"
    sock.sendall((request + "\r\n").encode("latin-1"))
    answer = (
        http.client.HTTPResponse(sock, method="CONNECT")
        if timing is None
        else TimedResponse(sock, method="CONNECT", timing=timing)
    )
    answer.begin()  # the status line and headers only: the tunnel's bytes stay unread
    if answer.status == 200:
        return
    said = f"{answer.status} {answer.reason}".strip()
    if answer.status == 407:
        hint = (
            "the credentials in its URL were refused"
            if proxy.authorization
            else "it asks for credentials: give them in the proxy URL "
            "(http://user:password@host:port)"
        )
        raise ProxyRefused(f"the {proxy.named} refused a tunnel to {target}: {said} ({hint})")
    if answer.status == 403:
        raise ProxyRefused(
            f"the {proxy.named} refused a tunnel to {target}: {said} (the proxy does not "
            "allow this address; ask its administrator, or set NO_PROXY if it is not needed)"
        )
    raise OSError(f"the {proxy.named} could not open a tunnel to {target}: {said}")


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
