"""The steps every trigger's run passes through, written once: the lifecycle frame
(issue 39) that the terminate hook (drainer/lifecycle/scale_in.py) and EC2's events
(drainer/lifecycle/ec2_events.py) share, so that a new trigger takes them rather
than copies them.

- `heartbeating`: the lifecycle action kept alive while a step runs, stopped however
  the step ends.
- `aws_guarded`: a run that an AWS error stops. One AWS can still fix is raised, for
  Lambda to run the event again (every step of a drain is safe to repeat); one no
  retry can fix ends the run as failed, naming it, instead of running the same event
  into the same error.
- `end_summary`: the outcome's log line and the end line's keys.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from drainer import aws
from drainer.errors import AwsError
from drainer.lifecycle import ending
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER, LifecycleEvent
from drainer.lifecycle.job import Run

log = logging.getLogger(__name__)


@contextmanager
def heartbeating(
    autoscaling: aws.Client, event: LifecycleEvent, hook: aws.HookInfo
) -> Iterator[aws.Heartbeat]:
    """Heartbeat the event's lifecycle action at the hook's interval (at least every
    second) while the block runs; the heartbeat says afterwards how many beats it
    sent and whether the action was gone."""
    heartbeat = aws.Heartbeat(autoscaling, event, max(1.0, hook.heartbeat_interval))
    heartbeat.start()
    try:
        yield heartbeat
    finally:
        heartbeat.stop()


def aws_guarded(step: Callable[[], Run]) -> Run:
    """The step's run; a failed run naming the error when AWS refuses for good
    (ending.permanent). Raised when AWS failed beyond botocore's retries, for Lambda
    to retry the event (a lifecycle hook's heartbeat timeout is the backstop)."""
    try:
        return step()
    except AwsError as e:
        if not aws.is_permanent(e):
            log.error("AWS call failed; the invocation will be retried: %s", e)
            raise
        return ending.permanent(e)


def end_summary(
    run: Run,
    result: str | None,
    completed: bool | None,
    started: float,
    *,
    trigger: str = TERMINATE_HOOK_TRIGGER,
) -> dict[str, Any]:
    """Log the run's outcome and give the end line's keys; `started`: the invocation's
    time.monotonic() when it took the event, `result` and `completed`: what the Auto
    Scaling group was told, if anything."""
    ending.log_outcome(run, result, completed)
    return ending.summary_of(run, result, completed, time.monotonic() - started, trigger=trigger)
