"""The end of a terminate hook's drain that stops because its lifecycle action is gone
(scale_in.drain_instance): the drain was cut by its invocation, and nobody waits on
it any more, so no invocation goes on with it. Its record on the node says it timed
out, so that no trigger waits for it and a warm pool's return releases the node."""

from __future__ import annotations

import logging

from drainer.engine.report import DrainReport
from drainer.errors import KubeConflict, KubeError
from drainer.k8s.cordon import ProgressRecord, record_text
from drainer.k8s.kube import Kube
from drainer.lifecycle.job import Tools
from drainer.outcome import Outcome

log = logging.getLogger(__name__)

TRIES = 3
"""Writes of the end tried while the node changes under it (a 409 each)."""


def record_stopped(
    kube: Kube, node: str, record: ProgressRecord, report: DrainReport, tools: Tools
) -> None:
    """The record's end, when the caller's `action_gone` says the action is gone (it
    is asked here, with the hand-over's beat): written on the node as read, if it still
    carries this drain's record (a re-cordon's too, whose cordon the end then claims),
    else left (released, or another drain's since); read again on a 409 (a kubelet's
    status, say). A failed write is said, never raised."""
    if not record.begun or tools.action_gone is None or not tools.action_gone():
        return
    ours = {record.begun, record_text(record.recordon())}
    for tries_left in range(TRIES - 1, -1, -1):
        try:
            current = kube.get_node(node) or {}
            if record_text(current) not in ours:
                return
            end = record.end(
                Outcome.TIMED_OUT, tools.clock(), report.evicted, cordoned=report.recordons > 0
            )
            meta = current["metadata"]
            end["metadata"] |= {
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            }
            kube.patch_node(node, end)
            return
        except KubeConflict:
            if tries_left == 0:
                log.warning("the record of the drain stopped on node %s kept changing", node)
        except KubeError as e:
            log.warning("the record of the drain stopped on node %s was not written: %s", node, e)
            return
