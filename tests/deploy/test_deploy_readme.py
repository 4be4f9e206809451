"""The documentation cannot drift from the code: the settings table of
docs/reference.md is generated from drainer.settings.VARIABLES, every template
parameter is documented, and the make variables, targets and metrics the pages
name are the ones that exist. README.md stays a short front door, and every
relative link in it and in docs/ leads to a file and a heading that exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.metrics import metric_names

from drainer.lifecycle.settings import VARIABLES
from tools import settings_table
from tools.deploy import MANAGED

from .cfn import ROOT

README_PATH = ROOT / "README.md"
DOCS = ROOT / "docs"
README = README_PATH.read_text()
REFERENCE = (DOCS / "reference.md").read_text()
OPERATIONS = (DOCS / "operations.md").read_text()
README_MAX_LINES = 250
"""The README is the front door: what it is, the demo, a quick start, operating it,
links. Everything longer belongs in docs/."""
DOCUMENTS = [README_PATH, *sorted(DOCS.glob("*.md"))]

_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^()\s]+)\)")
_HEADING = re.compile(r"^(#{1,6}) +(.+?) *#* *$", re.MULTILINE)


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where brackets and
    parentheses are not links."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def _without_fences(text: str) -> str:
    """The text with each fenced code block blanked, offsets kept: a '#' line in
    a code block is not a heading."""
    return _FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def section(text: str, heading: str) -> str:
    """The text under `heading` ("## Metrics") up to the next heading of its level
    or above."""
    level = len(heading) - len(heading.lstrip("#"))
    plain = _without_fences(text)
    start = re.search(rf"^{re.escape(heading)}$", plain, re.MULTILINE)
    assert start is not None, f"no heading {heading!r}"
    end = re.compile(rf"^#{{1,{level}}} ", re.MULTILINE).search(plain, start.end())
    return text[start.start() : end.start() if end else len(text)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercased, punctuation but '-' and '_'
    dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    """Every heading's anchor, with GitHub's -1, -2 ... for a repeated one."""
    seen: dict[str, int] = {}
    found = set()
    for match in _HEADING.finditer(_without_fences(document.read_text())):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(document: Path) -> list[str]:
    return [
        target
        for target in _LINK.findall(_prose(document.read_text()))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # https:, mailto: ...
    ]


def test_the_settings_table_is_generated_from_the_settings():
    assert settings_table.section(REFERENCE) == settings_table.render(), (
        "docs/reference.md's settings table is stale: run python -m tools.settings_table --write"
    )


def test_the_table_has_one_row_per_variable():
    rows = [
        line for line in settings_table.section(REFERENCE).splitlines() if line.startswith("| `")
    ]
    assert [re.match(r"\| `(\w+)`", row).group(1) for row in rows] == [v.name for v in VARIABLES]  # type: ignore[union-attr]


def test_every_template_parameter_is_documented(template: dict[str, Any]):
    settings = {settings_table.parameter_for(v.name) for v in VARIABLES}
    documented = REFERENCE + OPERATIONS
    undocumented = [
        name
        for name in template["Parameters"]
        if name not in settings and name not in MANAGED and f"`{name}`" not in documented
    ]
    assert not undocumented, f"add these to docs/reference.md's Parameters table: {undocumented}"


def test_the_make_variables_the_docs_name_are_the_makefiles():
    makefile = (ROOT / "Makefile").read_text()
    deploy_with_make = section(OPERATIONS, "## Deploy with make")
    for variable in ("STACK_NAME", "ARCH", "BUCKET", "PARAMS_FILE", "PARAMS", "REGION"):
        assert f"{variable} ?=" in makefile
        assert f"`{variable}`" in deploy_with_make


def test_the_metrics_table_is_what_the_handler_emits():
    source = (ROOT / "drainer" / "lifecycle" / "ending.py").read_text()
    launch = metric_names(launch=True)
    assert launch[-1] == "InvocationSeconds", launch
    emitted = metric_names() + launch[:-1]  # InvocationSeconds documented once
    metrics = section(REFERENCE, "## Metrics")
    documented = re.findall(r"^\| `(\w+)` \|", metrics, re.MULTILINE)
    assert documented == emitted
    assert 'METRICS_NAMESPACE = "EksNodeDrainer"' in source and "`EksNodeDrainer`" in metrics


def test_make_help_names_every_target():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.MULTILINE)) - {"help"}
    shown = subprocess.run(
        ["make", "--no-print-directory", "help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    listed = set(re.findall(r"^  make ([a-z-]+)", shown, re.MULTILINE))
    assert listed == targets, (sorted(targets - listed), sorted(listed - targets))


def test_the_readme_stays_a_front_door_under_250_lines():
    lines = len(README.splitlines())
    assert lines < README_MAX_LINES, (
        f"README.md has {lines} lines: move the detail to docs/ and link it"
    )


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(document: Path):
    broken = []
    for target in relative_links(document):
        path, _, anchor = target.partition("#")
        file = (document.parent / path).resolve() if path else document
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT)}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, f"{document.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Node groups by name or by tag", "node-groups-by-name-or-by-tag"),
        ("Check first: make preflight", "check-first-make-preflight"),
        (
            "Managed node groups, and what not to run beside it",
            "managed-node-groups-and-what-not-to-run-beside-it",
        ),
        ("What `make demo` shows", "what-make-demo-shows"),
        ("0.1.0, from a stack deployed before it", "010-from-a-stack-deployed-before-it"),
        ("TIMEOUT_POLICY and force", "timeout_policy-and-force"),
    ],
)
def test_slug_follows_githubs_rules(heading: str, anchor: str):
    assert slug(heading) == anchor
