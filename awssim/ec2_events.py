"""The EventBridge events EC2 (and AWS Health) send about an instance, as
EventBridge delivers them: a spot instance's interruption warning (two minutes
before EC2 reclaims it) and rebalance recommendation, an AWS Health scheduled change
(retirement, maintenance), a state-change notification and an interruptible
capacity reservation's warning. moto sends none of them; these build them, field
for field as AWS's documented samples have them (tests/events/ holds one of each)."""

from __future__ import annotations

import time
import uuid
from email.utils import formatdate
from typing import Any

from awssim.events import envelope, iso

INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
HEALTH = "AWS Health Event"
STATE_CHANGE = "EC2 Instance State-change Notification"
CAPACITY_INTERRUPTION = "EC2 Capacity Reservation Instance Interruption Warning"
RETIREMENT = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"


def interruption_warning(
    account: str, region: str, instance_id: str, *, age: float = 0.0, action: str = "terminate"
) -> dict[str, Any]:
    """The warning for `instance_id`, sent `age` seconds ago; `action` is what EC2
    will do: terminate, stop or hibernate."""
    detail = {"instance-id": instance_id, "instance-action": action}
    return _ec2_event(INTERRUPTION, account, region, instance_id, age=age, detail=detail)


def rebalance_recommendation(
    account: str, region: str, instance_id: str, *, age: float = 0.0
) -> dict[str, Any]:
    detail = {"instance-id": instance_id}
    return _ec2_event(REBALANCE, account, region, instance_id, age=age, detail=detail)


def scheduled_change(
    account: str,
    region: str,
    instance_ids: list[str],
    *,
    starts_in: float,
    code: str = RETIREMENT,
    age: float = 0.0,
) -> dict[str, Any]:
    """AWS Health's scheduled change for `instance_ids`, its window starting
    `starts_in` seconds from now. Health writes its times as RFC 1123 dates."""
    now = time.time()
    start = now + starts_in
    detail = {
        "eventArn": f"arn:aws:health:{region}::event/EC2/{code}/{code}_{uuid.uuid4().hex[:8]}",
        "service": "EC2",
        "eventScopeCode": "ACCOUNT_SPECIFIC",
        "communicationId": uuid.uuid4().hex,
        "eventTypeCode": code,
        "eventTypeCategory": "scheduledChange",
        "startTime": formatdate(start, usegmt=True),
        "endTime": formatdate(start + 7200, usegmt=True),
        "lastUpdatedTime": formatdate(now - age, usegmt=True),
        "statusCode": "upcoming",
        "eventRegion": region,
        "eventDescription": [
            {"language": "en_US", "latestDescription": f"{code} for your instances."}
        ],
        "affectedEntities": [{"entityValue": i} for i in instance_ids],
        "affectedAccount": account,
    }
    return envelope(
        HEALTH,
        "aws.health",
        account=account,
        region=region,
        at=now - age,
        resources=list(instance_ids),
        detail=detail,
    )


def state_change(
    account: str, region: str, instance_id: str, state: str, *, age: float = 0.0
) -> dict[str, Any]:
    """EC2's notice that the instance entered `state` (stopping, shutting-down...)."""
    detail = {"instance-id": instance_id, "state": state}
    return _ec2_event(STATE_CHANGE, account, region, instance_id, age=age, detail=detail)


def capacity_interruption(
    account: str, region: str, instance_id: str, *, age: float = 0.0, notice: float = 120.0
) -> dict[str, Any]:
    """An interruptible capacity reservation's warning: EC2 terminates the instance
    `notice` seconds after the warning (two minutes, as AWS documents it)."""
    sent = time.time() - age
    detail = {
        "instance-id": instance_id,
        "instance-action": "terminate",
        "instance-termination-time": iso(sent + notice),
        "azId": f"{region[:2]}{region.split('-')[1][0]}{region[-1]}-az1",
    }
    return _ec2_event(CAPACITY_INTERRUPTION, account, region, instance_id, age=age, detail=detail)


def _ec2_event(
    kind: str, account: str, region: str, instance_id: str, *, age: float, detail: dict[str, Any]
) -> dict[str, Any]:
    return envelope(
        kind,
        "aws.ec2",
        account=account,
        region=region,
        at=time.time() - age,
        resources=[f"arn:aws:ec2:{region}:{account}:instance/{instance_id}"],
        detail=detail,
    )
