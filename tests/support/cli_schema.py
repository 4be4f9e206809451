"""docs/cli-output.schema.json, the one shape of the CLI's `-o json` documents, as a
check the tests run on every document the CLI prints (tests/conftest.py)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "cli-output.schema.json"


@functools.cache
def _validator() -> Any:
    import jsonschema  # only once a test has made a document

    return jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))


def problems(document: object) -> list[str]:
    """What in `document` the schema refuses, one line each; none when it follows it."""
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(document)'}: {e.message}"
        for e in _validator().iter_errors(document)
    ]
