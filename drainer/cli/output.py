"""`-o json`: the one JSON document a run prints on stdout, whatever happens.

One shape for every command and every ending (docs/cli-output.schema.json): `result`
says how it ended, as in the Lambda's end line and the notices, and `exit_code` the
exit status. Apart from drainer/cli/main.py so that a usage error, which argparse
raises before the arguments are read, still finds `-o json` in the command line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from drainer.cli.streams import Stream

_JSON_WORDS = (("-o", "json"), ("--output", "json"))
_JSON_FLAGS = ("-ojson", "-o=json", "--output=json")


class UsageError(SystemExit):
    """argparse's exit 2, with its message kept for the JSON document."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


def asks_for_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for `-o json`, read as argparse would read it
    (the last one given wins; nothing after `--` is an option), before it is parsed:
    a usage error must still answer in JSON."""
    wanted = False
    for i, word in enumerate(argv):
        if word == "--":
            break
        if word in ("-o", "--output"):
            wanted = tuple(argv[i : i + 2]) in _JSON_WORDS
        elif word.startswith(("-o", "--output=")):
            wanted = word in _JSON_FLAGS
    return wanted


def document(result: str, exit_code: int, **fields: Any) -> dict[str, Any]:
    """A document: how it ended (`result`; `outcome`, its alias until 0.3.0), what
    the command has to say, and the exit status, last."""
    return {"result": result, "outcome": result, **fields, "exit_code": exit_code}


def emit(out: Stream, doc: dict[str, Any]) -> None:
    """The run's one document, on stdout."""
    out.write(json.dumps(doc, indent=2) + "\n")
    out.flush()
