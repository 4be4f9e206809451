"""The end of the demo: what happened, as a machine-readable dict and as text.

The dict (written to summary.json in the logs directory, and to --summary-json) is
what tests/test_demo.py checks: outcomes, not wording. Its facts come from
independent places: awssim's ledger (the lifecycle result the ASG received), the
demo's own watch on the cluster (pods, budgets, volumes), the function's drain
events (what it did to each pod: evicted, skipped and why, refused by which
budget, force-deleted; and its end line) and the API server's request log (the
429s it answered, to check the function's count against).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from demo import forecast
from demo.view import View, shown_path
from drainer.lifecycle.events_ec2 import SPOT_NOTICE_SECONDS
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER
from drainer.lifecycle.settings import Settings

if TYPE_CHECKING:
    from demo.observe import Observer
    from demo.run import State

_POD_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/?]+)(/eviction)?(?:\?.*)?$")


@dataclass
class Requests:
    """The function's pod requests, from the API server's request log."""

    evicted: set[str] = field(default_factory=set)
    """Pods whose eviction the API server accepted."""
    deleted: set[str] = field(default_factory=set)
    """Pods the function deleted outright (TIMEOUT_POLICY=force)."""
    refusals: dict[str, int] = field(default_factory=dict)
    """429 answers to evictions, per pod."""


def classify(records: list[dict[str, Any]]) -> Requests:
    found = Requests()
    for record in records:
        match = _POD_PATH.match(str(record.get("path", "")))
        if not match:
            continue
        pod = f"{match.group(1)}/{match.group(2)}"
        status = int(record.get("status") or 0)
        eviction = bool(match.group(3))
        method = str(record.get("method", ""))
        if eviction and method == "POST" and 200 <= status < 300:
            found.evicted.add(pod)
        elif eviction and method == "POST" and status == 429:
            found.refusals[pod] = found.refusals.get(pod, 0) + 1
        elif not eviction and method == "DELETE" and 200 <= status < 300:
            found.deleted.add(pod)
    return found


def build(state: State, observer: Observer) -> dict[str, Any]:
    options = state.options
    function = state.function
    with observer.lock:
        fates = sorted(observer.fates.values(), key=lambda f: f.name)
        final = observer.summaries[-1] if observer.summaries else {}
        # What the function says it did (its drain events); the watch confirms each
        # pod left.
        requests = classify(state.requests)
        evicted = [f.name for f in fates if f.drain_evicted and f.evicted_at]
        forced = [f.name for f in fates if f.drain_forced and not f.drain_evicted and f.evicted_at]
        skipped = {f.name: f.skipped for f in fates if f.skipped}
        replacements = {
            f.name: f"{f.replacement} on {f.replacement_node}"
            for f in fates
            if f.replacement_ready_at is not None
        }
        budgets = {
            name: {"worst_margin": w.margin, "healthy": w.healthy, "desired": w.desired}
            for name, w in sorted(observer.worst.items())
        }
        blocked = {f.name: sorted(f.blocked_by) for f in fates if f.blocked_by}
        volumes = sorted(set(observer.volumes.values()))
        detached = sorted(v for v in volumes if v in observer.detached)
        # The function's own count, from its end lines (one per invocation that drained).
        detached_logged = sum(int(s.get("volumes_detached") or 0) for s in observer.summaries)
        claims = {v: observer.claims_of.get(v, "") for v in volumes}
        left = list(observer.left_at_completion)
        attached_at_completion = list(observer.attached_at_completion)
        pods = [f.as_dict(observer.t0) for f in fates]
        refusals_logged = sum(f.refusals for f in fates)  # the function's own count
        errors = list(observer.errors)
        node_deleted = observer.node_deleted_at is not None
    action = state.lifecycle
    result = action.get("result")
    drain_seconds = None
    if action.get("closed_at") is not None:
        drain_seconds = round(float(action["closed_at"]) - float(action["started_at"]), 2)
    refusals = sum(requests.refusals.values())
    reported = sum(int(((i.result or {}).get("pdb_refusals")) or 0) for i in state.invocations)
    never_violated = all(b["worst_margin"] >= 0 for b in budgets.values())
    not_daemon = [f.name for f in fates if not f.daemon]
    summary: dict[str, Any] = {
        "scenario": {
            "nodes": options.nodes,
            "pods_per_node": options.pods_per_node,
            "stubborn_pdb": options.stubborn_pdb,
            "speed": options.speed,
            "spot": options.spot,
            "health": options.health,
            "launch_hook": options.launch_hook,
            "warm_pool": options.warm_pool,
            "plan": options.plan,
        },
        "spot": _spot(state) if options.ec2_trigger else None,
        "launch": _launch(state) if options.launch_hook else None,
        "warm_pool": _warm(state) if options.warm_pool else None,
        "settings_source": function.source if function else "",
        "settings": dict(function.environment) if function else {},
        "drain_marker": state.drain_marker,
        "cluster": "demo",
        "instance_id": state.instance_id,
        "node": state.node,
        "node_deleted": node_deleted,
        "lifecycle": {
            "result": result,
            "closed_by": action.get("closed_by") or None,
            "heartbeats": action.get("heartbeats", 0),
            "instance_state": state.instance_state,
        },
        "drain_seconds": drain_seconds,
        "demo_seconds": round(state.finished, 2),
        "invocations": [
            {
                "number": i.number,
                "handover": i.handover,
                "seconds": round(i.seconds, 2),
                "result": i.result,
                "error": i.error,
                "exit_status": i.exit_status,
            }
            for i in state.invocations
        ],
        "drainer_result": final.get("result"),
        "pods": {
            "on_node": [f.name for f in fates],
            "evicted": evicted,
            "forced": forced,
            "skipped": skipped,
            "left_when_released": left,
            "replacements": replacements,
            "details": pods,
        },
        "all_non_daemonset_pods_evicted": sorted(evicted) == sorted(not_daemon),
        "pdb_refusals": refusals,
        "pdb_refusals_reported": reported,
        "pdb_refusals_logged": refusals_logged,
        "refusals_by_pod": dict(sorted(requests.refusals.items())),
        "blocked": blocked,
        "budgets": budgets,
        "budget_never_violated": never_violated,
        "volumes": {
            "on_node": volumes,
            "claims": claims,
            "detached": detached,
            "detached_logged": detached_logged,
            "attached_when_released": attached_at_completion,
        },
        "errors": errors,
        "logs": str(state.logs),
        "forecast": forecast.comparison(state.plan, observer),
    }
    summary["checks"] = _checks(summary, state)
    summary["checks_passed"] = all(c["ok"] for c in summary["checks"])
    return summary


def _spot(state: State) -> dict[str, Any]:
    """The spot warning's drain (invocation 1) and the hook's invocation that waited
    for it, from their end lines."""
    by_trigger = {str((i.result or {}).get("trigger")): i.result or {} for i in state.invocations}
    warning = by_trigger.get(state.options.ec2_trigger, {})
    hook = by_trigger.get(TERMINATE_HOOK_TRIGGER, {})
    settings = Settings.from_env(state.function.environment if state.function else {})
    notice = state.options.health_window_seconds if state.options.health else SPOT_NOTICE_SECONDS
    return {
        "trigger": state.options.ec2_trigger,
        "result": warning.get("result"),
        "drain_seconds": warning.get("seconds"),
        "window_seconds": notice - settings.spot_deadline_margin_seconds,
        "evicted": warning.get("evicted"),
        "hook_result": hook.get("result"),
        "hook_evicted": hook.get("evicted"),
        "hook_message": hook.get("message", ""),
    }


def _launch(state: State) -> dict[str, Any]:
    """--launch-hook: how long the new instance was held, and that it was released only
    once its node had registered and was Ready."""
    launch = state.launch
    result = launch.get("result") or {}
    action = launch.get("action") or {}
    began, registered = launch.get("began", 0.0), launch.get("registered", 0.0)
    return {
        "instance_id": launch.get("instance_id"),
        "result": result.get("result"),
        "node": result.get("node"),
        "lifecycle_result": action.get("result"),
        "held_seconds": round((action.get("closed_at") or began) - began, 2),
        "released_after_registering": bool(
            registered and (action.get("closed_at") or 0) >= registered
        ),
    }


def _warm(state: State) -> dict[str, Any]:
    """--warm-pool: the instance's return, and the node as the launch hook left it."""
    warm = state.warm
    result = warm.get("result") or {}
    action = warm.get("action") or {}
    began = warm.get("began", 0.0)
    return {
        "instance_id": state.instance_id,
        "result": result.get("result"),
        "released": result.get("released") or [],
        "lifecycle_result": action.get("result"),
        "schedulable": bool(warm.get("schedulable")),
        "seconds_to_schedulable": round((action.get("closed_at") or began) - began, 2),
        "released_after_booting": bool(
            warm.get("booted") and (action.get("closed_at") or 0) >= warm["booted"]
        ),
    }


def _checks(summary: dict[str, Any], state: State) -> list[dict[str, Any]]:
    """What this scenario is expected to show; the demo exits 1 if one fails."""
    options = state.options
    policy = (summary["settings"].get("TIMEOUT_POLICY") or "continue").lower()
    lifecycle = summary["lifecycle"]
    checks: list[tuple[str, bool]] = [
        (
            "every invocation ended without an error",
            all(not i["error"] for i in summary["invocations"]),
        ),
    ]
    checks += _forecast_checks(summary["forecast"], options.stubborn_pdb)
    if not options.stubborn_pdb:
        checks += [
            ("the function drained the node", summary["drainer_result"] == "drained"),
            (
                "CompleteLifecycleAction CONTINUE sent by the function",
                lifecycle["result"] == "CONTINUE" and lifecycle["closed_by"] == "complete",
            ),
            ("every pod but DaemonSet pods evicted", summary["all_non_daemonset_pods_evicted"]),
            (
                "no pod left when the instance was released",
                not summary["pods"]["left_when_released"],
            ),
            ("no PodDisruptionBudget ever violated", summary["budget_never_violated"]),
            (
                "volumes detached before the drain ended",
                not summary["volumes"]["attached_when_released"],
            ),
            (
                "the function's log counts the volumes detached that the demo saw",
                summary["volumes"]["detached_logged"] == len(summary["volumes"]["detached"]),
            ),
        ]
        launch = summary["launch"]
        if launch is not None:
            checks.append(
                (
                    "the new instance went InService only once its node was Ready",
                    launch["result"] == "joined"
                    and launch["lifecycle_result"] == "CONTINUE"
                    and launch["released_after_registering"],
                )
            )
        warm = summary.get("warm_pool")
        if warm is not None:
            checks.append(
                (
                    "back from the warm pool, the node was released, Ready and schedulable",
                    warm["result"] == "joined"
                    and warm["lifecycle_result"] == "CONTINUE"
                    and warm["schedulable"]
                    and warm["released_after_booting"],
                )
            )
        spot = summary["spot"]
        if spot is not None:
            checks += [
                (
                    f"the {spot['trigger']} drain ended within its window",
                    spot["result"] == "drained"
                    and float(spot["drain_seconds"] or 1e9) < spot["window_seconds"],
                ),
                (
                    "the terminate hook's invocation evicted nothing itself",
                    spot["hook_result"] == "drained" and spot["hook_evicted"] == 0,
                ),
            ]
        return [{"name": name, "ok": ok} for name, ok in checks]
    checks.append(("the drain timed out", summary["drainer_result"] == "timed_out"))
    if policy == "abandon":
        checks.append(("no lifecycle result sent (abandon)", lifecycle["result"] is None))
    else:
        checks.append(
            (
                "CompleteLifecycleAction CONTINUE sent by the function",
                lifecycle["result"] == "CONTINUE" and lifecycle["closed_by"] == "complete",
            )
        )
    if policy == "force":
        checks.append(("the remaining pods were deleted (force)", bool(summary["pods"]["forced"])))
    else:
        checks.append(
            ("no PodDisruptionBudget violated by the drain", summary["budget_never_violated"])
        )
    return [{"name": name, "ok": ok} for name, ok in checks]


def _forecast_checks(found: dict[str, Any] | None, stubborn: bool) -> list[tuple[str, bool]]:
    """--plan: the forecast came true (within the issue's 25 % + 2 s), or, with
    --stubborn-pdb, the plan named the budget that holds the pod."""
    if found is None:
        return []
    if stubborn:
        named = any(b.get("budget") == "shop/billing" for b in found["blockers"])
        return [("the plan named the budget that never allows an eviction", named)]
    slack = f"{forecast.SLACK_RATIO:.0%} + {forecast.SLACK_SECONDS:g} s"
    return [(f"the plan's forecast within {slack} of the drain", bool(found["within_slack"]))]


def _names(names: list[str], limit: int = 6) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def render(view: View, summary: dict[str, Any]) -> None:
    """The summary as text, one fact per line."""
    rows: list[tuple[str, str, str]] = []
    lifecycle = summary["lifecycle"]
    result = lifecycle["result"]
    if result is None:
        sent = "none: the lifecycle action is still open (TIMEOUT_POLICY=abandon)"
    else:
        by = {
            "complete": "CompleteLifecycleAction from the function",
            "timeout": "the hook timed out",
        }
        sent = f"{result} ({by.get(lifecycle['closed_by'], lifecycle['closed_by'])})"
    rows.append(("result sent to the ASG", sent, "ok" if result == "CONTINUE" else "warn"))
    if summary["drain_seconds"] is not None:
        rows.append(
            (
                "duration",
                f"{summary['drain_seconds']:.1f} s from the "
                f"{'terminate hook' if summary['spot'] else 'scale-in'} to the lifecycle result "
                f"(demo total {summary['demo_seconds']:.0f} s)",
                "info",
            )
        )
    if summary.get("forecast") is not None:
        rows.append(forecast.row(summary["forecast"]))
    spot = summary.get("spot")
    if spot is not None and spot["drain_seconds"] is not None:
        rows.append(
            (
                f"{spot['trigger']} drain",
                f"{spot['result']} in {float(spot['drain_seconds']):.1f} s of the "
                f"{spot['window_seconds']} s window; the hook's invocation: "
                f"{spot['hook_message'] or spot['hook_result']}",
                "ok" if spot["result"] == "drained" else "warn",
            )
        )
    launch = summary.get("launch")
    if launch is not None:
        rows.append(
            (
                "launch hook",
                f"{launch['instance_id']} held {launch['held_seconds']:.1f} s until node "
                f"{launch['node']} was Ready, then {launch['lifecycle_result']}",
                "ok" if launch["lifecycle_result"] == "CONTINUE" else "warn",
            )
        )
    warm = summary.get("warm_pool")
    if warm is not None:
        rows.append(
            (
                "warm pool",
                f"{warm['instance_id']} back in service {warm['seconds_to_schedulable']:.1f} s "
                f"after the scale-out; node "
                + ("schedulable" if warm["schedulable"] else "STILL CORDONED")
                + f" ({', '.join(warm['released']) or 'nothing released'})",
                "ok" if warm["schedulable"] else "warn",
            )
        )
    invocations = summary["invocations"]
    handovers = max((i["handover"] for i in invocations), default=0)
    rows.append(
        (
            "invocations",
            f"{len(invocations)}"
            + (f", {handovers} hand-over(s)" if handovers else ", no hand-over needed"),
            "info",
        )
    )
    pods = summary["pods"]
    rows.append(("pods evicted", f"{len(pods['evicted'])}: {_names(pods['evicted'])}", "ok"))
    if pods["forced"]:
        rows.append(
            ("deleted by policy", f"{len(pods['forced'])}: {_names(pods['forced'])}", "warn")
        )
    for name, reason in sorted(pods["skipped"].items()):
        rows.append(("skipped", f"{name}: {reason}", "info"))
    if pods["left_when_released"]:
        fate = "died with the node" if summary["node_deleted"] else "still on the cordoned node"
        rows.append(("left on the node", f"{_names(pods['left_when_released'])} ({fate})", "warn"))
    blocked = summary["blocked"]
    refusals = f"{summary['pdb_refusals']} eviction(s) refused (429) and retried"
    if blocked:
        held = sorted({b for budgets in blocked.values() for b in budgets})
        refusals += f"; budgets that held pods back: {', '.join(held)}"
    rows.append(("PDB refusals", refusals, "info"))
    budgets = ", ".join(
        f"{name} lowest {b['healthy']} healthy of {b['desired']} required"
        for name, b in summary["budgets"].items()
    )
    died = pods["left_when_released"] if summary["node_deleted"] else []
    broken = sorted({b for name in died for b in blocked.get(name, [])})
    if summary["budget_never_violated"] and broken:
        # Not by the drain: the pods its budget held went with the terminated instance.
        policy = summary["settings"].get("TIMEOUT_POLICY", "continue")
        rows.append(
            (
                "budgets",
                f"never violated by an eviction ({budgets}); then {', '.join(broken)} lost "
                f"{_names(died)} with the terminated node (TIMEOUT_POLICY={policy})",
                "warn",
            )
        )
    elif summary["budget_never_violated"]:
        rows.append(("budgets", f"never violated ({budgets})", "ok"))
    elif pods["forced"]:
        rows.append(
            ("budgets", f"violated by TIMEOUT_POLICY=force, as configured ({budgets})", "warn")
        )
    else:
        rows.append(("budgets", f"VIOLATED ({budgets})", "error"))
    volumes = summary["volumes"]
    for volume in volumes["on_node"]:
        claim = volumes["claims"].get(volume) or "?"
        state = (
            "still attached when the drain ended"
            if volume in volumes["attached_when_released"]
            else "detached before the drain ended"
        )
        rows.append(
            ("volume", f"{volume} ({claim}): {state}", "ok" if "detached" in state else "warn")
        )
    rows.append(("replacements", f"{len(pods['replacements'])} Ready on other nodes", "ok"))
    failed = [c["name"] for c in summary["checks"] if not c["ok"]]
    rows.append(
        (
            "checks",
            "all passed" if not failed else "FAILED: " + "; ".join(failed),
            "ok" if not failed else "error",
        )
    )
    rows.append(("logs", shown_path(Path(summary["logs"])) + "/", "dim"))
    view.text()
    view.text("Summary", "step")
    width = max(len(label) for label, _, _ in rows)
    for label, text, style in rows:
        view.text(f"  {label:<{width}}  {text}", style)
