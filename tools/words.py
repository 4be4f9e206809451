"""The glossary's retired words (docs/ARCHITECTURE.md, "Glossary"), kept out of
drainer/'s identifiers by `make lint` (issue 39, item 5).

    .venv/bin/python -m tools.words [PATH ...]   (default: drainer)

An identifier is every name the code gives or uses: a module's file name, a
function, class, argument, variable, attribute, keyword or import. Its words are
its snake_case and CamelCase parts, lower case (`EventRecorder`: event, recorder).
A retired word is refused in any of them, except in the modules where the glossary
keeps it in its one meaning (`kept_in`). Comments, docstrings and strings are not
read: English keeps its own "the following", and the log's and the node record's
keys are an interface that keeps its old words (the glossary names them).

A rename that waits on a module someone else is changing is `PENDING`: the module
and the words it may still use until then, each to be removed with its rename.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tools.sizes import python_files, repo_path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Retired:
    """A word the glossary retired: what it meant, what replaced it, and the modules
    (paths from the repository's root) where it keeps its one meaning."""

    words: tuple[str, ...]
    meant: str
    now: str
    kept_in: tuple[str, ...] = ()


RETIRED = (
    Retired(
        ("follow", "follows", "followed", "following"),
        "waiting for another invocation's drain; keeping a watch's view current",
        "wait for a live drain (lifecycle/live.py, waits_for); a tracker (engine/watchers.py)",
        kept_in=("drainer/engine/following.py", "drainer/engine/drain.py"),
    ),
    Retired(
        ("follower", "followers"),
        "a view of API objects kept current by a list and a watch",
        "tracker (engine/watchers.py)",
    ),
    Retired(
        ("recorder", "recorders"),
        "what sends a drain's Kubernetes Events",
        "poster (the Events are told: lifecycle/told.py); 'record' is the node's alone",
    ),
    Retired(
        ("plan", "plans", "planned", "planning"),
        "how one drain job goes (lifecycle/job.py)",
        "approach; 'plan' is the command line's forecast of drains",
        kept_in=(
            "drainer/plan/",
            "drainer/cli/plan.py",
            "drainer/cli/arguments.py",
            "drainer/cli/main.py",
            "drainer/cli/refresh.py",
        ),
    ),
)

PENDING: dict[str, frozenset[str]] = {}

_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def words_of(identifier: str) -> list[str]:
    """`EventRecorder` -> ["event", "recorder"]; `FOLLOW_POLL_SECONDS` -> ["follow",
    "poll", "seconds"]; `_list_and_watch` -> ["list", "and", "watch"]."""
    return [part.lower() for part in _PARTS.findall(identifier)]


def retired_uses(paths: Sequence[Path]) -> Iterator[str]:
    """One line for each retired word in an identifier, by path and line."""
    for path in sorted(p for root in paths for p in python_files(root)):
        shown = repo_path(path)
        for line, identifier in _identifiers(path):
            for word in words_of(identifier):
                retired = _retired(word, shown)
                if retired is not None:
                    yield (
                        f"{shown}:{line}: {identifier}: '{word}' is retired (it meant "
                        f"{retired.meant}): say {retired.now}"
                    )


def _retired(word: str, shown: str) -> Retired | None:
    for retired in RETIRED:
        if word not in retired.words or any(shown.startswith(k) for k in retired.kept_in):
            continue
        if retired.words[0] in PENDING.get(shown, ()):
            continue
        return retired
    return None


def _identifiers(path: Path) -> Iterator[tuple[int, str]]:
    yield 1, path.stem
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        line = getattr(node, "lineno", 1)
        match node:
            case ast.FunctionDef(name=name) | ast.AsyncFunctionDef(name=name):
                yield line, name
            case ast.ClassDef(name=name):
                yield line, name
            case ast.Name(id=name) | ast.Attribute(attr=name) | ast.arg(arg=name):
                yield line, name
            case ast.keyword(arg=str(name)):
                yield line, name
            case ast.alias(name=name, asname=asname):
                yield line, asname or name.rsplit(".", 1)[-1]
            case ast.ImportFrom(module=str(module)):
                yield line, module.rsplit(".", 1)[-1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.words", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("paths", nargs="*", type=Path, default=[ROOT / "drainer"])
    found = list(retired_uses(parser.parse_args(argv).paths))
    for line in found:
        print(line)
    if found:
        print(
            f"{len(found)} retired word(s): use the glossary's word "
            "(docs/ARCHITECTURE.md, Glossary)",
            file=sys.stderr,
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
