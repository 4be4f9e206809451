"""`drain -l/--selector`: the nodes a label selector chooses, as kubectl drain
chooses them. Every selected node is checked first (a pod kubectl would refuse on
any of them: nothing changes), then every one is cordoned before any is drained,
as kubectl does, so that pods evicted from the first do not land on the next; then
they are drained one at a time (a concurrency of one: each drain already evicts
in parallel, and a pool drained node after node keeps capacity for the pods), each
reported as a single drain is, and one exit status says how it all went: the
worst of theirs (3 over 1 over 0); an interrupted drain stops the rest."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from drainer.errors import KubeError

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
    """Check, cordon, then drain each selected node; the combined exit status."""
    from drainer.cli import main

    if args.output == "json":  # one document per run, and this would be one per node
        why = "-o json with --selector is not supported yet: drain one node per run"
        return main._failed(terminal, args, 2, why)
    try:
        nodes = list(kube.list_nodes(label_selector=args.selector))
    except KubeError as e:
        if e.status == 400:  # the selector's syntax
            return main._failed(terminal, args, 2, f"--selector {args.selector!r}: {e}")
        raise
    if not nodes:
        return main._failed(terminal, args, 1, f"no node matches --selector {args.selector}")
    names = [str(n["metadata"]["name"]) for n in nodes]
    if _refused(kube, args, names, terminal):
        return 1
    if not args.dry_run and not main._may_evict(kube):
        why = "this identity may not evict pods (RBAC: create pods/eviction); no node cordoned"
        return main._failed(terminal, args, 3, why, result="forbidden")
    if not args.dry_run:
        nodes = [_cordon(kube, node, terminal) for node in nodes]
    codes: dict[str, int] = {}
    for node in nodes:
        terminal.log.quiet = False  # each drain's lines, until its verdict
        codes[str(node["metadata"]["name"])] = code = main._drain(
            kube, node, args, options, terminal
        )
        if code >= 128:  # interrupted: the rest are left as they are, cordoned
            _left_cordoned(args, names[len(codes) :], terminal)
            return code
    return _verdict(args.selector, codes, terminal)


def _refused(kube: Kube, args: argparse.Namespace, names: list[str], terminal: Any) -> bool:
    """kubectl's refusals on any selected node, said; nothing is changed then."""
    from drainer.cli.main import overrides_from
    from drainer.engine import filters

    refused = False
    for name in names:
        pod_list, _ = kube.list_pods_on_node(name, args.pod_selector or "")
        for message, pods in filters.refusals(pod_list, overrides_from(args)).items():
            print(f"error: {name}: {message}: {', '.join(pods)}", file=terminal.err)
            refused = True
    if refused:
        print(f"no node drained: {len(names)} selected; nothing changed", file=terminal.out)
    return refused


def _cordon(kube: Kube, node: dict[str, Any], terminal: Any) -> dict[str, Any]:
    """The node cordoned, as its drain will find it (its drain records it the same)."""
    from drainer.k8s.cordon import cordon_patch

    name = str(node["metadata"]["name"])
    patch, _ = cordon_patch(node, time.time())
    patch["metadata"]["uid"] = node["metadata"].get("uid")  # this node, not a new one
    cordoned = kube.patch_node(name, patch)
    print(f"cordoned node {name}", file=terminal.out)
    return cordoned


def _left_cordoned(args: argparse.Namespace, names: list[str], terminal: Any) -> None:
    from drainer.cli.main import _undo_command

    for name in names:
        print(
            f"node {name} not drained, left cordoned; to undo: {_undo_command(args, name)}",
            file=terminal.out,
        )


def _verdict(selector: str, codes: dict[str, int], terminal: Any) -> int:
    drained = [n for n, c in codes.items() if c == 0]
    not_drained = [n for n, c in codes.items() if c != 0]
    line = f"{len(codes)} nodes selected by {selector}: {len(drained)} drained"
    if not_drained:
        line += f"; not drained: {', '.join(not_drained)}"
    print(line, file=terminal.out)
    return max(codes.values())
