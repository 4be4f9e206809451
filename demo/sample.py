"""The README's sample of `make demo`, cut from a real run, and the check that keeps
it from going stale.

    python -m demo.sample            run the demo (as `make demo` does) and write the
                                     sample into README.md between its markers
    python -m demo.sample --check    say which of the README's lines a fresh run no
                                     longer prints (exit 1 if any)

The sample is the run's key moments, in the order they happened, then its whole
summary. A line is "the same" in another run when it differs only in what changes
from run to run: timings and counts, instance IDs, node, pod and volume names.
tests/test_demo.py checks the README's sample against the run it makes anyway.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from tools.markers import between, replace_between

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN = "<!-- demo-sample:begin -->"
END = "<!-- demo-sample:end -->"
ELIDED = "  [...]"

# What the sample shows of the event lines: (pattern, how many), each line at most once.
# Only lines every default run prints: a refusal by the budget depends on timing.
SHOWN: list[tuple[str, int]] = [
    (r"aws +\S+ scales in: ", 1),
    (r"aws +EventBridge delivers ", 1),
    (r"aws +RecordLifecycleActionHeartbeat", 1),
    (r"k8s +node \S+ cordoned", 1),
    (r"lambda +draining ", 1),
    (r"lambda +emptyDir data", 1),
    (r"k8s +\S+ evicted: terminating", 3),
    (r"k8s +\S+ gone \(stopped in", 1),
    (r"k8s +\S+ Ready on .*\(replaces", 1),
    (r"lambda +starting the critical tier", 1),
    (r"k8s +volume .* detached from", 1),
    (r"k8s +volume .* attached to", 1),
    (r"k8s +shop/db-0 Ready on", 1),
    (r"lambda +left .* target group", 1),
    (r"lambda +drain finished", 1),
    (r"aws +CompleteLifecycleAction", 1),
    (r"aws +\S+ terminated", 1),
]

TIME = r"^\s*\d+\.\ds\s+"
"""An event line's time, before its source (aws, k8s, lambda)."""

_VARYING = [
    (re.compile(TIME), ""),
    (re.compile(r"\bi-[0-9a-f]{8,17}\b"), "i-ID"),
    (re.compile(r"\bip-[0-9-]+\.ec2\.internal\b"), "NODE"),
    (re.compile(r"\bpvc-[0-9a-f-]{36}\b"), "pvc-ID"),
    (re.compile(r"-[0-9a-f]{10}-[a-z0-9]{5}\b"), "-POD"),  # a ReplicaSet's pod
    (re.compile(r"\baws-node-[a-z0-9]{5}\b"), "aws-node-POD"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d"), "TIME"),
    (re.compile(r"^(\s*logs\s+)\S+$"), r"\1DIR"),  # the summary's logs row: --logs or the time's
    # Which budgets held pods back depends on the run's timing, like the count.
    (re.compile(r"; budgets that held pods back: .*$"), ""),
    (re.compile(r"\d+(\.\d+)?"), "N"),
    (re.compile(r"\s+"), " "),
]


def normalise(line: str) -> str:
    """The line without what differs from run to run."""
    for pattern, replacement in _VARYING:
        line = pattern.sub(replacement, line)
    return line.strip()


def cut(output: str) -> list[str]:
    """The sample of a plain demo run's output: the key moments, then the summary."""
    lines = output.splitlines()
    summary = lines.index("Summary") if "Summary" in lines else len(lines)
    taken: list[str] = []
    wanted = dict(SHOWN)
    left = dict(wanted)  # pattern -> lines still wanted
    for line in lines[:summary]:
        for pattern, count in left.items():
            if count and re.search(TIME + pattern, line):
                left[pattern] -= 1
                taken.append(line.rstrip())
                break
    missing = [pattern for pattern, count in left.items() if count == wanted[pattern]]
    if missing:
        raise ValueError(f"the run printed no line like {missing}: is it a default run?")
    return [*taken, ELIDED, "", *(line.rstrip() for line in lines[summary:] if line.strip())]


def stale(sample: Iterable[str], output: str) -> list[str]:
    """The sample's lines that `output` (a fresh run's) no longer prints."""
    printed = {normalise(line) for line in output.splitlines()}
    return [
        line
        for line in sample
        if line.strip() not in ("", ELIDED.strip()) and normalise(line) not in printed
    ]


def readme_sample(text: str) -> list[str]:
    """The lines of the README's sample: the code block between the markers."""
    block = between(text, BEGIN, END)
    return [line for line in block.splitlines() if not line.startswith("```")]


def with_sample(text: str, sample: Sequence[str]) -> str:
    return replace_between(text, BEGIN, END, "\n".join(["```", *sample, "```"]))


def _run_demo() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "demo", "--plain"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"the demo failed (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return done.stdout


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demo.sample", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--check", action="store_true", help="check the README's sample against a fresh run"
    )
    args = parser.parse_args(argv)
    output = _run_demo()
    text = README.read_text()
    if args.check:
        old = stale(readme_sample(text), output)
        for line in old:
            print(f"no longer printed: {line}")
        return 1 if old else 0
    README.write_text(with_sample(text, cut(output)))
    print(f"{README.name}: the sample of a fresh run written between {BEGIN} and {END}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
