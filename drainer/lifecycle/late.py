"""EC2's events that come late: checked against EC2's state of the instance now.

Lambda's asynchronous queue keeps an event for up to six hours while the function
is throttled or failing, and a spot instance that stops or hibernates comes back.
A deadline taken from such an event is already past, and a past deadline is no
reason to delete pods on an instance that still runs. So before acting on one of
EC2's events (drainer/lifecycle/ec2_events.py):

- an instance started after its event (a later LaunchTime: stopped and started
  again) is left alone: the event is about an earlier life of it (`restarted`);
- an instance still pending or running whose event's moment has passed is drained
  at once with LATE_EVENT_DRAIN_SECONDS of its own, budgets respected, nothing
  deleted at its deadline (`is_late`);
- an instance stopping, shutting down or stopped is drained as its event says;
- an AWS Health scheduled change's update about a window EC2 lists as over (its
  scheduled event at that moment completed or canceled, none pending then) came
  after the change's close, which AWS Health delivers on its own: it is left alone
  (`over_in_ec2`; EC2 not answering is no answer, and the update is acted on).
"""

from __future__ import annotations

from drainer import aws
from drainer.errors import AwsError
from drainer.lifecycle.events_ec2 import (
    EC2_EVENT_NAMES,
    SPOT_NOTICE_SECONDS,
    STATE_CHANGE_NOTICE_SECONDS,
    Ec2Event,
    Ec2Kind,
)
from drainer.lifecycle.events_fields import Skip, iso

LATE_EVENT_DRAIN_SECONDS = float(SPOT_NOTICE_SECONDS)
"""A late event's drain time: EC2 may carry out an interruption a little late, so
the drain goes at once, budgets respected, and deletes nothing at its deadline."""

CAME_LATE = "came after EC2's moment to act"
"""In a late event's deadline source (the end line's `deadline_source`): the notice
reads it to say the node stays cordoned (EC2 did not take the instance then)."""
STILL_RUNNING = frozenset({"pending", "running"})

_NOTICE = {
    Ec2Kind.INTERRUPTION: SPOT_NOTICE_SECONDS,
    Ec2Kind.CAPACITY_RESERVATION: SPOT_NOTICE_SECONDS,
    Ec2Kind.STATE_CHANGE: STATE_CHANGE_NOTICE_SECONDS,
}
"""How long after its event EC2 acts, for the events that fix that moment."""


def acts_at(event: Ec2Event) -> float | None:
    """The moment EC2 acts on the instance as the event fixes it; None when the event
    fixes none (a rebalance; a scheduled change, whose maintenance window is checked apart)."""
    if event.kind is Ec2Kind.CAPACITY_RESERVATION and event.acts_at is not None:
        return event.acts_at
    issued, notice = event.issued_at, _NOTICE.get(event.kind)
    return None if issued is None or notice is None else issued + notice


def is_late(event: Ec2Event, instance: aws.NodeIdentity, now: float) -> bool:
    """Whether the event's moment has passed while EC2 says the instance is still
    pending or running."""
    moment = acts_at(event)
    return instance.state in STILL_RUNNING and moment is not None and moment <= now


def restarted(event: Ec2Event, instance: aws.NodeIdentity) -> Skip | None:
    """A Skip when the instance was started after its event; None otherwise (or when
    EC2 or the event does not say when)."""
    launched, issued = instance.launched_at, event.issued_at
    if launched is None or issued is None or launched <= issued:
        return None
    started = iso(launched)
    return Skip(
        f"{EC2_EVENT_NAMES[event.kind]} of {event.event_time} about instance "
        f"{instance.instance_id}, which was started again at {started}, after it: "
        "the event no longer applies; its node is left alone"
    )


SAME_WINDOW_SECONDS = 60.0
"""How far apart a change's window start (AWS Health's) and EC2's scheduled event's
NotBefore may be and still be the same window."""


def over_in_ec2(event: Ec2Event, ec2: aws.Client) -> Skip | None:
    """A Skip when EC2 lists the scheduled change's window as over: an event of EC2's
    that begins then is completed or canceled, and none that begins then is pending
    (an update about a change closed since, or moved: its old window). None when EC2
    lists nothing at that moment, or cannot be asked."""
    window = event.acts_at
    if event.kind is not Ec2Kind.SCHEDULED_CHANGE or window is None:
        return None
    try:
        listed = aws.scheduled_events(ec2, event.instance_id)
    except AwsError:
        return None
    then = [(code, over) for code, at, over in listed if at is not None
            and abs(at - window) <= SAME_WINDOW_SECONDS]  # fmt: skip
    if not then or not all(over for _, over in then):
        return None
    return Skip(
        f"{EC2_EVENT_NAMES[event.kind]} of {event.event_time} about instance "
        f"{event.instance_id}: EC2 lists its window ({iso(window)}) as over ({then[0][0]} "
        "completed or canceled): the update came after the change's close; its node is "
        "left alone"
    )
