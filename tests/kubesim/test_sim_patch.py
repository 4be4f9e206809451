"""Patch semantics and body decoding as pure functions (table-driven)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim import patch, schema
from kubesim.errors import ApiError
from kubesim.resources import BY_KEY

POD: dict[str, Any] = {
    "metadata": {"name": "a", "labels": {"app": "web"}, "finalizers": ["x", "y"]},
    "spec": {
        "containers": [
            {"name": "main", "image": "i:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "side", "image": "s:1"},
        ],
        "volumes": [{"name": "data", "emptyDir": {}}],
    },
}


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            {"spec": {"containers": [{"name": "main", "image": "i:2"}]}},
            {"containers": ["main:i:2", "side:s:1"]},
        ),
        (
            {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}},
            {"containers": ["main:i:1"]},
        ),
        (
            {"spec": {"containers": [{"name": "new", "image": "n:1"}, {"$patch": "replace"}]}},
            {"containers": ["new:n:1"]},
        ),
        ({"spec": {"volumes": None}}, {"volumes": None}),
        ({"spec": {"$patch": "replace", "containers": []}}, {"containers": [], "volumes": None}),
        (
            {"spec": {"$retainKeys": ["containers"], "containers": []}},
            {"containers": ["main:i:1", "side:s:1"], "volumes": None},
        ),
        (
            {
                "spec": {
                    "$setElementOrder/containers": [{"name": "side"}, {"name": "main"}],
                    "containers": [{"name": "side", "image": "s:2"}],
                }
            },
            {"containers": ["main:i:1", "side:s:2"]},
        ),
        ({"metadata": {"finalizers": ["z", "x"]}}, {"finalizers": ["x", "y", "z"]}),
        ({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}, {"finalizers": ["y"]}),
        ({"metadata": {"labels": {"app": None, "b": "2"}}}, {"labels": {"b": "2"}}),
    ],
    ids=[
        "merge-by-name",
        "delete-item",
        "replace-list",
        "null-removes-field",
        "replace-map",
        "retain-keys",
        "set-element-order-ignored",
        "finalizers-union",
        "delete-from-primitive-list",
        "label-removed",
    ],
)
def test_strategic_merge_patch(document: dict[str, Any], expected: dict[str, Any]) -> None:
    result = patch.strategic_merge_patch(POD, document)

    spec, metadata = result.get("spec") or {}, result["metadata"]
    if "containers" in expected:
        assert [f"{c['name']}:{c.get('image')}" for c in spec.get("containers", [])] == expected[
            "containers"
        ]
    if "volumes" in expected:
        assert spec.get("volumes") == expected["volumes"]
    for field in ("finalizers", "labels"):
        if field in expected:
            assert metadata.get(field) == expected[field]


def test_strategic_merge_patch__nested_env_merged_by_name() -> None:
    document = {"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "2"}]}]}}

    result = patch.strategic_merge_patch(POD, document)

    assert result["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "2"},
    ]
    assert POD["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]  # untouched


@pytest.mark.parametrize(
    ("operations", "expected"),
    [
        ([{"op": "add", "path": "/metadata/finalizers/-", "value": "z"}], ["x", "y", "z"]),
        ([{"op": "add", "path": "/metadata/finalizers/0", "value": "z"}], ["z", "x", "y"]),
        ([{"op": "remove", "path": "/metadata/finalizers/0"}], ["y"]),
        ([{"op": "replace", "path": "/metadata/finalizers/1", "value": "q"}], ["x", "q"]),
        (
            [{"op": "copy", "from": "/metadata/finalizers/0", "path": "/metadata/finalizers/-"}],
            ["x", "y", "x"],
        ),
        (
            [{"op": "move", "from": "/metadata/finalizers/0", "path": "/metadata/finalizers/-"}],
            ["y", "x"],
        ),
    ],
    ids=["append", "insert", "remove", "replace", "copy", "move"],
)
def test_json_patch__lists(operations: list[Any], expected: list[str]) -> None:
    assert patch.json_patch(POD, operations)["metadata"]["finalizers"] == expected


@pytest.mark.parametrize(
    "operations",
    [
        {"op": "add"},
        [{"op": "add", "path": "no-slash", "value": 1}],
        [{"op": "add", "path": "/metadata/finalizers/9", "value": "z"}],
        [{"op": "add", "path": "/metadata/finalizers/x", "value": "z"}],
        [{"op": "remove", "path": "/metadata/finalizers/9"}],
        [{"op": "replace", "path": "/nothing/here", "value": 1}],
        ["not-an-operation"],
    ],
    ids=[
        "not-a-list",
        "bad-pointer",
        "index-out-of-range",
        "index-not-number",
        "remove-missing-index",
        "replace-missing",
        "not-an-object",
    ],
)
def test_json_patch__invalid__patch_error(operations: Any) -> None:
    with pytest.raises(patch.PatchError):
        patch.json_patch(POD, operations)


def test_merge_patch__non_object_patch__replaces_whole() -> None:
    assert patch.merge_patch({"a": 1}, [1, 2]) == [1, 2]
    assert patch.merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None}}) == {"a": {"c": 2}}


PODS = BY_KEY["pods"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"metadata": {"name": "a", "labels": {"x": 1}}}, "of type string"),
        ({"metadata": {"name": "a", "labels": ["x"]}}, "map[string]string"),
        ({"metadata": {"name": "a"}, "spec": {"containers": {"name": "c"}}}, "[]v1.Container"),
        ({"metadata": {"name": "a"}, "spec": {"hostNetwork": "yes"}}, "of type bool"),
        ({"metadata": {"name": "a"}, "spec": "none"}, "of type v1.PodSpec"),
        ({"metadata": {"name": "a"}, "spec": {"priority": 1.5}}, "of type int32"),
    ],
    ids=["label-number", "labels-list", "containers-object", "bool", "spec-string", "float-int"],
)
def test_schema_decode__wrong_type__400(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiError) as raised:
        schema.decode(PODS, body)

    assert raised.value.code == 400
    assert 'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal' in str(
        raised.value
    )
    assert message in str(raised.value)


def test_schema_decode__quantities_as_numbers__accepted() -> None:
    body = {
        "metadata": {"name": "a"},
        "spec": {
            "containers": [
                {"name": "c", "image": "i", "resources": {"requests": {"cpu": 1, "memory": "1Gi"}}}
            ]
        },
    }

    decoded, warnings = schema.decode(PODS, body)

    assert decoded == body
    assert warnings == []


@pytest.mark.parametrize(
    ("mode", "warnings"),
    [("Warn", ['unknown field "spec.bogus"']), ("Ignore", [])],
)
def test_schema_decode__unknown_field__pruned(mode: str, warnings: list[str]) -> None:
    decoded, found = schema.decode(PODS, {"metadata": {"name": "a"}, "spec": {"bogus": 1}}, mode)

    assert decoded == {"metadata": {"name": "a"}, "spec": {}}
    assert found == warnings


def test_schema_field_validation__unknown_mode__400() -> None:
    with pytest.raises(ApiError):
        schema.field_validation("Loud")
