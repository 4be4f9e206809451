"""`-o json`: one JSON document on stdout whatever happens, in the one shape of
docs/cli-output.schema.json (every document a test makes is checked against it by
the fixture in tests/conftest.py)."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli_schema import SCHEMA, problems

from drainer.cli.main import main
from kubesim import KubeSim
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import pods_on, rbac_manifests, wait_until

NODE = "ip-10-0-0-1.ec2.internal"


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(speed=20) as running:
        running.apply(rbac_manifests())
        running.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
        yield running


def _json_run(argv: list[str]) -> tuple[int, dict[str, Any]]:
    """The exit status and the one JSON document stdout carries (nothing else)."""
    out = io.StringIO()
    try:
        code = main(argv, stdout=out, prog="eks-node-drainer")
    except SystemExit as e:  # argparse's usage error
        code = int(e.code or 0)
    document: dict[str, Any] = json.loads(out.getvalue())
    return code, document


def _on(sim: KubeSim, command: str, *args: str) -> list[str]:
    return [command, "--kubeconfig", str(sim.kubeconfig), "--context", "drainer", *args]


@pytest.mark.parametrize(
    "spelling",
    [["-o", "json"], ["--output", "json"], ["-ojson"], ["--output=json"]],
    ids=["-o json", "--output json", "-ojson", "--output=json"],
)
@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        pytest.param(
            ["drain", "--node", NODE, "--bogus"], "unrecognized arguments: --bogus", id="flag"
        ),
        pytest.param(["drain", "--node", "Not_A_Node"], "is not a node name", id="node-name"),
        pytest.param(["drain", "--node", NODE, "--timeout", "-1"], "--timeout", id="timeout"),
        pytest.param(["drain"], "one of the arguments", id="no-node"),
        pytest.param(["unknown"], "invalid choice: 'unknown'", id="command"),
        pytest.param(["drain", NODE, "--disable-eviction"], "--disable-eviction", id="refused"),
    ],
)
def test_usage_error__with_json__one_document_on_stdout__usage_on_stderr__exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], complaint: str, spelling: list[str]
) -> None:
    code, document = _json_run([*argv, *spelling])

    assert code == 2
    assert (document["result"], document["exit_code"]) == ("error", 2)
    assert complaint in document["message"]
    error = capsys.readouterr().err
    assert "usage: eks-node-drainer" in error
    assert complaint in error


def test_usage_error__without_json__nothing_on_stdout() -> None:
    out = io.StringIO()

    with pytest.raises(SystemExit) as exited:
        main(["drain", "--node", NODE, "--bogus"], stdout=out)

    assert exited.value.code == 2
    assert out.getvalue() == ""


def test_json_after_the_end_of_options__a_node_name_not_the_output_flag() -> None:
    """`--` ends the options: a `-o json` after it asks for nothing."""
    out = io.StringIO()

    with pytest.raises(SystemExit):
        main(["drain", "--bogus", "--", "-o", "json"], stdout=out)

    assert out.getvalue() == ""


def test_every_ending__result_says_it__outcome_the_same_for_one_release(sim: KubeSim) -> None:
    sim.apply(w.pod("lonely", node_name=NODE))
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), NODE)) == 1)

    endings = {
        "refused": _json_run(_on(sim, "drain", NODE, "-o", "json")),
        "dry run": _json_run(_on(sim, "drain", NODE, "--force", "--dry-run", "-o", "json")),
        "no node": _json_run(_on(sim, "drain", "ip-10-9-9-9.ec2.internal", "-o", "json")),
        "drained": _json_run(_on(sim, "drain", NODE, "--force", "-o", "json")),
        "released": _json_run(_on(sim, "release", NODE, "-o", "json")),
    }

    said = {name: (code, d["result"], d["outcome"]) for name, (code, d) in endings.items()}
    assert said == {
        "refused": (1, "refused", "refused"),
        "dry run": (0, "dry_run", "dry_run"),
        "no node": (1, "no_node", "no_node"),
        "drained": (0, "drained", "drained"),
        "released": (0, "released", "released"),
    }


def test_server_unreachable__error_document__exit_3(tmp_path: Path) -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )

    code, document = _json_run(["release", NODE, "--kubeconfig", str(kubeconfig), "-o", "json"])

    assert (code, document["result"], document["exit_code"]) == (3, "error", 3)
    assert "cannot reach the API server" in document["message"]


def test_unexpected_error__still_one_document__then_the_traceback(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drainer.k8s.kube import Kube

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Kube, "get_node", broken)
    out = io.StringIO()

    with pytest.raises(RuntimeError):
        main(_on(sim, "release", NODE, "-o", "json"), stdout=out)

    document = json.loads(out.getvalue())
    assert (document["result"], document["exit_code"]) == ("error", 1)
    assert "RuntimeError: a bug" in document["message"]


def test_schema__valid_draft_2020_12__refuses_a_document_without_result() -> None:
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    error = {"result": "error", "outcome": "error", "message": "x", "exit_code": 2}
    assert validator.is_valid(error)
    assert not validator.is_valid({k: v for k, v in error.items() if k != "result"})
    assert not validator.is_valid({**error, "outcome": "drained"}), "outcome is result's alias"
    assert not validator.is_valid({**error, "extra": 1}), "every key is in the schema"


def test_json_then_text__the_last_one_given_wins__no_document() -> None:
    out = io.StringIO()

    with pytest.raises(SystemExit):
        main(["drain", "--bogus", "-o", "json", "--output=text"], stdout=out)

    assert out.getvalue() == ""


def test_real_process__usage_error__stdout_is_one_document_in_the_schema() -> None:
    """As a script sees it: the command's own stdout, through the interpreter's exit."""
    ran = subprocess.run(
        [sys.executable, "-m", "drainer", "drain", NODE, "--bogus", "-ojson"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert ran.returncode == 2
    document = json.loads(ran.stdout)
    assert problems(document) == []
    assert document["message"].startswith("unrecognized arguments: --bogus")
    assert "usage: " in ran.stderr
