"""kubectl's flags, as kubectl drain takes them (issue 38, item 4): durations for
every time, `--dry-run=none|client|server`, and kubectl flags this tool does not
take answered with what to use instead."""

from __future__ import annotations

import pytest

from drainer.cli.main import _parse

NODE = "ip-10-0-0-1.ec2.internal"


def _drain(*flags: str) -> object:
    return _parse(["drain", NODE, *flags], "python -m drainer")


@pytest.mark.parametrize(
    ("flags", "timeout"),
    [
        (["--timeout", "10s"], 10.0),
        (["--timeout=5m"], 300.0),
        (["--timeout", "1h30m"], 5400.0),
        (["--timeout", "500ms"], 0.5),
        (["--timeout", "90"], 90.0),
        (["--timeout=48h"], 172_800.0),
    ],
)
def test_timeout_as_kubectl_takes_it(flags: list[str], timeout: float) -> None:
    assert _drain(*flags).timeout == timeout  # type: ignore[attr-defined]


def test_stuck_pod_seconds__a_duration_too() -> None:
    assert _drain("--stuck-pod-seconds", "5m").stuck_pod_seconds == 300  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", ["-5m", "soon", "1h30", "0s", "49h"])
def test_bad_timeout__usage_error_saying_the_accepted_forms(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _drain(f"--timeout={value}")

    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert f"argument --timeout: {value!r}" in error
    assert "90s, 5m, 1h30m, 500ms" in error
