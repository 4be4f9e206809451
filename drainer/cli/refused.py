"""kubectl drain's flags that this tool does not take, each answered with what to
use instead and why: a person typing kubectl's habits gets a reason, not
"unrecognized arguments" or a suggestion of a flag that means something else."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from drainer.engine.options import STUCK_POD_RANGE, DrainOptions

_STUCK = int(DrainOptions().stuck_pod_seconds)

REFUSED: dict[tuple[str, ...], str] = {
    ("--disable-eviction",): (
        "not taken: this tool never bypasses PodDisruptionBudgets (kubectl's "
        "--disable-eviction deletes pods without asking their budgets, which is what it "
        "exists not to do); a budget that never allows is waited for until --timeout, then "
        "named. To bound the wait, give --timeout; the Lambda's TIMEOUT_POLICY=force deletes "
        "what is left at its deadline, and says so"
    ),
    ("--delete-local-data",): (
        "kubectl's old name (deprecated since kubectl 1.20) of --delete-emptydir-data: "
        "use --delete-emptydir-data"
    ),
    ("--chunk-size",): (
        "not needed: lists are read in pages already (the API server's limit and "
        "continue), so leave it out"
    ),
    ("--skip-wait-for-delete-timeout",): (
        "use --stuck-pod-seconds N, which stops waiting for a pod still terminating N s past "
        "its grace period (its deletionTimestamp), as this flag does in kubectl; it defaults "
        f"to {_STUCK} s, where kubectl's default, 0, never stops waiting (here 0 stops at the "
        f"grace period; at most {STUCK_POD_RANGE[1]} s, and --timeout bounds the drain)"
    ),
}


class _Refuse(argparse.Action):
    """Stops the parse at the flag, with its answer (exit 2), whatever follows it."""

    def __init__(self, *args: Any, why: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.why = why

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        parser.error(f"argument {option_string}: {self.why}")


def add_refused(parser: argparse.ArgumentParser) -> None:
    """kubectl drain's flags this command answers with a usage error (not in --help)."""
    for flags, why in REFUSED.items():
        parser.add_argument(
            *flags, nargs="?", action=_Refuse, why=why, help=argparse.SUPPRESS, dest="refused"
        )
