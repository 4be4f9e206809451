"""The wire under drainer.k8s.kube: one urllib3 pool per API server, TLS always
verified against the cluster's CA, no retries of urllib3's own (the caller's are
the only ones), and no kubernetes package: importing its client costs a cold start
a quarter of a second or more (issue 28), and the drainer sends plain JSON.

A kubeconfig's user may still need the kubernetes package to load (an
auth-provider, or an exec plugin that gives a client certificate); its answer is
then turned into an Endpoint like any other (drainer/k8s/kubeconfig.py).
"""

from __future__ import annotations

import json
import ssl
import urllib.parse
from dataclasses import dataclass
from typing import Any

import urllib3


@dataclass(frozen=True)
class Endpoint:
    """Where an API server is and how to trust and reach it."""

    server: str
    """https://host[:port][/prefix]"""
    ca_pem: str = ""
    """The cluster CA (PEM); or `ca_file`."""
    ca_file: str = ""
    cert_file: str = ""
    """A client certificate (a kubeconfig's client-certificate), with `key_file`."""
    key_file: str = ""
    authorization: str = ""
    """The Authorization header of a kubeconfig's static credentials ("Bearer ..."),
    sent when the request brings no token of its own."""
    tls_server_name: str = ""
    """The name the server's certificate is checked against, when not the host's."""

    def __repr__(self) -> str:  # never the credentials
        return f"Endpoint(server={self.server!r})"


class Transport:
    """Requests to one API server over a pool of up to `pool_size` kept connections."""

    def __init__(self, endpoint: Endpoint, *, pool_size: int = 32, user_agent: str = "") -> None:
        self.endpoint = endpoint
        self.server = endpoint.server.rstrip("/")
        tls: dict[str, Any] = {"cert_reqs": ssl.CERT_REQUIRED}
        if endpoint.ca_pem:
            tls["ca_cert_data"] = endpoint.ca_pem
        if endpoint.ca_file:
            tls["ca_certs"] = endpoint.ca_file
        if endpoint.cert_file:
            tls["cert_file"] = endpoint.cert_file
            tls["key_file"] = endpoint.key_file or None
        if endpoint.tls_server_name:
            tls["server_hostname"] = endpoint.tls_server_name
            tls["assert_hostname"] = endpoint.tls_server_name
        self.pool = urllib3.PoolManager(num_pools=2, maxsize=pool_size, retries=False, **tls)
        self.user_agent = user_agent

    def send(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        bearer: str | None = None,
        timeout: float | tuple[float, float],
    ) -> urllib3.BaseHTTPResponse:
        """One request; the response unread (stream it, or read it and release the
        connection). Raises urllib3's errors (no connection, TLS, a timeout)."""
        url = self.server + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"Accept": accept, "User-Agent": self.user_agent}
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        elif self.endpoint.authorization:
            headers["Authorization"] = self.endpoint.authorization
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        if isinstance(timeout, tuple):
            limit = urllib3.Timeout(connect=timeout[0], read=timeout[1])
        else:
            limit = urllib3.Timeout(total=timeout)
        return self.pool.request(
            method,
            url,
            body=data,
            headers=headers,
            timeout=limit,
            preload_content=False,
            retries=False,
            redirect=False,
        )

    def close(self) -> None:
        self.pool.clear()
