"""`drain --dry-run=server` on both backends: the cordon and every eviction are sent
with dryRun=All and nothing changes; the server accepts every dry-run eviction
through a budget that allows one (it never lowers the allowance), so the CLI's own
arithmetic names the pods that would wait their turn."""

from __future__ import annotations

import io

from drainer.cli.main import main
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on, wait_until


def _allowed(world: World) -> int:
    budget = world.cluster.get("PodDisruptionBudget", "web", "default")
    return int((budget.get("status") or {}).get("disruptionsAllowed") or 0)


def test_dry_run_server__nothing_changes__the_budgets_turns_are_named(world: World) -> None:
    node = world.nodes[world.instance_ids[0]]
    place_on(world, node, [w.deployment("web", 3), w.budget("web", {"app": "web"}, max_unavailable=1)])  # noqa: E501  # fmt: skip
    wait_until(lambda: _allowed(world) == 1, timeout=30)
    web = {p["metadata"]["name"] for p in pods_on(world.cluster, node) if "web" in p["metadata"]["name"]}  # noqa: E501  # fmt: skip
    out = io.StringIO()

    code = main(
        ["drain", node, "--ignore-daemonsets", "--dry-run=server",
         "--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"],
        stdout=out,
    )  # fmt: skip

    output = out.getvalue()
    assert code == 0, output
    assert output.count("would evict  default/web-") == 3, output  # the server accepted all three
    assert output.count("waits its turn: PodDisruptionBudget default/web allows 1 at a time") == 2
    assert "dry run: would evict 3 pods, 2 of them after waiting their turn for a budget" in output
    assert not world.cluster.get("Node", node)["spec"].get("unschedulable")
    after = {p["metadata"]["name"] for p in pods_on(world.cluster, node)}
    assert web <= after
    assert _allowed(world) == 1
