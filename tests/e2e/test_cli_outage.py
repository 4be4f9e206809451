"""The API server out of reach mid-drain, longer than one call's retries (issue 38,
item 3), through the CLI: every request of the drainer's identity is dropped
unanswered (as by a server restarting behind its load balancer) for a while, then
answered again. The drain goes on and drains every pod, and says the outage once,
not once per retry of every call."""

from __future__ import annotations

import io
import logging
import threading
import time

import pytest

from drainer.cli.main import main
from kubesim.faults import Fault
from testbed import World
from testbed.world import pods_on, wait_until

from .conftest import place_guarded

DRAINER = "drainer"
"""The drainer's user, as kubesim authenticates the kubeconfig's context `drainer`."""
OUTAGE = 14.0
"""Longer than one call's retries (six tries, 5.5 to 11 s of pauses): the engine's
own loops must carry the drain through it."""


def _outage_while_held(world: World, node: str, seconds: float = OUTAGE) -> threading.Thread:
    """Meanwhile: once the drain is under way (the node cordoned, the pods held by
    their budget), the API server drops the drainer's requests for `seconds`,
    and the budget lets the pods go at its start."""

    def outage() -> None:
        wait_until(lambda: world.cluster.get("Node", node)["spec"].get("unschedulable"), 30)
        time.sleep(0.5)  # the budget's refusal: the drain now waits for the watch
        until = time.monotonic() + seconds
        world.cluster.kubesim.faults.add(Fault(kind="drop", user=DRAINER, until=until))
        world.cluster.patch("PodDisruptionBudget", "guard", {"spec": {"maxUnavailable": 2}})

    thread = threading.Thread(target=outage, daemon=True, name="outage")
    thread.start()
    return thread


@pytest.mark.kubesim_only("drops the drainer's requests for a while, which only kubesim can")
def test_api_server_unreachable_mid_drain_longer_than_a_calls_retries__drained__said_once(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    node = place_guarded(world, 2)
    meanwhile = _outage_while_held(world, node)
    out = io.StringIO()

    code = main(
        ["drain", node, "--ignore-daemonsets", "--timeout", "120s",
         "--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"],
        stdout=out,
    )  # fmt: skip
    meanwhile.join(10)

    assert code == 0, out.getvalue()
    assert not [p for p in pods_on(world.cluster, node) if "guarded" in p["metadata"]["name"]]
    client = [
        r.getMessage()
        for r in caplog.records
        if r.name == "drainer.k8s.client" and r.levelno >= logging.WARNING
    ]
    assert len([m for m in client if "cannot reach the API server" in m]) == 1, client
    assert len([m for m in client if "answers again, after 1" in m]) == 1, client


@pytest.mark.kubesim_only("drops the drainer's requests for a while, which only kubesim can")
def test_api_server_unreachable_until_the_deadline__node_cordoned__the_outage_named(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """A guard (it held before the change above too): an outage that lasts is not
    ridden out past the drain's deadline."""
    node = place_guarded(world, 2)
    meanwhile = _outage_while_held(world, node, seconds=600)
    out = io.StringIO()

    started = time.monotonic()
    code = main(
        ["drain", node, "--ignore-daemonsets", "--timeout", "10s",
         "--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"],
        stdout=out,
    )  # fmt: skip
    took = time.monotonic() - started
    meanwhile.join(10)
    world.cluster.kubesim.faults.clear()

    said = out.getvalue() + capsys.readouterr().err
    assert code == 1, said
    assert f"node {node} NOT drained" in said
    assert "cannot reach the API server" in said
    assert world.cluster.get("Node", node)["spec"].get("unschedulable") is True
    # The deadline, the answers in flight (5 s), then the node's record and Events,
    # each tried for 5.5 to 11 s: bounded, not the outage's length.
    assert took < 45, f"{took:.0f} s for a drain of 10 s"


@pytest.mark.kubesim_only("fails the drainer's pod lists, which only kubesim can")
def test_api_server_failing_the_last_list__drain_goes_on__drained(world: World) -> None:
    """The last list ("drained" waits for a fresh list to agree) fails through all
    of its call's tries, as in an outage of 5 to 11 s at the end of a drain."""
    node = place_guarded(world, 2)

    def fail_the_lists() -> None:
        wait_until(lambda: world.cluster.get("Node", node)["spec"].get("unschedulable"), 30)
        time.sleep(0.5)  # the pods' watch is open: the next list is the drain's last
        fault = Fault(kind="status", status=503, method="GET", path="^/api/v1/pods$", count=6)
        world.cluster.kubesim.faults.add(fault)
        world.cluster.patch("PodDisruptionBudget", "guard", {"spec": {"maxUnavailable": 2}})

    meanwhile = threading.Thread(target=fail_the_lists, daemon=True)
    meanwhile.start()
    out = io.StringIO()

    code = main(
        ["drain", node, "--ignore-daemonsets", "--timeout", "60s",
         "--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"],
        stdout=out,
    )  # fmt: skip
    meanwhile.join(10)

    assert code == 0, out.getvalue()
    assert f"node {node} drained" in out.getvalue()
