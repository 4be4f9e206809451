"""kubectl's impersonation flags (--as, --as-group, --as-uid): every request is then
made as that user, once the kubeconfig's own identity may impersonate it. What the
headers are, and how the flags meet the kubeconfig user's `as` fields, is
drainer/k8s/impersonation.py's."""

from __future__ import annotations

import argparse

from drainer.k8s.impersonation import Impersonation


def add_impersonation(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--as", dest="as_user", metavar="USER", help="impersonate this user (as kubectl's --as)"
    )
    parser.add_argument(
        "--as-group",
        action="append",
        metavar="GROUP",
        help="impersonate this group; repeat for more (needs --as or the kubeconfig's `as`)",
    )
    parser.add_argument("--as-uid", metavar="UID", help="impersonate this UID (needs --as)")


def from_args(args: argparse.Namespace) -> Impersonation:
    return Impersonation(
        user=args.as_user or "", uid=args.as_uid or "", groups=tuple(args.as_group or ())
    )


def words(args: argparse.Namespace) -> list[str]:
    """The flags again, for a command printed to run later (the undo of a drain)."""
    said = [("--as", args.as_user), ("--as-uid", args.as_uid)]
    said += [("--as-group", group) for group in args.as_group or ()]
    return [word for flag, value in said if value for word in (flag, value)]
