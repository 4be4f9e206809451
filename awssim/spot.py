"""The EventBridge events EC2 sends about a spot instance, as EventBridge delivers
them: the interruption warning (two minutes before EC2 reclaims the instance) and
the rebalance recommendation. moto sends neither; these build them."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"


def interruption_warning(
    account: str, region: str, instance_id: str, *, age: float = 0.0, action: str = "terminate"
) -> dict[str, Any]:
    """The warning for `instance_id`, sent `age` seconds ago; `action` is what EC2
    will do: terminate, stop or hibernate."""
    detail = {"instance-id": instance_id, "instance-action": action}
    return _event(INTERRUPTION, account, region, instance_id=instance_id, age=age, detail=detail)


def rebalance_recommendation(
    account: str, region: str, instance_id: str, *, age: float = 0.0
) -> dict[str, Any]:
    detail = {"instance-id": instance_id}
    return _event(REBALANCE, account, region, instance_id=instance_id, age=age, detail=detail)


def _event(
    detail_type: str,
    account: str,
    region: str,
    *,
    instance_id: str,
    age: float,
    detail: dict[str, Any],
) -> dict[str, Any]:
    sent = datetime.fromtimestamp(time.time() - age, UTC)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": "aws.ec2",
        "account": account,
        "time": sent.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [f"arn:aws:ec2:{region}a:instance/{instance_id}"],
        "detail": detail,
    }
