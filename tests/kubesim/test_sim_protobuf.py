"""The protobuf bodies kubectl sends: decoded for the kinds kubesim knows, 415 or 400
otherwise."""

from __future__ import annotations

import pytest

from kubesim import KubeSim, protobuf
from kubesim.testing import request


def _varint(value: int) -> bytes:
    out = b""
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def _field(number: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, api_version) + _field(2, kind)
    return protobuf.MAGIC + _field(1, type_meta) + _field(2, raw) + _field(4, protobuf.CONTENT_TYPE)


def _access_review(verb: str, resource: str, subresource: str = "") -> bytes:
    attributes = _field(1, "default") + _field(2, verb) + _field(5, resource)
    if subresource:
        attributes += _field(6, subresource)
    spec = _field(1, attributes)
    return _envelope("authorization.k8s.io/v1", "SelfSubjectAccessReview", _field(2, spec))


def test_decode__access_review__json_shape() -> None:
    kind, obj = protobuf.decode(_access_review("create", "pods", "eviction"))

    assert kind == "SelfSubjectAccessReview"
    assert obj == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "namespace": "default",
                "verb": "create",
                "resource": "pods",
                "subresource": "eviction",
            }
        },
    }


def test_decode__namespace__labels_map_and_finalizers() -> None:
    label = _field(1, "team") + _field(2, "a")
    metadata = _field(1, "ns1") + _field(11, label) + _field(14, "example.com/x")
    raw = _field(1, metadata) + _field(2, _field(1, "kubernetes"))

    _, obj = protobuf.decode(_envelope("v1", "Namespace", raw))

    assert obj["metadata"] == {
        "name": "ns1",
        "labels": {"team": "a"},
        "finalizers": ["example.com/x"],
    }
    assert obj["spec"] == {"finalizers": ["kubernetes"]}


@pytest.mark.parametrize(
    "body", [b"not protobuf", protobuf.MAGIC + b"\x0a\xff"], ids=["no-magic", "truncated"]
)
def test_decode__garbage__protobuf_error(body: bytes) -> None:
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode(body)


def test_post_protobuf_review__answered_in_json(sim: KubeSim) -> None:
    response = request(
        sim,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        _access_review("delete", "nodes"),
        headers={
            "Content-Type": protobuf.CONTENT_TYPE,
            "Accept": f"{protobuf.CONTENT_TYPE},application/json",
        },
        token=sim.drainer_token,
    )

    assert response.status == 201
    assert response.headers["content-type"] == "application/json"
    assert response.json()["status"]["allowed"] is False


@pytest.mark.parametrize(
    ("body", "code"),
    [(_envelope("v1", "Pod", b""), 415), (b"k8s\x00\x0a\x05ab", 400)],
    ids=["kind-without-schema", "malformed"],
)
def test_post_protobuf__unreadable__status_error(sim: KubeSim, body: bytes, code: int) -> None:
    response = request(
        sim,
        "POST",
        "/api/v1/namespaces/default/pods",
        body,
        headers={"Content-Type": protobuf.CONTENT_TYPE},
    )

    assert response.status == code
    assert response.json()["kind"] == "Status"
