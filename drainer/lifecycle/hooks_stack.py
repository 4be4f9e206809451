"""Whether the hook sync's stack is going away, for a sync that put hooks (hooks.py).

The stack deletes the schedule and the API-call rule before its custom resource, so
no sync starts after its Delete. One already running does (a sync over many groups
takes tens of seconds; a queued asynchronous event may start late): it may read a
group's hook before the Delete removes it, or find it missing after, and put it back,
naming a stack that no longer exists, holding every termination of the group for
HeartbeatTimeout, for good. So a sync that created a hook asks CloudFormation how its
stack is (DescribeStacks of STACK_ID, which the role may: template.yaml's
AskWhetherItsStackStillAwaitsTheHooks) and, when it is being deleted or a Create is
rolled back (the custom resource deleted), deletes the hooks it created. Any other
state, a stack CloudFormation does not know, or a status that cannot be read, keeps
them (the stack's own Delete, or the next sync, decides). A sync outside a stack (no
STACK_ID) never asks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from drainer import aws

log = logging.getLogger(__name__)

_GOING = ("DELETE_", "ROLLBACK_")
"""The stack's states in which its custom resource is (being) deleted: the stack's
deletion, and the rollback of its creation. UPDATE_ROLLBACK_* is not one."""

CloudFormation = Callable[[], aws.Client]
"""The CloudFormation client, built only when asked for."""


def going(stack_id: str, region: str, cloudformation: CloudFormation | None) -> str:
    """The stack's status when it is being deleted or its creation rolled back; ""
    otherwise, or when that cannot be told (logged)."""
    try:
        client = cloudformation() if cloudformation else _client(region)
        status = aws.stack_status(client, stack_id)
    except Exception as e:  # a check: never the sync's failure
        log.warning("the hook sync cannot tell whether its stack is being deleted: %s", e)
        return ""
    return status if status and status.startswith(_GOING) else ""


def _client(region: str) -> aws.Client:
    """A CloudFormation client in the sync's region, for a caller that gives none."""
    return aws.make_clients(aws.Session(region or None), region or None).cloudformation
