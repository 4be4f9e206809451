"""bench/instructions.py: instructions per pod, ours against the floor, counted by
callgrind (issue 39, item 10: a figure the machine's speed does not move). A full
run takes about a minute and a quarter (`python -m bench.instructions`); these
check its parts: the wrapper each client runs under, the totals read, the slope,
and the message when valgrind is missing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench import clients, instructions


def test_wrapper__the_client_runs_under_it_and_only_while_set(tmp_path: Path) -> None:
    seen = tmp_path / "argv"
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(
        "import subprocess, sys\n"
        f"open({str(seen)!r}, 'w').write(' '.join(sys.argv[1:]))\n"
        "sys.exit(subprocess.call(sys.argv[1:]))\n"
    )
    command = [sys.executable, "-S", "-c", "print('drained')"]
    clients.WRAPPER[:] = [sys.executable, "-S", str(wrapper)]
    try:
        wrapped = clients.launch(command, 30.0)
    finally:
        clients.WRAPPER.clear()
    assert wrapped.returncode == 0 and "drained" in wrapped.output
    assert seen.read_text() == " ".join(command)
    seen.unlink()
    clients.launch(command, 30.0)
    assert not seen.exists(), "no wrapper once cleared"


def test_callgrind_totals__one_total_a_process_summed(tmp_path: Path) -> None:
    (tmp_path / "callgrind.101").write_text(
        "# callgrind format\nversion: 1\nevents: Ir\nfn=main\n0 5\nsummary: 1500\ntotals: 1500\n"
    )
    (tmp_path / "callgrind.102").write_text("events: Ir\nfn=x\n0 1\ntotals: 250\n")
    (tmp_path / "unrelated.txt").write_text("totals: 99999\n")
    assert instructions.callgrind_totals(tmp_path) == 1750


def test_per_pod__the_slope_from_100_to_400_pods() -> None:
    assert instructions.COUNTS == (100, 400)
    assert instructions.per_pod(1_475_000_000, 2_147_000_000) == pytest.approx(2_240_000)


def test_without_valgrind__says_how_to_get_it_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(instructions.shutil, "which", lambda name: None)
    assert instructions.main([]) == 2
    assert "install it (apt-get install valgrind" in capsys.readouterr().err
