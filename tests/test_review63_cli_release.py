"""Review 63: `release` while a drain of the CLI's runs in another terminal. The drain
took the release's uncordon for someone else's and cordoned the node again, so the
release did not hold until the drain was stopped by hand. Now the drain stops at once,
says it was released, exits 1 (NOT drained) and leaves the node released."""

from __future__ import annotations

import io
import threading
import time

from test_cli import NODE, _run, sim

from drainer.cli.main import main
from drainer.k8s.cordon import PROGRESS_ANNOTATION
from kubesim import KubeSim
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import pods_on, wait_until

__all__ = ["sim"]


def test_release_from_another_terminal__the_running_drain_stops__node_left_released(
    sim: KubeSim,
) -> None:
    sim.apply(
        [
            w.pod("guarded", node_name=NODE, labels={"app": "guarded"}),
            w.budget("guard", {"app": "guarded"}, max_unavailable=0),
        ]
    )
    cluster = Cluster.of_kubesim(sim)
    wait_until(lambda: pods_on(cluster, NODE)[0]["status"].get("phase") == "Running")
    said = io.StringIO()
    released: list[tuple[int, float]] = []

    def release_once_waiting() -> None:
        wait_until(lambda: PROGRESS_ANNOTATION in _annotations(cluster), timeout=20)
        time.sleep(0.5)  # the drain is waiting on the budget
        kubeconfig = ["--kubeconfig", str(sim.kubeconfig), "--context", "drainer"]
        released.append((main(["release", "--node", NODE, *kubeconfig], stdout=said), time.time()))

    thread = threading.Thread(target=release_once_waiting, daemon=True)
    thread.start()
    code, output = _run(sim, "--node", NODE, "--timeout", "60", "--force")
    stopped = time.time()
    thread.join(20)

    assert released and released[0][0] == 0, said.getvalue()
    assert code == 1, output
    assert "released mid-drain" in output, output
    assert stopped - released[0][1] < 10.0, "the drain ran on after the release"
    time.sleep(0.5)
    node = cluster.client.get("Node", NODE)
    assert not node["spec"].get("unschedulable"), "cordoned again after the release"
    assert PROGRESS_ANNOTATION not in _annotations(cluster)


def _annotations(cluster: Cluster) -> dict[str, str]:
    return cluster.client.get("Node", NODE)["metadata"].get("annotations") or {}
