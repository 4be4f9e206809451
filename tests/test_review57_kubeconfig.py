"""Review 57: kubeconfigs kubectl (v1.32) reads, and what the CLI does with them.

Each test names what kubectl does with the same kubeconfig (established by hand with
`kubectl --kubeconfig F get node n1 -o name` against a kubesim), and fails where the
CLI does otherwise: a traceback, a refusal where kubectl connects, a wrong request, or
a message that does not say what is wrong.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.sims import fast_sim_with_a_node  # noqa: F401  (the fixture `sim`)

from drainer.cli.main import main
from drainer.errors import KubeError
from drainer.k8s import kubeconfig
from drainer.k8s.kube import Kube
from kubesim import KubeSim
from tests.support.clock import FakeClock
from tests.test_kubeconfig import _config

RELEASE = ["release", "--node", "n1", "--dry-run=client"]
"""The nearest read-only equivalent of `kubectl get node n1`: one GET of the node."""


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def test_ca_data_with_utf8_text_beside_the_pem__connects__no_traceback(
    sim: KubeSim, tmp_path: Path
) -> None:
    """A CA bundle with comment lines before its PEM block (curl's cacert.pem has
    `# Issuer: ... O=NetLock Kft. OU=Tanúsítványkiadók`), base64'd into
    certificate-authority-data. kubectl reads only the PEM blocks (Go's
    AppendCertsFromPEM) and prints node/n1. The CLI died with a traceback:
    `TypeError: cadata should be an ASCII string or a bytes-like object` from
    ssl.create_default_context in transport.Transport._tls_context, a TypeError that
    Kube.from_kubeconfig does not turn into a KubeError."""
    bundle = "# Issuer: CN=kubesim-ca O=Tanúsítványkiadók\n".encode() + sim.ca_pem
    data = base64.b64encode(bundle).decode()
    config = _write(
        tmp_path / "config",
        _config(sim, {"token": sim.admin_token}, **{"certificate-authority-data": data}),
    )

    code = main([*RELEASE, "--kubeconfig", str(config)], stdout=io.StringIO())

    assert code == 0


def test_ca_data_with_latin1_text_beside_the_pem__connects_as_kubectl(
    sim: KubeSim, tmp_path: Path
) -> None:
    """The same bundle with its comment in Latin-1 (bytes outside ASCII that are not
    UTF-8): kubectl prints node/n1. The CLI refused it, saying "base64 data that does
    not decode: 'utf-8' codec can't decode byte 0xfa", though the base64 decodes
    fine: kubeconfig._decoded insists the PEM text is UTF-8."""
    bundle = "# Issuer: CN=kubesim-ca O=Tanúsítvány\n".encode("latin-1") + sim.ca_pem
    data = base64.b64encode(bundle).decode()
    config = _write(
        tmp_path / "config",
        _config(sim, {"token": sim.admin_token}, **{"certificate-authority-data": data}),
    )

    kube = Kube.from_kubeconfig(str(config))
    try:
        assert kube.get_node("n1") is not None
    finally:
        kube.close()


def test_kubeconfig_flag_a_path_with_a_colon__read_as_the_one_file_it_names(
    sim: KubeSim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--kubeconfig names one file (the CLI's own kubeconfig.found says so, and
    checks that the whole path exists). kubectl reads
    `--kubeconfig /x/2024-01-01T10:00/config` and prints node/n1. The CLI's
    kubeconfig.load then splits the same path on ':' as if it were KUBECONFIG's list,
    reads neither half, and says "no context given and no current-context set" of a
    kubeconfig that sets one."""
    config = _write(
        tmp_path / "2024-01-01T10:00" / "config", _config(sim, {"token": sim.admin_token})
    )

    code = main([*RELEASE, "--kubeconfig", str(config)], stdout=io.StringIO())

    assert "no current-context set" not in capsys.readouterr().err
    assert code == 0


def test_token_and_token_file__the_files_token_sent__as_kubectl(
    sim: KubeSim, tmp_path: Path
) -> None:
    """A user with both `token` (a snapshot, since expired) and `tokenFile` (the
    rotated one, as tools write from an in-cluster rest.Config): client-go's
    NewBearerAuthWithRefreshRoundTripper sends the file's token whenever it can read
    the file, the inline one only as a fallback; kubectl prints node/n1. The CLI
    (kubeconfig._with_user) sends the stale inline token and the drain fails on a
    401 telling the person to get new credentials."""
    (tmp_path / "token").write_text(sim.admin_token + "\n")
    user = {"token": "stale-token", "tokenFile": "token"}
    config = _write(tmp_path / "config", _config(sim, user))

    kube = Kube.from_kubeconfig(str(config))
    try:
        assert kube.get_node("n1") is not None
    finally:
        kube.close()


def test_client_certificate_data_without_a_key__the_message_names_the_missing_key(
    sim: KubeSim, tmp_path: Path
) -> None:
    """kubectl: "client-key-data or client-key must be specified for u to use the
    clientCert authentication method." The CLI: "cannot load kubeconfig ...: [SSL]
    PEM lib (_ssl.c:3926)", the ssl module's load_cert_chain failing on a
    certificate with no key, which names neither the field nor the user."""
    cert = base64.b64encode(sim.tls.cert_pem).decode()
    user = {"token": sim.admin_token, "client-certificate-data": cert}
    config = _write(tmp_path / "config", _config(sim, user))

    with pytest.raises(KubeError) as raised:
        Kube.from_kubeconfig(str(config))

    assert "client-key" in str(raised.value), str(raised.value)


def test_oidc_auth_provider_without_an_id_token__an_error_not_a_traceback(
    sim: KubeSim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An oidc user not yet signed in (no id-token, no refresh-token): kubectl says
    "Unable to connect to the server: No valid id-token, and cannot refresh without
    refresh-token" and exits 1. The CLI died with a traceback: the kubernetes
    package's loader raises ConfigException ("Expected key id-token"), which
    kubeconfig.library_endpoint lets through and Kube.from_kubeconfig does not
    catch (it catches KubeconfigError, OSError, ValueError)."""
    provider = {
        "name": "oidc",
        "config": {"client-id": "drainer", "idp-issuer-url": "https://127.0.0.1:9/"},
    }
    config = _write(tmp_path / "config", _config(sim, {"auth-provider": provider}))

    code = main([*RELEASE, "--kubeconfig", str(config)], stdout=io.StringIO())

    assert code in (2, 3)
    assert "id-token" in capsys.readouterr().err


def test_as_groups_a_string__never_impersonates_each_letter(sim: KubeSim, tmp_path: Path) -> None:
    """`as-groups: system:masters` (a string where a list belongs): kubectl refuses
    the file ("json: cannot unmarshal string into Go struct field
    AuthInfo.users.user.as-groups of type []string"). The CLI
    (impersonation.Impersonation.of_user) iterates the string and sends
    Impersonate-Group: s, y, s, t, e, m, ":" ... — fourteen one-letter groups — though
    it refuses the same mistake in as-user-extra. Either refuse it or take it whole."""
    user = {"token": sim.admin_token, "as": "someone", "as-groups": "system:masters"}
    config = _write(tmp_path / "config", _config(sim, user))

    try:
        loaded = kubeconfig.load(str(config), None, clock=FakeClock())
    except (KubeError, kubeconfig.KubeconfigError, ValueError):
        return  # refused, as kubectl refuses it
    groups = [value for name, value in loaded.endpoint.impersonate if name == "Impersonate-Group"]
    assert groups == ["system:masters"]
