"""EC2 instances' LaunchTime as EC2 keeps it, which moto does not.

EC2's LaunchTime is the instance's last start: a stop and a start move it. moto
sets it once, at RunInstances, and never again. The drainer reads it to tell an
EC2 event that came late about the instance from one about an earlier life of it
(drainer/lifecycle/ec2_events.py), so awssim:

- starts every instance it runs LAUNCHED_AGO in the past, as a node group that has
  served a while looks (the tests' events, dated minutes ago, are then about the
  instance's present life, as they would be);
- sets LaunchTime to now when StartInstances starts a stopped instance again.

Each restart is recorded (`restarts`).
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from moto.core.utils import utcnow
from moto.ec2.models.instances import Instance

LAUNCHED_AGO = timedelta(days=1)

_LOCK = threading.Lock()
_RESTARTS: list[dict[str, Any]] = []


def restarts() -> list[dict[str, Any]]:
    """The instances started again so far: instance_id and the new launch_time."""
    with _LOCK:
        return list(_RESTARTS)


def register() -> None:
    """Wrap moto's Instance once (idempotent)."""
    if getattr(Instance, "_awssim_launch_time", False):
        return
    created = Instance.__init__
    started = Instance.start

    def __init__(self: Instance, *args: Any, **kwargs: Any) -> None:
        created(self, *args, **kwargs)
        self.launch_time = self.launch_time - LAUNCHED_AGO

    def start(self: Instance) -> Any:
        previous = started(self)
        if previous.name != "running":
            self.launch_time = utcnow()
            with _LOCK:
                _RESTARTS.append({"instance_id": self.id, "launch_time": self.launch_time})
        return previous

    Instance.__init__ = __init__  # type: ignore[method-assign]
    Instance.start = start  # type: ignore[method-assign]
    Instance._awssim_launch_time = True  # type: ignore[attr-defined]


def schedule_events(
    account: str, region: str, instance_id: str, events: list[dict[str, Any]]
) -> None:
    """Give an instance EC2's scheduled events (DescribeInstanceStatus's `Events`:
    Code, Description, NotBefore...), which moto never schedules: its serializer
    answers them from the instance's `events`. A description beginning "[Completed]"
    or "[Canceled]" is one that is over, as EC2 writes it."""
    from moto.ec2.models import ec2_backends

    instance = ec2_backends[account][region].get_instance(instance_id)
    instance.events = [dict(event) for event in events]  # type: ignore[attr-defined]
