"""The last step of a drain (drainer/engine/volumes.py), against kubesim: which
volumes the evicted pods used, and the bounded wait until they are detached from
the node. Time is a FakeClock; a pause moves it on, or waits for the watch."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from support.clock import FakeClock, SteppedWaits

from drainer.engine.context import DrainContext
from drainer.engine.drain import Drain
from drainer.engine.options import DrainOptions
from drainer.engine.report import DrainReport
from drainer.engine.volumes import Detach, attachments_on, volumes_of, wait_for_detach
from drainer.k8s.cordon import ProgressRecord
from drainer.k8s.kube import Kube
from drainer.outcome import Outcome
from kubesim import KubeSim
from kubesim import testing as k
from testbed.workloads import node, pod

NODE = "n1"


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim() as running:
        running.apply([node(NODE), node("n2")])
        yield running


def claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def attachment(
    name: str, volume: str, node_name: str = NODE, *, detach: float = 3600.0
) -> dict[str, Any]:
    """A VolumeAttachment no pod wants: kubesim's attach-detach controller removes it
    `detach` seconds on (the CSI driver's detach time)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name, "annotations": {"kubesim.io/detach-seconds": str(detach)}},
        "spec": {
            "attacher": "ebs.csi.aws.com",
            "nodeName": node_name,
            "source": {"persistentVolumeName": volume},
        },
    }


def bound_volume(sim: KubeSim, name: str) -> str:
    """The volume kubesim's provisioner bound the claim to."""
    return str(
        k.eventually(
            lambda: sim.get("PersistentVolumeClaim", name, "default")["spec"].get("volumeName")
        )
    )


@pytest.mark.parametrize(
    ("case", "mounts", "volumes"),
    [
        ("no claims", [()], set()),
        ("one bound claim", [("data",)], {"data"}),
        ("the same claim twice, one volume", [("data",), ("data",)], {"data"}),
        ("two claims", [("data", "logs")], {"data", "logs"}),
        ("a claim that does not exist", [("gone",)], set()),
    ],
)
def test_volumes_of__the_bound_volumes_behind_the_pods_claims(
    sim: KubeSim, kube: Kube, case: str, mounts: list[tuple[str, ...]], volumes: set[str]
) -> None:
    sim.apply([claim("data"), claim("logs")])
    bound = {name: bound_volume(sim, name) for name in ("data", "logs")}
    drained = [pod(f"p{i}", node_name=NODE, claims=c) for i, c in enumerate(mounts)]

    assert volumes_of(kube, drained) == {bound[v] for v in volumes}, case


COND = threading.Condition()
"""The drain's lock and condition, which the wait shares."""


@dataclass(frozen=True)
class Pausing:
    """The drain's waits (drainer.engine.context.Waits): `pause(until)` is the wait."""

    clock: FakeClock
    pause: Callable[[float], None]

    def now(self) -> float:
        return self.clock()

    def wait(
        self, cond: threading.Condition, until: Callable[[], float], busy: bool = False
    ) -> None:
        self.pause(until())


def _wait(
    kube: Kube,
    volumes: set[str],
    clock: FakeClock,
    pause: Callable[[float], None],
    attached_before: dict[str, str] | None = None,
) -> tuple[Detach, list[str]]:
    told: list[str] = []
    ctx = DrainContext(
        kube,
        NODE,
        DrainOptions(),
        Pausing(clock, pause),
        DrainReport(NODE),
        on_event=lambda event: told.append(event.reason),
        cond=COND,
    )
    result = wait_for_detach(ctx, volumes, clock() + 30, attached_before or {})
    return result, told


@pytest.mark.parametrize(
    ("case", "attachments", "volumes"),
    [
        ("nothing attached", [], {"pv-a"}),
        ("no volumes to wait for", [attachment("va-1", "pv-a")], set()),
        ("attached to another node", [attachment("va-1", "pv-a", node_name="n2")], {"pv-a"}),
        ("another volume attached here", [attachment("va-1", "pv-other")], {"pv-a"}),
    ],
)
def test_wait_for_detach__nothing_of_ours_attached__returns_without_a_pause(
    sim: KubeSim, kube: Kube, case: str, attachments: list[dict[str, Any]], volumes: set[str]
) -> None:
    sim.apply(attachments)
    clock = FakeClock()

    result, told = _wait(kube, volumes, clock, clock.sleep)

    assert result == Detach(), case
    assert (told, clock.sleeps) == ([], []), case


def test_wait_for_detach__volume_never_detaches__named_pending_at_the_deadline(
    sim: KubeSim, kube: Kube
) -> None:
    sim.apply([attachment("va-1", "pv-a"), attachment("va-2", "pv-b")])
    clock = FakeClock()
    start = clock()

    result, told = _wait(
        kube, {"pv-a", "pv-b"}, clock, lambda until: clock.advance(until - clock())
    )

    assert result.pending == ["pv-a", "pv-b"]
    assert (result.detached, told) == ([], [])
    assert clock() == start + 30, "waited until the bound, not past it"


def test_wait_for_detach__volume_detached__reported_once_and_the_wait_ends(
    sim: KubeSim, kube: Kube
) -> None:
    sim.apply([attachment("va-1", "pv-a", detach=0.5)])
    clock = FakeClock()

    def wait_for_the_watch(until: float) -> None:
        COND.wait(timeout=5.0)  # held; the watch's DELETED wakes it

    result, told = _wait(kube, {"pv-a"}, clock, wait_for_the_watch)

    assert result == Detach(detached=["va-1 (pv-a)"], pending=[])
    assert told == ["va-1 (pv-a)"]


def test_attached_at_the_start__detached_before_the_wait__counted_and_told(
    sim: KubeSim, kube: Kube
) -> None:
    """The pod stopped and its volume detached while other pods were still going:
    the drain's report counts it (the log's volumes_detached agrees with what an
    operator watching the volume saw), without a pause."""
    sim.apply([attachment("va-1", "pv-a"), attachment("va-2", "pv-b", node_name="n2")])
    before = attachments_on(kube, NODE)
    assert before == {"va-1": "pv-a"}
    sim.api.delete(sim.resource_for(attachment("va-1", "pv-a")), "", "va-1")
    k.eventually(lambda: attachments_on(kube, NODE) == {})
    clock = FakeClock()

    result, told = _wait(kube, {"pv-a"}, clock, clock.sleep, attached_before=before)

    assert result == Detach(detached=["va-1 (pv-a)"])
    assert (told, clock.sleeps) == (["va-1 (pv-a)"], [])


def test_attached_at_the_start__another_volume__not_counted(sim: KubeSim, kube: Kube) -> None:
    clock = FakeClock()

    result, told = _wait(kube, {"pv-a"}, clock, clock.sleep, attached_before={"va-9": "pv-z"})

    assert result == Detach()
    assert told == []


def test_claim_names__an_ephemeral_claim_is_the_pods_own__the_plan_leaves_it_out(
    sim: KubeSim,
) -> None:
    """The ephemeral claim is the pod's own, deleted with it: its replacement gets a
    new one wherever it lands, so the plan must not tie it to the old volume's zone
    (the drain still waits for that volume to detach)."""
    from drainer.engine import pods as podlib

    drained = pod("p0", node_name=NODE)
    drained["spec"]["volumes"] = [
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "d"}},
    ]

    assert podlib.claim_names(drained) == ["p0-scratch", "d"]
    assert podlib.claim_names(drained, ephemeral=False) == ["d"]


def test_volumes_of__a_generic_ephemeral_volume__its_claim_named_pod_dash_volume(
    sim: KubeSim, kube: Kube
) -> None:
    """A generic ephemeral volume (spec.volumes[].ephemeral.volumeClaimTemplate) is an
    EBS volume like any other: the ephemeral controller makes its claim, named
    <pod>-<volume>, and the node's attachment must detach before the instance goes."""
    sim.apply([claim("p0-scratch")])  # as the ephemeral volume controller names it
    bound = bound_volume(sim, "p0-scratch")
    drained = pod("p0", node_name=NODE)
    drained["spec"]["volumes"] = [
        {
            "name": "scratch",
            "ephemeral": {
                "volumeClaimTemplate": {
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                    }
                }
            },
        }
    ]

    assert volumes_of(kube, [drained]) == {bound}


@pytest.mark.parametrize(
    ("case", "stays", "options"),
    [
        (
            "a DaemonSet's pod, skipped",
            pod("agent-0", node_name=NODE, owner="DaemonSet", claims=("keep",)),
            DrainOptions(),
        ),
        (
            "a pod the selector leaves out",
            pod("other-0", node_name=NODE, claims=("keep",)),
            DrainOptions(pod_selector="app=web"),
        ),
    ],
)
def test_drain__the_volume_of_a_pod_that_stays_on_the_node__not_waited_for(
    sim: KubeSim, kube: Kube, case: str, stays: dict[str, Any], options: DrainOptions
) -> None:
    """The wait is for every attachment on the node but those of the pods that stay on
    it (Karpenter's terminator's rule): theirs never detach while they run."""
    sim.apply([claim("keep"), stays, pod("web-0", node_name=NODE, labels={"app": "web"})])
    sim.settle()
    k.eventually(
        lambda: [a for a in sim.list("VolumeAttachment") if a["spec"]["nodeName"] == NODE],
        what="the volume attached",
    )
    clock = FakeClock()
    start = clock()
    engine = Drain(kube, NODE, options, record=ProgressRecord(), waits=SteppedWaits(clock))

    report = engine.run(start + 3600)

    assert report.outcome == Outcome.DRAINED, case
    assert (report.volumes_pending, report.volumes_detached) == ([], 0), case
    assert clock() < start + 60, "no wait for a volume that cannot detach"
