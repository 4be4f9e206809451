"""One environment variable of the drainer: how its text is read, checked and
described.

The variables themselves are listed by concern in settings_groups.py (which
instances and hooks are the function's), settings_drain.py (how a drain goes and
ends), settings_triggers.py (the launch hook and EC2's events) and
settings_notices.py (notices and logs); each `Settings` field
(drainer/lifecycle/settings.py) carries one of them in its metadata.

A value that cannot be used raises a `SettingsError` naming the variable, the value
and what is allowed: a drain run with a misread timeout is worse than no drain at all.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from drainer.errors import SettingsError

Kind = Literal["str", "names", "int", "float", "bool", "choice"]

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


@dataclass(frozen=True)
class Variable:
    """One environment variable: how it is read, its default and why it exists."""

    name: str
    """The environment variable."""
    field: str
    """The `Settings` attribute it fills."""
    kind: Kind
    """How the text is parsed."""
    default: str
    """The default, as it would be written in the environment (and in CloudFormation)."""
    description: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    """Allowed values of a "choice" variable, compared case-insensitively."""
    pattern: str = ""
    """A regular expression a non-empty "str" value must match in full."""
    pattern_description: str = ""
    """The pattern in words, for error messages and the README."""
    secret: bool = False
    """Hidden by `Settings.describe()`; no variable is secret today."""
    enum: type[StrEnum] | None = None
    """The enum a "choice" variable is read into; None: the choice's text."""

    def allowed(self) -> str:
        """What the variable accepts, in words, for error messages and the README."""
        if self.kind == "int":
            return f"an integer from {self.minimum:g} to {self.maximum:g}"
        if self.kind == "float":
            return f"a number from {self.minimum:g} to {self.maximum:g}"
        if self.kind == "bool":
            return "true/false, 1/0, yes/no or on/off"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "names":
            return "a comma-separated list, or empty"
        if self.pattern_description:
            return f"{self.pattern_description}, or empty"
        return "a string"

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready description, for generated documentation and templates."""
        return {
            "name": self.name,
            "field": self.field,
            "kind": self.kind,
            "default": self.default,
            "description": self.description,
            "allowed": self.allowed(),
            "minimum": self.minimum,
            "maximum": self.maximum,
            "choices": list(self.choices),
            "pattern": self.pattern,
            "secret": self.secret,
        }

    def parse(self, raw: str) -> object:
        """The value `raw` gives the field; raises SettingsError when it cannot be used."""
        if self.kind == "int":
            return self._number(raw, int)
        if self.kind == "float":
            return self._number(raw, float)
        if self.kind == "bool":
            lowered = raw.lower()
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
            raise self._invalid(raw)
        if self.kind == "choice":
            for choice in self.choices:
                if raw.lower() == choice.lower():
                    return self.enum(choice) if self.enum else choice
            raise self._invalid(raw)
        if self.kind == "names":
            return frozenset(name.strip() for name in raw.split(",") if name.strip())
        if raw and self.pattern and not re.fullmatch(self.pattern, raw):
            raise self._invalid(raw)
        return raw

    def _number(self, raw: str, kind: type[int] | type[float]) -> int | float:
        try:
            value = kind(raw)
        except ValueError:
            if kind is not int:
                raise self._invalid(raw) from None
            value = self._whole(raw)
        if isinstance(value, float) and not math.isfinite(value):
            raise self._invalid(raw)
        assert self.minimum is not None and self.maximum is not None
        if not self.minimum <= value <= self.maximum:
            raise self._invalid(raw, "out of range")
        return value

    def _whole(self, raw: str) -> int:
        """An integer written with a decimal point ("5400.0"): CloudFormation's Number
        parameters take it, and pass the function the text as given."""
        try:
            value = float(raw)
        except ValueError:
            raise self._invalid(raw) from None
        if not value.is_integer():  # 5400.5, and inf and nan
            raise self._invalid(raw, "not a whole number")
        return int(value)

    def _invalid(self, raw: str, why: str = "") -> SettingsError:
        reason = f" ({why})" if why else ""
        return SettingsError(
            self.name,
            f"{raw!r} is not valid{reason}; expected {self.allowed()} (default {self.default!r})",
        )


def env(
    name: str,
    kind: Kind,
    default: str,
    description: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] = (),
    pattern: str = "",
    pattern_description: str = "",
    enum: type[StrEnum] | None = None,
) -> dict[str, object]:
    """A `Settings` field's metadata: its variable, all but the field's own name
    (drainer/lifecycle/settings.py adds it)."""
    spec = {
        "name": name,
        "kind": kind,
        "default": default,
        "description": description,
        "minimum": minimum,
        "maximum": maximum,
        "choices": choices,
        "pattern": pattern,
        "pattern_description": pattern_description,
        "enum": enum,
    }
    return {"env": spec}
