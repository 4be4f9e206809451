"""Object schemas: what the real server's Go structs do to a request body.

The real API server decodes JSON into typed Go structs, so a value of the wrong type
is a 400, and an unknown field is dropped: silently (fieldValidation=Ignore), with a
`Warning` header (Warn, the default) or refused with 400 (Strict, what `kubectl
create` asks for). The field names and types come from the official Python client's
models, which are generated from the same OpenAPI schema as the Go structs.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from kubesim.errors import ApiError, bad_request
from kubesim.resources import Resource

_GENERIC = re.compile(r"^(List|Dict)\[(?:str, )?(.+)\]$")
# Quantities (cpu: 1) decode from JSON numbers as well as strings.
_QUANTITY_MAPS = {"limits", "requests", "capacity", "allocatable", "hard", "used"}
_GO_TYPES = {"str": "string", "int": "int32", "bool": "bool", "float": "float64"}
_MODES = {"": "Warn", "warn": "Warn", "strict": "Strict", "ignore": "Ignore"}


@dataclass
class Findings:
    unknown: list[str] = field(default_factory=list)
    wrong_type: list[str] = field(default_factory=list)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


@functools.cache
def _models() -> Any:
    from kubernetes.client import models  # heavy: imported on the first write

    return models


@functools.cache
def _fields(model_name: str) -> dict[str, str] | None:
    """JSON field name -> type string of a client model, None when it is unknown."""
    model = getattr(_models(), model_name, None)
    if model is None:
        return None
    return {model.attribute_map[attr]: kind for attr, kind in model.openapi_types.items()}


def model_name(resource: Resource) -> str:
    if resource.kind == "Event" and not resource.group:
        return "CoreV1Event"
    return f"V1{resource.kind}"


def _walk(value: Any, kind: str, path: str, struct: str, found: Findings, *, quantity: bool) -> Any:
    """Check `value` against the type string `kind`; return it with unknown fields pruned."""
    if value is None or kind == "object":
        return value
    generic = _GENERIC.match(kind)
    if generic:
        container, inner = generic.groups()
        if container == "List":
            if not isinstance(value, list):
                found.wrong_type.append(_type_error(value, path, struct, _go_type(kind)))
                return value
            return [
                _walk(item, inner, f"{path}[{i}]", struct, found, quantity=quantity)
                for i, item in enumerate(value)
            ]
        if not isinstance(value, dict):
            found.wrong_type.append(_type_error(value, path, struct, _go_type(kind)))
            return value
        return {
            k: _walk(v, inner, f"{path}.{k}" if path else k, struct, found, quantity=quantity)
            for k, v in value.items()
        }
    if kind in ("str", "datetime", "date", "bytes"):
        if isinstance(value, str) or (quantity and _json_type(value) == "number"):
            return value
        found.wrong_type.append(_type_error(value, path, struct, "string"))
        return value
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        found.wrong_type.append(_type_error(value, path, struct, "int32"))
        return value
    if kind == "float":
        if _json_type(value) == "number":
            return value
        found.wrong_type.append(_type_error(value, path, struct, "float64"))
        return value
    if kind == "bool":
        if isinstance(value, bool):
            return value
        found.wrong_type.append(_type_error(value, path, struct, "bool"))
        return value
    fields = _fields(kind)
    if fields is None:
        return value
    if not isinstance(value, dict):
        found.wrong_type.append(_type_error(value, path, struct, _go_type(kind)))
        return value
    pruned: dict[str, Any] = {}
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        if key not in fields:
            found.unknown.append(child)
            continue
        pruned[key] = _walk(
            item, fields[key], child, _struct(kind), found, quantity=key in _QUANTITY_MAPS
        )
    return pruned


def _go_type(kind: str) -> str:
    """The Go type a client model's type string stands for, as Go's errors name it."""
    generic = _GENERIC.match(kind)
    if generic:
        container, inner = generic.groups()
        prefix = "[]" if container == "List" else "map[string]"
        return prefix + _go_type(inner)
    if kind in _GO_TYPES:
        return _GO_TYPES[kind]
    if kind in ("datetime", "date"):
        return "v1.Time"
    return f"v1.{_struct(kind)}"


def _struct(model: str) -> str:
    return re.sub(r"^(Core)?V\d+(beta\d+|alpha\d+)?", "", model)


def _type_error(value: Any, path: str, struct: str, go_type: str) -> str:
    return (
        f"json: cannot unmarshal {_json_type(value)} into Go struct field "
        f"{struct}.{path} of type {go_type}"
    )


def field_validation(query_value: str | None) -> str:
    """The fieldValidation mode; a 400 for a value the real server does not know."""
    mode = _MODES.get((query_value or "").lower())
    if mode is None:
        raise bad_request(
            f'fieldValidation: Unsupported value: "{query_value}": supported values: '
            '"Ignore", "Strict", "Warn"'
        )
    return mode


def decode(resource: Resource, obj: Any, mode: str = "Warn") -> tuple[Any, list[str]]:
    """Decode a request body as the real server does: (pruned object, warnings).

    Raises 400 for a wrong type, or an unknown field in Strict mode."""
    if not isinstance(obj, dict):
        return obj, []
    found = Findings()
    name = model_name(resource)
    fields = _fields(name)
    if fields is None:
        return obj, []
    pruned = _walk(obj, name, "", _struct(name), found, quantity=False)
    prefix = (
        f'{resource.kind} in version "{resource.version}" cannot be handled as a {resource.kind}: '
    )
    if found.wrong_type:
        raise ApiError(400, prefix + found.wrong_type[0], reason="BadRequest")
    if found.unknown and mode == "Strict":
        raise ApiError(
            400,
            prefix
            + "strict decoding error: "
            + ", ".join(f'unknown field "{path}"' for path in found.unknown),
            reason="BadRequest",
        )
    warnings = [f'unknown field "{path}"' for path in found.unknown] if mode == "Warn" else []
    return pruned, warnings
