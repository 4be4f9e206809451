"""Review 58: the CLI's drain and release as an operator used to `kubectl drain`
runs them, against kubesim."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from drainer.cli import arguments, output
from drainer.cli.main import main
from kubesim import KubeSim
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import pods_on, rbac_manifests, wait_until

POOL = ["ip-10-0-0-1.ec2.internal", "ip-10-0-0-2.ec2.internal"]


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    """Two nodes in pool old, one bare pod on each."""
    with KubeSim(speed=20) as running:
        running.apply(rbac_manifests())
        running.apply([w.node(n, labels={"pool": "old"}) for n in POOL])
        running.apply([w.pod(f"lonely-{i}", node_name=n) for i, n in enumerate(POOL)])
        cluster = Cluster.of_kubesim(running)
        wait_until(lambda: all(len(pods_on(cluster, n)) == 1 for n in POOL), timeout=20)
        yield running


def _run(sim: KubeSim, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    flags = ["--kubeconfig", str(sim.kubeconfig), "--context", "drainer"]
    return main(["drain", *flags, *args], stdout=out), out.getvalue()


def test_selector__malformed_pod_selector__usage_error_exit_2_as_for_one_node(
    sim: KubeSim, capsys: pytest.CaptureFixture[str]
) -> None:
    """`drain NODE --pod-selector 'app in (web'` is a usage error (exit 2) naming the
    flag; the same flag with `-l` was exit 3, an API error, the server's 400 unexplained."""
    code, text = _run(sim, "-l", "pool=old", "--force", "--pod-selector", "app in (web")

    assert code == 2, text
    assert "--pod-selector 'app in (web'" in capsys.readouterr().err
    assert not any(sim.get("Node", n)["spec"].get("unschedulable") for n in POOL)


def test_skip_wait_for_delete_timeout__kubectls_flag__not_a_bare_unrecognized_argument(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/cli.md: kubectl drain's flags it does not take are answered with a usage
    error saying what to use instead (drainer/cli/refused.py: "not 'unrecognized
    arguments'"). kubectl's --skip-wait-for-delete-timeout (stop waiting for a pod
    whose deletionTimestamp is N s past, what --stuck-pod-seconds does) got a bare
    'unrecognized arguments' and no hint. Either answer passes: taken as
    --stuck-pod-seconds, or refused naming it."""
    try:
        args = arguments.parse(["drain", POOL[0], "--skip-wait-for-delete-timeout=60"], "d")
    except output.UsageError as refused:
        assert refused.code == 2
        assert "unrecognized arguments" not in refused.message
        assert "--stuck-pod-seconds" in refused.message
    else:
        assert args.stuck_pod_seconds == 60
    capsys.readouterr()


def test_selector_matching_no_node__json__no_node_not_an_unexpected_error(sim: KubeSim) -> None:
    """docs/cli.md's table: `error` with exit 1 is an unexpected error (a traceback on
    stderr); no such node is `no_node`, as `drain NODE` and `plan -l` say it. `drain -l`
    matching no node said `error`, exit 1: a script reading .result sees a crash."""
    code, text = _run(sim, "-l", "pool=gone", "--force", "-o", "json")

    document = json.loads(text)
    assert code == 1 == document["exit_code"]
    assert document["result"] == "no_node", document


@pytest.mark.parametrize("command", ["drain", "release"])
def test_bare_dry_run_before_the_node__client_dry_run_of_that_node_as_kubectl(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kubectl drain --dry-run NODE` is a client dry run of NODE (pflag: a bare
    --dry-run takes no value after a space). Here NODE was read as --dry-run's value:
    `invalid choice: 'ip-10-0-0-1.ec2.internal'`, exit 2."""
    args = arguments.parse([command, "--dry-run", POOL[0]], "d")

    assert (args.dry_run_mode, args.node) == ("client", POOL[0])
    capsys.readouterr()
