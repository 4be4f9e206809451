"""`plan` at the command line, on kubesim as the drainer identity: the table and its
columns, -l, and its exit statuses (2 usage, 3 access, 1 a node not found)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from drainer.cli.main import main
from kubesim import KubeSim
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import pods_on, rbac_manifests, wait_until

NODES = ("ip-10-0-0-1.ec2.internal", "ip-10-0-0-2.ec2.internal")
SPARE = "ip-10-0-0-3.ec2.internal"
"""Not planned: where the planned nodes' pods can go."""


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(speed=20) as running:
        running.apply(rbac_manifests())
        running.apply(
            [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": n, "labels": {"pool": pool}},
                }
                for n, pool in [(NODES[0], "old"), (NODES[1], "old"), (SPARE, "new")]
            ]
        )
        yield running


def _plan(sim: KubeSim, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    where = ["--kubeconfig", str(sim.kubeconfig), "--context", "drainer"]
    code = main(["plan", *args, *where], stdout=out)
    return code, out.getvalue()


def test_table__a_row_per_selected_node__nothing_blocks__exit_0(sim: KubeSim) -> None:
    sim.apply(w.pod("web", node_name=NODES[0], grace=7, owner="ReplicaSet"))
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), NODES[0])) == 1)

    code, table = _plan(sim, "-l", "pool=old")

    assert code == 0, table
    header, first, second, verdict = table.splitlines()
    assert header.split() == ["NODE", "PODS", "ETA", "UP", "TO", "PACED", "BY", "BLOCKERS"]
    assert first.split()[:4] == [NODES[0], "1", "7s", "7s"]
    assert "grace period of default/web (7 s, an upper bound)" in first
    assert second.split()[:4] == [NODES[1], "0", "0s", "0s"]
    assert verdict == "nothing blocks; forecast 7s in all, one node after the other"


def test_bare_pod_without_force__blocker_with_the_flag_that_fixes_it__exit_1(
    sim: KubeSim,
) -> None:
    sim.apply(w.pod("lonely", node_name=NODES[0]))
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), NODES[0])) == 1)

    code, out = _plan(sim, NODES[0], "-o", "json")

    document = json.loads(out)
    assert (code, document["result"], document["deadlocked"]) == (1, "blocked", False)
    [blocker] = document["nodes"][0]["blockers"]
    assert blocker["pod"] == "default/lonely" and blocker["budget"] is None
    assert blocker["fix"].startswith("--force")


def test_no_node__usage_error_exit_2(sim: KubeSim) -> None:
    with pytest.raises(SystemExit) as raised:
        _plan(sim, "-o", "json")

    assert raised.value.code == 2


def test_unknown_node__exit_1_named(sim: KubeSim, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _plan(sim, "ip-10-9-9-9.ec2.internal", "-o", "json")

    assert (code, json.loads(out)["result"]) == (1, "no_node")
    assert "node(s) not found: ip-10-9-9-9.ec2.internal" in capsys.readouterr().err


def test_rbac_missing__exit_3_names_verb_and_resource(
    sim: KubeSim, capsys: pytest.CaptureFixture[str]
) -> None:
    from kubesim.api import R

    sim.api.delete(R["clusterrolebindings.rbac.authorization.k8s.io"], "", "eks-node-drainer")

    code, out = _plan(sim, NODES[0], "-o", "json")

    assert code == 3
    assert json.loads(out)["exit_code"] == 3
    assert "RBAC denied" in capsys.readouterr().err
