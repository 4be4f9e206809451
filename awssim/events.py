"""The EventBridge envelope every emulated AWS event comes in, as EventBridge
delivers it to a target: Auto Scaling's lifecycle actions (awssim/lifecycle.py)
and EC2's own events about an instance (awssim/ec2_events.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any


def envelope(
    detail_type: str,
    source: str,
    *,
    account: str,
    region: str,
    at: float,
    resources: list[str],
    detail: dict[str, Any],
) -> dict[str, Any]:
    """One event sent at `at` (epoch seconds), with a fresh id."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": source,
        "account": account,
        "time": iso(at),
        "region": region,
        "resources": resources,
        "detail": detail,
    }


def iso(epoch: float) -> str:
    """Epoch seconds as EventBridge writes a time: RFC 3339, UTC, whole seconds."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
