"""Instructions per pod, ours (as deployed) against the floor, counted by valgrind:

    python -m bench.instructions [--rounds N]

`make bench`'s CPU per pod is CPU time, and on a shared two-core machine the same
code measured between 1.4x and 2.6x the floor's (issue 39, item 10): the machine's
speed moves it more than a change does. An instruction count does not move with
the machine's speed. Each drain of the CPU scenarios (bench/scenarios.py
`cpu_pods`: 100 and 400 pods, no budget, as deployed) runs on kubesim with the
client's process under callgrind (`--tool=callgrind`), and the slope from 100 to
400 pods (start-up apart) is each client's instructions per pod. callgrind runs
the process's threads one at a time and some fifty times slower, so how the
threads interleave differs from a free run: rounds of the same code still differ,
the floor's by 0.2 %, ours' by up to 15 % (how many changes each turn of the drain's
loop takes in varies; the median is printed), where CPU time differed by half.

valgrind must be on PATH (`apt-get install valgrind`, `dnf install valgrind`);
without it this says so and exits 2.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench import clients, run, scenarios

COUNTS = scenarios.CPU_PODS
CLIENTS = ("ours", "floor")


def callgrind_totals(directory: Path) -> int:
    """The instructions every callgrind output in `directory` counted (one a process)."""
    total = 0
    for path in sorted(directory.glob("callgrind.*")):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith(("totals:", "summary:")):
                total += int(line.split()[1])
                break
    return total


def counted(client: str, pods: int, round_: int) -> int:
    """The instructions of one drain's process (start-up included) under callgrind."""
    with tempfile.TemporaryDirectory(prefix="bench-callgrind-") as tmp:
        clients.WRAPPER[:] = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={tmp}/callgrind.%p",
            "--dump-instr=no",
            "--separate-threads=no",
        ]
        try:
            result = run.drain_once(scenarios.cpu_pods(pods), client, round_, 1.0, None)
        finally:
            clients.WRAPPER.clear()
        if not result.ok:
            raise RuntimeError(f"{client}, {pods} pods, under callgrind: {result.problem}")
        return callgrind_totals(Path(tmp))


def per_pod(low: int, high: int) -> float:
    """Instructions per pod: the slope from COUNTS[0] to COUNTS[1] pods."""
    return (high - low) / (COUNTS[1] - COUNTS[0])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the four drains")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print(
            "bench.instructions: valgrind is not on PATH; install it (apt-get install "
            "valgrind, dnf install valgrind) and run this again",
            file=sys.stderr,
        )
        return 2
    slopes: dict[str, list[float]] = {client: [] for client in CLIENTS}
    for round_ in range(args.rounds):
        for client in CLIENTS:
            low, high = (counted(client, pods, round_) for pods in COUNTS)
            slopes[client].append(per_pod(low, high))
            print(
                f"round {round_ + 1} {client:5s} {COUNTS[0]} pods {low / 1e6:,.0f} M, "
                f"{COUNTS[1]} pods {high / 1e6:,.0f} M: {slopes[client][-1] / 1e6:.3f} M per pod",
                flush=True,
            )
    ours, floor = (statistics.median(slopes[client]) for client in CLIENTS)
    print(
        f"instructions per pod ({COUNTS[0]} to {COUNTS[1]} pods, kubesim, callgrind, median of "
        f"{args.rounds}): ours {ours / 1e6:.3f} M, floor {floor / 1e6:.3f} M: "
        f"ours/floor {ours / floor:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
