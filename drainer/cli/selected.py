"""`drain -l/--selector`: the nodes a label selector chooses, as kubectl drain
chooses them. Every selected node is checked first (a pod kubectl would refuse on
any of them: nothing changes), then every one is cordoned before any is drained,
as kubectl does, so that pods evicted from the first do not land on the next; then
they are drained one at a time (a concurrency of one: each drain already evicts
in parallel, and a pool drained node after node keeps capacity for the pods), each
reported as a single drain is, and one exit status says how it all went: the
worst of theirs (3 over 1 over 0); an interrupted drain stops the rest. With -o
json, one document: each node's as its own drain prints it, under `nodes`, and the
worst one's `result` with the combined `exit_code`."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import io
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from drainer.cli import output
from drainer.cli.streams import Stream
from drainer.cli.terminal import exit_code
from drainer.errors import KubeConflict, KubeError, KubeNotFound

if TYPE_CHECKING:
    from drainer.engine.options import DrainOptions
    from drainer.k8s.kube import Kube


def add_selector(target: Any) -> None:
    """-l/--selector, in the group that says which node (so it excludes NODE)."""
    target.add_argument(
        "--selector",
        "-l",
        type=_label_selector,
        help="drain every node this label selector selects (e.g. pool=old), as kubectl: "
        "all cordoned first, then drained one at a time",
    )


def _label_selector(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not a label selector (e.g. pool=old)")
    return text.strip()


def drain_selected(
    kube: Kube, args: argparse.Namespace, options: DrainOptions, terminal: Any
) -> int:
    """Check, cordon, then drain each selected node; the combined exit status. With
    -o json, one document for the run: each node's as its own drain would print it,
    under `nodes`, and the combined `result` and `exit_code`."""
    from drainer.cli import main

    try:
        nodes = list(kube.list_nodes(label_selector=args.selector))
    except KubeError as e:
        if e.status == 400:  # the selector's syntax
            return main._failed(terminal, args, 2, f"--selector {args.selector!r}: {e}")
        raise
    if not nodes:
        why = f"no node matches --selector {args.selector}"
        return main._failed(terminal, args, 1, why, result="no_node")
    run = _Run(args, terminal)
    names = [str(n["metadata"]["name"]) for n in nodes]
    if _refused(kube, args, names, run):
        return run.end(1)
    if not args.dry_run and not main._may_evict(kube):
        why = "this identity may not evict pods (RBAC: create pods/eviction); no node cordoned"
        return main._failed(terminal, args, 3, why, result="forbidden")
    cordoned: list[str] = []
    try:
        if not args.dry_run:
            try:
                nodes = _cordon_all(kube, nodes, args, run.say, cordoned)
            except CordonFailed as e:  # those cordoned before it were named, with their undo
                return _cordon_failed(terminal, run, e, cordoned)
        for node in nodes:
            terminal.log.quiet = False  # each drain's lines, until its verdict
            drain = functools.partial(main._drain, kube, node, args, options)
            code = run.drained(str(node["metadata"]["name"]), drain)
            if code >= 128:  # interrupted: the rest are left as they are, cordoned
                break
        else:
            code = _verdict(args.selector, run.codes, run.say)
    except KeyboardInterrupt as e:  # a signal between drains, or while cordoning
        code = exit_code(e)
        print("\ninterrupted", file=terminal.err)
    if code < 128:
        return run.end(code)
    # Cordoned by this run and never drained (an interrupted drain names its own node).
    left = [n for n in cordoned if n not in run.codes]
    return run.end(code, left=_left_cordoned(args, left, run.say))


class _Run:
    """Where a selector's run writes: its own lines on stdout, or on stderr with -o
    json, whose one document gathers each node's (printed at the `end`)."""

    def __init__(self, args: argparse.Namespace, terminal: Any) -> None:
        self.json = args.output == "json"
        self.selector = str(args.selector)
        self.terminal = terminal
        self.say = terminal.err if self.json else terminal.out
        self.codes: dict[str, int] = {}
        self.documents: list[dict[str, Any]] = []

    def drained(self, name: str, drain: Callable[[Any], int]) -> int:
        """One node's drain; with -o json its document kept for the run's."""
        if not self.json:
            self.codes[name] = code = drain(self.terminal)
            return code
        kept = io.StringIO()
        self.codes[name] = code = drain(dataclasses.replace(self.terminal, out=kept))
        self.documents.append(json.loads(kept.getvalue()))
        return code

    def refused(self, name: str, refusals: dict[str, list[str]]) -> None:
        self.codes[name] = 1
        self.documents.append(output.document("refused", 1, node=name, refusals=refusals))

    def end(self, code: int, left: list[str] | None = None) -> int:
        if self.json:
            worst = next((d for d in self.documents if d["exit_code"] == code), None)
            if worst is None:  # interrupted between drains: no node's drain says so
                said = "interrupted between the nodes' drains"
                worst = output.document("interrupted", code, message=said)
                self.documents.append(worst)
            more = {"left_cordoned": left} if left else {}
            doc = output.document(
                worst["result"], code, selector=self.selector, nodes=self.documents, **more
            )
            output.emit(self.terminal.out, doc)
        return code


def _refused(kube: Kube, args: argparse.Namespace, names: list[str], run: _Run) -> bool:
    """kubectl's refusals on any selected node, said; nothing is changed then. A
    --pod-selector the API server cannot read is main's BadPodSelector (exit 2)."""
    from drainer.cli.arguments import overrides_from
    from drainer.cli.main import pods_on
    from drainer.engine import filters

    refused = False
    for name in names:
        pod_list = pods_on(kube, name, args)
        found = filters.refusals(pod_list, overrides_from(args))
        for message, pods in found.items():
            print(f"error: {name}: {message}: {', '.join(pods)}", file=run.terminal.err)
        if found:
            run.refused(name, {m: list(p) for m, p in found.items()})
            refused = True
    if refused:
        print(f"no node drained: {len(names)} selected; nothing changed", file=run.say)
    return refused


CORDON_TRIES = 3
"""How many times a node's cordon is tried when the node changes between its read
and its patch (409 on the version read), before the run stops on it."""


def _cordon(kube: Kube, listed: dict[str, Any], say: Stream) -> dict[str, Any]:
    """The node cordoned, as its drain will find it (its drain records it the same).
    Its patch is built from the node read just before it, not as listed (an operator
    may have cordoned it since: that cordon is theirs, and `release` keeps it), and
    is written on that version only: a change in between answers 409, and the node
    is read and tried again. A node gone since the list raises KubeNotFound; another
    node object under its name, or a node that keeps changing, KubeConflict."""
    from drainer.k8s.cordon import cordon_patch

    name, uid = str(listed["metadata"]["name"]), listed["metadata"].get("uid")
    tries = 0
    while True:
        tries += 1
        node = kube.get_node(name)
        if node is None:
            raise KubeNotFound(f"node {name} not found", 404)
        if node["metadata"].get("uid") != uid:
            raise KubeConflict(f"node {name} was replaced since it was listed", 409)
        patch, _ = cordon_patch(node, time.time())
        patch["metadata"]["uid"] = uid  # this node, not a new one
        patch["metadata"]["resourceVersion"] = node["metadata"].get("resourceVersion")
        try:
            cordoned = kube.patch_node(name, patch)
        except KubeConflict as e:
            if tries < CORDON_TRIES:
                continue
            raise KubeConflict(
                f"node {name} changed each time it was read to be cordoned ({tries} tries, "
                f"the last answered: {e}); not cordoned",
                409,
                e.reason,
            ) from e
        print(f"cordoned node {name}", file=say)
        return cordoned


def _cordon_all(
    kube: Kube,
    nodes: list[dict[str, Any]],
    args: argparse.Namespace,
    say: Stream,
    cordoned: list[str],
) -> list[dict[str, Any]]:
    """Every node cordoned before any is drained. A node deleted or replaced since it
    was listed (404; 409 or 422 on its UID) is left as it is: its drain says it is
    gone. Any other failure names the nodes already cordoned (`cordoned` keeps them),
    and how to undo them, before CordonFailed is raised. A node is in `cordoned` from
    before its cordon is sent until an error answers it: a signal that lands once the
    server applied it, before its answer is read, names it too, with its undo."""
    done: list[dict[str, Any]] = []
    for node in nodes:
        name = str(node["metadata"]["name"])
        cordoned.append(name)
        try:
            done.append(_cordon(kube, node, say))
        except KubeError as e:
            cordoned.remove(name)  # answered: not cordoned by this run
            if e.status == 404 or (e.status in (409, 422) and _replaced(kube, node)):
                done.append(node)  # its drain finds it gone, or another node: left alone
                continue
            _left_cordoned(args, cordoned, say)
            raise CordonFailed(name, e) from e
    return done


class CordonFailed(Exception):
    """A selected node's cordon failed (not because it is gone): the run stops."""

    def __init__(self, node: str, error: KubeError) -> None:
        super().__init__(str(error))
        self.node = node


def _cordon_failed(terminal: Any, run: _Run, failure: CordonFailed, left: list[str]) -> int:
    """Exit 3 for a cordon that failed; with -o json the run's document names the
    node that failed (an error of its own) and the nodes left cordoned."""
    print(f"error: {failure}", file=terminal.err)
    if run.json:
        failed = output.document("error", 3, node=failure.node, message=str(failure))
        more = {"left_cordoned": left} if left else {}
        document = output.document(
            "error", 3, message=str(failure), selector=run.selector, nodes=[failed], **more
        )
        output.emit(terminal.out, document)
    return 3


def _replaced(kube: Kube, node: dict[str, Any]) -> bool:
    """Whether the node's name now belongs to no node, or to another node object (a
    409 or 422 on the cordon's UID; admission may answer those codes too)."""
    try:
        current = kube.get_node(str(node["metadata"]["name"]))
    except KubeError:
        return False
    uid = ((current or {}).get("metadata") or {}).get("uid")
    return current is None or uid != node["metadata"].get("uid")


def _left_cordoned(args: argparse.Namespace, names: list[str], say: Stream) -> list[str]:
    from drainer.cli.main import _undo_command

    for name in names:
        print(f"node {name} not drained, left cordoned; to undo: {_undo_command(args, name)}",
              file=say)  # fmt: skip
    return names


def _verdict(selector: str, codes: dict[str, int], say: Stream) -> int:
    drained = [n for n, c in codes.items() if c == 0]
    not_drained = [n for n, c in codes.items() if c != 0]
    line = f"{len(codes)} nodes selected by {selector}: {len(drained)} drained"
    if not_drained:
        line += f"; not drained: {', '.join(not_drained)}"
    print(line, file=say)
    return max(codes.values())
