"""`python -m drainer drain`: the same engine from a terminal.

For operators (drain a node by hand, the way the Lambda would) and for testing
RBAC before deploying (`--context` of a user in the eks-node-drainer group,
`--dry-run` to check permissions without touching anything).

    python -m drainer drain --node NAME [--kubeconfig PATH] [--context NAME]
                            [--timeout SECONDS] [--dry-run]
    python -m drainer drain --instance-id ID ...   (looks the node up through EC2)
    python -m drainer release --node NAME [--dry-run]   (undo: uncordon, and remove
                            what the drainer added to the node, nothing else)

Ctrl-C, SIGTERM (a CI job's timeout, `kill`) and SIGHUP (the terminal closed) stop
new evictions at once, record on the node that the drain was interrupted, and say
what state the node is in and how to undo it (on stderr when stdout is gone); a
second one quits at once.

Exit status: 0 drained or released (or dry run done), 1 not drained (no such node
or instance, timeout, pods left), 2 usage or configuration error (checked before
any request), 3 API error (RBAC, TLS, unreachable), 128 + the signal's number when
interrupted: 130 Ctrl-C (SIGINT), 143 SIGTERM, 129 SIGHUP.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import re
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from drainer import __version__
from drainer.cli import output
from drainer.cli.dry_run import add_dry_run
from drainer.cli.durations import seconds, whole_seconds
from drainer.cli.impersonate import add_impersonation
from drainer.cli.impersonate import from_args as impersonation_from
from drainer.cli.impersonate import words as impersonation_words
from drainer.cli.refused import add_refused
from drainer.cli.selected import add_selector
from drainer.cli.streams import SafeStream
from drainer.engine import filters
from drainer.engine.options import (
    CONCURRENCY_RANGE,
    GRACE_PERIOD_RANGE,
    STUCK_POD_RANGE,
    DrainOptions,
)
from drainer.errors import DrainerError, InstanceNotFound, KubeError
from drainer.k8s import cordon
from drainer.k8s.kube import Kube
from drainer.k8s.nodes import find_node_object
from drainer.outcome import Outcome

if TYPE_CHECKING:
    from drainer import aws
    from drainer.cli.display import Progress
    from drainer.engine.drain import Drain
    from drainer.engine.report import DrainReport

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


def _parse(argv: Sequence[str] | None, prog: str) -> argparse.Namespace:
    """The arguments; an unknown one is the subcommand's usage error (exit 2), with
    the flags it may have meant."""
    parser = _parser(prog)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = parser.commands[args.command]
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


def _parser(prog: str) -> _Parser:
    parser = _Parser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
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
    parser.commands = {"release": release, "drain": drain}
    return parser


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
        type=_integer(-1, high),
        default=-1,
        help=f"seconds each pod gets to stop, 0 to {high} (default -1: the pod's own)",
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


def options_from(args: argparse.Namespace) -> DrainOptions:
    """The drain options the flags describe: the engine's defaults, changed by each
    flag; what is evicted follows kubectl drain's flags, not the Lambda's defaults."""
    return dataclasses.replace(
        DEFAULTS,
        filters=filters.FilterOptions(
            evict_unreplicated=args.force,
            evict_emptydir=args.delete_emptydir_data,
            evict_daemonset=args.evict_daemonset_pods,
        ),
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


class NoRegion(DrainerError):
    """No AWS region configured for an --instance-id lookup."""


def _aws_session() -> aws.Session:
    """A session in the region botocore's chain finds, AWS_REGION first (the
    variable the Lambda runtime sets, which botocore alone does not read)."""
    from drainer import aws

    session = aws.Session(region_name=os.environ.get("AWS_REGION") or None)
    if not session.region_name:
        raise NoRegion(
            "no AWS region to look the instance up in: set AWS_REGION or "
            "AWS_DEFAULT_REGION, or a region in your AWS profile"
        )
    return session


def _node_for_instance(kube: Kube, instance: str) -> dict[str, Any] | None:
    """The instance's node as the lookup read it; None when there is none."""
    from drainer import aws

    session = _aws_session()
    identity = aws.describe_instance(aws.make_clients(session).ec2, instance)
    return find_node_object(
        kube, identity.private_dns_name, identity.hostname_candidates, identity.provider_id_suffix
    )


def main(
    argv: Sequence[str] | None = None, stdout: TextIO | None = None, *, prog: str | None = None
) -> int:
    """The command line; `prog` is how the person typed it (the usage line and the
    undo command it prints say it the same way): `eks-node-drainer`,
    `kubectl drainer`, or by default `python -m drainer`."""
    err = SafeStream(sys.stderr)
    terminal = _Terminal(out=SafeStream(stdout or sys.stdout, fallback=err), err=err)
    terminal.log.quiet = False
    words = sys.argv[1:] if argv is None else argv
    try:
        args = _parse(words, prog or python_m_prog())
    except output.UsageError as e:
        if output.asks_for_json(words):
            output.emit(terminal.out, output.document("error", 2, message=e.message))
        raise
    verbose = getattr(args, "verbose", False)
    # A handler of our own, filtered: basicConfig installs it only in a process whose
    # logging nobody set up yet (a test's handlers, shared across tests, stay as they are).
    handler = logging.StreamHandler(err)
    handler.addFilter(terminal.log)
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        handlers=[handler],
    )
    try:
        with _signals_interrupt():
            return _connect(args, terminal)
    except KeyboardInterrupt as e:  # before the drain began (its own signals are handled)
        said = "interrupted before anything changed"
        print(f"\n{said}", file=err)
        code = 128 + (e.signum if isinstance(e, Signalled) else signal.SIGINT)
        if args.output == "json":
            output.emit(terminal.out, output.document("interrupted", code, message=said))
        return code
    except Exception as e:  # a bug: the traceback follows, and stdout still has its document
        if args.output == "json":
            said = f"unexpected error: {type(e).__name__}: {e}"
            output.emit(terminal.out, output.document("error", 1, message=said))
        raise


def _failed(
    terminal: _Terminal, args: argparse.Namespace, code: int, message: str, **more: Any
) -> int:
    """An error before or instead of a drain: one line on stderr, and with -o json
    the one JSON document stdout carries."""
    print(f"error: {message}", file=terminal.err)
    if args.output == "json":
        ended = more.pop("result", "error")
        output.emit(terminal.out, output.document(ended, code, message=message, **more))
    return code


def _connect(args: argparse.Namespace, terminal: _Terminal) -> int:
    """The client, the command, and the exit status of what went wrong before a drain."""
    options = options_from(args) if args.command == "drain" else DEFAULTS
    if args.instance_id:
        try:
            _aws_session()
        except DrainerError as e:  # no region, a profile that does not exist
            return _failed(terminal, args, 2, str(e))
    try:
        kube = Kube.from_kubeconfig(
            args.kubeconfig,
            args.context,
            pool_size=options.concurrency + 4,
            impersonate=impersonation_from(args),
        )
    except DrainerError as e:
        return _failed(terminal, args, 2, str(e))
    try:
        return _command(kube, args, options, terminal)
    except KubeError as e:
        return _failed(terminal, args, 3, str(e))
    except InstanceNotFound as e:
        return _failed(terminal, args, 1, str(e))
    except DrainerError as e:
        return _failed(terminal, args, 2, str(e))
    finally:
        kube.close()


def _command(
    kube: Kube, args: argparse.Namespace, options: DrainOptions, terminal: _Terminal
) -> int:
    out, err = terminal.out, terminal.err
    if getattr(args, "selector", None):  # drain -l: the nodes a label selector chooses
        from drainer.cli.selected import drain_selected

        return drain_selected(kube, args, options, terminal)
    if args.instance_id:
        found = _node_for_instance(kube, args.instance_id)
        if found is None:
            why = f"no Kubernetes node for instance {args.instance_id}"
            return _failed(terminal, args, 1, why, result="no_node")
    else:
        found = kube.get_node(args.node)
        if found is None:  # kubectl's answer; nothing is touched
            return _failed(terminal, args, 1, f"node {args.node} not found", result="no_node")
    node = str(found["metadata"]["name"])
    if args.command == "release":
        return _release(kube, found, args, out)
    try:
        pod_list, _ = kube.list_pods_on_node(node, args.pod_selector or "")
    except KubeError as e:
        if e.status == 400 and args.pod_selector:  # a usage error: the selector's syntax
            return _failed(terminal, args, 2, f"--pod-selector {args.pod_selector!r}: {e}")
        raise
    if args.pod_selector and not pod_list:  # kubectl's answer: nothing to evict, no error
        print(f"warning: --pod-selector {args.pod_selector} matches no pod on {node}", file=err)
    refused = filters.refusals(pod_list, overrides_from(args))
    if refused:  # kubectl's answer, before anything changes (kubectl cordons first)
        for message, names in refused.items():
            print(f"error: {message}: {', '.join(names)}", file=err)
        said = f"node {node} not drained; nothing changed"
        if args.output == "json":
            print(said, file=err)
            output.emit(out, output.document("refused", 1, node=node, refusals=refused))
        else:
            print(said, file=out)
        return 1
    if not args.dry_run and not _may_evict(kube):
        why = (
            "this identity may not evict pods (RBAC: create pods/eviction); node "
            f"{node} not cordoned, nothing changed. Apply k8s-rbac/ (kubectl apply -f k8s-rbac/)"
        )
        return _failed(terminal, args, 3, why, result="forbidden", node=node)
    return _drain(kube, found, args, options, terminal)


def _drain(
    kube: Kube,
    found: dict[str, Any],
    args: argparse.Namespace,
    options: DrainOptions,
    terminal: _Terminal,
) -> int:
    """Drain the node read, showing its progress; the exit status."""
    # Imported here, not at the top: the first requests (the node, its pods, the
    # permission) go out without waiting for the engine's modules (issue 28).
    from drainer.cli.display import Progress, StatusTicker
    from drainer.cli.told import CliStory
    from drainer.engine.drain import Drain

    out, err = terminal.out, terminal.err
    node = str(found["metadata"]["name"])
    # With -o json, stdout carries the JSON alone; the progress goes to stderr.
    display = err if args.output == "json" else out
    print(f"draining node {node}{' (dry run)' if args.dry_run else ''}", file=display, flush=True)
    live = display.isatty()
    progress = Progress(display, node, args.verbose, live=live)
    # The drain is of the node object read here: one of the same name later is not it.
    uid = str(found["metadata"].get("uid") or "")
    story = None if args.dry_run else CliStory(kube, node, uid, then=progress)  # Events
    drain = Drain(kube, node, options, on_event=story or progress, node_uid=uid)
    undo = _undo_command(args, node)
    with _Interruptible(drain) as interruptible:
        try:
            try:
                with StatusTicker(progress, drain.waiting, 1.0 if live else 5.0):
                    report = drain.run(
                        time.time() + args.timeout,
                        deadline_source=f"--timeout ({args.timeout:g} s)",
                    )
                if story is not None:
                    story.end(report)
            finally:  # before the verdict: nothing about the drain is printed after it
                if story is not None:
                    story.close()
                interruptible.over = True
                terminal.drain_over(progress)
        except KubeError as e:  # the API failed beyond retries after the drain began
            cordoned = drain.report.cordoned
            if cordoned:
                print(f"node {node} NOT drained; it stays cordoned; to undo: {undo}", file=display)
            return _failed(terminal, args, 3, str(e), node=node, cordoned=cordoned)
        code = _conclude(report, node, display, err, undo, interrupted=interruptible.exit_code)
        if args.output == "json":
            _emit_report(out, report, code, dry_run=bool(args.dry_run))
        return code


def _emit_report(out: SafeStream, report: DrainReport, code: int, *, dry_run: bool) -> None:
    """The drain's one JSON document (docs/cli-output.schema.json)."""
    summary = report.summary()
    if dry_run:  # which pods would go, and which only after their turn
        summary.update(would_evict=report.would_evict, would_wait=report.would_wait)
    output.emit(out, output.document(summary.pop("outcome"), code, **summary))


def _may_evict(kube: Kube) -> bool:
    """Asked before the cordon (a SelfSubjectAccessReview): a drain that may not evict
    would cordon the node, take it out of its load balancers, then fail. An identity
    that may not ask is let through: the evictions say it then."""
    try:
        return kube.can_i("create", "", "pods/eviction")
    except KubeError:
        return True


def _release(kube: Kube, node: dict[str, object], args: argparse.Namespace, out: SafeStream) -> int:
    if args.dry_run_mode == "client":  # nothing sent: what the patch would change
        result = cordon.release_patch(node)[1]
    else:
        result = cordon.release(kube, node, dry_run=args.dry_run)
    if args.output == "json":
        ended = ("would_release" if args.dry_run else "released") if result.changed else "unchanged"
        document = output.document(
            ended,
            0,
            node=result.node,
            changed=list(result.changed),
            kept=list(result.kept),
            warning=result.warning or None,
        )
        output.emit(out, document)
        return 0
    if result.warning:
        print(f"warning: {result.warning}", file=out)
    for kept in result.kept:
        print(f"node {result.node}: {kept}", file=out)
    if result.changed:
        verb = "would be released" if args.dry_run else "released"
        print(f"node {result.node} {verb}: {', '.join(result.changed)}", file=out)
    return 0


class _TerminalLog(logging.Filter):
    """The log lines a person at a terminal sees. Not the drain's event lines and its
    warnings: they are the Lambda's, and the progress lines and the closing warnings
    already say them. Nothing once the verdict is given (`quiet`): an eviction still
    in flight when the drain ended is not heard of after it."""

    def __init__(self) -> None:
        super().__init__()
        self.quiet = False

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.quiet or hasattr(record, "event") or hasattr(record, "in_report"))


_TERMINAL_LOG = _TerminalLog()
"""One, as the logging it filters is the process's: the handler basicConfig installs
with it stays for later main() calls in the same process, each of which unmutes it."""


@dataclasses.dataclass(frozen=True)
class _Terminal:
    """Where the CLI writes: `out` (stdout; stderr once stdout is gone), `err`
    (stderr; nowhere once it is gone) and the log lines."""

    out: SafeStream
    err: SafeStream
    log: _TerminalLog = _TERMINAL_LOG

    def drain_over(self, progress: Progress) -> None:
        """Before the verdict: nothing more about the drain is printed after it."""
        progress.close()
        self.log.quiet = True


_SIGNAL_NAMES: dict[int, str] = {
    signal.SIGINT: "Ctrl-C",
    signal.SIGTERM: "SIGTERM",
    signal.SIGHUP: "SIGHUP",
}
"""The signals that stop a drain: a person's Ctrl-C, a CI job's timeout or `kill`, a
closed terminal. The exit status is 128 + the signal's number, as a shell reports it."""


class Signalled(KeyboardInterrupt):
    """SIGTERM or SIGHUP outside a drain: handled as Python handles Ctrl-C there."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _signals_interrupt:
    """SIGTERM and SIGHUP raise Signalled, as SIGINT raises KeyboardInterrupt (only
    the main thread can set a handler: elsewhere, as they were)."""

    def __init__(self) -> None:
        self.previous: dict[int, object] = {}

    @staticmethod
    def _raise(signum: int, frame: object) -> None:
        raise Signalled(signum)

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGHUP):
                self.previous[signum] = signal.signal(signum, self._raise)

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self.previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]


def _say(text: str) -> None:
    """To stderr from a signal handler: unbuffered, and silent when stderr is gone."""
    with contextlib.suppress(OSError):
        os.write(2, text.encode())


class _Interruptible:
    """While a drain runs, the first Ctrl-C, SIGTERM or SIGHUP interrupts it (new
    evictions stop, run() returns with what is left, the node's record says
    interrupted) and a second one quits at once. Once the drain is `over`, a first
    one lets the verdict be printed."""

    def __init__(self, drain: Drain) -> None:
        self.drain = drain
        self.signum = 0  # the first signal's number
        self.over = False
        self.previous: dict[int, object] = {}
        self.installed = threading.current_thread() is threading.main_thread()

    @property
    def exit_code(self) -> int:
        """An interrupted drain's exit status: 128 + the signal's number."""
        return 128 + (self.signum or signal.SIGINT)

    def _on_signal(self, signum: int, frame: object) -> None:
        # No lock, no print: a signal handler may run inside a print of the main
        # thread, or while it holds a lock another thread waits for.
        name = _SIGNAL_NAMES.get(signum, f"signal {signum}")
        if self.signum:
            _say(f"\n{name} again: quitting at once\n")
            os._exit(128 + signum)
        self.signum = signum
        if self.over:
            return
        _say(f"\ninterrupted by {name}: no new evictions ({name} again to quit at once)\n")
        self.drain.interrupt(f"interrupted by {name}")

    def __enter__(self) -> _Interruptible:
        if self.installed:
            for signum in _SIGNAL_NAMES:
                self.previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self.previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]


def command() -> int:
    """The `eks-node-drainer` command a pip install of the wheel puts on PATH."""
    return main(prog=COMMAND)


def kubectl_plugin() -> int:
    """`kubectl drainer ...`: the wheel's `kubectl-drainer` on PATH. The plugin cannot
    be called `drain`: kubectl never lets a plugin shadow a built-in command."""
    return main(prog=KUBECTL_PLUGIN)


def python_m_prog() -> str:
    """`python -m drainer`, with the interpreter's full path when `python` on PATH is
    another one (a venv not activated), so the printed undo command works as shown."""
    import shutil  # only for how to run it again

    on_path = shutil.which("python")
    if on_path and os.path.realpath(on_path) == os.path.realpath(sys.executable):
        return "python -m drainer"
    return f"{shlex.quote(sys.executable)} -m drainer"


def _undo_command(args: argparse.Namespace, node: str) -> str:
    words = [*shlex.split(args.prog), "release", "--node", node]
    for flag in ("kubeconfig", "context"):
        if getattr(args, flag):
            words += [f"--{flag}", getattr(args, flag)]
    return shlex.join(words + impersonation_words(args))


def _conclude(
    report: DrainReport, node: str, out: SafeStream, err: SafeStream, undo: str, *, interrupted: int
) -> int:
    """The closing lines, in words, and the exit status of a drain that ran
    (`interrupted`: the status of an interrupted one)."""
    from drainer.cli.display import human_summary

    summary = human_summary(report)
    if report.outcome == Outcome.FAILED:
        print(f"error: {report.stopped_by}", file=err)
        print(f"node {node} NOT drained: stopped by an API error; {summary}", file=out)
        if report.cordoned:
            print(f"the node stays cordoned; to undo: {undo}", file=out)
        return 3
    if report.outcome == Outcome.INTERRUPTED:
        left = "; ".join(f"{pod} ({why})" for pod, why in sorted(report.left.items()))
        print(
            f"{report.stopped_by}: node {node} is cordoned and excluded from load balancers; "
            f"{len(report.left)} pods left{': ' + left if left else ''}",
            file=out,
        )
        print(f"to undo: {undo}", file=out, flush=True)
        return interrupted
    for message, names in report.warnings.items():
        print(f"warning: {message}: {', '.join(names)}", file=out)
    if report.outcome == Outcome.DRY_RUN:
        held = sum(len(names) for names in report.blocked_by.values())
        budgets = ", ".join(f"{b} ({len(names)})" for b, names in sorted(report.blocked_by.items()))
        waiting = len(report.would_wait)
        print(
            f"dry run: would evict {len(report.would_evict)} pods"
            + (f", {waiting} of them after waiting their turn for a budget" if waiting else "")
            + (f"; {held} held by budgets allowing no disruption now: {budgets}" if held else "")
            + "; nothing changed",
            file=out,
        )
        return 0
    if report.outcome == Outcome.NO_NODE and report.stopped_by:
        # Replaced mid-drain: the drain of this node did not finish.
        print(f"node {node} NOT drained: {report.stopped_by}; {summary}", file=out)
        return 1
    if report.outcome == Outcome.NO_NODE:
        print(f"node {node} is gone: nothing to drain", file=out)
        return 0
    if report.outcome == Outcome.DRAINED:
        print(f"node {node} drained: {summary}", file=out)
        return 0
    print(f"node {node} NOT drained: {report.timeout_message()}; {summary}", file=out)
    print(f"the node stays cordoned; to undo: {undo}", file=out)
    return 1
