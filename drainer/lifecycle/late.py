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
  (`over_in_ec2_mid_chain`; EC2 not answering is no answer, and the update is acted on);
- a scheduled change EC2 lists nothing at the window of, but an event of its kind
  pending at another time, was moved there (EC2 keeps one event per change and lists
  a rescheduled one at its new time only; AWS Health may send no update, as when the
  owner moves one instance of a change): the drain, or its schedule, goes toward
  EC2's time (`as_ec2_lists`), never toward a window EC2 no longer keeps.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from drainer import aws
from drainer.errors import AwsError
from drainer.lifecycle.events_ec2 import (
    AGAIN_SUFFIX,
    EC2_EVENT_NAMES,
    SPOT_NOTICE_SECONDS,
    STATE_CHANGE_NOTICE_SECONDS,
    Ec2Event,
    Ec2Kind,
)
from drainer.lifecycle.events_fields import Skip, iso

if TYPE_CHECKING:  # both import this module (through ending, for SoFar's)
    from drainer.lifecycle.ec2_events import Ec2Target
    from drainer.lifecycle.ec2_handover import SoFar

log = logging.getLogger("drainer.lifecycle.ec2_events")

Listed = list[tuple[str, float | None, bool]]
"""EC2's scheduled events for an instance: (code, when it begins, whether it is over)."""

SAME_EVENT_SECONDS = 60.0
"""An EC2 event that begins within this of the change's start (AWS Health's window)
is the change's own: the same window."""

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


def _listed(event: Ec2Event, ec2: aws.Client) -> Listed | None:
    """EC2's scheduled events for a scheduled change's instance (DescribeInstanceStatus,
    asked once); None for another event, one with no window, or when EC2 cannot be
    asked (no answer: the update is acted on)."""
    if event.kind is not Ec2Kind.SCHEDULED_CHANGE or event.acts_at is None:
        return None
    try:
        return aws.scheduled_events(ec2, event.instance_id)
    except AwsError:
        return None


def _over(event: Ec2Event, listed: Listed) -> Skip | None:
    """A Skip when EC2 lists the scheduled change's window as over: an event of EC2's
    that begins then is completed or canceled, and none that begins then is pending
    (an update about a change closed since, or moved: its old window). None when EC2
    lists nothing at that moment."""
    window = event.acts_at
    if window is None:
        return None
    then = [(code, over) for code, at, over in listed if _near(at, window)]
    if not then or not all(over for _, over in then):
        return None
    return Skip(
        f"{EC2_EVENT_NAMES[event.kind]} of {event.event_time} about instance "
        f"{event.instance_id}: EC2 lists its window ({iso(window)}) as over ({then[0][0]} "
        "completed or canceled): the update came after the change's close; its node is "
        "left alone"
    )


_EC2_CODES = (
    ("RETIREMENT", "instance-retirement"),
    ("_STOP_", "instance-stop"),
    ("SYSTEM_REBOOT", "system-reboot"),
    ("INSTANCE_REBOOT", "instance-reboot"),
    ("MAINTENANCE", "system-maintenance"),
)
"""A part of AWS Health's eventTypeCode, and EC2's code for that kind of scheduled
event (DescribeInstanceStatus): the first part that matches."""


def ec2_code(health_code: str) -> str:
    """EC2's code for the kind of a scheduled change AWS Health names; "" for a kind
    EC2 does not list (a termination)."""
    return next((ec2 for part, ec2 in _EC2_CODES if part in health_code.upper()), "")


def _near(at: float | None, moment: float) -> bool:
    """Whether EC2's event begins at `moment`: within SAME_EVENT_SECONDS of it."""
    return at is not None and abs(at - moment) <= SAME_EVENT_SECONDS


def _of_kind(event: Ec2Event, listed: Listed, *, over: bool) -> list[float]:
    """When EC2's events of the change's kind begin: those over, or those pending."""
    code = ec2_code(event.detail_code)
    return [at for c, at, done in listed if c == code and done is over and at is not None]


def _moved_to(event: Ec2Event, listed: Listed) -> float | None:
    """Where EC2 moved the scheduled change: the earliest pending event of its kind
    EC2 lists, when it lists nothing at the change's window; None otherwise."""
    window = event.acts_at
    if window is None or any(_near(at, window) for _, at, _ in listed):
        return None
    return min(_of_kind(event, listed, over=False), default=None)


def as_ec2_lists(
    found: Ec2Target, clients: aws.AwsClients, so_far: SoFar | None
) -> tuple[Skip | None, Ec2Target, SoFar | None]:
    """A scheduled change as EC2 lists it (its events asked once): the change moved
    to EC2's time (`_ec2_time`), where the drain's deadline and schedule are then
    taken from; then whether EC2 lists that time as over (`over_in_ec2_mid_chain`)."""
    event, listed = found.event, _listed(found.event, clients.ec2)
    moved, how = _ec2_time(event, listed, so_far)
    at = moved if moved is not None else event.acts_at
    pending = _of_kind(event, listed, over=False) if listed is not None else []
    if at is not None and any(_near(t, at) for t in pending):
        event = replace(event, listed_at=at)  # EC2 lists it pending then
    if moved is not None:
        window = event.acts_at
        log.warning(
            "scheduled change %s of instance %s at %s, not at the event's window (%s): %s; "
            "it was moved, and the drain goes toward that time",
            event.detail_code,
            found.instance_id,
            iso(moved),
            iso(window) if window is not None else "?",
            how,
            extra={"moved_to": iso(moved)},
        )
        event = replace(event, acts_at=moved, announced_at=window)
    found = replace(found, event=event)
    stale, so_far = over_in_ec2_mid_chain(found, clients, so_far, listed)
    return stale, found, so_far


def _ec2_time(
    event: Ec2Event, listed: Listed | None, so_far: SoFar | None
) -> tuple[float | None, str]:
    """The change's time where it is not the event's window, and how it is known: a
    pending event of its kind EC2 lists elsewhere (`_moved_to`); else, when EC2 lists
    nothing at the window (or cannot be asked), the time the chain's step before
    drained toward (its mark: one failed call, or a moved event EC2 then canceled,
    does not bring back a window EC2 moved), or, for a schedule made again because
    EC2 moved the change, where EC2 lists it over. (None, "") otherwise."""
    window = event.acts_at
    if listed is not None:
        moved = _moved_to(event, listed)
        if moved is not None:
            return moved, "EC2 lists it there"
        if window is None or any(_near(at, window) for _, at, _ in listed):
            return None, ""
    read = _last_read(event, so_far)
    if read is None and listed is not None and event.schedule.endswith(AGAIN_SUFFIX):
        read = min(_of_kind(event, listed, over=True), default=None)
    why = "EC2 could not be asked" if listed is None else "EC2 lists nothing pending for it"
    return read, why + "; it was drained or scheduled for that time"


def _last_read(event: Ec2Event, so_far: SoFar | None) -> float | None:
    """EC2's time for the change as the chain's step before read it, when it was not
    the event's window; None otherwise."""
    window, read = event.acts_at, so_far.ec2_at if so_far is not None else None
    if window is None or read is None or _near(read, window):
        return None
    return read


def not_in_service(
    found: Ec2Target,
    clients: aws.AwsClients,
    listed: Listed | None = None,
) -> str:
    """Why the instance is not one to release now; "" when it is. `listed`: EC2's
    scheduled events for it, when already asked."""
    instance_id = found.instance_id
    if found.identity.state != "running":
        return f"instance {instance_id} is {found.identity.state}: nothing to release"
    if found.asg_name and found.lifecycle_state != "InService":
        return (
            f"instance {instance_id} is {found.lifecycle_state or 'in no known state'} in "
            f"{found.asg_name}, not InService: its node stays cordoned"
        )
    if listed is None:
        listed = aws.scheduled_events(clients.ec2, instance_id)
    starts = found.event.acts_at
    pending = [
        f"{code}" + (f" at {iso(at)}" if at is not None else "")
        for code, at, over in listed
        if not over and (starts is None or not _near(at, starts))
    ]
    if pending:
        return (
            f"EC2 still has {', '.join(pending)} scheduled for instance {instance_id}: "
            "its node stays cordoned for it"
        )
    return ""


def over_in_ec2_mid_chain(
    found: Ec2Target,
    clients: aws.AwsClients,
    so_far: SoFar | None,
    listed: Listed | None,
) -> tuple[Skip | None, SoFar | None]:
    """A Skip when EC2 lists the scheduled change's window as over (`_over`; `listed`:
    its events, None when EC2 could not be asked). A step of a chain that recorded its
    drain, whose change is so over (closed while an invocation of it ran, which the
    close cannot release) on an instance in service that nothing else is scheduled
    for, is not left alone: it goes on to release the node (SoFar.over)."""
    stale = None if listed is None else _over(found.event, listed)
    if stale is None or listed is None or so_far is None or not so_far.recorded:
        return stale, so_far
    if not_in_service(found, clients, listed):
        return stale, so_far
    window = found.event.acts_at
    over = (
        f"EC2 lists the window of scheduled change {found.event.detail_code} "
        f"({iso(window) if window is not None else '?'}) as over (completed or canceled)"
    )
    return None, replace(so_far, over=over)
