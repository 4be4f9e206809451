"""An exec plugin's client certificate (drainer/k8s/execcert.py): renewed near its
stated expiry and after a 401, never in a loop; the transport's next connections
present the renewed one (on the real API server: tests/e2e/test_exec_certificate.py)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from support.sims import fast_sim_with_a_node  # noqa: F401  (the fixture `sim`)

from drainer.errors import CredentialsFailing, CredentialsUnavailable, KubeUnauthorized
from drainer.k8s.execcert import ExecCertificate
from drainer.k8s.kube import Kube
from drainer.k8s.transport import Endpoint, Transport
from kubesim import KubeSim
from tests.support.clock import FakeClock

NOW = 1_000_000.0


def _stamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Plugin:
    """Each run: a certificate named by its run's number, expiring `lifetime` later."""

    def __init__(self, sim: KubeSim, clock: FakeClock, lifetime: float | None = 600) -> None:
        self.sim, self.clock, self.lifetime, self.runs = sim, clock, lifetime, 0

    def __call__(self) -> Mapping[str, Any]:
        self.runs += 1
        status = {
            "clientCertificateData": self.sim.tls.cert_pem.decode() + f"# run {self.runs}\n",
            "clientKeyData": self.sim.tls.key_pem.decode(),
        }
        if self.lifetime is not None:
            status["expirationTimestamp"] = _stamp(self.clock() + self.lifetime)
        return status


def _client(sim: KubeSim, plugin: Plugin, clock: FakeClock) -> tuple[Kube, ExecCertificate]:
    source = ExecCertificate(plugin, command="cert-plugin", clock=clock, status=plugin())
    _, cert, key = source.current()
    endpoint = Endpoint(
        sim.url, ca_pem=sim.ca_pem.decode(), cert_file=cert, key_file=key, certificate=source
    )
    return Kube(Transport(endpoint, environ={}), source), source


def test_renewed_near_its_stated_expiry__not_before() -> None:
    clock = FakeClock(NOW)
    statuses = iter(
        {
            "clientCertificateData": f"c{n}",
            "clientKeyData": f"k{n}",
            "expirationTimestamp": _stamp(NOW + 600),
        }
        for n in range(1, 4)
    )
    source = ExecCertificate(
        lambda: next(statuses), command="p", clock=clock, status=next(statuses)
    )

    assert source.token() == ""  # no bearer token: the certificate is the credential
    clock.advance(600 - 11)
    source.token()
    assert source.current()[0] == 1
    clock.advance(2)  # within 10 s of the expiry
    source.token()
    version, cert, _ = source.current()
    assert version == 2
    assert Path(cert).read_text() == "c2"


def test_a_401__the_plugin_runs_once_more__then_the_refusal_is_said(sim: KubeSim) -> None:
    """kubesim authenticates bearer tokens only, so it refuses every certificate: one
    renewal and one retry, as for a token, never a loop."""
    clock = FakeClock(NOW)
    plugin = Plugin(sim, clock)
    kube, _ = _client(sim, plugin, clock)
    try:
        with pytest.raises(KubeUnauthorized, match="401"):
            kube.get_node("n1")
    finally:
        kube.close()
    assert plugin.runs == 2  # the first, and the renewal after the 401


def test_renewed__kept_connections_closed__the_next_one_presents_the_new(sim: KubeSim) -> None:
    clock = FakeClock(NOW)
    plugin = Plugin(sim, clock)
    source = ExecCertificate(plugin, command="p", clock=clock, status=plugin())
    _, cert, key = source.current()
    endpoint = Endpoint(
        sim.url, ca_pem=sim.ca_pem.decode(), cert_file=cert, key_file=key, certificate=source
    )
    transport = Transport(endpoint, environ={})
    transport.send("GET", "/version", timeout=5).read()
    first = transport._context
    assert not transport._idle.empty()

    clock.advance(600)
    source.token()
    transport.send("GET", "/version", timeout=5).read()

    assert transport._context is not first
    kept = transport._idle.get_nowait()
    assert kept.tls is transport._context  # the old connection was not reused
    transport.close()


def test_a_renewal_failing_after_it_worked__retried__then_given_up() -> None:
    """As an exec plugin's token (drainer/k8s/auth.py): the last certificate while it
    is valid, CredentialsFailing (a server error the drain retries) after, and
    CredentialsUnavailable once the plugin has failed for the outage allowed."""
    clock = FakeClock(NOW)
    first = {"clientCertificateData": "c", "clientKeyData": "k",
             "expirationTimestamp": _stamp(NOW + 60)}  # fmt: skip
    source = ExecCertificate(
        lambda: {"token": "not a certificate"}, command="p", clock=clock, status=first,
        outage=120.0,
    )  # fmt: skip

    clock.advance(55)  # within the margin: the plugin runs, fails; the certificate holds
    assert source.token() == ""
    assert source.current()[0] == 1
    clock.advance(10)  # past its expiry, the plugin failing still
    with pytest.raises(CredentialsFailing, match="no client certificate"):
        source.token()
    clock.advance(120)
    with pytest.raises(CredentialsUnavailable, match="failed on every run"):
        source.token()
