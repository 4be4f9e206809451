"""Scaling activities for moto's Auto Scaling: a group's history of launches.

moto 5.2.5 answers DescribeScalingActivities with an empty list, whatever the group
has done. The refresh plan reads a group's recent launches from it (how long a new
instance took to be InService: drainer/plan/history.py), so awssim keeps,
explicitly, a ledger per account and region (a moto backend, so moto's reset clears
it) of the activities a scenario gives a group (`add_launch`: an instance launched
at StartTime, InService at EndTime, as Auto Scaling records it), and answers
DescribeScalingActivities from it as AWS does: the group's activities, the most
recent first, at most MaxRecords (100 by default) a page, with a NextToken. Every
call received is recorded (`calls`).
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from moto.autoscaling.responses import AutoScalingResponse
from moto.core.base_backend import BackendDict, BaseBackend
from moto.core.responses import ActionResult

LAUNCHING = "Launching a new EC2 instance: {}"
"""Auto Scaling's Description of a launch activity."""
MAX_RECORDS = 100


@dataclass(frozen=True)
class Activity:
    asg_name: str
    description: str
    cause: str
    start: datetime
    end: datetime | None
    status: str
    activity_id: str

    def answer(self) -> dict[str, Any]:
        """The activity as DescribeScalingActivities lists it."""
        found: dict[str, Any] = {
            "ActivityId": self.activity_id,
            "AutoScalingGroupName": self.asg_name,
            "Description": self.description,
            "Cause": self.cause,
            "StartTime": self.start,
            "StatusCode": self.status,
            "Progress": 100 if self.end is not None else 50,
            "Details": "{}",
        }
        if self.end is not None:
            found["EndTime"] = self.end
        return found


class ActivityLedger(BaseBackend):
    """The activities of each group, and the DescribeScalingActivities calls received."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.lock = threading.Lock()
        self.activities: list[Activity] = []
        self.received: list[dict[str, Any]] = []

    def add_launch(
        self,
        asg_name: str,
        instance_id: str,
        start: float,
        end: float | None,
        *,
        status: str = "Successful",
        cause: str = "an instance refresh",
    ) -> None:
        """A launch of `instance_id` into the group begun at `start` (epoch seconds)
        and InService at `end` (None: still in progress)."""
        if end is not None and end < start:
            raise ValueError(f"a launch cannot end ({end}) before it starts ({start})")
        when = datetime.fromtimestamp(start, UTC)
        done = None if end is None else datetime.fromtimestamp(end, UTC)
        activity = Activity(
            asg_name,
            LAUNCHING.format(instance_id),
            f"At {when:%Y-%m-%dT%H:%M:%SZ} {cause} launched an instance.",
            when,
            done,
            status,
            str(uuid.uuid4()),
        )
        with self.lock:
            self.activities.append(activity)

    def describe(self, params: dict[str, Any]) -> dict[str, Any]:
        asg_name = params.get("AutoScalingGroupName")
        limit = min(int(params.get("MaxRecords") or MAX_RECORDS), MAX_RECORDS)
        offset = int(params.get("NextToken") or 0)
        with self.lock:
            self.received.append({key: params.get(key) for key in _KEYS})
            mine = [a for a in self.activities if not asg_name or a.asg_name == asg_name]
        mine.sort(key=lambda a: a.start, reverse=True)
        page = mine[offset : offset + limit]
        answer: dict[str, Any] = {"Activities": [a.answer() for a in page]}
        if offset + limit < len(mine):
            answer["NextToken"] = str(offset + limit)
        return answer

    def calls(self) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(call) for call in self.received]


_KEYS = ("AutoScalingGroupName", "MaxRecords", "NextToken")

ledgers: BackendDict[ActivityLedger] = BackendDict(ActivityLedger, "autoscaling")


def ledger(account_id: str, region: str) -> ActivityLedger:
    found: ActivityLedger = ledgers[account_id][region]
    return found


def _describe_scaling_activities(self: AutoScalingResponse) -> ActionResult:
    params = dict(self._get_params())
    return ActionResult(ledger(self.current_account, self.region).describe(params))


def register() -> None:
    """Answer DescribeScalingActivities from the ledger (idempotent)."""
    AutoScalingResponse.describe_scaling_activities = _describe_scaling_activities  # type: ignore[method-assign]
