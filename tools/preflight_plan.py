"""make preflight's plan of each group the function would drain: what
`eks-node-drainer plan --asg NAME` says of a refresh of it today, run in this
process as the command line runs it (drainer/cli/plan.py: the same reads, the same
model) with the drain the function's default settings make, as the kubeconfig's
identity, in preflight's region and profile.

Its rows are never blocking: a blocker holds a refresh, not the deploy. Per group,
the forecast (its nodes, its batches, the total) with how many blockers and whether
a deadlock holds it, then each blocker (the pod and its node, the reason, the
budget, the fix). The plan's notes (an instance with no node, a wait for new nodes
counted as a bound) are rows too, except the optional read of PersistentVolumes
(k8s-rbac/plan/): denied, it is said once for every group."""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from drainer.plan.volumes import PLAN_RBAC
from tools.preflight_rows import Check, Status


@dataclass(frozen=True)
class Where:
    """Where the plans read: the kubeconfig (its context: "" the current one), and
    AWS's region and profile ("" the environment's)."""

    kubeconfig: str
    context: str
    region: str
    profile: str = ""


@dataclass(frozen=True)
class GroupPlan:
    """`plan --asg GROUP -o json`: its exit status, its document, its notes."""

    group: str
    code: int
    document: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def drain_flags() -> list[str]:
    """The plan's flags for the drain the function's default settings make: their
    drain options (Settings.drain_options) as `plan`'s flags (the demo's plan asks
    the same way: demo/forecast.py)."""
    from drainer.lifecycle.settings import Settings
    from drainer.plan.function_drain import plan_flags

    settings = Settings()
    return plan_flags(settings.drain_options(), settings.drain_timeout_seconds)


def plan_group(group: str, where: Where) -> GroupPlan:
    """The command line's plan of a refresh of `group`, with the function's drain."""
    from drainer.cli import arguments
    from drainer.cli.plan import run_plan
    from drainer.cli.streams import SafeStream
    from drainer.cli.terminal import Terminal

    argv = ["plan", "--asg", group, *drain_flags(), "-o", "json", "--kubeconfig", where.kubeconfig]
    if where.context:
        argv += ["--context", where.context]
    out, err = io.StringIO(), io.StringIO()
    with _aws_environment(where.region, where.profile):
        code = run_plan(
            arguments.parse(argv, arguments.COMMAND),
            Terminal(out=SafeStream(out), err=SafeStream(err)),
        )
    notes = [
        line[len("note: ") :] for line in err.getvalue().splitlines() if line.startswith("note: ")
    ]
    return GroupPlan(group, code, json.loads(out.getvalue()), notes)


@contextlib.contextmanager
def _aws_environment(region: str, profile: str) -> Iterator[None]:
    """The command line takes AWS's region and profile from the environment
    (AWS_REGION, AWS_PROFILE): preflight's own while the plan runs, then as they were."""
    wanted = {"AWS_REGION": region, **({"AWS_PROFILE": profile} if profile else {})}
    before = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def check_plans(groups: Sequence[str], where: Where) -> list[Check]:
    """Each group's plan, as rows; the denied optional read said once, last."""
    rows: list[Check] = []
    volumes: list[str] = []
    for group in groups:
        plan = plan_group(group, where)
        rows += plan_rows(plan)
        for note in plan.notes:
            if PLAN_RBAC in note:
                volumes.append(note)
            else:
                rows.append(Check(f"plan {group}", Status.WARN, f"note: {note}"))
    if volumes:
        more = f" (and in {len(volumes) - 1} more group(s)' plans)" if len(volumes) > 1 else ""
        rows.append(
            Check(
                "plan volumes",
                Status.WARN,
                volumes[0] + more,
                f"{PLAN_RBAC}   (optional: only plan reads PersistentVolumes, never a drain)",
            )
        )
    return rows


def plan_rows(plan: GroupPlan) -> list[Check]:
    """The group's forecast, then a row per blocker."""
    what, document = f"plan {plan.group}", plan.document
    result = document.get("result")
    if result == "no_node":
        return [Check(what, Status.OK, f"nothing to plan: {document.get('message', '')}")]
    if result not in ("planned", "blocked"):
        return [Check(what, Status.WARN, f"not planned: {document.get('message', '')}", _READS)]
    found = [(n["node"], b) for n in document["nodes"] for b in n["blockers"]]
    if not found:
        return [Check(what, Status.OK, f"{_forecast(document)}; nothing blocks")]
    deadlock = (
        "; deadlocked: the refresh waits out a drain's timeout" if document["deadlocked"] else ""
    )
    rows = [
        Check(
            what,
            Status.WARN,
            f"{_forecast(document)}; {len(found)} blocker(s){deadlock}",
            "each blocker's fix is on its row below; the whole plan, node by node: "
            "eks-node-drainer plan "
            f"--asg {plan.group} {' '.join(drain_flags())}",
        )
    ]
    for node, blocker in found:
        budget = blocker["budget"]
        named = "" if budget is None or budget in blocker["reason"] else f" (budget {budget})"
        rows.append(
            Check(
                f"{what} blocker",
                Status.WARN,
                f"{blocker['pod']} on {node}: {blocker['reason']}{named}",
                str(blocker["fix"]),
            )
        )
    return rows


_READS = (
    "plan --asg needs, for your AWS identity, autoscaling:DescribeAutoScalingGroups and "
    "ec2:DescribeInstances, and for the kubeconfig's, to list nodes, pods and "
    "PodDisruptionBudgets (k8s-rbac/ grants them)"
)


def _forecast(document: dict[str, Any]) -> str:
    refresh = document["refresh"]
    said = (
        f"a refresh of {len(document['nodes'])} node(s), {len(refresh['batches'])} batch(es) "
        f"of up to {refresh['batch']} with a {refresh['instance_warmup_seconds']:g} s "
        f"warm-up: forecast {_seconds(document['total_eta_seconds'])} in all"
    )
    waits = sum(refresh["waits_for_new_nodes"])
    if waits:
        new_nodes = refresh["new_nodes"]
        basis = "the group's launches" if new_nodes["basis"] == "observed" else "a bound"
        said += (
            f", {waits} batch(es) of it waiting for new nodes "
            f"({new_nodes['wait_seconds']:g} s each: {basis})"
        )
    return said


def _seconds(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole} s" if whole < 120 else f"{whole} s (~{round(whole / 60)} min)"
