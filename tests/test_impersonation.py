"""Impersonation as kubectl does it (drainer/k8s/impersonation.py): the kubeconfig
user's `as` fields and the --as flags, as the headers an API server (here one that
records them, on 127.0.0.1) receives."""

from __future__ import annotations

import http.server
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drainer.cli.main import main
from drainer.k8s.impersonation import Impersonation
from drainer.k8s.kube import Kube


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every GET with node n1 and keeps each request's headers, repeats and all."""

    seen: list[list[tuple[str, str]]]

    def do_GET(self) -> None:
        self.seen.append(list(self.headers.items()))
        body = json.dumps({"kind": "Node", "metadata": {"name": "n1"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, list[list[tuple[str, str]]]]]:
    seen: list[list[tuple[str, str]]] = []
    handler = type("Handler", (Recorder,), {"seen": seen})
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as running:
        thread = threading.Thread(target=running.serve_forever, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{running.server_address[1]}", seen
        running.shutdown()


def _kubeconfig(tmp_path: Path, url: str, **user: Any) -> str:
    config = {
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": "t", **user}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def _impersonating(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower().startswith("impersonate-")]


def test_kubeconfig_user_as_fields__sent_as_impersonate_headers(
    tmp_path: Path, server: tuple[str, list[list[tuple[str, str]]]]
) -> None:
    url, seen = server
    config = _kubeconfig(
        tmp_path,
        url,
        **{
            "as": "jane",
            "as-uid": "42",
            "as-groups": ["ops", "dev"],
            "as-user-extra": {"scopes": ["view", "edit"], "team name": ["blue"]},
        },
    )

    assert Kube.from_kubeconfig(config).get_node("n1") is not None

    assert _impersonating(seen[0]) == [
        ("Impersonate-User", "jane"),
        ("Impersonate-Uid", "42"),
        ("Impersonate-Group", "ops"),
        ("Impersonate-Group", "dev"),
        ("Impersonate-Extra-scopes", "view"),
        ("Impersonate-Extra-scopes", "edit"),
        ("Impersonate-Extra-team%20name", "blue"),
    ]


def test_flags__override_the_kubeconfig_user_fields(
    tmp_path: Path, server: tuple[str, list[list[tuple[str, str]]]]
) -> None:
    url, seen = server
    config = _kubeconfig(tmp_path, url, **{"as": "jane", "as-groups": ["ops"]})
    flags = Impersonation(user="sam", groups=("admins",))

    Kube.from_kubeconfig(config, impersonate=flags).get_node("n1")

    assert _impersonating(seen[0]) == [
        ("Impersonate-User", "sam"),
        ("Impersonate-Group", "admins"),
    ]


def test_cli_as_flags__every_request_impersonates(
    tmp_path: Path, server: tuple[str, list[list[tuple[str, str]]]]
) -> None:
    url, seen = server
    argv = ["release", "n1", "--kubeconfig", _kubeconfig(tmp_path, url)]
    flags = ["--as", "jane", "--as-group", "ops", "--as-group", "dev", "--as-uid", "7"]

    main([*argv, *flags], stdout=io.StringIO())

    assert seen, "requests were made"
    for headers in seen:
        assert _impersonating(headers) == [
            ("Impersonate-User", "jane"),
            ("Impersonate-Uid", "7"),
            ("Impersonate-Group", "ops"),
            ("Impersonate-Group", "dev"),
        ]


def test_no_impersonation__no_headers(
    tmp_path: Path, server: tuple[str, list[list[tuple[str, str]]]]
) -> None:
    url, seen = server

    Kube.from_kubeconfig(_kubeconfig(tmp_path, url)).get_node("n1")

    assert _impersonating(seen[0]) == []


@pytest.mark.parametrize(
    ("user", "flags"),
    [
        ({}, ["--as-group", "ops"]),
        ({}, ["--as-uid", "7"]),
        ({"as-groups": ["ops"]}, []),
    ],
    ids=["group-flag", "uid-flag", "kubeconfig-groups"],
)
def test_groups_or_uid_without_a_user__usage_error_before_any_request(
    tmp_path: Path,
    server: tuple[str, list[list[tuple[str, str]]]],
    capsys: pytest.CaptureFixture[str],
    user: dict[str, Any],
    flags: list[str],
) -> None:
    url, seen = server

    code = main(["release", "n1", "--kubeconfig", _kubeconfig(tmp_path, url, **user), *flags])

    assert code == 2
    assert "without a user to impersonate" in capsys.readouterr().err
    assert seen == []
