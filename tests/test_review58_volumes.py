"""Review 58, the drain's wait for volumes to detach (drainer/engine/volumes.py):
each test fails on the code it was written against. kubesim is the cluster (its
attach-detach controller attaches a running pod's claim and, with the pod's
`kubesim.io/detach-seconds`, keeps the attachment that long after the pod went, as
a slow or stuck CSI controller would); the drain's clock is a fake one its pauses
move.

The goal: CONTINUE (the outcome `drained`) is not answered while a volume of a pod
that was on the node is still attached, unless the drain's deadline has come."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from support.clock import FakeClock
from test_drain import place as place_running
from test_review58_engine import Settling
from test_volumes import claim
from test_warm_pool_drain_recorded import clock, sim  # noqa: F401  (fixtures)

from drainer.engine.drain import Drain
from drainer.engine.options import DrainOptions
from drainer.engine.report import DrainReport
from drainer.k8s.cordon import ProgressRecord
from drainer.k8s.kube import Kube
from drainer.outcome import Outcome
from kubesim import KubeSim
from kubesim import testing as k
from testbed import workloads as objects

NODE = "n1"
STUCK = {"kubesim.io/detach-seconds": "3600"}
"""The pod's attachment outlives it by an hour: the CSI controller is down."""


def attached_here(sim: KubeSim) -> set[str]:  # noqa: F811
    return {
        a["spec"]["source"].get("persistentVolumeName")
        for a in sim.list("VolumeAttachment")
        if a["spec"]["nodeName"] == NODE
    }


def place(sim: KubeSim, *objs: dict[str, Any], volumes: int) -> set[str]:  # noqa: F811
    """Apply, wait for the node's pods to run and `volumes` attachments on the node."""
    place_running(sim, *objs)
    k.eventually(lambda: len(attached_here(sim)) == volumes, what="volumes attached")
    return attached_here(sim)


def one_stuck_volume(sim: KubeSim) -> str:  # noqa: F811
    """db-0 on the node, its claim's volume attached, to stay attached an hour."""
    (volume,) = place(
        sim,
        claim("data"),
        objects.pod("db-0", node_name=NODE, claims=("data",), annotations=STUCK, grace=1),
        volumes=1,
    )
    return volume


def _drained_still_attached(report: DrainReport, sim: KubeSim, volume: str, pod: str) -> None:  # noqa: F811
    """Drained, `pod`'s volume still attached to the node: named pending, not let go
    unsaid at CONTINUE."""
    assert report.outcome == Outcome.DRAINED, report.outcome
    assert attached_here(sim) == {volume}, f"{pod}'s volume never detached"
    assert report.volumes_pending == [volume], (
        f"CONTINUE with {pod}'s volume still attached, not waited for and not named"
    )


def drain(
    kube: Kube,
    sim: KubeSim,  # noqa: F811
    clock: FakeClock,  # noqa: F811
    deadline: float,
    stop_at: float | None = None,
) -> DrainReport:
    engine = Drain(kube, NODE, DrainOptions(), record=ProgressRecord(), waits=Settling(clock, sim))
    return engine.run(deadline, stop_at)


# -- the hand-over moment comes during the wait --------------------------------


def test_hand_over_moment_comes_during_the_volume_wait__not_drained_while_the_volume_is_attached(
    sim: KubeSim,  # noqa: F811
    kube: Kube,
    clock: FakeClock,  # noqa: F811
) -> None:
    """The Lambda's invocation must hand over 60 s in; the drain's deadline is an hour
    away. The pod goes at once, its EBS volume does not detach: the wait is cut by
    the hand-over moment, not by VOLUME_DETACH_TIMEOUT_SECONDS (120 s) nor the
    deadline. The drain must hand over (the next invocation waits on), as the wait for
    the target groups does (runner._leave_target_groups); `drained` is CONTINUE, and
    the instance is terminated under the attached volume with 59 minutes left."""
    volume = one_stuck_volume(sim)
    start = clock()

    report = drain(kube, sim, clock, deadline=start + 3600, stop_at=start + 60)

    assert report.volumes_pending == [volume], "the wait ended with the volume attached"
    assert clock() < start + 120, "the hand-over moment, not the detach timeout, ended it"
    assert report.outcome == Outcome.HANDED_OVER, (
        f"{report.outcome}: CONTINUE with {volume} still attached, the deadline 59 min away"
    )


# -- the volume of a pod an earlier invocation evicted --------------------------


def test_drain_handed_over__the_next_invocation_waits_for_the_volume_of_a_pod_evicted_before(
    sim: KubeSim,  # noqa: F811
    kube: Kube,
    clock: FakeClock,  # noqa: F811
) -> None:
    """A drain spans invocations. The first evicts db-0 (its EBS volume stays
    attached: the CSI controller is down) and hands over while a budget holds web-0.
    The next evicts web-0, and the drain is over: its volume wait reads only its own
    pods' claims, so db-0's volume, attached to the node the whole time, is neither
    waited for nor named pending, and CONTINUE goes with it attached. Any
    VolumeAttachment on the node is of a pod that was on it (Karpenter's terminator
    waits for every attachment on the node but those of pods that stay on it)."""
    (volume,) = place(
        sim,
        claim("data"),
        objects.pod("db-0", node_name=NODE, claims=("data",), annotations=STUCK, grace=1),
        objects.pod("web-0", node_name=NODE, labels={"app": "web"}, grace=1),
        objects.budget("web", {"app": "web"}, min_available=1),
        volumes=1,
    )
    start = clock()
    deadline = start + 3600

    first = drain(kube, sim, clock, deadline, stop_at=start + 30)
    assert first.outcome == Outcome.HANDED_OVER, first.outcome
    assert not [p for p in sim.list("Pod") if p["metadata"]["name"] == "db-0"], "db-0 went"
    assert attached_here(sim) == {volume}, "its volume did not detach"
    sim.api.delete(sim.resource_for(objects.budget("web", {"app": "web"})), "default", "web")

    second = drain(kube, sim, clock, deadline, stop_at=start + 900)

    _drained_still_attached(second, sim, volume, "db-0")


# -- a generic ephemeral volume: its claim goes with its pod ----------------------


def test_generic_ephemeral_volume__its_claim_collected_before_the_wait__still_waited_for(
    sim: KubeSim,  # noqa: F811
    kube: Kube,
    clock: FakeClock,  # noqa: F811
) -> None:
    """A generic ephemeral volume's claim (<pod>-<volume>) is owned by its pod: the
    garbage collector deletes it once the pod is gone, seconds before its EBS volume
    detaches. The drain reads the claims only at its end, when every pod is gone:
    a pod evicted early (here while a budget holds web-0) has no claim left by then,
    so its volume, still attached, is neither waited for nor named pending
    (tests/test_volumes.py says the drain waits for it: only while the claim is
    there). kubesim has no garbage collector: the claim is deleted here as it
    would, once scratch-0 is gone, before the budget lets web-0 go."""
    sim.apply([claim("scratch-0-tmp")])  # as the ephemeral volume controller names it
    volume = str(
        k.eventually(
            lambda: sim.get("PersistentVolumeClaim", "scratch-0-tmp", "default")["spec"].get(
                "volumeName"
            )
        )
    )
    ephemeral = {
        "name": "tmp",
        "ephemeral": {
            "volumeClaimTemplate": {
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                }
            }
        },
    }
    place(
        sim,
        objects.pod("scratch-0", node_name=NODE, grace=1, spec_fields={"volumes": [ephemeral]}),
        objects.pod("web-0", node_name=NODE, labels={"app": "web"}, grace=1),
        objects.budget("web", {"app": "web"}, min_available=1),
        {  # the attach-detach controller's, for scratch-0's volume (kubesim makes none)
            "apiVersion": "storage.k8s.io/v1",
            "kind": "VolumeAttachment",
            "metadata": {"name": "csi-scratch", "annotations": STUCK},
            "spec": {
                "attacher": "ebs.csi.aws.com",
                "nodeName": NODE,
                "source": {"persistentVolumeName": volume},
            },
        },
        volumes=1,
    )

    def garbage_collector() -> None:
        k.eventually(
            lambda: not [p for p in sim.list("Pod") if p["metadata"]["name"] == "scratch-0"],
            what="scratch-0 gone",
        )
        sim.api.delete(sim.resource_for(claim("scratch-0-tmp")), "default", "scratch-0-tmp")
        sim.api.delete(sim.resource_for(objects.budget("web", {"app": "web"})), "default", "web")

    collector = threading.Thread(target=garbage_collector, daemon=True)
    collector.start()
    start = clock()

    report = drain(kube, sim, clock, deadline=start + 3600)
    collector.join(timeout=5)

    assert "web-0" not in {p["metadata"]["name"] for p in sim.list("Pod")}
    _drained_still_attached(report, sim, volume, "scratch-0")


# -- the deadline cuts the wait: the line says which bound ended it --------------


def test_deadline_cuts_the_volume_wait__the_warning_does_not_blame_the_detach_timeout(
    sim: KubeSim,  # noqa: F811
    kube: Kube,
    clock: FakeClock,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The deadline (here 20 s away, as a spot interruption's) ends the wait long
    before VOLUME_DETACH_TIMEOUT_SECONDS (120 s). The warning says the volume is
    still attached "after 120 s", which it was not: the operator is sent to raise
    the timeout (docs/reference.md's advice for this line), which changes nothing;
    the deadline cut the wait, and the line must say so."""
    volume = one_stuck_volume(sim)
    start = clock()

    with caplog.at_level(logging.WARNING, logger="drainer.engine.drain"):
        report = drain(kube, sim, clock, deadline=start + 20)

    assert report.volumes_pending == [volume]
    assert clock() <= start + 21, "the wait ended at the deadline"
    (line,) = [r.getMessage() for r in caplog.records if "still attached" in r.getMessage()]
    assert "after 120 s" not in line, line
    assert "deadline" in line, line
