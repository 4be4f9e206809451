"""Structured JSON logs (aws-lambda-powertools Logger) with fixed keys.

Every module logs through the standard `logging` module under the `drainer`
logger; `configure()` routes those records through one powertools handler, so
each line is JSON with the keys bound for the invocation (instance_id, node_name,
asg_name, lifecycle_hook_name, cluster). A filter redacts anything that looks like
an EKS bearer token, whatever logged it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import IO, Any

SERVICE = "eks-node-drainer"
FIXED_KEYS = ("instance_id", "node_name", "asg_name", "lifecycle_hook_name", "cluster")
_TOKEN = re.compile(r"k8s-aws-v1\.[A-Za-z0-9_\-]+")
_SIGNATURE = re.compile(r"(X-Amz-Signature=|X-Amz-Credential=|X-Amz-Security-Token=)[^&\s\"']+")


class _State:
    logger: Any = None


_STATE = _State()


class RedactTokens(logging.Filter):
    """Never let a bearer token or a presigned URL's signature reach a log line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = _SIGNATURE.sub(r"\1[redacted]", _TOKEN.sub("k8s-aws-v1.[redacted]", message))
        if redacted != message:
            record.msg = redacted
            record.args = None
        return True


def configure(level: str = "INFO", stream: IO[str] | None = None) -> Any:
    """Set up JSON logging once per process (a Lambda container); returns the Logger."""
    if _STATE.logger is None:
        from aws_lambda_powertools import Logger

        _STATE.logger = Logger(service=SERVICE, level=level, stream=stream)
        handler = _STATE.logger.registered_handler
        handler.addFilter(RedactTokens())
        package = logging.getLogger("drainer")
        package.handlers = [handler]
        package.propagate = False
    elif stream is not None:
        _STATE.logger.registered_handler.setStream(stream)
    _STATE.logger.setLevel(level)
    logging.getLogger("drainer").setLevel(level)
    # botocore at DEBUG prints presigned URLs; keep it quiet whatever LOG_LEVEL says.
    logging.getLogger("botocore").setLevel(max(logging.INFO, logging.getLogger("botocore").level))
    return _STATE.logger


def bind(**keys: str) -> None:
    """Add keys to every following log line of this invocation."""
    if _STATE.logger is not None:
        _STATE.logger.append_keys(**{k: v for k, v in keys.items() if v})


def reset() -> None:
    """Forget the keys of the previous invocation (containers are reused)."""
    if _STATE.logger is not None:
        _STATE.logger.remove_keys([*FIXED_KEYS, "event_id", "trigger"])


# Keys a drain event must not take, or its line breaks: `logging` refuses an extra
# that names a LogRecord attribute (KeyError: "Attempt to overwrite 'name' in
# LogRecord"), and powertools overwrites or drops its own keys (message, level,
# timestamp...). A contract key never is one of these (tests/test_logs.py); one
# that slips through is renamed with a trailing underscore rather than lost.
POWERTOOLS_KEYS = frozenset(
    {
        "level",
        "location",
        "message",
        "timestamp",
        "service",
        "sampling_rate",
        "xray_trace_id",
        "exception",
        "exception_name",
        "exception_notes",
        "stack_trace",
        "cold_start",
        "function_name",
        "function_memory_size",
        "function_arn",
        "function_request_id",
    }
)
RESERVED_KEYS = frozenset(
    set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"} | POWERTOOLS_KEYS
)


def safe_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """`fields` with every reserved key renamed `key_`."""
    return {(f"{k}_" if k in RESERVED_KEYS else k): v for k, v in fields.items()}


def drain_event(
    logger: logging.Logger, message: str, fields: Mapping[str, Any], level: int = logging.INFO
) -> None:
    """One drain event as one log line: `message` for people, `fields` (the log
    contract, DrainEvent.fields() in drainer/engine/report.py) as top-level JSON keys, at
    `level` (the one EVENT_LEVELS gives its kind)."""
    logger.log(level, message, extra=safe_fields(fields))
