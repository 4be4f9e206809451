"""The CLI's command line: its commands and flags, each checked as argparse reads it
(a usage error, exit 2, before any request), and the drain options they describe."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from drainer import __version__
from drainer.cli import booleans, output
from drainer.cli.dry_run import add_dry_run, bare_dry_run
from drainer.cli.durations import seconds, whole_seconds
from drainer.cli.impersonate import add_impersonation
from drainer.cli.refused import add_refused
from drainer.cli.selected import add_selector
from drainer.engine import filters
from drainer.engine.options import (
    CONCURRENCY_RANGE,
    GRACE_PERIOD_RANGE,
    STUCK_POD_RANGE,
    DrainOptions,
)

DESCRIPTION = "`python -m drainer drain`: the same engine from a terminal."

COMMAND = "eks-node-drainer"
KUBECTL_PLUGIN = "kubectl drainer"
"""The wheel's two commands, as a person types them."""

DEFAULTS = DrainOptions()
"""The CLI's defaults are the engine's (which are the Lambda's), but for which pods
go: those follow kubectl drain's flags."""
DEFAULT_TIMEOUT = 3600
"""As the Lambda's DRAIN_TIMEOUT_SECONDS."""
MAX_TIMEOUT = 172_800
"""48 hours: the longest a lifecycle hook holds an instance, and DRAIN_TIMEOUT_SECONDS's bound."""

# A node's name is a DNS-1123 subdomain (what the API server accepts for a Node).
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INSTANCE_ID = re.compile(r"i-([0-9a-f]{8}|[0-9a-f]{17})")


def node_name(text: str) -> str:
    if len(text) > 253 or not _DNS_SUBDOMAIN.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a node name (lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit, at most 253 characters)"
        )
    return text


def instance_id(text: str) -> str:
    if not _INSTANCE_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an EC2 instance id (i- followed by 8 or 17 hex digits)"
        )
    return text


def _selector(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a label selector (e.g. app=web or 'tier in (web,api)')"
        )
    return text.strip()


positive_seconds = seconds(
    maximum=MAX_TIMEOUT, why=" (48 hours, the longest a lifecycle hook holds an instance)"
)
"""--timeout: `90`, `90s`, `5m`, `1h30m`, as kubectl takes it (drainer/cli/durations.py)."""


def _integer(minimum: int, maximum: int) -> Callable[[str], int]:
    """An integer from `minimum` to `maximum`: the engine's range for the option."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not an integer from {minimum} to {maximum}"
            )
        return value

    return parse


def _target(parser: argparse.ArgumentParser) -> Any:
    """The flags that say which node, on which cluster: the same for every command."""
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "node_name",
        nargs="?",
        type=node_name,
        metavar="NODE",
        help="the Kubernetes node name, as kubectl takes it (the same as --node)",
    )
    target.add_argument("--node", type=node_name, help="the Kubernetes node name")
    target.add_argument(
        "--instance-id",
        type=instance_id,
        help="an EC2 instance id; the node is found through EC2 (region: AWS_REGION, "
        "AWS_DEFAULT_REGION or the profile's)",
    )
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)"
    )
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")
    add_impersonation(parser)
    return target  # the group that says which node


class _Parser(argparse.ArgumentParser):
    """No abbreviations (`--f` is not `--force`): a flag is spelled out or refused."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.commands: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str) -> NoReturn:
        try:
            super().error(message)  # the usage and the message, on stderr
        except SystemExit:
            raise output.UsageError(message) from None


def parse(argv: Sequence[str] | None, prog: str) -> argparse.Namespace:
    """The arguments; an unknown one is the subcommand's usage error (exit 2), with
    the flags it may have meant."""
    made = parser(prog)
    words = bare_dry_run(sys.argv[1:] if argv is None else argv)  # kubectl's bare --dry-run
    words = booleans.with_values(words, booleans.switches(made.commands.values()))
    args, unknown = made.parse_known_args(words)
    if unknown:
        command = made.commands[args.command]
        command.error(f"unrecognized arguments: {' '.join(unknown)}{_suggestion(unknown, command)}")
    args.node = args.node or args.node_name
    args.prog = prog
    return args


def _suggestion(unknown: Sequence[str], parser: argparse.ArgumentParser) -> str:
    import difflib  # only for a mistyped flag

    shown = [a for a in parser._actions if a.help != argparse.SUPPRESS]  # not the refused
    flags = sorted(o for action in shown for o in action.option_strings)
    for word in unknown:
        if not word.startswith("-"):
            continue
        given = word.split("=", 1)[0]
        close = [f for f in flags if f.startswith(given) and given.startswith("--")]
        close = close or difflib.get_close_matches(given, flags, n=3, cutoff=0.75)
        if close:
            return f" (did you mean {' or '.join(close)}?)"
    return ""


def parser(prog: str) -> _Parser:
    made = _Parser(prog=prog, description=DESCRIPTION)
    made.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = made.add_subparsers(dest="command", required=True, parser_class=_Parser)
    release = commands.add_parser(
        "release",
        help="undo a drain: uncordon, remove the load-balancer exclusion label and the "
        "progress annotation, where the drainer added them",
    )
    _target(release)
    add_dry_run(release, "say what would change")
    _output_flag(release)
    drain = commands.add_parser(
        "drain", help="cordon and drain one node, respecting PodDisruptionBudgets"
    )
    add_selector(_target(drain))  # -l/--selector: nodes by label, as kubectl
    _pacing_flags(drain)
    _kubectl_flags(drain)
    add_refused(drain)  # kubectl's flags it does not take, each with why
    _output_flag(drain)
    drain.add_argument(
        "--verbose", "-v", action="store_true", help="print every eviction attempt and debug logs"
    )
    made.commands = {"release": release, "drain": drain, "plan": _plan(commands)}
    return made


def _plan(commands: Any) -> argparse.ArgumentParser:
    """`plan NODE...` or `plan -l SELECTOR`: the forecast of their drains, read-only."""
    plan: argparse.ArgumentParser = commands.add_parser(
        "plan",
        help="before a refresh: how long each node's drain would take and what would "
        "block it (reads only; changes nothing)",
    )
    which = plan.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "nodes", nargs="*", type=node_name, default=[], metavar="NODE", help="the nodes to plan"
    )
    which.add_argument(
        "--selector",
        "-l",
        type=_selector,
        help="plan every node this label selector selects (e.g. pool=old), drained one "
        "after the other as `drain -l` does",
    )
    which.add_argument(
        "--asg",
        metavar="NAME",
        help="plan an instance refresh of this Auto Scaling group: its InService "
        "instances' nodes, batch by batch (region: AWS_REGION or your AWS profile's)",
    )
    _refresh_flags(plan)
    plan.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)"
    )
    plan.add_argument("--context", help="kubeconfig context (default: the current one)")
    add_impersonation(plan)
    plan.add_argument(
        "--timeout",
        type=positive_seconds,
        default=float(DEFAULT_TIMEOUT),
        help="the drain's timeout: a pod that would still be there then is a blocker "
        f"(default {DEFAULT_TIMEOUT})",
    )
    _kubectl_flags(plan)
    _output_flag(plan)
    plan.set_defaults(node=None, node_name=None, instance_id=None)
    return plan


def _refresh_flags(plan: argparse.ArgumentParser) -> None:
    """An instance refresh's settings (StartInstanceRefresh's; a group stores none)."""
    refresh = plan.add_argument_group("instance refresh (with --asg)")
    size = refresh.add_mutually_exclusive_group()
    size.add_argument(
        "--batch", type=_at_least_one, metavar="N", help="instances replaced at a time"
    )
    size.add_argument(
        "--min-healthy-percentage",
        type=_percentage,
        metavar="P",
        help="the refresh's MinHealthyPercentage (default: the group's instance "
        "maintenance policy's, else 90, as AWS takes it): each batch is "
        "max(1, floor(size * (100 - P) / 100)) instances",
    )
    refresh.add_argument(
        "--instance-warmup",
        type=_non_negative_int,
        metavar="SECONDS",
        help="seconds after each batch before the next (default: the group's "
        "DefaultInstanceWarmup, else its HealthCheckGracePeriod, as AWS takes it)",
    )


def _at_least_one(text: str) -> int:
    value = _non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least 1")
    return value


def _percentage(text: str) -> int:
    value = _non_negative_int(text)
    if value > 100:
        raise argparse.ArgumentTypeError(f"{text!r}: a percentage, 0 to 100")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: not negative")
    return value


def _grace_period(maximum: int) -> Callable[[str], int]:
    """kubectl drain's --grace-period: up to `maximum` seconds; any negative value is
    the pod's own (-1)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = maximum + 1
        if value > maximum:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not an integer up to {maximum} (negative: the pod's own)"
            )
        return max(value, -1)

    return parse


def _output_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output",
        "-o",
        choices=("text", "json"),
        default="text",
        help="json: one JSON document on stdout, whatever happens, for scripts (progress "
        "and errors on stderr)",
    )


def _pacing_flags(drain: argparse.ArgumentParser) -> None:
    """How long, how fast, how gently: the Lambda's settings, as flags, within their bounds."""
    drain.add_argument(
        "--timeout",
        type=positive_seconds,
        default=float(DEFAULT_TIMEOUT),
        help="give up after this long: seconds or a duration (90, 90s, 5m, 1h30m), at most "
        f"{MAX_TIMEOUT} s, 48h (default {DEFAULT_TIMEOUT})",
    )
    add_dry_run(drain, "show what would be evicted, and which pods would wait their turn")
    low, high = CONCURRENCY_RANGE
    drain.add_argument(
        "--concurrency",
        type=_integer(low, high),
        default=DEFAULTS.concurrency,
        help=f"evictions in flight at once, {low} to {high} (default {DEFAULTS.concurrency})",
    )
    high = GRACE_PERIOD_RANGE[1]
    drain.add_argument(
        "--grace-period",
        type=_grace_period(high),
        default=-1,
        help=f"seconds each pod gets to stop, 0 to {high}; negative, as the default -1: "
        "the pod's own (as kubectl)",
    )
    low, high = STUCK_POD_RANGE
    stuck = int(DEFAULTS.stuck_pod_seconds)
    drain.add_argument(
        "--stuck-pod-seconds",
        type=whole_seconds(low, high),
        default=stuck,
        help="stop waiting for pods stuck terminating this long past their grace period, "
        f"{low} to {high} seconds (default {stuck})",
    )


def _kubectl_flags(drain: argparse.ArgumentParser) -> None:
    """Which pods go, with kubectl drain's flags and defaults."""
    drain.add_argument(
        "--ignore-daemonsets",
        action="store_true",
        help="leave DaemonSet pods on the node (without it, as kubectl, refuse to drain one)",
    )
    drain.add_argument(
        "--delete-emptydir-data",
        action="store_true",
        help="evict pods with emptyDir volumes, whose data is lost (without it: refuse)",
    )
    drain.add_argument(
        "--force",
        action="store_true",
        help="evict pods no controller will recreate (without it: refuse)",
    )
    drain.add_argument(
        "--pod-selector",
        type=_selector,
        help="drain only the pods this label selector selects (e.g. app=web,tier!=db)",
    )
    drain.add_argument(
        "--evict-daemonset-pods",
        action="store_true",
        help="evict DaemonSet pods too (their controller may recreate them on the node)",
    )
    drain.add_argument(
        "--ignore-do-not-disrupt",
        action="store_true",
        help="evict pods annotated karpenter.sh/do-not-disrupt=true too (without it, they "
        "are held until the timeout, then left)",
    )


def filter_options(args: argparse.Namespace) -> filters.FilterOptions:
    """Which pods go, from kubectl drain's flags (drain's and plan's alike)."""
    return filters.FilterOptions(
        evict_unreplicated=args.force,
        evict_emptydir=args.delete_emptydir_data,
        evict_daemonset=args.evict_daemonset_pods,
    )


def options_from(args: argparse.Namespace) -> DrainOptions:
    """The drain options the flags describe: the engine's defaults, changed by each
    flag; what is evicted follows kubectl drain's flags, not the Lambda's defaults."""
    return dataclasses.replace(
        DEFAULTS,
        filters=filter_options(args),
        concurrency=args.concurrency,
        grace_period_seconds=args.grace_period if args.grace_period >= 0 else None,
        stuck_pod_seconds=args.stuck_pod_seconds,
        dry_run=args.dry_run,
        dry_run_server=args.dry_run_mode != "client",
        pod_selector=args.pod_selector or "",
        honor_do_not_disrupt=not args.ignore_do_not_disrupt,
    )


def overrides_from(args: argparse.Namespace) -> filters.Overrides:
    return filters.Overrides(
        ignore_daemonsets=args.ignore_daemonsets or args.evict_daemonset_pods,
        delete_emptydir_data=args.delete_emptydir_data,
        force=args.force,
    )
