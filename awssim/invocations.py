"""Asynchronous Lambda invocations, queued instead of run.

moto's Invoke runs the function in Docker, which these machines do not have. The
drainer only ever invokes itself asynchronously (InvocationType "Event", the
hand-over of a long drain), so awssim answers those with 202 and keeps the payload
in a queue per account and region; a test or the demo pops it and runs the handler
itself. Synchronous invocations go to moto (which needs Docker), unless a runner
is registered for the function: `run_synchronously(name, runner)` answers them by
calling the runner in process, as `make deploy`'s self-check needs.

The function need not exist in moto: the drainer's function ARN comes from its
Lambda context, and tests should not have to upload a zip to see a hand-over.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from moto.awslambda.responses import LambdaResponse
from moto.core.base_backend import BackendDict, BaseBackend


class InvocationQueue(BaseBackend):
    """Asynchronous invocations received, oldest first."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.lock = threading.Lock()
        self.queue: deque[dict[str, Any]] = deque()

    def push(self, function_name: str, qualifier: str | None, body: str | bytes) -> None:
        text = body.decode() if isinstance(body, bytes) else body
        payload: object = json.loads(text) if text else {}
        with self.lock:
            self.queue.append(
                {
                    "function_name": function_name,
                    "qualifier": qualifier,
                    "payload": payload,
                    "time": time.time(),
                }
            )

    def pending(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.queue)

    def pop(self) -> dict[str, Any] | None:
        with self.lock:
            return self.queue.popleft() if self.queue else None


queues: BackendDict[InvocationQueue] = BackendDict(InvocationQueue, "lambda")


def invocation_queue(account_id: str, region: str) -> InvocationQueue:
    found: InvocationQueue = queues[account_id][region]
    return found


_original_invoke = LambdaResponse.invoke
_runners: dict[str, Callable[[object], object]] = {}


def run_synchronously(function_name: str, runner: Callable[[object], object] | None) -> None:
    """Answer RequestResponse invocations of `function_name` with `runner(payload)`,
    run in this process (None: back to moto)."""
    if runner is None:
        _runners.pop(function_name, None)
    else:
        _runners[function_name] = runner


def _invoke(self: LambdaResponse) -> Any:
    function_name = unquote(self.path.rsplit("/", 2)[-2])
    if self.headers.get("X-Amz-Invocation-Type") != "Event":
        runner = _runners.get(function_name)
        if runner is None:
            return _original_invoke(self)
        body = self.body.decode() if isinstance(self.body, bytes) else (self.body or "")
        answer = runner(json.loads(body) if body else {})
        return 200, {"status": 200, "content-type": "application/json"}, json.dumps(answer)
    qualifier = self._get_param("qualifier") or self._get_param("Qualifier")
    invocation_queue(self.current_account, self.region).push(
        function_name, qualifier, self.body or ""
    )
    return 202, {"status": 202, "content-type": "application/json"}, ""


def register() -> None:
    """Queue asynchronous invocations instead of running them (idempotent)."""
    LambdaResponse.invoke = _invoke  # type: ignore[method-assign]
