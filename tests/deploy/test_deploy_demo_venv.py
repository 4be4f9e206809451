"""`make demo` from a fresh clone installs only what the demo needs
(requirements-demo.txt, into its own .venv-demo), pinned as the tests pin it, and
says what it is doing while it installs: the first run spent 2 of its 2.5 minutes
in a silent `pip --quiet` of the whole development set."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .cfn import ROOT

DEMO_LOADS = ("demo", "kubesim", "awssim", "drainer", "testbed")
"""The packages the demo's processes import from (the demo, the two servers, the
function's handler, the testbed's cluster client)."""
MOTO_SERVER = {"flask", "flask-cors"}
"""What awssim needs of moto's `server` extra (its Flask app), not the rest of it."""


def pins(name: str) -> dict[str, str]:
    found = {}
    for line in (ROOT / name).read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)$", line.strip())
        if match:
            found[canonicalize_name(match.group(1))] = match.group(2)
    return found


def imported_distributions() -> set[str]:
    """The distributions behind every third-party import of the demo's packages
    (lazy ones inside functions included), but the real control plane's."""
    ours = set(DEMO_LOADS) | {"tools"}
    providers = importlib.metadata.packages_distributions()
    found: set[str] = set()
    for package in DEMO_LOADS:
        for path in (ROOT / package).rglob("*.py"):
            if "controlplane" in path.parts:
                continue  # the real backend's: tests only, never the demo
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for top in {name.split(".")[0] for name in names}:
                    if top not in sys.stdlib_module_names and top not in ours:
                        found |= {canonicalize_name(d) for d in providers[top]}
    return found


def closure(roots: set[str]) -> set[str]:
    """`roots` and everything they require (no extras), as installed."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for text in importlib.metadata.distribution(name).requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def test_the_demo_requirements_are_what_the_demo_imports_and_their_dependencies() -> None:
    needed = closure(imported_distributions() | MOTO_SERVER)
    assert set(pins("requirements-demo.txt")) == needed


def test_the_demo_pins_are_the_tests_pins() -> None:
    development = pins("requirements.txt") | pins("requirements-dev.txt")
    demo = pins("requirements-demo.txt")
    assert {name: development.get(name) for name in demo} == demo
    assert len(demo) < len(development) / 2


def test_make_demo_installs_them_into_its_own_venv_saying_so() -> None:
    makefile = (ROOT / "Makefile").read_text()
    rule = re.search(r"^\$\(DEMO_STAMP\): (.*?)\n\n", makefile, re.MULTILINE | re.DOTALL)
    assert rule is not None, "no $(DEMO_STAMP) rule"
    recipe = rule.group(1)
    assert "requirements-demo.txt" in recipe and "--quiet" not in recipe
    assert "@echo" in recipe, "a line says what is installed and how long it may take"
    assert "DEMO_VENV := .venv-demo" in makefile
    demo = re.search(r"^demo: (.*)\n\t(.*)\n", makefile, re.MULTILINE)
    assert demo is not None and "DEMO_PY" in demo.group(2)
