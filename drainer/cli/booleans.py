"""kubectl's boolean flags with a value: `--force=true`, `--ignore-daemonsets=false`.

kubectl's flags (pflag) take a boolean's value after `=` (never after a space):
`kubectl drain N --ignore-daemonsets=true --delete-emptydir-data=true` is a common
script line. argparse's store_true flags take none, so the words are rewritten first:
true (as Go's strconv.ParseBool reads it) is the bare flag, false drops it and any use
of it before (pflag's last value wins). A value Go refuses is left, for argparse's
usage error.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Iterable, Mapping, Sequence

GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def switches(parsers: Iterable[argparse.ArgumentParser]) -> dict[str, frozenset[str]]:
    """The long options of the parsers' store_true flags, each with all its spellings
    (`--verbose`: `--verbose` and `-v`)."""
    return {
        option: frozenset(action.option_strings)
        for parser in parsers
        for action in parser._actions
        if isinstance(action, argparse._StoreTrueAction)
        for option in action.option_strings
        if option.startswith("--")
    }


def with_values(words: Sequence[str], flags: Mapping[str, Collection[str]]) -> list[str]:
    """`words` with each `--flag=VALUE` of `flags` read as pflag reads it (false drops
    the flag's earlier uses, in any of its spellings)."""
    read: list[str] = []
    for at, word in enumerate(words):
        if word == "--":  # positional arguments only, from here
            return read + list(words[at:])
        name, equals, value = word.partition("=")
        if equals and name in flags and value in GO_TRUE:
            read.append(name)
        elif equals and name in flags and value in GO_FALSE:
            read = [w for w in read if w not in flags[name]]
        else:
            read.append(word)
    return read
