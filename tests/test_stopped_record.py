"""A terminate hook's drain cut by its invocation while its lifecycle action is gone
goes no further, and its record on the node says it timed out
(drainer/lifecycle/stopped.py): written only on the record this drain began
(or its re-cordon's), on the node as read, so a release or another drain's record
since is never overwritten."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any, cast

from drainer.engine.report import DrainReport
from drainer.k8s.cordon import ADDED_CORDON, PROGRESS_ANNOTATION, ProgressRecord
from drainer.k8s.kube import Kube
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER
from drainer.lifecycle.job import Tools
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.stopped import record_stopped
from drainer.outcome import Outcome
from kubesim import KubeSim
from kubesim.faults import Fault

NODE = "ip-10-0-1-23.ec2.internal"


def _begun(sim: KubeSim, kube: Kube, *, cordoned: bool = False) -> ProgressRecord:
    """The node, cordoned by a terminate hook's drain (its record: draining);
    `cordoned`: by an operator before it (the cordon is not the drain's then)."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
    sim.apply([{**node, "spec": {"unschedulable": True}} if cordoned else node])
    record = ProgressRecord(TERMINATE_HOOK_TRIGGER)
    now = time.time()
    kube.patch_node(NODE, record.begin(kube.get_node(NODE) or {}, now, now + 3600))
    return record


def _tools(gone: bool) -> Tools:
    no = cast(Any, None)
    return Tools(Settings(), no, no, action_gone=lambda: gone)


def _record(kube: Kube) -> dict[str, Any]:
    node = kube.get_node(NODE) or {}
    found: dict[str, Any] = json.loads(node["metadata"]["annotations"][PROGRESS_ANNOTATION])
    return found


def test_action_gone__the_record_ends_timed_out(sim: KubeSim, kube: Kube) -> None:
    record = _begun(sim, kube)

    record_stopped(kube, NODE, record, DrainReport(NODE, Outcome.HANDED_OVER), _tools(True))

    assert _record(kube)["phase"] == "timed_out"


def test_action_alive__the_record_left_draining(sim: KubeSim, kube: Kube) -> None:
    record = _begun(sim, kube)

    record_stopped(kube, NODE, record, DrainReport(NODE, Outcome.HANDED_OVER), _tools(False))

    assert _record(kube)["phase"] == "draining"


def test_after_a_re_cordon__the_end_claims_that_cordon(sim: KubeSim, kube: Kube) -> None:
    """Someone uncordoned the node mid-drain and the drain cordoned it again: that
    cordon is the drain's, and `release` must undo it when the instance comes back."""
    record = _begun(sim, kube, cordoned=True)
    assert ADDED_CORDON not in _record(kube)["added"], "the operator's cordon"
    kube.patch_node(NODE, record.recordon())
    report = DrainReport(NODE, Outcome.HANDED_OVER)
    report.recordons = 1

    record_stopped(kube, NODE, record, report, _tools(True))

    found = _record(kube)
    assert found["phase"] == "timed_out" and ADDED_CORDON in found["added"], found


def test_another_record_since__left_as_it_is(sim: KubeSim, kube: Kube) -> None:
    """The instance back and scaled in again: the new action's drain recorded itself;
    the old chain's last step ends nothing of it."""
    record = _begun(sim, kube)
    other = ProgressRecord(TERMINATE_HOOK_TRIGGER)
    now = time.time()
    kube.patch_node(NODE, other.begin(kube.get_node(NODE) or {}, now + 5, now + 7200))
    before = _record(kube)

    record_stopped(kube, NODE, record, DrainReport(NODE, Outcome.HANDED_OVER), _tools(True))

    assert _record(kube) == before


def test_the_node_written_meanwhile__read_again__the_record_ended(sim: KubeSim, kube: Kube) -> None:
    """A write of the node between the read and the end's patch (a kubelet's status)
    answers 409 on the version read: the node is read again and the end written."""
    record = _begun(sim, kube)
    conflict = Fault(
        kind="status", status=409, reason="Conflict", method="PATCH", path=f"/api/v1/nodes/{NODE}$"
    )
    sim.faults.add(replace(conflict, count=1))

    record_stopped(kube, NODE, record, DrainReport(NODE, Outcome.HANDED_OVER), _tools(True))

    assert _record(kube)["phase"] == "timed_out"
