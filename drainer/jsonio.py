"""JSON on the hot paths: the API server's watch events, answers and request bodies,
and every log line, through orjson, a compiled codec, where it is installed (the
Lambda zip and the command line's wheel ship it). A drain reads each of its pods
some eight times (its watch events, the lists, the forecast's) and writes two log
lines a pod: the standard library's json was a fifth of the drain's CPU, which on
Lambda is wall time (issue 39, item 10).

The standard library's json stays the answer's judge: what orjson refuses, json is
asked too, so nothing json read before is refused now (a lone surrogate escape, a
NaN, a number past a double's range), and nothing json wrote is refused (a value
nested past orjson's depth). One difference is left, and the API server never sends
it: an integer past 64 bits is read as a float (every integer of the objects a drain
reads is at most 64 bits; the server validates them).
"""

from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover - the zip and the wheel install it
    orjson = None  # type: ignore[assignment]

_LINE = json.JSONEncoder(default=str, separators=(",", ":"), ensure_ascii=False)
"""The log line's encoder where orjson cannot: one encoder, not one a call."""

_LINE_OPTIONS = (
    0
    if orjson is None
    else orjson.OPT_NON_STR_KEYS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
"""A line's values as json's `default=str` wrote them: a dataclass or a datetime as
its str(), a key that is not a string as json turned it into one."""


def loads(data: bytes | bytearray | str) -> Any:
    """The JSON document in `data`; ValueError (json.JSONDecodeError) when it is not
    one, as json.loads raised."""
    if orjson is not None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # json reads a few documents orjson refuses: let json judge
    return json.loads(data)


def dumps(value: Any) -> bytes:
    """A request's body: `value` as compact UTF-8 JSON (TypeError for a value JSON
    cannot hold, as json.dumps raised)."""
    if orjson is not None:
        try:
            return orjson.dumps(value)
        except TypeError:
            pass  # a lone surrogate, nested past orjson's depth, a key that is no string
    # ASCII, as before: a lone surrogate (a forged name echoed in an Event's note) is
    # escaped, where UTF-8 cannot hold it.
    return json.dumps(value, separators=(",", ":")).encode()


def line(value: dict[str, Any]) -> str:
    """One log line: `value` as compact JSON text, what JSON cannot hold as its str()."""
    if orjson is not None:
        try:
            return orjson.dumps(value, default=str, option=_LINE_OPTIONS).decode()
        except TypeError:
            pass
    return _LINE.encode(value)
