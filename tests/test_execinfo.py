"""An exec credential plugin run as client-go runs it (drainer/k8s/execinfo.py, run
by drainer/k8s/kubeconfig.py): what a real plugin script sees, and what the person
at the terminal sees of it."""

from __future__ import annotations

import base64
import io
import json
import os
import pty
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drainer.cli.main import main
from drainer.k8s import kubeconfig

V1BETA1 = "client.authentication.k8s.io/v1beta1"
PLUGIN = """\
import json, os, sys
record = {"cwd": os.getcwd(), "tty": os.isatty(0),
          "info": json.loads(os.environ["KUBERNETES_EXEC_INFO"]),
          "greeting": os.environ.get("GREETING")}
token = "plain"
if record["info"]["spec"]["interactive"]:
    print("open https://sso.example/device and enter the code; then type it here:",
          file=sys.stderr, flush=True)
    token = "code-" + sys.stdin.readline().strip()
with open(sys.argv[1], "w") as f:
    json.dump(record, f)
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": {"token": token}}))
"""


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """Our stdin is a terminal (a pty); yields the side the person types into."""
    typist, ours = pty.openpty()
    stdin = os.fdopen(ours, "r")
    monkeypatch.setattr(sys, "stdin", stdin)
    yield typist
    stdin.close()
    os.close(typist)


@pytest.fixture
def no_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))


def _kubeconfig(directory: Path, exec_spec: dict[str, Any], **cluster: Any) -> Path:
    script = directory / "plugin.py"
    script.write_text(PLUGIN)
    spec = {
        "apiVersion": V1BETA1,
        "command": sys.executable,
        "args": [str(script), str(directory / "seen.json")],
        **exec_spec,
    }
    config = {
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", **cluster}}],
        "users": [{"name": "u", "user": {"exec": spec}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def _seen(directory: Path) -> dict[str, Any]:
    seen: dict[str, Any] = json.loads((directory / "seen.json").read_text())
    return seen


def _token(path: Path) -> str:
    loaded = kubeconfig.load(str(path), None, clock=lambda: 0.0)
    assert loaded.token is not None
    return loaded.token.token()


def test_sso_prompt__shown_on_our_stderr__answered_from_our_terminal(
    tmp_path: Path, terminal: int, capfd: pytest.CaptureFixture[str]
) -> None:
    os.write(terminal, b"493-221\n")  # the person types the code the prompt asked for

    token = _token(_kubeconfig(tmp_path, {}))

    assert "open https://sso.example/device" in capfd.readouterr().err
    assert token == "code-493-221"
    assert _seen(tmp_path)["info"]["spec"]["interactive"] is True


@pytest.mark.parametrize(
    ("mode", "has_terminal", "interactive"),
    [
        ("Never", True, False),
        ("IfAvailable", True, True),
        ("IfAvailable", False, False),
        ("Always", True, True),
        (None, True, True),  # v1beta1's default: IfAvailable
    ],
)
def test_interactive_mode__stdin_passed_through_only_when_interactive(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    mode: str | None,
    has_terminal: bool,
    interactive: bool,
) -> None:
    typist = request.getfixturevalue("terminal") if has_terminal else None
    if typist is not None:
        os.write(typist, b"1\n")
    spec = {"interactiveMode": mode} if mode else {}

    _token(_kubeconfig(tmp_path, spec))

    seen = _seen(tmp_path)
    assert seen["info"]["spec"]["interactive"] is interactive
    assert seen["tty"] is interactive


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"interactiveMode": "Always"},
            "interactiveMode is Always but standard input is not a terminal",
        ),
        ({"env": [{"value": "x"}]}, "env entry 1 has no name"),
        ({"interactiveMode": "Sometimes"}, "interactiveMode 'Sometimes' is none of"),
        ({"apiVersion": "client.authentication.k8s.io/v1"}, "interactiveMode must be set"),
    ],
    ids=["always-without-terminal", "env-without-name", "unknown-mode", "v1-without-mode"],
)
def test_exec_section_client_go_refuses__usage_error_exit_2_before_any_run(
    tmp_path: Path,
    no_terminal: None,
    capsys: pytest.CaptureFixture[str],
    spec: dict[str, Any],
    message: str,
) -> None:
    config = _kubeconfig(tmp_path, spec)

    code = main(["release", "n1", "--kubeconfig", str(config)])

    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "seen.json").exists()


def test_env_entries__given_to_the_plugin(tmp_path: Path, no_terminal: None) -> None:
    _token(_kubeconfig(tmp_path, {"env": [{"name": "GREETING", "value": "hello"}]}))

    assert _seen(tmp_path)["greeting"] == "hello"


def test_relative_command__from_the_users_file__run_in_our_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_terminal: None
) -> None:
    """Clusters in one file, users in another (KUBECONFIG=a:b): `./bin/plugin` is the
    one beside the users' file, and it runs where the drainer runs, as in kubectl."""
    clusters, users, here = tmp_path / "a", tmp_path / "b", tmp_path / "elsewhere"
    for directory in (clusters, users / "bin", here):
        directory.mkdir(parents=True)
    plugin = users / "bin" / "plugin"
    plugin.write_text(f"#!{sys.executable}\n{PLUGIN}")
    plugin.chmod(0o755)
    (clusters / "config").write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    spec = {"apiVersion": V1BETA1, "command": "./bin/plugin", "args": [str(tmp_path / "seen.json")]}
    (users / "config").write_text(
        yaml.safe_dump({"users": [{"name": "u", "user": {"exec": spec}}]})
    )
    monkeypatch.chdir(here)
    monkeypatch.setenv("KUBECONFIG", f"{clusters / 'config'}{os.pathsep}{users / 'config'}")

    loaded = kubeconfig.load(None, None, clock=lambda: 0.0)

    assert loaded.token is not None
    token = loaded.token.token()

    assert token == "plain"
    assert _seen(tmp_path)["cwd"] == str(here)


def test_provide_cluster_info__everything_client_go_passes(
    tmp_path: Path, no_terminal: None
) -> None:
    ca = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    (tmp_path / "ca.crt").write_bytes(ca)
    config = _kubeconfig(
        tmp_path,
        {"provideClusterInfo": True},
        **{
            "certificate-authority": "ca.crt",
            "tls-server-name": "api.internal",
            "disable-compression": True,
            "extensions": [
                {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "eks"}},
                {"name": "other", "extension": {"x": 1}},
            ],
        },
    )

    _token(config)

    assert _seen(tmp_path)["info"]["spec"]["cluster"] == {
        "server": "https://127.0.0.1:1",
        "certificate-authority-data": base64.b64encode(ca).decode(),
        "tls-server-name": "api.internal",
        "disable-compression": True,
        "config": {"audience": "eks"},
    }
