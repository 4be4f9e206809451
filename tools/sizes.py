"""The size rule of drainer/ (issue 39, item 6), checked by `make lint`: no module over
500 lines, no function or method over 50, so that growth is split where it happens
instead of at the next review.

    .venv/bin/python -m tools.sizes [PATH ...]   (default: drainer)

Lines are physical lines: a module's whole file; a function's from its `def` (its
decorators apart) to its last line, docstring included.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_LINES = 500
FUNCTION_LINES = 50


def oversized(paths: Sequence[Path]) -> Iterator[str]:
    """One line for each module and function over its limit, by path and line."""
    for path in sorted(p for root in paths for p in python_files(root)):
        text = path.read_text()
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        shown = repo_path(path)
        if lines > MODULE_LINES:
            yield f"{shown}: {lines} lines (a module: at most {MODULE_LINES})"
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES:
                    yield (
                        f"{shown}:{node.lineno}: {node.name} is {length} lines "
                        f"(a function: at most {FUNCTION_LINES})"
                    )


def python_files(root: Path) -> Iterator[Path]:
    """The Python files at `root` (a file, or a folder searched below)."""
    return iter([root]) if root.is_file() else root.rglob("*.py")


def repo_path(path: Path) -> str:
    """`path` as it is shown: relative to the repository when inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.sizes", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("paths", nargs="*", type=Path, default=[ROOT / "drainer"])
    found = list(oversized(parser.parse_args(argv).paths))
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} over the size limits: split them by concern", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
