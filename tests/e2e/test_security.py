"""Security checks: no token or secret in any log line, and TLS verification that
no setting can turn off."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from drainer.errors import TlsVerificationError
from drainer.k8s.kube import Kube
from drainer.lifecycle.settings import VARIABLES, Settings
from testbed import World
from testbed import workloads as w
from testbed.world import place_on

from .conftest import Invoke, LogCapture


def test_no_token_or_secret_in_logs__even_at_debug(
    world: World, invoke: Invoke, drainer_logs: LogCapture, capsys: pytest.CaptureFixture[str]
) -> None:
    instance = world.instance_ids[0]
    place_on(world, world.nodes[instance], [w.deployment("web", 2, shutdown=80.0, grace=120)])
    # Tokens go stale mid-drain (X-Amz-Date has 1 s steps): a refresh and a 401 on the way.
    assert world.cluster.authenticator is not None
    world.cluster.authenticator.max_token_age = 2.0

    summary = invoke(world.terminate(instance), LOG_LEVEL="DEBUG", DRAIN_TIMEOUT_SECONDS=120)

    assert summary["result"] == "drained"
    captured = capsys.readouterr()
    everything = drainer_logs.text + captured.out + captured.err
    assert everything.strip(), "the test must have captured logs"
    secret = _secret_key(world)
    assert "k8s-aws-v1." not in everything.replace("k8s-aws-v1.[redacted]", "")
    assert not re.search(r"X-Amz-Signature=[0-9a-f]{16}", everything)
    assert secret not in everything
    assert world.cluster.admin_token not in everything


def _secret_key(world: World) -> str:
    import boto3

    credentials = boto3.Session().get_credentials()
    assert credentials is not None
    return str(credentials.secret_key)


def test_no_setting_can_turn_tls_verification_off() -> None:
    names = " ".join(v.name.lower() for v in VARIABLES)
    for word in ("insecure", "verify", "tls", "ssl", "skip"):
        assert word not in names, f"a setting mentions {word!r}"
    assert not any("verify" in f.name or "tls" in f.name for f in dataclasses.fields(Settings))


def test_kubeconfig_that_skips_verification__refused(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1',"
        " insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )

    with pytest.raises(TlsVerificationError, match="always verifies"):
        Kube.from_kubeconfig(str(config))
