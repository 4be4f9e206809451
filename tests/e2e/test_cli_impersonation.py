"""kubectl's --as flags against the real API server, which alone of the backends
impersonates (kubesim ignores the headers): the drainer's requests are then
authorized as the user and groups named, each group in a header of its own."""

from __future__ import annotations

import io

import pytest

from drainer.cli.main import main
from testbed.cluster import Cluster

NOBODY = "impersonated-nobody"


def _release(cluster: Cluster, *flags: str) -> int:
    argv = ["release", "no-such-node", "--kubeconfig", str(cluster.kubeconfig)]
    return main([*argv, "--context", "admin", *flags], stdout=io.StringIO())


@pytest.mark.parametrize("backend", ["real"])
def test_cli_as__requests_made_as_that_user__each_group_counted(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _release(cluster) == 1  # the admin: no such node
    capsys.readouterr()

    as_nobody = _release(cluster, "--as", NOBODY)
    denied = capsys.readouterr().err
    # Two groups, the one that grants last: both must arrive, as two headers.
    as_masters = _release(
        cluster, "--as", NOBODY, "--as-group", "team", "--as-group", "system:masters"
    )

    assert as_nobody == 3
    assert NOBODY in denied
    assert as_masters == 1
    assert "no-such-node not found" in capsys.readouterr().err
