"""`make unit` runs the tests marked `alone` in a second pytest run that collects only
the files its grep names: a test marked another way would be deselected by the first
run and never collected by the second, so it would silently not run."""

from __future__ import annotations

import ast
import itertools
import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _marks_alone(path: Path) -> bool:
    """Any `<...>mark.alone` in the file: a decorator, `pytestmark`, or a param's marks."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return any(
        isinstance(node, ast.Attribute)
        and node.attr == "alone"
        and (
            (isinstance(node.value, ast.Attribute) and node.value.attr == "mark")
            or (isinstance(node.value, ast.Name) and node.value.id == "mark")
        )
        for node in ast.walk(tree)
    )


def _alone_run() -> list[str]:
    """The arguments of the recipe's pytest run with `-m alone`, as make expands them."""
    shown = subprocess.run(
        ["make", "--no-print-directory", "-n", "unit"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    runs = [shlex.split(line) for line in shown.splitlines() if "pytest" in line]
    alone = [
        argv
        for argv in runs
        if any(a == "-m" and b == "alone" for a, b in itertools.pairwise(argv))
    ]
    assert len(alone) == 1, shown
    return alone[0]


def test_the_alone_run_collects_every_file_that_marks_a_test_alone() -> None:
    marking = {
        str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("*.py") if _marks_alone(path)
    }
    assert marking, "no test is marked alone: the second run would collect all of tests/"
    named = {arg for arg in _alone_run() if arg.endswith(".py")}
    assert named == marking


def test_a_test_marked_alone_without_the_pytest_prefix_is_still_found(tmp_path: Path) -> None:
    """The checker itself: `from pytest import mark` then `@mark.alone` counts."""
    source = tmp_path / "test_x.py"
    source.write_text("from pytest import mark\n\n@mark.alone\ndef test_x():\n    pass\n")
    assert _marks_alone(source)
    source.write_text("import pytest\n\n@pytest.mark.slow\ndef test_alone():\n    pass\n")
    assert not _marks_alone(source)
