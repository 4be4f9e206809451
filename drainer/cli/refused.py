"""kubectl drain's flags that this tool does not take, each answered with what to
use instead and why: a person typing kubectl's habits gets a reason, not
"unrecognized arguments" or a suggestion of a flag that means something else."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

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
