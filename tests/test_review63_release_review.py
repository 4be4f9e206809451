"""Review of cac049d (a node released while its drain runs stops that drain, outcome
`released`): what an operator meets around the new outcome."""

from __future__ import annotations

import io
import json
import threading
import time
from typing import Any

import pytest
from support.cli_schema import problems
from support.clock import FakeClock
from test_cli import NODE, sim
from test_ec2_events import NOW, ScriptedNode, _draining, _wait

from drainer.cli.main import main
from drainer.k8s.cordon import PROGRESS_ANNOTATION
from drainer.lifecycle import notices
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER
from drainer.lifecycle.job import Run
from drainer.lifecycle.launch_release import DRAIN_RECORDED, advice
from drainer.lifecycle.outcomes import Result
from drainer.lifecycle.scale_in import _into_warm_pool
from drainer.lifecycle.settings import Settings
from kubesim import KubeSim
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import pods_on, wait_until

__all__ = ["sim"]


# --- 1. a follower takes a released (stopped) drain for a drained one --------------


def test_terminate_hook_waiting_on_a_drain_released_mid_drain__not_taken_for_drained() -> None:
    """The terminate hook's drain waits for a spot (or scheduled change) drain under
    way (live.wait_for_live_drain). A `release` now stops that drain where it is and
    leaves no end record: the node shows no record, its pods still on it. The follower
    reads 'record removed' as DRAINED and the hook completes CONTINUE, the instance
    terminated with pods never evicted, the notice saying `drained`."""
    released = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {}}
    kube = ScriptedNode(_draining(), _draining(), released)
    clock = FakeClock(NOW + 5)

    run = _wait(kube, clock)

    assert run is None or run.result != Result.DRAINED, (
        f"a drain stopped by a release is taken for drained: {run}"
    )


# --- 2. the CLI's -o json document of a drain released mid-drain ------------------


def test_cli_json__drain_released_mid_drain__document_follows_the_schema(sim: KubeSim) -> None:
    """`drain -o json` of a drain released from another terminal prints result
    `released` with a drain's fields: the schema knows `released` only as the
    `release` command's document (changed/kept/warning, exit 0), so the document is
    off docs/cli-output.schema.json (and a script reading result == released takes
    it for a release done)."""
    sim.apply(
        [
            w.pod("guarded", node_name=NODE, labels={"app": "guarded"}),
            w.budget("guard", {"app": "guarded"}, max_unavailable=0),
        ]
    )
    cluster = Cluster.of_kubesim(sim)
    wait_until(lambda: pods_on(cluster, NODE)[0]["status"].get("phase") == "Running")
    kubeconfig = ["--kubeconfig", str(sim.kubeconfig), "--context", "drainer"]

    def annotations() -> dict[str, str]:
        return cluster.client.get("Node", NODE)["metadata"].get("annotations") or {}

    def release_once_waiting() -> None:
        wait_until(lambda: PROGRESS_ANNOTATION in annotations(), timeout=20)
        time.sleep(0.5)
        main(["release", "--node", NODE, *kubeconfig], stdout=io.StringIO())

    thread = threading.Thread(target=release_once_waiting, daemon=True)
    thread.start()
    out = io.StringIO()
    code = main(
        ["drain", *kubeconfig, "--node", NODE, "--timeout", "60", "--force", "-o", "json"],
        stdout=out,
    )
    thread.join(20)
    document: dict[str, Any] = json.loads(out.getvalue())

    assert code == 1 and document["result"] == "released", document
    assert problems(document) == [], problems(document)


# --- 3. words that still say a release is undone by the running drain -------------


def test_warm_pool_notice_advice__no_longer_says_a_release_is_cordoned_again() -> None:
    """The launch's notice for a node back from the warm pool whose drain record still
    says draining tells the operator that a release under a running drain gets the
    node cordoned again and what lands on it evicted: since cac049d that drain stops
    at the release (docs/operations.md was changed, this advice was not)."""
    said = advice("n1", DRAIN_RECORDED)

    assert "cordoned again" not in said, said


def test_into_warm_pool_released__message_does_not_say_the_node_stays_cordoned() -> None:
    """A scale-in into the warm pool whose drain was released mid-drain (LAUNCH_HOOK
    off): the end line and notice tell the operator the node stays cordoned until
    they run release, while the release already uncordoned it."""
    run = Run(Result.RELEASED, "node n1 was released mid-drain (...)", node="n1")
    summary = _into_warm_pool({"result": "released", "message": run.message}, run, Settings())

    assert "stays cordoned" not in summary["message"], summary["message"]


@pytest.mark.parametrize(
    "result", [Result.DRY_RUN, Result.NOT_OURS, Result.NOT_ALLOWED, Result.STALE]
)
def test_into_warm_pool_nothing_cordoned__message_does_not_say_the_node_stays_cordoned(
    result: Result,
) -> None:
    """A scale-in into the warm pool that cordoned nothing (a dry run, another
    cluster's node, a group not admitted, a stale event) told the operator, in the
    end line, a warning and the notice, that its node stays cordoned until they run
    release."""
    run = Run(result, "", node="n1")
    summary = _into_warm_pool({"result": str(result), "message": ""}, run, Settings())

    assert "cordoned" not in summary["message"], summary["message"]


def test_into_warm_pool_failed__the_node_said_cordoned_only_if_it_is() -> None:
    """A failed run may have cordoned the node (its cordon, or an earlier step's of
    its chain) or not: the advice stays, saying so."""
    run = Run(Result.FAILED, "the API server refused", node="n1")
    summary = _into_warm_pool({"result": "failed", "message": run.message}, run, Settings())

    assert "if it was cordoned, it stays so until then" in summary["message"]


def test_terminate_hook_released_mid_drain__notice_title_not_about_a_hand_over() -> None:
    """The notice of a terminate hook's drain released mid-drain is titled
    'released (its drain handed over no further)': it was never handed over, and the
    title hides that its lifecycle action is left waiting for the hook's timeout."""

    class Subject:
        instance_id = "i-0123456789abcdef0"
        asg_name = "workers"

    summary = {
        "result": "released",
        "node": "n1",
        "lifecycle_result": "none",
        "trigger": TERMINATE_HOOK_TRIGGER,
        "message": "node n1 was released mid-drain (...)",
    }
    title, _text, _ = notices.end_notice(Subject(), summary)

    assert "handed over" not in title, title
