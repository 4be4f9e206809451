"""tools/sizes.py, the size rule `make lint` keeps (issue 39, item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import sizes


def _function(name: str, body_lines: int) -> str:
    return f"def {name}() -> None:\n" + "    x = 1\n" * (body_lines - 1)


def test_a_function_of_51_lines__named_with_its_line__50_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = tmp_path / "m.py"
    module.write_text(_function("fits", 50) + "\n\n" + _function("grown", 51))

    assert sizes.main([str(tmp_path)]) == 1

    out = capsys.readouterr().out.splitlines()
    assert out == [f"{module}:53: grown is 51 lines (a function: at most 50)"]


def test_a_module_of_501_lines__named__500_passes(tmp_path: Path) -> None:
    (tmp_path / "fits.py").write_text("x = 1\n" * 500)
    (tmp_path / "grown.py").write_text("x = 1\n" * 501)

    assert list(sizes.oversized([tmp_path])) == [
        f"{tmp_path / 'grown.py'}: 501 lines (a module: at most 500)"
    ]


def test_methods_count_too(tmp_path: Path) -> None:
    method = "class C:\n    def m(self) -> None:\n" + "        x = 1\n" * 50
    (tmp_path / "c.py").write_text(method)

    assert list(sizes.oversized([tmp_path])) == [
        f"{tmp_path / 'c.py'}:2: m is 51 lines (a function: at most 50)"
    ]
