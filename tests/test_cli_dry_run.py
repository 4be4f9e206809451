"""`drain --dry-run=none|client|server` against kubesim, as the drainer identity:
server sends the cordon and every eviction with dryRun=All and changes nothing;
client sends nothing but reads; both name the pods that would wait their turn
through a budget (the server's dry-run answers never lower its allowance)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from drainer.cli.main import main
from kubesim import KubeSim
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import pods_on, rbac_manifests, set_schedulable, wait_until

NODE = "ip-10-0-0-1.ec2.internal"
OTHER = "ip-10-0-0-2.ec2.internal"


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    """Three replicas of web on NODE, under a budget that allows one disruption."""
    with KubeSim(speed=20) as running:
        running.apply(rbac_manifests())
        running.apply([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}} for n in (NODE, OTHER)])  # noqa: E501  # fmt: skip
        cluster = Cluster.of_kubesim(running)
        set_schedulable(cluster, [OTHER], False)
        running.apply([w.deployment("web", 3), w.budget("web", {"app": "web"}, max_unavailable=1)])
        wait_until(lambda: _allowed(running) == 1 and len(pods_on(cluster, NODE)) == 3, timeout=20)
        yield running


def _allowed(sim: KubeSim) -> int:
    budget = sim.get("PodDisruptionBudget", "web", "default")
    return int((budget.get("status") or {}).get("disruptionsAllowed") or 0)


def _run(sim: KubeSim, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    flags = ["--kubeconfig", str(sim.kubeconfig), "--context", "drainer"]
    code = main(["drain", NODE, *flags, *args], stdout=out)
    return code, out.getvalue()


def _writes(sim: KubeSim, since: int) -> list[tuple[str, str]]:
    return [
        (r.method, r.resource) for r in sim.requests()[since:] if r.method not in ("GET", "HEAD")
    ]


def _unchanged(sim: KubeSim) -> None:
    assert not sim.get("Node", NODE)["spec"].get("unschedulable")
    assert len(pods_on(Cluster.of_kubesim(sim), NODE)) == 3
    assert _allowed(sim) == 1


def test_server__every_eviction_sent_with_dry_run__nothing_changed__two_wait_their_turn(
    sim: KubeSim,
) -> None:
    before = len(sim.requests())

    code, output = _run(sim, "--dry-run=server")

    assert code == 0, output
    writes = _writes(sim, before)
    assert writes.count(("POST", "pods/eviction")) == 3, writes  # each asked of the server
    assert ("PATCH", "nodes") in writes  # the cordon too, with dryRun=All
    _unchanged(sim)
    assert output.count("would evict  default/web-") == 3
    assert output.count("waits its turn: PodDisruptionBudget default/web allows 1 at a time") == 2
    assert "dry run: would evict 3 pods, 2 of them after waiting their turn for a budget" in output


@pytest.mark.parametrize("flag", ["--dry-run", "--dry-run=client"])
def test_client__nothing_sent_but_reads__the_same_turns(sim: KubeSim, flag: str) -> None:
    before = len(sim.requests())

    code, output = _run(sim, flag)

    assert code == 0, output
    assert _writes(sim, before) == []
    _unchanged(sim)
    assert output.count("waits its turn: PodDisruptionBudget default/web allows 1 at a time") == 2
    assert "dry run: would evict 3 pods, 2 of them after waiting their turn for a budget" in output


def test_server__a_budget_allowing_none__held_as_the_server_says(sim: KubeSim) -> None:
    patch = {"spec": {"maxUnavailable": 0}}
    Cluster.of_kubesim(sim).patch("PodDisruptionBudget", "web", patch, "default")
    wait_until(lambda: _allowed(sim) == 0, timeout=10)

    code, output = _run(sim, "--dry-run=server")

    assert code == 0, output
    assert "would evict  default/web-" not in output
    assert "dry run: would evict 0 pods; 3 held by budgets allowing no disruption now" in output


def _drain_for_real(sim: KubeSim, *flags: str) -> tuple[int, str]:
    set_schedulable(Cluster.of_kubesim(sim), [OTHER], True)  # room for the replacements
    return _run(sim, *flags, "--timeout", "60s")


def test_none__a_real_drain(sim: KubeSim) -> None:
    code, output = _drain_for_real(sim, "--dry-run=none")

    assert code == 0, output
    assert f"node {NODE} drained" in output
    assert sim.get("Node", NODE)["spec"]["unschedulable"] is True


@pytest.mark.parametrize("command", ["drain", "release"])
def test_an_unknown_mode__usage_error_naming_the_three(
    sim: KubeSim, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, NODE, "--dry-run=maybe"])

    assert exited.value.code == 2
    assert "choose from 'none', 'client', 'server'" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "sent"), [("--dry-run=server", True), ("--dry-run", False)])
def test_release__server_asks_with_dry_run__client_sends_nothing(
    sim: KubeSim, flag: str, sent: bool
) -> None:
    assert _drain_for_real(sim)[0] == 0  # drained, so there is something to release
    before = len(sim.requests())
    out = io.StringIO()

    code = main(["release", NODE, "--kubeconfig", str(sim.kubeconfig), flag], stdout=out)

    assert code == 0
    assert f"node {NODE} would be released" in out.getvalue()
    assert (_writes(sim, before) == [("PATCH", "nodes")]) is sent
    assert sim.get("Node", NODE)["spec"]["unschedulable"] is True


def test_json__names_the_pods_that_would_go_and_those_that_would_wait(sim: KubeSim) -> None:
    code, output = _run(sim, "--dry-run=server", "-o", "json")

    document = json.loads(output)
    assert code == document["exit_code"] == 0
    assert len(document["would_evict"]) == 3
    assert len(document["would_wait"]) == 2
    assert set(document["would_wait"]) < set(document["would_evict"])
    assert all("waits its turn" in why for why in document["would_wait"].values())
