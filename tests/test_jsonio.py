"""drainer/jsonio.py: orjson on the hot paths, the standard library's json its judge.
Whatever json read, wrote or refused before, the codec reads, writes or refuses
now, with orjson and without it (a source checkout that lacks it)."""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Iterator
from typing import Any

import pytest

from drainer import jsonio
from drainer.outcome import Outcome

POD = {
    "kind": "Pod",
    "apiVersion": "v1",
    "metadata": {
        "name": "web-0",
        "namespace": "default",
        "uid": "0b1c",
        "resourceVersion": "123",
        "annotations": {"note": 'naïve ✓ \u2028 "quoted" \\ back'},
        "managedFields": [{"manager": "kwok", "fieldsV1": {"f:status": {}}}],
    },
    "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30},
    "status": {"phase": "Running", "podIP": "10.0.0.1"},
}

DOCUMENTS = [
    json.dumps(POD).encode(),
    json.dumps(POD, ensure_ascii=False).encode(),
    b'{"type":"MODIFIED","object":' + json.dumps(POD).encode() + b"}",
    b'"\\ud800"',  # a lone surrogate: orjson refuses it, json reads it
    b"NaN",
    b"[1e400, -1e400]",  # past a double: orjson refuses, json reads infinity
    b"9223372036854775807",
    b"{}",
    "[1, 2.5, true, null]",
]


@pytest.fixture(params=["orjson", "json only"])
def codec(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "json only":
        monkeypatch.setattr(jsonio, "orjson", None)
    else:
        assert jsonio.orjson is not None, "orjson is in requirements.txt: `make venv` installs it"
    yield request.param


@pytest.mark.parametrize("document", DOCUMENTS, ids=range(len(DOCUMENTS)))
def test_loads__reads_what_json_reads(codec: str, document: bytes | str) -> None:
    got, want = jsonio.loads(document), json.loads(document)
    assert json.dumps(got) == json.dumps(want)  # NaN and infinities compare as text


@pytest.mark.parametrize("document", [b"", b"{", b"<html>502</html>", b'{"a":1}x', b"\xff"])
def test_loads__refuses_what_json_refuses_as_a_value_error(codec: str, document: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(document)
    with pytest.raises(ValueError):
        jsonio.loads(document)


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": [value]}
    return value


@pytest.mark.parametrize(
    "value",
    [POD, {"a": 1}, [], {"deep": _nested(200)}, {1: "int key"}],
    ids=["pod", "small", "empty", "deeper than orjson goes", "int key"],
)
def test_dumps__compact_utf8_that_json_reads_back_the_same(codec: str, value: Any) -> None:
    data = jsonio.dumps(value)
    assert json.loads(data) == json.loads(json.dumps(value))
    assert data.startswith((b'{"', b"[]")) and b'": ' not in data and b", " not in data[:40]


def test_dumps__a_lone_surrogate_still_goes_as_json_reads_it_back(codec: str) -> None:
    """A string UTF-8 cannot hold (a lone surrogate, say in a forged name an Event's
    note echoes) is sent escaped, as json sent it, never an encoding error."""
    value = {"note": "pod \ud800 refused", "name": "web-0"}
    assert json.loads(jsonio.dumps(value)) == value


def test_dumps__a_value_json_cannot_hold_is_a_type_error(codec: str) -> None:
    with pytest.raises(TypeError):
        jsonio.dumps({"set": {1, 2}})


@dataclasses.dataclass
class _Seen:
    pod: str


_LINE_VALUES: list[dict[str, Any]] = [
    {"level": "INFO", "message": "evicted default/web-0", "seconds": 0.125, "n": 3},
    {"outcome": Outcome.DRAINED, "flag": True, "none": None, "big": 1e16, "f": 0.1},
    {"when": datetime.datetime(2026, 12, 1, 3, 0, tzinfo=datetime.UTC), "seen": _Seen("p")},
    {"set": {"only"}, "tuple": ("a", 1), 7: "int key", "nested": {"deep": [1, {"x": "y"}]}},
    {"text": 'naïve ✓ \u2028 "q" \\ \n\t', "left": {"default/web-0": "budget web"}},
    {"deep": _nested(300)},
]


@pytest.mark.parametrize("value", _LINE_VALUES, ids=range(len(_LINE_VALUES)))
def test_line__the_text_the_standard_encoder_wrote(codec: str, value: dict[str, Any]) -> None:
    """A log line is the very text json's encoder wrote (default=str, compact, not
    ASCII-escaped): log readers and metric filters see no change."""
    old = json.JSONEncoder(default=str, separators=(",", ":"), ensure_ascii=False)
    assert jsonio.line(value) == old.encode(value)


def test_line__a_float_with_a_small_exponent_reads_back_the_same(codec: str) -> None:
    """The one spelling that may differ: orjson writes 1e-7 where json wrote 1e-07."""
    value = {"tiny": 1e-7, "seconds": 0.000123}
    assert json.loads(jsonio.line(value)) == value
