"""The EBS CSI driver's controller-side sidecars, emulated for the real control plane.

kwok plays the kubelets; this plays what an EBS CSI driver runs beside the control
plane, so the real kube-controller-manager does the real work around it:

- the StorageClass `gp3` (provisioner ebs.csi.aws.com, volumeBindingMode Immediate,
  as kubesim binds every claim at once) and the CSIDriver object (attachRequired);
- external-provisioner: a claim that the PV controller has handed to
  ebs.csi.aws.com (annotation `volume.kubernetes.io/storage-provisioner`) gets a
  PersistentVolume pre-bound to it (claimRef with its uid), which the PV controller
  then binds; a Released volume of reclaim policy Delete is deleted once no
  VolumeAttachment holds it;
- external-attacher: a VolumeAttachment that the attach-detach controller creates
  (attacher ebs.csi.aws.com) gets the finalizer `external-attacher/ebs-csi-aws-com`
  and `status.attached: true`; once the controller deletes it (detach, after the pod
  is gone), the finalizer goes after the pod's `kubesim.io/detach-seconds` divided by
  `speed`, read at attach time from the pod on that node using that volume and kept
  on the attachment as the same annotation (as kubesim does).

The attach-detach controller only manages nodes annotated
`volumes.kubernetes.io/controller-managed-attach-detach: "true"` (the kubelet adds
it when it registers; testbed.workloads.node() does, as kwok does not).

One daemon thread polls the API (the watch cache: resourceVersion=0) every
`interval`; an error does not stop it, and `check()` raises the last one.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from testbed.cluster import ApiClient, ApiError, Outage

Obj = dict[str, Any]

DRIVER = "ebs.csi.aws.com"
STORAGE_CLASS = "gp3"
ATTACHER_FINALIZER = "external-attacher/ebs-csi-aws-com"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
PROVISIONER_ANNOTATIONS = (
    "volume.kubernetes.io/storage-provisioner",
    "volume.beta.kubernetes.io/storage-provisioner",
)
DETACH = "kubesim.io/detach-seconds"
STORAGE_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"
CSI_DRIVERS = "/apis/storage.k8s.io/v1/csidrivers"


class StorageEmulatorError(RuntimeError):
    """The storage emulator met an error it could not get past."""


class StorageEmulator:
    """`StorageEmulator(client, speed).start()`; `check()` raises its last error;
    `stop()` ends its thread."""

    def __init__(self, client: ApiClient, speed: float = 1.0, *, interval: float = 0.08) -> None:
        if not speed > 0:
            raise ValueError("speed must be positive")
        self.client = client
        self.speed = speed
        self.interval = interval
        self.error: BaseException | None = None
        self.errors = 0
        self._outage = Outage()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._detach_due: dict[str, float] = {}  # attachment uid -> when its finalizer goes
        self._pv_sweep = 0.0

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> StorageEmulator:
        """Create the StorageClass and the CSIDriver (now: an error raises here), then
        start the thread."""
        self._ensure(STORAGE_CLASSES, storage_class())
        self._ensure(CSI_DRIVERS, csi_driver())
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="storage-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def __enter__(self) -> StorageEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def check(self) -> None:
        """Raise StorageEmulatorError if a pass failed (the last error) or the thread
        died."""
        if self.error is not None:
            raise StorageEmulatorError(
                f"storage emulator: {self.errors} failed pass(es), the last: {self.error!r}"
            ) from self.error
        if self._thread is not None and not self._thread.is_alive() and not self._stop.is_set():
            raise StorageEmulatorError("storage emulator: its thread ended")

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
                self._outage.over()
            except Exception as e:
                if self._stop.is_set():
                    return  # the API server may be going away with us
                if self._outage.ride_out(e):
                    # The API server restarting (ControlPlane.restart): a CSI
                    # controller retries; a lasting failure is an error below.
                    self._stop.wait(0.2)
                    continue
                self.error = e
                self.errors += 1
                self._stop.wait(1.0)  # no hot loop on a lasting failure
            self._stop.wait(self.interval)

    # -- one pass ---------------------------------------------------------------

    def sync(self) -> None:
        """One pass: provision, attach, detach (and, every second, delete released
        volumes)."""
        claims = self._list("PersistentVolumeClaim")
        self._provision(claims)
        attachments = self._list("VolumeAttachment")
        self._attach(attachments, claims)
        now = time.monotonic()
        if now >= self._pv_sweep:
            self._pv_sweep = now + 1.0
            self._delete_released(attachments)

    def _list(self, kind: str) -> list[Obj]:
        return self.client.list(kind, resourceVersion="0")

    # -- external-provisioner -------------------------------------------------------

    def _provision(self, claims: list[Obj]) -> None:
        classes: dict[str, Obj | None] = {}
        for claim in claims:
            metadata, spec = claim["metadata"], claim.get("spec") or {}
            annotations = metadata.get("annotations") or {}
            if spec.get("volumeName") or metadata.get("deletionTimestamp"):
                continue
            if DRIVER not in (annotations.get(a) for a in PROVISIONER_ANNOTATIONS):
                continue  # not (yet) handed to this driver by the PV controller
            class_name = str(spec.get("storageClassName") or "")
            if class_name not in classes:
                classes[class_name] = self._find(f"{STORAGE_CLASSES}/{class_name}")
            storage_class = classes[class_name]
            if storage_class is None or storage_class.get("provisioner") != DRIVER:
                continue
            try:
                self.client.call(
                    "POST", "/api/v1/persistentvolumes", body=volume_for(claim, storage_class)
                )
            except ApiError as e:
                if e.status != 409:  # made on an earlier pass, not yet bound
                    raise

    def _delete_released(self, attachments: list[Obj]) -> None:
        held = {
            ((a.get("spec") or {}).get("source") or {}).get("persistentVolumeName")
            for a in attachments
        }
        for volume in self._list("PersistentVolume"):
            metadata, spec = volume["metadata"], volume.get("spec") or {}
            if (
                (metadata.get("annotations") or {}).get(PROVISIONED_BY) == DRIVER
                and (volume.get("status") or {}).get("phase") == "Released"
                and spec.get("persistentVolumeReclaimPolicy") == "Delete"
                and not metadata.get("deletionTimestamp")
                and metadata["name"] not in held
            ):
                self.client.delete(
                    "PersistentVolume",
                    metadata["name"],
                    preconditions={"uid": metadata["uid"]},
                )

    # -- external-attacher ---------------------------------------------------------

    def _attach(self, attachments: list[Obj], claims: list[Obj]) -> None:
        now = time.monotonic()
        seen = set()
        for attachment in attachments:
            metadata = attachment["metadata"]
            if (attachment.get("spec") or {}).get("attacher") != DRIVER:
                continue
            seen.add(metadata["uid"])
            finalizers = list(metadata.get("finalizers") or [])
            if metadata.get("deletionTimestamp"):
                if ATTACHER_FINALIZER not in finalizers:
                    continue
                seconds = _seconds((metadata.get("annotations") or {}).get(DETACH))
                due = self._detach_due.setdefault(metadata["uid"], now + seconds / self.speed)
                if now >= due:
                    finalizers.remove(ATTACHER_FINALIZER)
                    self._patch_metadata(attachment, {"finalizers": finalizers or None})
                continue
            if ATTACHER_FINALIZER not in finalizers:
                seconds = self._detach_seconds(attachment, claims)
                annotations = {DETACH: _format(seconds)}
                if not self._patch_metadata(
                    attachment,
                    {"finalizers": [*finalizers, ATTACHER_FINALIZER], "annotations": annotations},
                ):
                    continue
            if not (attachment.get("status") or {}).get("attached"):
                with _gone_ok():
                    self.client.patch(
                        "VolumeAttachment",
                        metadata["name"],
                        {
                            "status": {
                                "attached": True,
                                "attachmentMetadata": {"devicePath": "/dev/xvdba"},
                            }
                        },
                        sub="status",
                    )
        for uid in set(self._detach_due) - seen:
            del self._detach_due[uid]

    def _detach_seconds(self, attachment: Obj, claims: list[Obj]) -> float:
        """The largest `kubesim.io/detach-seconds` among the pods on the attachment's
        node that use its volume (0 when none is found)."""
        spec = attachment.get("spec") or {}
        volume = (spec.get("source") or {}).get("persistentVolumeName")
        node = spec.get("nodeName")
        if not volume or not node:
            return 0.0
        bound = {
            (c["metadata"]["namespace"], c["metadata"]["name"])
            for c in claims
            if (c.get("spec") or {}).get("volumeName") == volume
        }
        seconds = 0.0
        for pod in self.client.list("Pod", fieldSelector=f"spec.nodeName={node}"):
            namespace = pod["metadata"]["namespace"]
            for source in (pod.get("spec") or {}).get("volumes") or []:
                claim = (source.get("persistentVolumeClaim") or {}).get("claimName")
                if claim and (namespace, claim) in bound:
                    annotations = pod["metadata"].get("annotations") or {}
                    seconds = max(seconds, _seconds(annotations.get(DETACH)))
        return seconds

    def _patch_metadata(self, attachment: Obj, metadata: Obj) -> bool:
        """A merge patch of the attachment's metadata, on the resourceVersion we read:
        False when it changed meanwhile (the next pass sees the new one) or is gone."""
        current = attachment["metadata"]
        patch = {"metadata": {**metadata, "resourceVersion": current["resourceVersion"]}}
        try:
            self.client.patch("VolumeAttachment", current["name"], patch)
        except ApiError as e:
            if e.status in (404, 409):
                return False
            raise
        return True

    # -- helpers ---------------------------------------------------------------------

    def _ensure(self, collection: str, body: Obj) -> None:
        try:
            self.client.call("POST", collection, body=body)
        except ApiError as e:
            if e.status != 409:
                raise

    def _find(self, path: str) -> Obj | None:
        try:
            found: Obj = self.client.call("GET", path)
        except ApiError as e:
            if e.status == 404:
                return None
            raise
        return found


def storage_class(name: str = STORAGE_CLASS) -> Obj:
    """gp3 as the EBS CSI driver's users define it; Immediate binding as kubesim does,
    and the default class (kubesim binds a claim of any class, or of none)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": name,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": DRIVER,
        "parameters": {"type": "gp3", "csi.storage.k8s.io/fstype": "ext4"},
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": True,
    }


def csi_driver() -> Obj:
    """The CSIDriver object the EBS CSI driver installs: attach required (the default
    without one, said explicitly)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": DRIVER},
        "spec": {"attachRequired": True, "podInfoOnMount": False, "fsGroupPolicy": "File"},
    }


def volume_for(claim: Obj, storage_class: Obj) -> Obj:
    """The PersistentVolume external-provisioner makes for `claim`: named after its
    uid, pre-bound to it, of the requested size."""
    metadata, spec = claim["metadata"], claim.get("spec") or {}
    uid = str(metadata["uid"])
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    volume: Obj = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"pvc-{uid}", "annotations": {PROVISIONED_BY: DRIVER}},
        "spec": {
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "capacity": {"storage": size},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": metadata["namespace"],
                "name": metadata["name"],
                "uid": uid,
                "resourceVersion": metadata.get("resourceVersion"),
            },
            "csi": {
                "driver": DRIVER,
                "volumeHandle": "vol-" + uid.replace("-", "")[:17],
                "fsType": "ext4",
            },
            "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
            "storageClassName": storage_class["metadata"]["name"],
            "volumeMode": spec.get("volumeMode") or "Filesystem",
        },
    }
    if storage_class.get("mountOptions"):
        volume["spec"]["mountOptions"] = list(storage_class["mountOptions"])
    return volume


def _seconds(value: Any) -> float:
    try:
        seconds = float(value or 0)
    except (TypeError, ValueError):
        return 0.0
    return seconds if seconds > 0 and seconds != float("inf") else 0.0


def _format(seconds: float) -> str:
    return str(int(seconds)) if seconds == int(seconds) else str(seconds)


@contextlib.contextmanager
def _gone_ok() -> Iterator[None]:
    """An object deleted (404) or changed (409) meanwhile: the next pass sees it."""
    try:
        yield
    except ApiError as e:
        if e.status not in (404, 409):
            raise
