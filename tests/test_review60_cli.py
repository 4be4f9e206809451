"""Review 60: the CLI (drainer/cli, and the kubeconfig and wire under it) as an
operator used to kubectl runs it, against kubesim. Each test fails on the code as
reviewed, for the reason its docstring says."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from test_review58_cli import POOL, _run, sim
from test_transport import OK_BODY, _recording

from drainer.cli import arguments, output
from drainer.cli import main as cli_main
from drainer.cli.main import main
from kubesim import KubeSim
from kubesim.faults import Fault
from testbed.world import wait_until

__all__ = ["sim"]  # the fixture, shared with review 58's CLI tests


def _unschedulable(sim: KubeSim, node: str) -> bool:
    return bool(sim.get("Node", node)["spec"].get("unschedulable"))


def _api_fails_from_the_drain_of(monkeypatch: pytest.MonkeyPatch, sim: KubeSim, node: str) -> None:
    """From the moment `drain -l` starts the drain of `node` (which its cordon-all step
    has already cordoned), the API server answers 500 to every read of that node: it
    went away for the rest of the run, as far as this node is concerned."""
    drain = cli_main._drain

    def failing_from(kube: Any, found: Any, *args: Any, **kwargs: Any) -> int:
        if found["metadata"]["name"] == node:
            sim.faults.add(
                Fault(kind="status", method="GET", path=f"/api/v1/nodes/{node}$", status=500,
                      reason="InternalError", message="etcdserver: leader changed", count=None)
            )  # fmt: skip
        return drain(kube, found, *args, **kwargs)

    monkeypatch.setattr(cli_main, "_drain", failing_from)


def test_selector__api_failing_at_a_later_nodes_drain__that_node_said_left_cordoned_with_undo(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`drain -l` cordons every node first (drainer/cli/selected.py `_cordon_all`), then
    runs each node's drain. When a later node's drain fails before the engine's own
    cordon step has an answer (the API server gone, a credential plugin given up), main
    `_drain` says "it stays cordoned; to undo" only `if drain.report.cordoned`, which
    is False: the engine did not cordon it, the run did. The node is left cordoned
    (and out of its load balancers) and nothing says so; the run's last line says only
    `not drained: NODE`. docs/cli.md: a node this run cordoned and did not drain is
    named with its undo command."""
    _api_fails_from_the_drain_of(monkeypatch, sim, POOL[1])

    code, text = _run(sim, "-l", "pool=old", "--force", "--timeout", "60s")
    said = text + capsys.readouterr().err

    assert code == 3, said
    assert _unschedulable(sim, POOL[1]), "cordoned by the run's cordon-all step"
    assert f"release --node {POOL[1]}" in said, (
        f"node {POOL[1]} is left cordoned by this run; nothing says so or how to undo:\n{said}"
    )


def test_selector_json__api_failing_at_a_later_nodes_drain__the_document_says_it_is_cordoned(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same run with -o json: the node's document says `"cordoned": false` (main
    `_failed(..., cordoned=drain.report.cordoned)`) and the run's document has no
    `left_cordoned`, while the node is cordoned by this run. A script reading the
    document would leave it so."""
    _api_fails_from_the_drain_of(monkeypatch, sim, POOL[1])

    code, text = _run(sim, "-l", "pool=old", "--force", "--timeout", "60s", "-o", "json")

    document = json.loads(text)
    assert code == 3 == document["exit_code"]
    assert _unschedulable(sim, POOL[1])
    second = next(d for d in document["nodes"] if d.get("node") == POOL[1])
    assert second.get("cordoned") is not False, second
    assert POOL[1] in (document.get("left_cordoned") or []) or second.get("cordoned"), document


def test_cordon_answered_after_the_request_deadline__the_node_said_maybe_cordoned_with_undo(
    sim: KubeSim, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same root as above, on one node: the engine's cordon PATCH is sent, the API
    server applies it after the request's 10 s deadline (KubeTimedOut, not retried),
    and main `_drain` says "stays cordoned" only when `drain.report.cordoned`, set
    once an answer was read. The run ends `error: ...` exit 3, which docs/cli.md calls
    "touching nothing before the drain", and -o json says `"cordoned": false`; the
    node is cordoned, out of its load balancers, its record saying a drain is under
    way. For `-l`, the docs already name "the node whose cordon was being sent ...:
    the API server may have applied it"; a single node's drain does not."""
    node = POOL[0]
    sim.faults.add(
        Fault(kind="latency", method="PATCH", path=f"/api/v1/nodes/{node}$", latency=11.0,
              count=1)
    )  # fmt: skip

    code, text = _run(sim, node, "--force", "-o", "json")
    said = capsys.readouterr().err

    document = json.loads(text)
    assert code == 3 == document["exit_code"], said
    wait_until(lambda: _unschedulable(sim, node), timeout=10)  # the late PATCH applied
    assert document.get("cordoned") is not False or f"release --node {node}" in said, (
        f"node {node} is cordoned; the run says it is not, and no undo:\n{document}\n{said}"
    )


# -- impersonation of a user or group whose name is not ASCII ------------------------


def test_as_a_user_named_outside_latin1__no_traceback__as_kubectl_which_sends_it(
    sim: KubeSim,
) -> None:
    """`kubectl --as łukasz get node N` works (Go writes the header's UTF-8 bytes; kubesim
    ignores impersonation, as measured: kubectl exits 0). The drainer's transport
    encodes the request head as latin-1 (transport.py `exchange`), so the
    UnicodeEncodeError (a ValueError, which client.py `_once` does not catch) leaves
    main as an 'unexpected error', exit 1, with a traceback."""
    out = io.StringIO()
    flags = ["--kubeconfig", str(sim.kubeconfig), "--context", "admin", "--as", "łukasz"]
    try:
        code = main(["release", "--node", POOL[0], "--dry-run=client", "-o", "json", *flags],
                    stdout=out)  # fmt: skip
    except UnicodeEncodeError as e:
        pytest.fail(f"a traceback where kubectl sends the header: {type(e).__name__}: {e.reason}")
    assert code == 0, out.getvalue()


def test_as_a_user_named_in_latin1__sent_as_utf8__as_kubectl__not_another_name() -> None:
    """`kubectl --as josé` sends `Impersonate-User: jos\\xc3\\xa9` (measured against a
    TLS recorder), the name the API server's RBAC bindings hold. The drainer sends
    `jos\\xe9` (latin-1): another user name, which no binding names, so every request
    is refused as a user the operator never asked for (and `--as-group Développeurs`
    a group that does not exist)."""
    names = (("Impersonate-User", "josé"), ("Impersonate-Group", "Développeurs"))
    with _recording(OK_BODY, impersonate=names) as (transport, seen):
        transport.send("GET", "/api/v1/nodes", timeout=5).read()

    head = seen[0]
    assert b"Impersonate-User: jos\xc3\xa9\r\n" in head, head
    assert b"Impersonate-Group: D\xc3\xa9veloppeurs\r\n" in head, head


def test_kubeconfig_token_with_a_line_break__an_error_naming_it__not_a_traceback(
    sim: KubeSim, tmp_path: Any
) -> None:
    """A token with a trailing line break (`token: |` in YAML, a plugin's
    `"token": "...\\n"`): kubectl fails with `net/http: invalid header field value for
    "Authorization"` (measured). The drainer's transport raises ValueError ("the
    'Authorization' header has a line break"), which client.py `_once` does not
    translate (it catches OSError and HTTPException only): main's 'unexpected error',
    exit 1, a traceback, where docs/cli.md promises a configuration error (2) or an
    API error (3) in one line."""
    import yaml

    config = yaml.safe_load(sim.kubeconfig.read_text())
    for user in config["users"]:
        user["user"]["token"] += "\n"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    out = io.StringIO()
    try:
        code = main(["release", "--node", POOL[0], "--dry-run=client", "-o", "json",
                     "--kubeconfig", str(path)], stdout=out)  # fmt: skip
    except ValueError as e:
        pytest.fail(f"a traceback, not an error naming the token: {type(e).__name__}: {e}")
    assert code in (2, 3), out.getvalue()


# -- kubectl drain's flags as kubectl takes them ---------------------------------------


@pytest.mark.parametrize(
    ("flag", "field", "value"),
    [
        ("--ignore-daemonsets=true", "ignore_daemonsets", True),
        ("--delete-emptydir-data=true", "delete_emptydir_data", True),
        ("--force=true", "force", True),
        ("--force=false", "force", False),
    ],
)
def test_kubectl_boolean_flag_with_a_value__read_as_kubectl_reads_it(
    flag: str, field: str, value: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """kubectl's boolean flags (pflag) take `=true`/`=false`: `kubectl drain N
    --ignore-daemonsets=true --delete-emptydir-data=true --force=true` is a common
    script line. The drainer's store_true flags answer it with a usage error
    ('ignored explicit argument'), exit 2; docs/cli.md promises kubectl's flags."""
    try:
        args = arguments.parse(["drain", POOL[0], flag], "eks-node-drainer")
    except output.UsageError as refused:
        pytest.fail(f"{flag}: {refused.message}")
    finally:
        capsys.readouterr()
    assert getattr(args, field) is value


def test_grace_period_any_negative__the_pods_own__as_kubectl(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """kubectl drain --grace-period: 'If negative, the default value specified in the
    pod will be used' (any negative). The drainer takes -1 alone: `--grace-period=-2`
    is a usage error, exit 2."""
    try:
        args = arguments.parse(["drain", POOL[0], "--grace-period=-2"], "eks-node-drainer")
    except output.UsageError as refused:
        pytest.fail(f"--grace-period=-2: {refused.message}")
    finally:
        capsys.readouterr()
    assert arguments.options_from(args).grace_period_seconds is None
