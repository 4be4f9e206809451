"""Faults on any AWS query-protocol action: a throttled DescribeInstances, a
DescribeAutoScalingGroups answering 503, as AWS answers them.

The lifecycle ledger (awssim.lifecycle) injects faults into the two calls it
implements; the drainer also reads EC2 and Auto Scaling through moto's own
actions, and a seeded chaos run throttles those too. This module queues faults
per account, region, service and action, and answers the next calls with them
before moto sees the request. Each fault answered is recorded (`injected`).

The error body follows the service's protocol, so botocore parses the code and
its retry policy reacts as it would to AWS: Auto Scaling (query protocol) sends
`<ErrorResponse><Error>...`, EC2 sends `<Response><Errors><Error>...` and throttles
with RequestLimitExceeded on HTTP 503.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from typing import Any

from moto.core.base_backend import BackendDict, BaseBackend
from moto.core.responses import BaseResponse

SERVICES = ("autoscaling", "ec2")
# HTTP status and message of each error code a fault may use, as the services send
# them (this module's faults and the lifecycle ledger's, awssim.lifecycle).
ERRORS: dict[str, tuple[int, str]] = {
    "Throttling": (400, "Rate exceeded"),
    "RequestLimitExceeded": (503, "Request limit exceeded."),
    "ServiceUnavailable": (503, "Service is unavailable. Please try again later."),
    "InternalFailure": (500, "An internal error occurred."),
    "ResourceContention": (500, "You already have a pending update to an Auto Scaling resource."),
    "AccessDenied": (403, "User is not authorized to perform this action (injected by awssim)"),
    "ValidationError": (400, "Injected validation error (awssim)"),
    "InvalidInstanceID.NotFound": (400, "The instance ID does not exist (injected by awssim)"),
}
_AUTOSCALING_XMLNS = "http://autoscaling.amazonaws.com/doc/2011-01-01/"


def error_response(service: str, code: str, message: str = "") -> tuple[int, str]:
    """The HTTP status and XML body of error `code`, in `service`'s protocol."""
    status, default = ERRORS[code]
    message, request = message or default, uuid.uuid4()
    if service == "ec2":
        return status, (
            f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message>"
            f"</Error></Errors><RequestID>{request}</RequestID></Response>"
        )
    side = "Receiver" if status >= 500 else "Sender"
    return status, (
        f'<ErrorResponse xmlns="{_AUTOSCALING_XMLNS}"><Error><Type>{side}</Type>'
        f"<Code>{code}</Code><Message>{message}</Message></Error>"
        f"<RequestId>{request}</RequestId></ErrorResponse>"
    )


class ApiFaults(BaseBackend):
    """Faults queued per (service, action), and those answered, per account/region."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.lock = threading.Lock()
        self.queued: dict[tuple[str, str], deque[str]] = {}
        self.answered: list[dict[str, Any]] = []

    def fail_next(
        self, service: str, action: str, code: str, count: int = 1, *, after: int = 0
    ) -> None:
        """Answer `count` calls of `action` with `code`, once `after` more calls of it
        were let through to moto (counted after the faults already queued for it)."""
        if service not in SERVICES:
            raise ValueError(f"service must be one of {SERVICES}, not {service!r}")
        if code not in ERRORS:
            raise ValueError(f"fault code must be one of {sorted(ERRORS)}, not {code!r}")
        if count < 1:
            raise ValueError(f"count must be at least 1, not {count}")
        with self.lock:
            queue = self.queued.setdefault((service, action), deque())
            queue.extend([""] * after + [code] * count)

    def take(self, service: str, action: str) -> str | None:
        """The code to answer this call with, or None to let moto answer it."""
        with self.lock:
            queue = self.queued.get((service, action))
            if not queue:
                return None
            code = queue.popleft()
            if not code:  # one of `after`'s: moto answers it
                return None
            self.answered.append(
                {"service": service, "action": action, "code": code, "time": time.time()}
            )
            return code

    def pending(self) -> dict[str, int]:
        """Faults not answered yet, by "service:Action"."""
        with self.lock:
            counts = {f"{s}:{a}": len([c for c in q if c]) for (s, a), q in self.queued.items()}
            return {key: count for key, count in counts.items() if count}

    def injected(self) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(a) for a in self.answered]


faults: BackendDict[ApiFaults] = BackendDict(ApiFaults, "ec2")


def api_faults(account_id: str, region: str) -> ApiFaults:
    found: ApiFaults = faults[account_id][region]
    return found


_original_call_action = BaseResponse.call_action


def _call_action(self: BaseResponse) -> Any:
    service = getattr(self, "service_name", "")
    if service in SERVICES:
        code = api_faults(self.current_account, self.region).take(service, self._get_action())
        if code is not None:
            status, body = error_response(service, code)
            return status, {"status": status, "Content-Type": "text/xml"}, body
    return _original_call_action(self)


def register() -> None:
    """Answer queued faults before moto does (idempotent)."""
    BaseResponse.call_action = _call_action  # type: ignore[method-assign]
