"""An AWS Health scheduled change that is over (closed): carried out, or cancelled
before its window. Its drain may have left a node cordoned whose instance is still
there: a reboot or a maintenance it ran through, a change drained ahead of a window
that never came. Such a node is released as `release` does (only what the drainer
added), when each of these holds:

- the instance is one of the function's (`ec2_events.target`, as for the drain),
  running, and in service in its Auto Scaling group (not terminating, not in
  standby or a warm pool);
- the node's record is of this change's drain (its eventArn), and that drain is
  under way (it sees its record gone and stops, leaving the node released), or ended
  before the change closed: a node drained for another change, or by any other
  trigger, stays as it is;
- EC2 has no other event scheduled for the instance (DescribeInstanceStatus): a node
  drained for this change stays cordoned for a second change EC2 announced, whose
  own drain may not have come yet. EC2's event for this change itself (the one that
  begins at this change's start) is not counted: EC2 may not have marked it
  completed or canceled yet.

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
from drainer.lifecycle.events_ec2 import ChangeClosed, Ec2Event
from drainer.lifecycle.events_fields import Skip
from drainer.lifecycle.job import Run, Tools
from drainer.lifecycle.late import not_in_service
from drainer.lifecycle.runner import node_for
from drainer.lifecycle.window import Invocation
from drainer.outcome import DRAINING

log = logging.getLogger(__name__)


def handle(change: ChangeClosed, tools: Tools, invocation: Invocation | None) -> dict[str, Any]:
    """Settle the change's schedules, release its nodes; what was done, by instance."""
    over = f"{change.first.detail_code}: closed, the change is over"
    targets = _Targets(tools)
    settled = scheduled.settle_closed(change, tools, invocation, targets.admitted)
    released: list[str] = []
    kept: dict[str, str] = {}
    if tools.settings.scheduled_change_drain:
        clusters: dict[str, aws.ClusterInfo] = {}  # one description per cluster named
        for event in change.events:
            logs.bind(instance_id=event.instance_id)
            why = _release(event, tools, clusters, targets)
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


class _Targets:
    """Each instance's admission (ec2_events.target, as for its drain), looked up once:
    the close's mark (scheduled.settle_closed) and its release both ask."""

    def __init__(self, tools: Tools) -> None:
        self._tools = tools
        self._found: dict[str, ec2_events.Ec2Target | Skip] = {}

    def get(self, event: Ec2Event) -> ec2_events.Ec2Target | Skip:
        found = self._found.get(event.instance_id)
        if found is None:
            tools = self._tools
            found = self._found[event.instance_id] = ec2_events.target(
                event, tools.settings, tools.clients
            )
        return found

    def admitted(self, event: Ec2Event) -> bool:
        """Is the instance the function's (in its warm pool too: it may come back within
        the mark's hours)? Not when AWS cannot say for good (the release says why);
        raised when it fails for now (the close comes again)."""
        try:
            found = self.get(event)
            return not isinstance(found, Skip) or found.ours
        except ClusterNotFound:
            return False
        except AwsError as e:
            if not aws.is_permanent(e):
                raise
            return False


def _release(
    event: Ec2Event, tools: Tools, clusters: dict[str, aws.ClusterInfo], targets: _Targets
) -> str:
    """Release the instance's node; why not, or "" once released."""
    settings = tools.settings
    try:
        found = targets.get(event)
        if isinstance(found, Skip):
            return found.reason
        why = not_in_service(found, tools.clients)
        if why:
            return why
        cluster = clusters.get(found.cluster)
        if cluster is None:
            cluster = clusters[found.cluster] = aws.describe_cluster(
                tools.clients.eks, found.cluster
            )
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
        log.warning("the node of instance %s is not released: %s", event.instance_id, e)
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
    if record.get("change") != event.change_id:
        began = record.get("trigger") or "the command line or an earlier version"
        return f"node {name}'s record is of another drain ({began}): left as it is"
    if record.get("phase") == DRAINING:  # its drain sees the record gone, and stops
        return ""
    ended, closed_at = record.get("at"), event.issued_at
    if isinstance(ended, int | float) and closed_at is not None and ended > closed_at:
        return f"node {name}'s drain ended after the change closed: left as it is"
    return ""
