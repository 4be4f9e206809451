"""TIMEOUT_POLICY=force: at the deadline, delete the pods still on the node.

The deletion bypasses PodDisruptionBudgets and admission policies that refuse
evictions: it is the last resort of a drain that timed out, and the node goes
anyway. The drain (drainer/engine/drain.py, `_force`) then waits briefly for the
deleted pods to go.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from drainer.engine.report import DrainReport, Emit, Kind
from drainer.engine.schedule import Entry
from drainer.errors import FatalKubeError, KubeConflict, KubeError, KubeNotFound
from drainer.k8s.kube import Kube

# The drain's logger: its name is part of every line (the CLI prints it).
log = logging.getLogger("drainer.engine.drain")


def delete_left(
    kube: Kube,
    left: list[Entry],
    grace: int | Callable[[Entry], int],
    *,
    report: DrainReport,
    emit: Emit,
) -> list[Entry]:
    """Delete each pod of `left` with `grace` seconds to go (or the grace `grace`
    gives it), and return those deleted. A pod gone already is skipped, and one whose
    deletion fails is logged and left; a fatal error (RBAC, TLS, a refused token) is
    raised and deletes no more."""
    deleted = []
    for entry in left:
        seconds = grace(entry) if callable(grace) else grace
        why = report.left.get(entry.name) or entry.held or "not gone by the deadline"
        try:
            kube.delete_pod(entry.pod, grace_period_seconds=seconds)
        except (KubeNotFound, KubeConflict):
            continue
        except FatalKubeError:
            raise
        except KubeError as e:
            log.error("force-deleting %s failed: %s", entry.name, e)
            continue
        deleted.append(entry)
        report.forced += 1
        report.forced_pods[entry.name] = why
        emit(
            Kind.FORCED,
            pod=entry.name,
            uid=entry.uid,
            seconds=float(seconds),
            reason=why,
            refusals=entry.refusals,
            tier=entry.tier,
        )
    return deleted
