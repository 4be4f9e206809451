"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

Strategic merge is implemented for the list fields the drainer, kubectl and the
tests touch: lists of objects merged by their merge key (containers by name,
conditions by type, ...), primitive lists with merge strategy (finalizers), and
the `$patch`, `$retainKeys`, `$setElementOrder` and `$deleteFromPrimitiveList`
directives.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """The patch cannot be applied (422 or 400 in the real server)."""


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# field name -> merge key for lists of objects merged by key.
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "addresses": "type",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
}
# Primitive lists with patchStrategy "merge": union instead of replace.
_MERGE_PRIMITIVE = {"finalizers"}


def _unescape(key: str) -> str:
    return key.replace("~1", "/").replace("~0", "~")


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return _strip_directives(copy.deepcopy(patch))
    if patch.get("$patch") == "replace":
        return _strip_directives({k: v for k, v in patch.items() if k != "$patch"})
    if patch.get("$patch") == "delete":
        return None
    result = dict(target)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(value, list) and isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(
                result.get(key) if isinstance(result.get(key), dict) else {}, value
            )
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    return result


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    current = current if isinstance(current, list) else []
    if field in _MERGE_PRIMITIVE:
        merged = list(current)
        merged.extend(v for v in patch if v not in merged)
        return merged
    merge_key = _MERGE_KEYS.get(field)
    if merge_key is None or not all(isinstance(v, dict) for v in patch):
        return [_strip_directives(copy.deepcopy(v)) for v in patch]
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [_strip_directives(v) for v in patch if v.get("$patch") != "replace"]
    merged = [copy.deepcopy(v) for v in current]
    for item in patch:
        key_value = item.get(merge_key)
        index = next(
            (
                i
                for i, v in enumerate(merged)
                if isinstance(v, dict) and v.get(merge_key) == key_value
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                merged.pop(index)
            continue
        if index is None:
            merged.append(_strip_directives(copy.deepcopy(item)))
        else:
            merged[index] = strategic_merge_patch(merged[index], item)
    return merged


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [_unescape(p) for p in path[1:].split("/")]


def _resolve(doc: Any, parts: list[str], path: str) -> Any:
    current = doc
    for part in parts:
        if isinstance(current, dict):
            if part not in current:
                raise PatchError(f'doc is missing path: "{path}": missing value')
            current = current[part]
        elif isinstance(current, list):
            try:
                current = current[int(part)]
            except (ValueError, IndexError) as e:
                raise PatchError(f'doc is missing path: "{path}": missing value') from e
        else:
            raise PatchError(f'doc is missing path: "{path}": missing value')
    return current


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise PatchError("json patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid json patch operation: {op!r}")
        parts = _pointer(op["path"])
        kind = op["op"]
        if kind == "test":
            if _resolve(doc, parts, op["path"]) != op.get("value"):
                raise PatchError(f"testing value {op['path']} failed")
            continue
        if kind in ("move", "copy"):
            value = copy.deepcopy(_resolve(doc, _pointer(op["from"]), op["from"]))
            if kind == "move":
                doc = _remove(doc, _pointer(op["from"]), op["from"])
            doc = _add(doc, parts, value, op["path"])
            continue
        if kind == "remove":
            doc = _remove(doc, parts, op["path"])
        elif kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")), op["path"])
        elif kind == "replace":
            _resolve(doc, parts, op["path"])
            doc = _remove(doc, parts, op["path"])
            doc = _add(doc, parts, copy.deepcopy(op.get("value")), op["path"])
        else:
            raise PatchError(f"Unexpected kind: {kind}")
    return doc


def _add(doc: Any, parts: list[str], value: Any, path: str) -> Any:
    if not parts:
        return value
    parent = _resolve(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                index = int(last)
            except ValueError as e:
                raise PatchError(f"invalid index {last!r} in {path}") from e
            if index < 0 or index > len(parent):
                raise PatchError(f"add operation does not apply: index {index} out of bounds")
            parent.insert(index, value)
    else:
        raise PatchError(f'doc is missing path: "{path}": missing value')
    return doc


def _remove(doc: Any, parts: list[str], path: str) -> Any:
    if not parts:
        return None
    parent = _resolve(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"Unable to remove nonexistent key: {last}: missing value")
        del parent[last]
    elif isinstance(parent, list):
        try:
            parent.pop(int(last))
        except (ValueError, IndexError) as e:
            raise PatchError(f"Unable to remove nonexistent index: {last}") from e
    return doc
