"""`drain -l/--selector` on both backends: the nodes a label selects are all
cordoned before the first is drained, then drained one at a time; the node left
out keeps running the pods."""

from __future__ import annotations

import io

from drainer.cli.main import main
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on, wait_until


def test_selector__both_cordoned_first__both_drained__the_other_takes_the_pods(
    world: World,
) -> None:
    first, second, other = (world.nodes[i] for i in world.instance_ids)
    place_on(world, first, [w.deployment("web", 2)])
    for node in (first, second):
        world.cluster.patch("Node", node, {"metadata": {"labels": {"pool": "drain-me"}}})
    out = io.StringIO()

    code = main(
        ["drain", "-l", "pool=drain-me", "--ignore-daemonsets", "--timeout", "90s",
         "--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"],
        stdout=out,
    )  # fmt: skip

    output = out.getvalue()
    assert code == 0, output
    cordoned = max(output.index(f"cordoned node {n}") for n in (first, second))
    assert cordoned < output.index("draining node"), output  # every one before any drain
    assert "2 nodes selected by pool=drain-me: 2 drained" in output
    for node in (first, second):
        assert world.cluster.get("Node", node)["spec"].get("unschedulable") is True
    assert not world.cluster.get("Node", other)["spec"].get("unschedulable")

    def web_on_other() -> bool:
        running = [p for p in pods_on(world.cluster, other) if "web" in p["metadata"]["name"]]
        return len(running) == 2

    wait_until(web_on_other, timeout=60)
