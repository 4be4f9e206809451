"""Where a launching instance is (drainer/lifecycle/launch.py), with EC2's eventual
consistency in mind: DescribeInstances may answer InvalidInstanceID.NotFound for an
instance launched a moment ago, and answers it too for one terminated long enough
ago that EC2 forgot it.

The two are told apart by the lifecycle action, not by EC2. One heartbeat is
recorded (RecordLifecycleActionHeartbeat, which also keeps the action alive):

- the action is gone: the event came late (held past the hook's timeout, or a
  duplicate of one answered) for an instance since terminated. No node can join and
  nothing waits for an answer: the launch ends stale, as the terminate hook ends an
  unknown instance without a failure (no_node), and no failure notice is sent;
- the action is alive: the instance is being launched and EC2 has not caught up. It
  is never skipped or abandoned for that: it is looked for again, LOCATE_TRIES times
  LOCATE_PAUSE_SECONDS apart, then the invocation fails (NotYetKnown, an AWS error
  to retry) for Lambda to deliver the event again; the hook's heartbeat timeout
  (DefaultResult CONTINUE) is the backstop should EC2 never know it.

A heartbeat that fails otherwise is the caller's, as any AWS error of the launch:
raised to retry, or failed when no retry can help (a denied permission).

An instance EC2 knows but says is not running (NOT_RUNNING: terminated, stopped, or
on the way) cannot come back from the warm pool either: a return event whose action
is gone at its first heartbeat is then stale too (launch.py), rather than waited for
to the timeout as a return that the hook's timeout put in service.
"""

from __future__ import annotations

import logging

from drainer import aws
from drainer.errors import AwsError, LifecycleActionGone
from drainer.lifecycle import frame
from drainer.lifecycle.events_hook import LifecycleEvent
from drainer.lifecycle.job import Tools

log = logging.getLogger(__name__)

LOCATE_TRIES = 4
"""How many times an instance EC2 does not know, whose action is alive, is looked for
in one invocation."""
LOCATE_PAUSE_SECONDS = 5.0
"""The pause between two looks (EC2 catches up within seconds)."""
NOT_RUNNING = frozenset({"shutting-down", "terminated", "stopping", "stopped"})
"""EC2's states of an instance that is not (or no longer) on its way into service."""

STALE = {
    "answered": (
        "the launch lifecycle action of instance {} was already answered (no action for "
        "its first heartbeat: a duplicate or late delivery of the event, answered by an "
        "earlier one, by its timeout or by hand): its node is not waited for and nothing "
        "is answered"
    ),
    "unknown": (
        "EC2 no longer knows instance {} (terminated and gone) and its launch lifecycle "
        "action is gone with it (a late or duplicate delivery of the event): no node to "
        "wait for, nothing to answer"
    ),
    "into_warm_pool": (
        "the launch lifecycle action of instance {} into the warm pool was answered "
        "already (a duplicate or late delivery of the event): its answer found the "
        "action gone"
    ),
    "not_running": (
        "the launch lifecycle action of instance {} back from the warm pool was already "
        "answered (no action for its first heartbeat: a duplicate or late delivery of the "
        "event) and EC2 says the instance is {state}: its node cannot come back, it is not "
        "waited for and nothing is answered"
    ),
}
"""Why a launch event is stale (launch.py): its action was gone before it could be
answered; each text is formatted with the instance's id (and `state`: EC2's)."""


class NotYetKnown(AwsError):
    """EC2 does not know an instance whose launch action is alive: the invocation
    fails for Lambda to retry (not permanent: aws.is_permanent is False)."""


def locate(
    event: LifecycleEvent, admitted: frame.Admitted, tools: Tools
) -> frame.Located | frame.NotLocated:
    """frame.locate, looked again while EC2 does not know the instance and its action
    is alive. NotLocated with no_instance only when the action is gone too (stale);
    NotYetKnown when EC2 still does not know it after LOCATE_TRIES looks."""
    for attempt in range(LOCATE_TRIES):
        if attempt:
            tools.sleep(LOCATE_PAUSE_SECONDS)
        where = frame.locate(event, admitted, tools)
        if not (isinstance(where, frame.NotLocated) and where.no_instance):
            return where
        if _action_gone(tools.clients.autoscaling, event):
            log.info(
                "EC2 no longer knows instance %s and its launch lifecycle action is gone "
                "(a late or duplicate event of an instance since terminated): nothing to "
                "wait for or answer",
                event.instance_id,
            )
            return where
        log.info(
            "EC2 does not know instance %s yet and its launch lifecycle action is alive "
            "(EC2's eventual consistency after a launch): looking again",
            event.instance_id,
        )
    log.warning(
        "EC2 still does not know instance %s after %d looks while its launch lifecycle "
        "action is alive: the invocation fails for Lambda to retry the event (the hook's "
        "timeout answers its DefaultResult should EC2 never know it)",
        event.instance_id,
        LOCATE_TRIES,
    )
    raise NotYetKnown(
        f"EC2 does not know instance {event.instance_id} yet, and its launch lifecycle "
        "action is alive: retried"
    )


def _action_gone(autoscaling: aws.Client, event: LifecycleEvent) -> bool:
    """One heartbeat: False when it was recorded (the action is alive), True when
    the action is gone (answered, timed out)."""
    try:
        aws.record_heartbeat(autoscaling, event)
    except LifecycleActionGone:
        return True
    return False
