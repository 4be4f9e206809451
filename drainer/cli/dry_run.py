"""`--dry-run=none|client|server`, as kubectl takes it (a bare `--dry-run` is
client, as in kubectl). client: nothing is sent but reads, and the budgets listed
judge the evictions; server: the cordon and every eviction are sent with
dryRun=All, so RBAC, admission and the budgets answer for real, and nothing is
stored. Either way the pods that would wait their turn through a budget are named."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

MODES = ("none", "client", "server")


class _DryRun(argparse.Action):
    """Keeps the mode in `dry_run_mode` and whether it is a dry run at all in `dry_run`."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        namespace.dry_run_mode = values
        namespace.dry_run = values != "none"


def bare_dry_run(argv: Sequence[str]) -> list[str]:
    """The command line, a bare `--dry-run` followed by a word that is not a mode
    (`drain --dry-run NODE`) spelled `--dry-run=client`, as kubectl reads it (pflag:
    a bare --dry-run takes no value after a space); argparse's nargs="?" would take
    NODE as the mode. `--dry-run server`, a mode after a space, stays as it was."""
    words = list(argv)
    command = next((w for w in words if not w.startswith("-")), None)  # no flag takes one
    if command not in ("drain", "release"):  # the commands with --dry-run
        return words
    for i, word in enumerate(words):
        if word == "--":  # positional arguments only, from here
            break
        after = words[i + 1] if i + 1 < len(words) else None
        if word == "--dry-run" and after not in MODES:
            words[i] = "--dry-run=client"
    return words


def add_dry_run(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--dry-run",
        dest="dry_run_mode",
        action=_DryRun,
        nargs="?",
        const="client",
        default="none",
        choices=MODES,
        help=f"{what}; change nothing. client (a bare --dry-run): only reads are sent; "
        "server: every write is sent with dryRun=All, so RBAC, admission and budgets answer",
    )
    parser.set_defaults(dry_run=False)
