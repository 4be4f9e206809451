"""An AWS Health scheduled change that is over (closed): carried out, or cancelled
before its window. Its drain may have left a node cordoned whose instance is still
there: a reboot or a maintenance it ran through, a change drained ahead of a window
that never came. Such a node is released as `release` does (only what the drainer
added), when each of these holds:

- the instance is one of the function's (`ec2_events.target`, as for the drain) and
  running;
- EC2 has no other event scheduled for it (DescribeInstanceStatus): a node drained
  ahead of a second change stays cordoned for it;
- the node's record is of a drain begun by a scheduled change, ended, and begun
  before the change closed.

Any other node is left as it is, saying why. The change's schedules are settled
first (drainer/lifecycle/scheduled.py).
"""

from __future__ import annotations

import logging
from typing import Any

from drainer import aws, logs
from drainer.errors import AwsError, ClusterNotFound, KubeError
from drainer.k8s.cordon import progress_of, release
from drainer.lifecycle import ec2_events, scheduled
from drainer.lifecycle.events_ec2 import ChangeClosed, Ec2Event, Ec2Kind
from drainer.lifecycle.events_fields import Skip
from drainer.lifecycle.job import Run, Tools
from drainer.lifecycle.runner import node_for
from drainer.lifecycle.window import Invocation
from drainer.outcome import DRAINING

log = logging.getLogger(__name__)

TRIGGER = str(Ec2Kind.SCHEDULED_CHANGE)


def handle(change: ChangeClosed, tools: Tools, invocation: Invocation | None) -> dict[str, Any]:
    """Settle the change's schedules, release its nodes; what was done, by instance."""
    over = f"{change.first.detail_code}: closed, the change is over"
    settled = scheduled.settle_closed(change, tools, invocation)
    released: list[str] = []
    kept: dict[str, str] = {}
    if tools.settings.scheduled_change_drain:
        for event in change.events:
            logs.bind(instance_id=event.instance_id)
            why = _release(event, tools)
            if why:
                kept[event.instance_id] = why
                log.info("%s: %s", over, why)
            else:
                released.append(event.instance_id)
    return {
        "result": "closed",
        "reason": over,
        "settled": settled,
        "released": released,
        "kept": kept,
    }


def _release(event: Ec2Event, tools: Tools) -> str:
    """Release the instance's node; why not, or "" once released."""
    settings, clients = tools.settings, tools.clients
    try:
        found = ec2_events.target(event, settings, clients)
        if isinstance(found, Skip):
            return found.reason
        if found.identity.state != "running":
            return f"instance {event.instance_id} is {found.identity.state}: nothing to release"
        pending = aws.pending_events(clients.ec2, event.instance_id)
        if pending:
            return (
                f"EC2 still has {', '.join(pending)} scheduled for instance "
                f"{event.instance_id}: its node stays cordoned for it"
            )
        cluster = aws.describe_cluster(clients.eks, found.cluster)
    except ClusterNotFound as e:
        return str(e)
    except AwsError as e:
        if not aws.is_permanent(e):
            raise  # EventBridge delivers the event again: settling and releasing repeat safely
        return f"not released: {e}"
    kube = tools.kube_factory(cluster, cluster.name, settings)
    try:
        node = node_for(kube, found.identity)
        if isinstance(node, Run):
            return node.message
        why = _not_its_drain(node, event)
        if why:
            return why
        release(kube, node, dry_run=settings.dry_run)
    except KubeError as e:
        return f"could not release the node: {e}"
    finally:
        kube.close()
    return ""


def _not_its_drain(node: dict[str, Any], event: Ec2Event) -> str:
    """Why the node's record is not of this change's ended drain; "" when it is."""
    name = node["metadata"]["name"]
    record = progress_of(node)
    if record is None:
        return f"node {name} has no eks-node-drainer record: nothing to release"
    if record.get("trigger") != TRIGGER:
        began = record.get("trigger") or "the command line or an earlier version"
        return f"node {name}'s record is of a drain begun by {began}: left as it is"
    if record.get("phase") == DRAINING:
        return f"node {name} is being drained: left as it is"
    ended, closed_at = record.get("at"), event.issued_at
    if isinstance(ended, int | float) and closed_at is not None and ended > closed_at:
        return f"node {name}'s drain ended after the change closed: left as it is"
    return ""
