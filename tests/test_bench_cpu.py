"""bench's CPU per pod (issue 39, item 10): the table `make bench` prints for ours as
deployed and the floor, and the launcher's figures behind it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from bench import run
from bench.clients import launch
from bench.report import Summary, cpu_slopes, cpu_text
from bench.run import RunResult, run_all
from bench.scenarios import CPU_PODS, CPU_RUNS, cpu_pods, many_pods


def _cpu(client: str, pods: int, cpu: float, system: float, switches: float) -> Summary:
    return Summary(
        f"cpu{pods}",
        client,
        3,
        0,
        None,
        window=1.5,
        wall=2.0,
        cpu=cpu,
        system_cpu=system,
        switches=switches,
    )


def test_cpu_text__per_pod_the_cpu_the_kernels_share_and_the_switches() -> None:
    summaries = [
        _cpu("ours", 100, 0.50, 0.07, 1900),
        _cpu("ours", 400, 0.89, 0.16, 5800),
        _cpu("floor", 100, 0.15, 0.03, 600),
        _cpu("floor", 400, 0.33, 0.04, 1950),
    ]

    lines = cpu_text(summaries).splitlines()

    assert lines[1] == (
        "  ours   100 pods 0.50 s CPU (wall 2.00 s), 400 pods 0.89 s CPU (wall 2.00 s): "
        "1.30 ms per pod (0.30 ms of it in the kernel), 13.0 context switches per pod"
    )
    assert lines[2].endswith(
        "0.60 ms per pod (0.03 ms of it in the kernel), 4.5 context switches per pod"
    )
    assert lines[3] == "  ours/floor per pod: 2.17x (context switches 2.9x)"


def test_cpu_text__nothing_without_both_sizes() -> None:
    assert cpu_text([_cpu("ours", 100, 0.5, 0.07, 1900)]) == ""


def test_launcher__counts_the_waits_of_a_process_threads(tmp_path: Path) -> None:
    """A process whose two threads hand a token back and forth 500 times: each hand-over
    is a wait and a wake-up, which the launcher's getrusage counts."""
    script = tmp_path / "pingpong.py"
    script.write_text(
        "import threading\n"
        "ping, pong = threading.Semaphore(0), threading.Semaphore(0)\n"
        "def other():\n"
        "    for _ in range(500):\n"
        "        ping.acquire(); pong.release()\n"
        "threading.Thread(target=other).start()\n"
        "for _ in range(500):\n"
        "    ping.release(); pong.acquire()\n"
    )
    quiet = tmp_path / "quiet.py"
    quiet.write_text("print(sum(range(1000)))\n")

    busy, idle = (launch([sys.executable, "-S", str(s)], 30.0) for s in (script, quiet))

    assert busy.returncode == idle.returncode == 0
    assert busy.switches >= 500 > idle.switches, (busy.switches, idle.switches)
    assert 0 <= busy.system_cpu <= busy.cpu


def test_run_all__the_cpu_scenarios_run_their_own_count__ours_and_the_floor_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`make bench` runs the CPU scenarios 7 times (their medians; 3 could not tell
    1.5x from 2x), the others `--runs`; kubectl never on the CPU scenarios."""
    drained: list[tuple[str, str, int]] = []

    def drain_once(scenario: Any, client: str, number: int, *args: Any, **kwargs: Any) -> RunResult:
        drained.append((scenario.key, client, number))
        return RunResult(scenario.key, client, number, True)

    monkeypatch.setattr(run, "drain_once", drain_once)
    scenarios = (many_pods(5, 5, key="1"), cpu_pods(CPU_PODS[0]))

    results = run_all(
        scenarios, runs=3, kubectl_runs={"cpu100": 0}, scenario_runs=CPU_RUNS, speed=1.0,
        kubectl=Path("/usr/bin/kubectl"), lookup_nodes=0, progress=lambda line: None,
    )  # fmt: skip

    assert len(results) == len(drained)
    counts = {(k, c): sum(1 for d in drained if d[:2] == (k, c)) for k, c, _ in drained}
    assert counts == {("1", "ours"): 3, ("1", "floor"): 3, ("1", "kubectl"): 3,
                      ("cpu100", "ours"): 7, ("cpu100", "floor"): 7}  # fmt: skip
    assert set(CPU_RUNS) == {f"cpu{n}" for n in CPU_PODS}


def _own(client: str, pods: int, process: float, work: float, system: float) -> Summary:
    summary = _cpu(client, pods, process, 0.1, 3000)
    summary.work_cpu, summary.work_system_cpu, summary.work_switches = work, system, pods * 10
    return summary


OURS_OWN = [_own("ours", 100, 0.90, 0.20, 0.02), _own("ours", 400, 1.05, 0.56, 0.08)]
"""Ours at both sizes: the process's CPU, and the drain's own within it."""


def test_cpu_slopes__the_drain_s_own_cpu_when_both_report_it__the_process_s_beside() -> None:
    """A process's start-up (its modules compiled anew each run) moves its CPU by a
    tenth of a second from run to run, as much as 300 pods' work: the slope is taken
    from the drain's own CPU, which both clients report, and the process's is shown."""
    summaries = [
        *OURS_OWN,
        _own("floor", 100, 0.15, 0.08, 0.01),
        _own("floor", 400, 0.29, 0.20, 0.04),
    ]

    slopes = cpu_slopes(summaries)
    lines = cpu_text(summaries).splitlines()

    assert round(slopes["ours"].per_pod_ms, 2) == 1.20  # (0.56 - 0.20) / 300, not 0.50
    assert round(slopes["floor"].per_pod_ms, 2) == 0.40
    assert "the drain's own" in lines[0]
    assert lines[1].startswith(
        "  ours   100 pods 0.20 s CPU (the process 0.90 s, wall 2.00 s), "
        "400 pods 0.56 s CPU (the process 1.05 s, wall 2.00 s): 1.20 ms per pod"
    )
    assert lines[3] == "  ours/floor per pod: 3.00x (context switches 1.0x)"


def test_cpu_slopes__one_client_without_its_own_figure__both_from_the_process() -> None:
    """An older floor that reports no `work`: both slopes from the process's CPU, never
    one from each."""
    summaries = [
        *OURS_OWN,
        _cpu("floor", 100, 0.15, 0.01, 600),
        _cpu("floor", 400, 0.29, 0.04, 1950),
    ]

    slopes = cpu_slopes(summaries)

    assert round(slopes["ours"].per_pod_ms, 2) == 0.50
    assert slopes["ours"].process is None
    assert "of the process" in cpu_text(summaries).splitlines()[0]
