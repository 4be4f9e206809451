"""The EventBridge events EC2 sends about a spot instance, as EventBridge delivers
them: the interruption warning (two minutes before EC2 reclaims the instance) and
the rebalance recommendation. moto sends neither; these build them."""

from __future__ import annotations

import time
from typing import Any

from awssim.events import envelope

INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"


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
