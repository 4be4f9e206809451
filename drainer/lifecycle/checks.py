"""The self-check event: whether this function, as its own identity, may drain
(drainer/k8s/selfcheck.py), asked by `make deploy` before it turns the hooks on."""

from __future__ import annotations

import logging
from typing import Any

from drainer import aws, logs
from drainer.errors import DrainerError
from drainer.k8s import selfcheck
from drainer.lifecycle.events import SelfCheckEvent
from drainer.lifecycle.job import Tools
from drainer.lifecycle.settings_drain import TimeoutPolicy

log = logging.getLogger(__name__)


def handle(event: SelfCheckEvent, tools: Tools) -> dict[str, Any]:
    """The check's answer for the event's cluster (CLUSTER_NAME when it names none)."""
    settings = tools.settings
    name = event.cluster_name or settings.cluster_name
    if not name:
        return {"result": "check_failed", "message": "no cluster: set CLUSTER_NAME"}
    logs.bind(cluster=name)
    try:
        cluster = aws.describe_cluster(tools.clients.eks, name)
        kube = tools.kube_factory(cluster, name, settings)
    except DrainerError as e:
        result = selfcheck.SelfCheck(name, error=str(e))
    else:
        try:
            force = settings.timeout_policy == TimeoutPolicy.FORCE
            result = selfcheck.check(kube, name, force=force)
        finally:
            kube.close()
    (log.info if result.passed else log.error)("self-check: %s", result.message())
    return result.result()
