"""kubectl's flags, as kubectl drain takes them (issue 38, item 4): durations for
every time, `--dry-run=none|client|server`, and kubectl flags this tool does not
take answered with what to use instead."""

from __future__ import annotations

import pytest

from drainer.cli.arguments import parse as _parse

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


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--disable-eviction"], ["never bypasses PodDisruptionBudgets", "--timeout"]),
        (["--disable-eviction=true"], ["never bypasses PodDisruptionBudgets"]),
        (["--delete-local-data"], ["kubectl's old name", "use --delete-emptydir-data"]),
        (["--chunk-size", "500"], ["read in pages already", "leave it out"]),
        (["--chunk-size=0"], ["read in pages already"]),
    ],
)
def test_kubectl_flags_this_tool_does_not_take__usage_error_saying_what_instead(
    flags: list[str], says: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _drain(*flags)

    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert f"argument {flags[0].split('=')[0]}" in error
    for words in says:
        assert words in error
    assert "unrecognized" not in error


def test_a_typo_is_never_answered_with_a_refused_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _drain("--delete")

    error = capsys.readouterr().err
    assert "did you mean --delete-emptydir-data?" in error
    assert "--delete-local-data" not in error
