"""README.md cannot drift from the code: the settings table is generated from
drainer.settings.VARIABLES, and every template parameter is documented."""

from __future__ import annotations

import re
import subprocess
from typing import Any

from drainer.lifecycle.settings import VARIABLES
from tools import settings_table
from tools.deploy import MANAGED

from .cfn import ROOT

README = (ROOT / "README.md").read_text()


def test_the_settings_table_is_generated_from_the_settings():
    assert settings_table.section(README) == settings_table.render(), (
        "README.md's settings table is stale: run python -m tools.settings_table --write"
    )


def test_the_table_has_one_row_per_variable():
    rows = [line for line in settings_table.section(README).splitlines() if line.startswith("| `")]
    assert [re.match(r"\| `(\w+)`", row).group(1) for row in rows] == [v.name for v in VARIABLES]  # type: ignore[union-attr]


def test_every_template_parameter_is_documented(template: dict[str, Any]):
    settings = {settings_table.parameter_for(v.name) for v in VARIABLES}
    deploy_section = README[README.index("## Deploy") : README.index("## Settings")]
    undocumented = [
        name
        for name in template["Parameters"]
        if name not in settings and name not in MANAGED and f"`{name}`" not in deploy_section
    ]
    assert not undocumented, f"add these to README.md's Parameters table: {undocumented}"


def test_the_make_variables_the_readme_names_are_the_makefiles():
    makefile = (ROOT / "Makefile").read_text()
    for variable in ("STACK_NAME", "ARCH", "BUCKET", "PARAMS_FILE", "PARAMS", "REGION"):
        assert f"{variable} ?=" in makefile
        assert f"`{variable}`" in README


def test_the_metrics_table_is_what_the_handler_emits():
    source = (ROOT / "drainer" / "lifecycle" / "ending.py").read_text()
    emitted = re.findall(r'add_metric\(\s*name="(\w+)"', source)
    section = README[README.index("### Metrics") : README.index("### Troubleshooting")]
    documented = re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE)
    assert documented == emitted
    assert 'METRICS_NAMESPACE = "EksNodeDrainer"' in source and "`EksNodeDrainer`" in section


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
