"""Structured JSON logs with fixed keys, one JSON object per line.

Every module logs through the standard `logging` module under the `drainer`
logger; `configure()` routes those records through one handler, so each line is
JSON with the keys bound for the invocation (instance_id, node_name, asg_name,
lifecycle_hook_name, cluster). A filter redacts anything that looks like an EKS
bearer token, whatever logged it.

The line is the one aws-lambda-powertools' Logger writes (which wrote it before):
`level`, `location`, `message`, `timestamp`, `service`, the invocation's keys, the
record's own, an exception's (`exception`, `exception_name`, `stack_trace`) and
`xray_trace_id`, None values left out (a message stays the string it is, where
powertools turned one that reads as JSON, "42", into its value). It is written
here: powertools' formatter took twice the CPU of this one for each line (a drain
writes two a pod), and its import (about 55 ms) came before a drain's first
request; powertools is now imported at a drain's end only, for its Metrics.
"""

from __future__ import annotations

import dis
import logging
import os
import re
import sys
import time
import traceback
from collections.abc import Mapping
from typing import IO, Any

from drainer import jsonio

SERVICE = "eks-node-drainer"
FIXED_KEYS = ("instance_id", "node_name", "asg_name", "lifecycle_hook_name", "cluster")
_TOKEN = re.compile(r"k8s-aws-v1\.[A-Za-z0-9_\-]+")
_SIGNATURE = re.compile(r"(X-Amz-Signature=|X-Amz-Credential=|X-Amz-Security-Token=)[^&\s\"']+")
_SIGNATURE_IN_JSON = re.compile(
    r"(X-Amz-Signature=|X-Amz-Credential=|X-Amz-Security-Token=)[^&\s\"'\\]+"
)
"""In a JSON line the value also stops at a backslash: a character after it comes
escaped (\\", \\n), and the escape must stay or the line breaks."""
_RECORD_OWN = frozenset(
    set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}
)
"""A LogRecord's own attributes: every other one is an `extra`, a key of the line."""
_NOT_EXTRAS = _RECORD_OWN | {"level", "location", "timestamp"}
"""Left out of a line's extras: an extra named as one of the line's first keys is
dropped, as powertools did."""


class JsonLines(logging.Formatter):
    """A record as one line of JSON: the line's keys in a fixed order, None left out."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: dict[str, Any] = {}
        """The invocation's keys (`bind`), on every line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "level": record.levelname,
            "location": f"{record.funcName}:{record.lineno}",
            "message": record.msg if isinstance(record.msg, dict) else record.getMessage(),
            "timestamp": _timestamp(record),
            "service": SERVICE,
            **self.keys,
        }
        for key, value in record.__dict__.items():
            if key not in _NOT_EXTRAS:
                line[key] = value
        if isinstance(record.exc_info, tuple) and record.exc_info[0] is not None:
            for key, value in _exception(self, record.exc_info).items():
                line.setdefault(key, value)
        trace = os.environ.get("_X_AMZN_TRACE_ID")
        if trace:
            line["xray_trace_id"] = trace.split(";")[0].replace("Root=", "")
        # The filter redacted the message; an exception's text or an extra may hold a
        # token or a signature too, so the whole line is redacted as well.
        text = jsonio.line({k: v for k, v in line.items() if v is not None})
        return redact(text, _SIGNATURE_IN_JSON)


def redact(text: str, signature: re.Pattern[str] = _SIGNATURE) -> str:
    """`text` with every EKS bearer token and every presigned URL's signature,
    credential and session token replaced."""
    if "k8s-aws-v1." in text:
        text = _TOKEN.sub("k8s-aws-v1.[redacted]", text)
    if "X-Amz-" in text:
        text = signature.sub(r"\1[redacted]", text)
    return text


def _timestamp(record: logging.LogRecord) -> str:
    """2026-11-28 22:00:21,227+0000: local time (UTC on Lambda), milliseconds."""
    second = int(record.created)
    cached = _Second.last
    if cached[0] != second:
        moment = time.localtime(second)
        cached = (second, time.strftime("%Y-%m-%d %H:%M:%S", moment), time.strftime("%z", moment))
        _Second.last = cached  # one tuple, swapped whole: threads read it as one
    return f"{cached[1]},{int(record.msecs):03d}{cached[2]}"


class _Second:
    """The last second a line was written in, as text, and its zone: one localtime
    a second, not one a line."""

    last: tuple[int, str, str] = (-1, "", "")


def _exception(formatter: logging.Formatter, info: Any) -> dict[str, Any]:
    kind, error, trace = info
    return {
        "exception": formatter.formatException(info),
        "exception_name": kind.__name__,
        "exception_notes": getattr(error, "__notes__", None),
        "stack_trace": {
            "type": kind.__name__,
            "value": error,
            "module": type(error).__module__,
            "frames": [
                {"file": f.filename, "line": f.lineno, "function": f.name, "statement": f.line}
                for f in traceback.extract_tb(trace)
            ],
        },
    }


class _State:
    handler: logging.StreamHandler[IO[str]] | None = None
    formatter: JsonLines | None = None


_STATE = _State()


class RedactTokens(logging.Filter):
    """Never let a bearer token or a presigned URL's signature reach a log line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact(message)
        if redacted != message:
            record.msg = redacted
            record.args = None
        return True


def configure(level: str = "INFO", stream: IO[str] | None = None) -> logging.StreamHandler[IO[str]]:
    """Set up JSON logging once per process (a Lambda container), on standard output
    unless `stream`; returns the handler."""
    if _STATE.handler is None:
        _STATE.formatter = JsonLines()
        _STATE.handler = logging.StreamHandler(stream or sys.stdout)
        _STATE.handler.setFormatter(_STATE.formatter)
        _STATE.handler.addFilter(RedactTokens())
        package = logging.getLogger("drainer")
        package.handlers = [_STATE.handler]
        package.propagate = False
    elif stream is not None:
        _STATE.handler.setStream(stream)
    logging.getLogger("drainer").setLevel(level)
    # botocore at DEBUG prints presigned URLs; keep it quiet whatever LOG_LEVEL says.
    logging.getLogger("botocore").setLevel(max(logging.INFO, logging.getLogger("botocore").level))
    return _STATE.handler


def bind(**keys: str) -> None:
    """Add keys to every following log line of this invocation."""
    if _STATE.formatter is not None:
        _STATE.formatter.keys.update({k: v for k, v in keys.items() if v})


def bound() -> dict[str, Any]:
    """The invocation's keys now, each of them (None: not bound), for a line logged
    later by a thread that outlives the invocation: passed as its `extra`, they name
    the invocation it came from, not the container's next one."""
    keys = _STATE.formatter.keys if _STATE.formatter is not None else {}
    return {key: keys.get(key) for key in (*FIXED_KEYS, "event_id", "trigger")}


def reset() -> None:
    """Forget the keys of the previous invocation (containers are reused)."""
    if _STATE.formatter is not None:
        for key in (*FIXED_KEYS, "event_id", "trigger"):
            _STATE.formatter.keys.pop(key, None)


# Keys a drain event must not take, or its line breaks: `logging` refuses an extra
# that names a LogRecord attribute (KeyError: "Attempt to overwrite 'name' in
# LogRecord"), and a line's own keys (message, level, timestamp...: those of the
# format powertools' Logger wrote, kept) would be overwritten. A contract key never
# is one of these (tests/test_logs.py); one that slips through is renamed with a
# trailing underscore rather than lost.
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
RESERVED_KEYS = _RECORD_OWN | POWERTOOLS_KEYS


def safe_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """`fields` with every reserved key renamed `key_`."""
    return {(f"{k}_" if k in RESERVED_KEYS else k): v for k, v in fields.items()}


def drain_event(
    logger: logging.Logger, message: str, fields: Mapping[str, Any], level: int = logging.INFO
) -> None:
    """One drain event as one log line: `message` for people, `fields` (the log
    contract, DrainEvent.fields() in drainer/engine/report.py) as top-level JSON keys, at
    `level` (the one EVENT_LEVELS gives its kind). Its location is this function's, as
    logger.log would find it, without walking the stack for it (a drain writes two
    lines a pod)."""
    if logger.isEnabledFor(level):
        extra = safe_fields(fields)
        logger.handle(
            logger.makeRecord(logger.name, level, __file__, _LINE, message, (), None, _FUNC, extra)
        )


_FUNC = drain_event.__name__
_LINE = next(
    i.positions.lineno
    for i in dis.get_instructions(drain_event)
    if i.argval == "handle" and i.positions is not None and i.positions.lineno is not None
)
"""The line of drain_event's call into logging: the one logger.log would have named."""
