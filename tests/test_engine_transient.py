"""A failure of the API server near a drain's end that outlasts one call's retries is
not the drain's end (issue 38, item 3): the volumes' courtesy wait is skipped with a
line, not turned into a failed drain, after the pods are gone. (The last list's
retry is shown end to end: tests/e2e/test_cli_outage.py.)"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from support.clock import FakeClock

from drainer.engine.context import DrainContext, RealWaits
from drainer.engine.options import DrainOptions
from drainer.engine.report import DrainReport
from drainer.engine.volumes import Volumes
from drainer.k8s.client import RetryPolicy
from drainer.k8s.kube import Kube
from kubesim import KubeSim
from kubesim.faults import Fault


def test_volumes_wait__claims_unreadable__skipped_with_a_line__the_drain_not_failed(
    sim: KubeSim, kube: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    kube.retry = RetryPolicy(attempts=1)  # the call's retries spent at once
    sim.faults.add(Fault(kind="status", status=503, method="GET", path="persistentvolumeclaims"))
    clock = FakeClock()
    report = DrainReport("n1")
    ctx = DrainContext(
        kube, "n1", DrainOptions(), RealWaits(clock), report, cond=threading.Condition()
    )
    pod = {
        "metadata": {"name": "db-0", "namespace": "default"},
        "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]},
    }

    sim.apply([_attachment("va-1", "pv-a")])  # something on the node to wait for

    # db-0 stays on the node: its claim is read to leave its volume out of the wait.
    Volumes(ctx).wait(clock() + 60, lambda: [pod])  # raised KubeServerError before

    assert not ctx.over()
    assert report.errors == []
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("not waiting for volumes to detach from n1" in line for line in said), said


def _attachment(name: str, volume: str) -> dict[str, Any]:
    """A VolumeAttachment on n1 that kubesim's attach-detach controller keeps an hour."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name, "annotations": {"kubesim.io/detach-seconds": "3600"}},
        "spec": {
            "attacher": "ebs.csi.aws.com",
            "nodeName": "n1",
            "source": {"persistentVolumeName": volume},
        },
    }
