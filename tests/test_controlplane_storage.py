"""testbed.controlplane.storage on a real control plane: the real PV controller binds
what the emulated provisioner makes, the real attach-detach controller attaches the
volume to the pod's node and detaches it once the pod is gone, after the pod's
detach delay."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kubesim.testing import eventually
from testbed import workloads
from testbed.cluster import ApiClient
from testbed.controlplane.storage import ATTACHER_FINALIZER, DRIVER, StorageEmulator

pytestmark = pytest.mark.real_backend

SPEED = 20.0
DETACH = 20.0  # seconds, so 1 s at SPEED
NODE = "ip-10-0-1-1.ec2.internal"


@pytest.fixture(scope="module")
def storage() -> Iterator[tuple[ApiClient, StorageEmulator]]:
    from testbed.controlplane import ControlPlane

    with ControlPlane(speed=SPEED) as plane:
        client = ApiClient(plane.url, plane.ca_pem, plane.admin_token)
        # The harness's own emulator once it runs one (ControlPlane.storage), else ours.
        emulator = getattr(plane, "storage", None)
        if emulator is not None:
            yield client, emulator
            plane.check()
            return
        emulator = StorageEmulator(client, SPEED).start()
        try:
            yield client, emulator
        finally:
            began = time.monotonic()
            emulator.stop()
            assert time.monotonic() - began < 2.0, "the emulator's thread did not stop promptly"
            plane.check()


def wait_for(what: str, probe: Callable[[], Any], emulator: StorageEmulator, timeout: float) -> Any:
    """eventually(probe), the storage emulator checked on every look."""
    return eventually(lambda: (emulator.check(), probe())[1], timeout, 0.05, what=what)


def attachments(client: ApiClient, volume: str) -> list[dict[str, Any]]:
    return [
        a
        for a in client.list("VolumeAttachment")
        if a["spec"]["source"].get("persistentVolumeName") == volume
    ]


def test_a_statefulset_volume_is_provisioned_attached_and_detached(
    storage: tuple[ApiClient, StorageEmulator],
) -> None:
    client, emulator = storage
    storage_class = client.call("GET", "/apis/storage.k8s.io/v1/storageclasses/gp3")
    assert (storage_class["provisioner"], storage_class["volumeBindingMode"]) == (
        DRIVER,
        "Immediate",
    )
    client.apply(workloads.node(NODE, "i-0123456789abcdef0", "us-east-1a", pods=110))
    client.apply(workloads.statefulset("db", 1, detach=DETACH))

    # provisioned by the emulator, bound by the real PV controller
    claim = wait_for(
        "the claim to be bound",
        lambda: (
            (c := client.find("PersistentVolumeClaim", "data-db-0"))
            and c.get("status", {}).get("phase") == "Bound"
            and c
        ),
        emulator,
        30,
    )
    volume = client.get("PersistentVolume", claim["spec"]["volumeName"])
    assert volume["status"]["phase"] == "Bound"
    assert volume["spec"]["csi"]["driver"] == DRIVER
    assert volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert volume["spec"]["capacity"] == {"storage": "10Gi"}

    # attached by the real attach-detach controller, through the emulated attacher
    pod = wait_for(
        "the pod to run",
        lambda: (p := client.find("Pod", "db-0")) and p["status"].get("phase") == "Running" and p,
        emulator,
        30,
    )
    assert pod["spec"]["nodeName"] == NODE
    [attachment] = wait_for(
        "the volume to be attached",
        lambda: [
            a for a in attachments(client, volume["metadata"]["name"]) if a["status"]["attached"]
        ],
        emulator,
        30,
    )
    assert attachment["spec"] == {
        "attacher": DRIVER,
        "nodeName": NODE,
        "source": {"persistentVolumeName": volume["metadata"]["name"]},
    }
    assert attachment["metadata"]["finalizers"] == [ATTACHER_FINALIZER]
    assert attachment["metadata"]["annotations"]["kubesim.io/detach-seconds"] == "20"

    # the pod goes (its StatefulSet first, orphaning it, so nothing makes it again)
    client.delete("StatefulSet", "db", propagationPolicy="Orphan")
    wait_for(
        "the StatefulSet to go", lambda: client.find("StatefulSet", "db") is None, emulator, 30
    )
    client.delete("Pod", "db-0")
    wait_for("the pod to go", lambda: client.find("Pod", "db-0") is None, emulator, 30)
    gone = time.monotonic()
    detaching = wait_for(
        "the attach-detach controller to detach",
        lambda: [
            a
            for a in attachments(client, volume["metadata"]["name"])
            if a["metadata"].get("deletionTimestamp")
        ],
        emulator,
        10,
    )
    assert detaching[0]["metadata"]["name"] == attachment["metadata"]["name"]
    wait_for(
        "the VolumeAttachment to go",
        lambda: not attachments(client, volume["metadata"]["name"]),
        emulator,
        DETACH / SPEED + 10,
    )
    took = time.monotonic() - gone
    # (the clock starts when this test sees the pod gone, a poll after it went)
    assert DETACH / SPEED - 0.1 <= took <= DETACH / SPEED + 5, took

    # the claim deleted, the Released volume goes too (reclaim policy Delete)
    client.delete("PersistentVolumeClaim", "data-db-0")
    wait_for(
        "the volume to be deleted",
        lambda: client.find("PersistentVolume", volume["metadata"]["name"]) is None,
        emulator,
        30,
    )
    emulator.check()


def test_a_claim_of_another_provisioner_is_left_alone(
    storage: tuple[ApiClient, StorageEmulator],
) -> None:
    client, emulator = storage
    client.call(
        "POST",
        "/apis/storage.k8s.io/v1/storageclasses",
        body={
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "other"},
            "provisioner": "example.com/other",
            "volumeBindingMode": "Immediate",
        },
    )
    client.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "elsewhere", "namespace": "default"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "other",
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    )
    # handed by the PV controller to its (absent) provisioner...
    wait_for(
        "the PV controller to hand the claim on",
        lambda: (
            (
                client.get("PersistentVolumeClaim", "elsewhere")["metadata"].get("annotations")
                or {}
            ).get("volume.kubernetes.io/storage-provisioner")
            == "example.com/other"
        ),
        emulator,
        30,
    )
    time.sleep(0.5)  # several passes of the emulator
    claim = client.get("PersistentVolumeClaim", "elsewhere")
    assert claim["status"]["phase"] == "Pending"
    assert not claim["spec"].get("volumeName")
    emulator.check()
