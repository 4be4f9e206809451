"""`python -m drainer drain` against kubesim, as the drainer identity under RBAC."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from drainer.__main__ import main
from kubesim import KubeSim
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import pods_on, rbac_manifests, wait_until

NODE = "ip-10-0-0-1.ec2.internal"


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(speed=20) as running:
        running.apply(rbac_manifests())
        running.apply(
            [
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}}
                for n in (NODE, "ip-10-0-0-2.ec2.internal")
            ]
        )
        yield running


def _run(sim: KubeSim, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(
        ["drain", "--kubeconfig", str(sim.kubeconfig), "--context", "drainer", *args], stdout=out
    )
    return code, out.getvalue()


def test_drain_node__as_drainer_context__exit_0_and_progress(sim: KubeSim) -> None:
    sim.apply([w.bare_pod("lonely", node=NODE, emptydir=True), w.daemonset("agent")])
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), NODE)) == 2)

    code, output = _run(sim, "--node", NODE)

    assert code == 0, output
    assert "cordoned" in output
    assert "evicted  default/lonely" in output
    assert "skip  kube-system/agent-" in output
    assert (
        "warning: emptyDir data is deleted with the pod; "
        "no controller will recreate this pod: default/lonely" in output
    )
    assert f"node {NODE} drained" in output
    assert sim.get("Node", NODE)["spec"]["unschedulable"] is True


def test_dry_run__changes_nothing__lists_what_would_go(sim: KubeSim) -> None:
    sim.apply(w.bare_pod("lonely", node=NODE))
    wait_until(
        lambda: pods_on(Cluster.of_kubesim(sim), NODE)[0]["status"].get("phase") == "Running"
    )

    code, output = _run(sim, "--node", NODE, "--dry-run")

    assert code == 0, output
    assert "would evict  default/lonely" in output
    assert not sim.get("Node", NODE)["spec"].get("unschedulable")
    assert not pods_on(Cluster.of_kubesim(sim), NODE)[0]["metadata"].get("deletionTimestamp")


def test_pdb_never_allows__timeout__exit_1_names_budget_and_pod(sim: KubeSim) -> None:
    sim.apply(
        [
            w.bare_pod("guarded", node=NODE, labels={"app": "guarded"}),
            w.budget("guard", {"app": "guarded"}, max_unavailable=0),
        ]
    )
    wait_until(
        lambda: pods_on(Cluster.of_kubesim(sim), NODE)[0]["status"].get("phase") == "Running"
    )

    code, output = _run(sim, "--node", NODE, "--timeout", "1")

    assert code == 1
    assert "NOT drained" in output
    assert "PodDisruptionBudget default/guard holds default/guarded" in output


def test_rbac_missing__exit_3_names_verb_and_resource(
    sim: KubeSim, capsys: pytest.CaptureFixture[str]
) -> None:
    from kubesim.api import R

    sim.api.delete(R["clusterrolebindings.rbac.authorization.k8s.io"], "", "eks-node-drainer")

    code, _ = _run(sim, "--node", NODE)

    assert code == 3
    error = capsys.readouterr().err
    assert "RBAC denied 'patch' on 'nodes'" in error
    assert "kubectl apply -f k8s-rbac/" in error


def test_bad_kubeconfig__exit_2_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["drain", "--kubeconfig", str(tmp_path / "missing"), "--node", NODE])

    assert code == 2
    assert "cannot load kubeconfig" in capsys.readouterr().err


def test_module_entry_point__help_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "drainer", "drain", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    assert "--instance-id" in result.stdout
