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
import logging
import os
import shlex
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from drainer.cli import arguments, output
from drainer.cli.arguments import COMMAND, DEFAULTS, KUBECTL_PLUGIN, options_from, overrides_from
from drainer.cli.impersonate import from_args as impersonation_from
from drainer.cli.impersonate import words as impersonation_words
from drainer.cli.streams import SafeStream
from drainer.cli.terminal import Interruptible, Terminal, exit_code, signals_interrupt
from drainer.engine import filters
from drainer.engine.options import DrainOptions
from drainer.errors import AwsConfigError, AwsError, DrainerError, InstanceNotFound, KubeError
from drainer.k8s import cordon, observed
from drainer.k8s.kube import Kube
from drainer.k8s.nodes import find_node_object
from drainer.outcome import Outcome

if TYPE_CHECKING:
    from drainer import aws
    from drainer.cli.display import Progress
    from drainer.cli.told import CliStory
    from drainer.engine.drain import Drain
    from drainer.engine.pace import Eta
    from drainer.engine.report import DrainReport


class NoRegion(DrainerError):
    """No AWS region configured for an --instance-id lookup."""


AWS_PROBLEMS: tuple[type[DrainerError], ...] = (AwsError, AwsConfigError, NoRegion)
"""What keeps a command from AWS's answers (drain and release --instance-id, plan
--asg): a call denied, AWS unreachable, no credentials (AwsError, its message naming
the call and the IAM action), a profile that does not exist or a config file that
does not parse (AwsConfigError), no region. Exit 3, as a Kubernetes API that refuses
or cannot be reached: an access or connection problem, not a usage error."""


def exit_status(error: DrainerError) -> int:
    """A DrainerError's exit status before or instead of a drain: 3 for AWS's
    problems (AWS_PROBLEMS), else 2, a usage or configuration error."""
    return 3 if isinstance(error, AWS_PROBLEMS) else 2


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
    terminal = Terminal(out=SafeStream(stdout or sys.stdout, fallback=err), err=err)
    terminal.log.quiet = False
    words = sys.argv[1:] if argv is None else argv
    try:
        args = arguments.parse(words, prog or python_m_prog())
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
        with signals_interrupt():
            if args.command == "plan":  # read-only: its own client and errors
                from drainer.cli.plan import run_plan

                return run_plan(args, terminal)
            return _connect(args, terminal)
    except KeyboardInterrupt as e:  # before the drain began (its own signals are handled)
        said = "interrupted before anything changed"
        print(f"\n{said}", file=err)
        code = exit_code(e)
        if args.output == "json":
            output.emit(terminal.out, output.document("interrupted", code, message=said))
        return code
    except Exception as e:  # a bug: the traceback follows, and stdout still has its document
        if args.output == "json":
            said = f"unexpected error: {type(e).__name__}: {e}"
            output.emit(terminal.out, output.document("error", 1, message=said))
        raise


def _failed(
    terminal: Terminal, args: argparse.Namespace, code: int, message: str, **more: Any
) -> int:
    """An error before or instead of a drain: one line on stderr, and with -o json
    the one JSON document stdout carries."""
    print(f"error: {message}", file=terminal.err)
    if args.output == "json":
        ended = more.pop("result", "error")
        output.emit(terminal.out, output.document(ended, code, message=message, **more))
    return code


class BadPodSelector(DrainerError):
    """A --pod-selector the API server could not read (400): a usage error, exit 2."""


def pods_on(kube: Kube, node: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The node's pods (those --pod-selector selects). A 400 while a --pod-selector
    is given is the selector's syntax: BadPodSelector, naming the flag."""
    try:
        pod_list, _ = kube.list_pods_on_node(node, args.pod_selector or "")
    except KubeError as e:
        if e.status == 400 and args.pod_selector:
            raise BadPodSelector(f"--pod-selector {args.pod_selector!r}: {e}") from e
        raise
    return pod_list


def _connect(args: argparse.Namespace, terminal: Terminal) -> int:
    """The client, the command, and the exit status of what went wrong before a drain."""
    options = options_from(args) if args.command == "drain" else DEFAULTS
    if args.instance_id:
        try:
            _aws_session()
        except DrainerError as e:  # no region, a profile that does not exist: 3
            return _failed(terminal, args, exit_status(e), str(e))
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
    except DrainerError as e:  # AWS's (--instance-id) is 3, as the API's; BadPodSelector 2
        return _failed(terminal, args, exit_status(e), str(e))
    finally:
        kube.close()


def _command(
    kube: Kube, args: argparse.Namespace, options: DrainOptions, terminal: Terminal
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
    pod_list = pods_on(kube, node, args)
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
    terminal: Terminal,
) -> int:
    """Drain the node read, showing its progress; the exit status."""
    # Imported here, not at the top: the first requests (the node, its pods, the
    # permission) go out without waiting for the engine's modules (issue 28).
    from drainer.cli.display import Progress, StatusTicker
    from drainer.cli.pace import fields, said_against

    out, err = terminal.out, terminal.err
    node = str(found["metadata"]["name"])
    # With -o json, stdout carries the JSON alone; the progress goes to stderr.
    display = err if args.output == "json" else out
    print(f"draining node {node}{' (dry run)' if args.dry_run else ''}", file=display, flush=True)
    live = display.isatty()
    progress = Progress(display, node, args.verbose, live=live)
    drain, story, eta = _built(kube, found, args, options, progress=progress, err=err)
    undo = _undo_command(args, node)
    with Interruptible(drain) as interruptible:
        try:
            try:
                with StatusTicker(progress, drain.waiting, 1.0 if live else 5.0):
                    report = drain.run(
                        time.time() + args.timeout,
                        deadline_source=f"--timeout ({args.timeout:g} s)",
                    )
                _ended(kube, story, report)
            finally:  # before the verdict: nothing about the drain is printed after it
                if story is not None:
                    story.close()
                interruptible.over = True
                terminal.drain_over(progress)
        except KubeError as e:  # the API failed beyond retries after the drain began
            cordoned = _left_cordoned(drain, found, node, undo, display)
            return _failed(terminal, args, 3, str(e), node=node, cordoned=cordoned)
        accuracy = said_against(eta, display)
        code = _conclude(report, node, display, err, undo, interrupted=interruptible.exit_code)
        if args.output == "json":
            _emit_report(out, report, code, dry_run=bool(args.dry_run), more=fields(accuracy))
        return code


def _left_cordoned(
    drain: Drain, found: dict[str, Any], node: str, undo: str, display: SafeStream
) -> bool:
    """After an API error mid-drain: whether the node may stay cordoned by the drainer
    (the drain's cordon answered, or sent with its answer lost; or `drain -l`'s first
    step, whose record the node carries), said with the undo command. Someone else's
    cordon is theirs: not claimed, no undo."""
    listed = cordon.ADDED_CORDON in cordon.added_by_drainer(found)
    if drain.report.cordoned or listed:
        print(f"node {node} NOT drained; it stays cordoned; to undo: {undo}", file=display)
        return True
    if drain.ctx.cordon_sent:
        print(
            f"node {node} NOT drained; its cordon was sent and its answer lost: it may be "
            f"cordoned; to undo: {undo}",
            file=display,
        )
        return True
    return False


def _built(
    kube: Kube,
    found: dict[str, Any],
    args: argparse.Namespace,
    options: DrainOptions,
    *,
    progress: Progress,
    err: SafeStream,
) -> tuple[Drain, CliStory | None, Eta | None]:
    """The engine's drain of the node found, told in its Events (not in a dry run), and
    its ETA, forecast now (none in a dry run, or when it cannot be forecast)."""
    from drainer.cli.pace import eta_for
    from drainer.cli.told import CliStory
    from drainer.engine.drain import Drain

    node = str(found["metadata"]["name"])
    uid = str(found["metadata"].get("uid") or "")  # the drain's node: not a later namesake
    story = None if args.dry_run else CliStory(kube, node, uid, then=progress)  # Events
    record = cordon.ProgressRecord(options.trigger, options.destination)
    eta = None if args.dry_run else eta_for(kube, node, options, args.timeout, err)
    pace = None if eta is None else eta.fields
    drain = Drain(
        kube, node, options, record=record, on_event=story or progress, node_uid=uid, pace=pace
    )
    return drain, story, eta


def _ended(kube: Kube, story: CliStory | None, report: DrainReport) -> None:
    """The drain's end told in an Event, and the stops it saw kept for the plan (neither
    in a dry run: no story). Keeping them never fails the drain: a warning at most."""
    if story is not None:
        story.end(report)
        observed.keep(kube, report.stopped)


def _emit_report(
    out: SafeStream, report: DrainReport, code: int, *, dry_run: bool, more: dict[str, Any]
) -> None:
    """The drain's one JSON document (docs/cli-output.schema.json); `more`: its
    forecast against the actual, when it had one."""
    summary = {**report.summary(), **more}
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
    if report.outcome in (Outcome.NO_NODE, Outcome.RELEASED) and report.stopped_by:
        # Replaced or released mid-drain: the drain of this node did not finish.
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
