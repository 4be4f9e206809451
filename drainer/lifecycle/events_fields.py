"""The checks every parsed event's fields pass, and `Skip`, what an event the drainer
does not act on becomes (drainer/lifecycle/events.py: parse_event).

Every value that reaches an AWS call or a deadline is checked once, here: an
instance id has EC2's shape, a group, hook or token name holds no control
character, a time parses. A field that fails raises `Malformed`, which the event's
parser turns into a `Skip` with `malformed=True`: an error in the log, never a
crash, never retried.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

INSTANCE_ID = re.compile(r"i-(?:[0-9a-f]{8}|[0-9a-f]{17})")
"""An EC2 instance id: i- and 8 (older instances) or 17 hex digits."""
AWS_NAME_MAX = 255
"""The longest Auto Scaling group, lifecycle hook or action token name AWS accepts."""


@dataclass(frozen=True)
class Skip:
    """An event the drainer does not act on, and why (for the log)."""

    reason: str
    malformed: bool = False
    """The event claims to be one the drainer acts on but a field is missing, of the
    wrong type or out of bounds: logged as an error, never retried."""
    ours: bool = False
    """The instance is the function's, left alone for now (in a warm pool): a change's
    close still marks the change closed for it (drainer/lifecycle/closed.py)."""


class Malformed(Exception):
    """A required field is missing, has the wrong type or is out of bounds; the
    event's parser turns it into a malformed `Skip`, never lets it out."""


LAST_TIME = datetime(3000, 1, 1, tzinfo=UTC).timestamp()
"""An event's times are before this (and not before 1970): past it, a deadline's log
line, a notice and a schedule could not write the time (year 10000 is out of range)."""


def epoch(text: str) -> float | None:
    """An event's RFC 3339 time in epoch seconds; None when it does not parse or is
    outside 1970 to 3000 (in_range)."""
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)  # EventBridge writes UTC
        return in_range(moment.timestamp())
    except (ValueError, OverflowError):
        return None


def in_range(seconds: float) -> float | None:
    """`seconds`, when an event's time may be that (0 to LAST_TIME); else None."""
    return seconds if 0 <= seconds < LAST_TIME else None


def iso(seconds: float) -> str:
    """Epoch seconds as an event writes a time: RFC 3339, UTC, to the second."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def required(source: Mapping[str, Any], key: str, prefix: str = "") -> str:
    """A string field that must be there and not blank; `prefix` names where it sits
    in the event ("detail.") for the message."""
    value = source.get(key)
    if value is None:
        raise Malformed(f"field '{prefix}{key}' is missing")
    if not isinstance(value, str):
        raise Malformed(f"field '{prefix}{key}' is a {type(value).__name__}, not a string")
    if not value.strip():
        raise Malformed(f"field '{prefix}{key}' is empty")
    return value


def optional(source: Mapping[str, Any], key: str, prefix: str = "") -> str:
    """A string field that may be missing ("" then), but is a string when there."""
    value = source.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Malformed(f"field '{prefix}{key}' is a {type(value).__name__}, not a string")
    return value


def instance_id(detail: Mapping[str, Any], key: str) -> str:
    """An EC2 instance id, checked before any AWS call sees it (a NUL byte in one once
    crashed botocore's parser of EC2's answer)."""
    value = required(detail, key, "detail.")
    if not INSTANCE_ID.fullmatch(value):
        raise Malformed(
            f"field 'detail.{key}' is {shown(value)}, not an EC2 instance id "
            "(i- followed by 8 or 17 hex digits)"
        )
    return value


def aws_name(detail: Mapping[str, Any], key: str) -> str:
    """A name the drainer passes to Auto Scaling as it is: at most AWS_NAME_MAX
    characters, none of them a control character (AWS's own pattern for them)."""
    value = required(detail, key, "detail.")
    if len(value) > AWS_NAME_MAX or any(_not_xml(c) for c in value):
        raise Malformed(
            f"field 'detail.{key}' is {shown(value)}: control characters or more than "
            f"{AWS_NAME_MAX} characters, which AWS does not accept"
        )
    return value


def _not_xml(c: str) -> bool:
    """A character outside AWS's pattern for these names (XML's): a C0 control but tab
    and line ends, a lone surrogate (it would not even encode), U+FFFE or U+FFFF."""
    return (c < " " and c not in "\t\n\r") or "\ud800" <= c <= "\udfff" or c in "\ufffe\uffff"


def shown(value: str) -> str:
    """A field's value for a log line: escaped and cut short."""
    return repr(value[:40] + ("..." if len(value) > 40 else ""))
