"""Just enough of the Kubernetes protobuf encoding to read what kubectl sends that way.

kubectl posts some objects as `application/vnd.kubernetes.protobuf`, accepting JSON
back: SelfSubjectAccessReviews and SelfSubjectRulesReviews (`kubectl auth can-i`) and
Namespaces (`kubectl create namespace`). The body is the magic `k8s\\x00` and a
runtime.Unknown message: TypeMeta, then the object's own bytes. Only the kinds below
are decoded; others get a 415, as the real server answers for a kind without a
protobuf schema.
"""

from __future__ import annotations

from typing import Any

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"


class ProtobufError(ValueError):
    """Bytes that are not the protobuf this module reads."""


# field number -> (JSON name, str | bytes | MAP | REPEATED | nested schema)
Schema = dict[int, tuple[str, Any]]
MAP = "map<string,string>"
REPEATED = "repeated string"

_RESOURCE_ATTRIBUTES: Schema = {
    1: ("namespace", str),
    2: ("verb", str),
    3: ("group", str),
    4: ("version", str),
    5: ("resource", str),
    6: ("subresource", str),
    7: ("name", str),
}
_NON_RESOURCE_ATTRIBUTES: Schema = {1: ("path", str), 2: ("verb", str)}
_OBJECT_META: Schema = {
    1: ("name", str),
    2: ("generateName", str),
    3: ("namespace", str),
    11: ("labels", MAP),
    12: ("annotations", MAP),
    14: ("finalizers", REPEATED),
}
SCHEMAS: dict[str, Schema] = {
    "SelfSubjectAccessReview": {
        1: ("metadata", _OBJECT_META),
        2: (
            "spec",
            {
                1: ("resourceAttributes", _RESOURCE_ATTRIBUTES),
                2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES),
            },
        ),
    },
    "SelfSubjectRulesReview": {
        1: ("metadata", _OBJECT_META),
        2: ("spec", {1: ("namespace", str)}),
    },
    "Namespace": {
        1: ("metadata", _OBJECT_META),
        2: ("spec", {1: ("finalizers", REPEATED)}),
    },
}
_TYPE_META: Schema = {1: ("apiVersion", str), 2: ("kind", str)}
_UNKNOWN: Schema = {1: ("typeMeta", _TYPE_META), 2: ("raw", bytes)}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data) or shift > 63:
            raise ProtobufError("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: varints as int, length-delimited as bytes."""
    result: list[tuple[int, int | bytes]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            result.append((number, value))
        elif wire == 2:
            length, at = _varint(data, at)
            if at + length > len(data):
                raise ProtobufError("truncated field")
            result.append((number, data[at : at + length]))
            at += length
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
    return result


def _message(data: bytes, schema: Schema) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for number, value in _fields(data):
        if number not in schema or not isinstance(value, bytes):
            continue
        name, kind = schema[number]
        if kind is bytes:
            result[name] = value
        elif kind is str:
            result[name] = value.decode()
        elif kind == REPEATED:
            result.setdefault(name, []).append(value.decode())
        elif kind == MAP:
            entry = _message(value, {1: ("key", str), 2: ("value", str)})
            result.setdefault(name, {})[entry.get("key", "")] = entry.get("value", "")
        else:
            result[name] = _message(value, kind)
    return result


def decode(body: bytes) -> tuple[str, dict[str, Any]]:
    """(kind, JSON-shaped object) of a protobuf body; ProtobufError when unreadable,
    KeyError when the kind is one this module does not know."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic number")
    envelope = _message(body[len(MAGIC) :], _UNKNOWN)
    type_meta = envelope.get("typeMeta") or {}
    kind = str(type_meta.get("kind", ""))
    obj = _message(envelope.get("raw", b""), SCHEMAS[kind])
    obj["apiVersion"] = type_meta.get("apiVersion", "")
    obj["kind"] = kind
    return kind, obj
