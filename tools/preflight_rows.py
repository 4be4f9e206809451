"""One row of make preflight's table (tools/preflight.py), apart so that the modules
that make rows (tools/preflight_plan.py) need not import preflight itself."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Check:
    what: str
    status: Status
    detail: str
    fix: str = ""
    group: str = ""
    """On a group's own row: the Auto Scaling group the function would drain ("" on
    every other row, and on a group it refuses or leaves alone): the groups planned."""
