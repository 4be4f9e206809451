"""A client certificate from an exec credential plugin, renewed as client-go renews
it (drainer/k8s/execcert.py): the plugin runs again shortly before the expiry it
states, and the connections made after that present the new certificate. On the real
API server alone, which authenticates client certificates against its client CA
(kubesim authenticates bearer tokens only): who the server says the request came
from (a SelfSubjectReview) is the certificate's common name."""

from __future__ import annotations

import datetime
import sys
import time
from pathlib import Path

import pytest
import yaml

from drainer.k8s.kube import Kube
from kubesim import certs
from testbed.cluster import Cluster
from tests.support.clock import FakeClock

PLUGIN = """
import json, pathlib, sys
here = pathlib.Path(sys.argv[1])
runs = here / "runs"
n = len(runs.read_text().split()) + 1 if runs.exists() else 1
runs.write_text(runs.read_text() + f"{n} " if runs.exists() else f"{n} ")
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1",
    "kind": "ExecCredential",
    "status": {
        "clientCertificateData": (here / f"cert-{n}.pem").read_text(),
        "clientKeyData": (here / f"key-{n}.pem").read_text(),
        "expirationTimestamp": (here / "expiry").read_text(),
    },
}))
"""


def _who(kube: Kube) -> str:
    review = kube.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        verb="create",
        resource="selfsubjectreviews",
    )
    return str(review["status"]["userInfo"]["username"])


@pytest.mark.parametrize("backend", ["real"])  # kubesim does not authenticate certificates
def test_exec_client_certificate__renewed_before_its_stated_expiry__next_requests_use_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    assert cluster.plane is not None
    for n in (1, 2):
        cert, key = certs.client(cluster.plane.tls, f"cert-user-{n}", ("system:masters",))
        (tmp_path / f"cert-{n}.pem").write_bytes(cert)
        (tmp_path / f"key-{n}.pem").write_bytes(key)
    expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=5)
    (tmp_path / "expiry").write_text(expiry.strftime("%Y-%m-%dT%H:%M:%SZ"))
    (tmp_path / "plugin.py").write_text(PLUGIN)
    config = tmp_path / "kubeconfig"
    exec_spec = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": [str(tmp_path / "plugin.py"), str(tmp_path)],
        "interactiveMode": "Never",
    }
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": cluster.url,
                            "certificate-authority-data": cluster.ca_data,
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"exec": exec_spec}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    clock = FakeClock(time.time())
    kube = Kube.from_kubeconfig(str(config), clock=clock)
    try:
        assert _who(kube) == "cert-user-1"
        assert _who(kube) == "cert-user-1"  # kept until near its expiry: one run

        clock.advance(5 * 60 - 5)  # within the margin before the stated expiry

        assert _who(kube) == "cert-user-2"
        assert (tmp_path / "runs").read_text().split() == ["1", "2"]
    finally:
        kube.close()
