"""Label and field selectors, parsed and matched as the real API server does."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubesim.resources import Resource

Obj = dict[str, Any]


class SelectorError(ValueError):
    """A selector the real server would reject with 400 BadRequest."""


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "=":
            return present and value == self.values[0]
        if self.operator == "!=":
            return not present or value != self.values[0]
        if self.operator == "in":
            return present and value in self.values
        if self.operator == "notin":
            return not present or value not in self.values
        if self.operator == "exists":
            return present
        return not present  # "!"


_KEY = re.compile(
    r"^([a-z0-9A-Z]([-a-z0-9A-Z.]*[a-z0-9A-Z])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$"
)
_VALUE = re.compile(r"^([a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?)?$")


def _check_key(key: str) -> str:
    if not key or len(key.rsplit("/", 1)[-1]) > 63 or not _KEY.match(key):
        raise SelectorError(f'unable to parse requirement: invalid label key "{key}"')
    return key


def _check_value(value: str) -> str:
    if len(value) > 63 or not _VALUE.match(value):
        raise SelectorError(f'unable to parse requirement: invalid label value: "{value}"')
    return value


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts]


_SET_EXPR = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")


def parse_label_selector(text: str) -> list[Requirement]:
    """Parse `a=b,c!=d,e in (x,y),f notin (z),g,!h` into requirements."""
    if not text.strip():
        return []
    requirements = []
    for part in _split_top_level(text):
        if not part:
            raise SelectorError(
                f"unable to parse requirement: found '', expected: identifier in {text!r}"
            )
        match = _SET_EXPR.match(part)
        if match:
            values = tuple(_check_value(v.strip()) for v in match["values"].split(","))
            requirements.append(Requirement(_check_key(match["key"]), match["op"], values))
        elif part.startswith("!"):
            requirements.append(Requirement(_check_key(part[1:].strip()), "!"))
        elif "!=" in part:
            key, value = part.split("!=", 1)
            requirements.append(
                Requirement(_check_key(key.strip()), "!=", (_check_value(value.strip()),))
            )
        elif "==" in part:
            key, value = part.split("==", 1)
            requirements.append(
                Requirement(_check_key(key.strip()), "=", (_check_value(value.strip()),))
            )
        elif "=" in part:
            key, value = part.split("=", 1)
            requirements.append(
                Requirement(_check_key(key.strip()), "=", (_check_value(value.strip()),))
            )
        else:
            requirements.append(Requirement(_check_key(part), "exists"))
    return requirements


def selector_from_object(selector: Mapping[str, Any] | None) -> list[Requirement] | None:
    """A metav1.LabelSelector as requirements; None selects nothing, {} selects everything."""
    if selector is None:
        return None
    requirements = [
        Requirement(k, "=", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()
    ]
    operators = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expression in selector.get("matchExpressions") or []:
        operator = operators.get(expression.get("operator", ""))
        if operator is None:
            raise SelectorError(
                f"{expression.get('operator')!r} is not a valid pod selector operator"
            )
        requirements.append(
            Requirement(expression["key"], operator, tuple(expression.get("values") or ()))
        )
    return requirements


def selector_to_string(selector: Mapping[str, Any] | None) -> str:
    """A metav1.LabelSelector in the query syntax (as Scale.status.selector shows it)."""
    parts = [f"{k}={v}" for k, v in sorted(((selector or {}).get("matchLabels") or {}).items())]
    for expression in (selector or {}).get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = ",".join(sorted(expression.get("values") or []))
        parts.append(
            {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})"}.get(
                operator, key if operator == "Exists" else f"!{key}"
            )
        )
    return ",".join(parts)


def labels_match(requirements: list[Requirement] | None, labels: Mapping[str, str] | None) -> bool:
    if requirements is None:
        return False
    labels = labels or {}
    return all(r.matches(labels) for r in requirements)


@dataclass(frozen=True)
class FieldRequirement:
    path: str
    negate: bool
    value: str


def _field_value(obj: Obj, path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, dict):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def parse_field_selector(text: str, resource: Resource) -> list[FieldRequirement]:
    if not text.strip():
        return []
    allowed = {"metadata.name", "metadata.namespace", *resource.field_labels}
    requirements = []
    for raw_part in text.split(","):
        part = raw_part.strip()
        if "!=" in part:
            path, value = part.split("!=", 1)
            negate = True
        elif "==" in part:
            path, value = part.split("==", 1)
            negate = False
        elif "=" in part:
            path, value = part.split("=", 1)
            negate = False
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        path = path.strip()
        if resource.kind == "Pod" and path == "spec.host":
            path = "spec.nodeName"  # what old v1 clients send
        if path not in allowed:
            if not resource.field_labels:  # kinds without their own conversion function
                raise SelectorError(
                    f'"{path}" is not a known field selector: only "metadata.name", '
                    '"metadata.namespace"'
                )
            raise SelectorError(f"field label not supported: {path}")
        requirements.append(FieldRequirement(path, negate, value.strip()))
    return requirements


def fields_match(requirements: list[FieldRequirement], obj: Obj) -> bool:
    for requirement in requirements:
        equal = _field_value(obj, requirement.path) == requirement.value
        if equal == requirement.negate:
            return False
    return True


def make_filter(
    label_selector: str, field_selector: str, resource: Resource
) -> Callable[[Obj], bool]:
    labels = parse_label_selector(label_selector)
    fields = parse_field_selector(field_selector, resource)

    def accept(obj: Obj) -> bool:
        metadata = obj.get("metadata") or {}
        return labels_match(labels, metadata.get("labels")) and fields_match(fields, obj)

    return accept
