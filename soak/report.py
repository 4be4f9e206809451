"""A soak's figures and invariants, as text (printed, summary.txt) and JSON
(report.json), beside the timeline (soak.png)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from soak import forecast
from soak.run import Outcome


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def invariants(outcome: Outcome) -> list[Check]:
    drains = outcome.drains
    config = outcome.config
    worst = ", ".join(f"{k} {v:+d}" for k, v in sorted(outcome.worst_margin.items()))
    budgets = Check(
        "no budget below its minimum",
        not outcome.violations,
        "; ".join(f"{k} at {v}" for k, v in outcome.violations.items())
        or f"lowest healthy - desired: {worst}",
    )
    left = {d.node: d.left for d in drains if d.left}
    clean = Check(
        "nothing the filters evict left on a drained node",
        not left,
        "; ".join(f"{n}: {', '.join(p)}" for n, p in left.items())
        or f"{sum(1 for d in drains if d.summary.get('result') == 'drained')} nodes checked",
    )
    completed = _completions(outcome)
    late = [
        f"{d.instance}: {d.error or d.summary.get('result')} after {d.ended - d.started:.1f} s"
        for d in drains
        if d.error
        or d.summary.get("result") != "drained"
        or d.ended - d.started > config.drain_timeout
    ]
    longest = max((d.ended - d.started for d in drains), default=0.0)
    deadline = Check(
        "each drain over by its deadline",
        not late and len(drains) == config.nodes,
        "; ".join(late)
        or f"{len(drains)} drained, the longest in {longest:.1f} s "
        f"(DRAIN_TIMEOUT_SECONDS={config.drain_timeout})",
    )
    tracebacks = Check(
        "no traceback in any log",
        not outcome.tracebacks,
        "; ".join(outcome.tracebacks[:5])
        or "drainer.log, metrics.log, this process's logs"
        + (", the control plane's components" if config.backend == "real" else ""),
    )
    return [budgets, clean, completed, deadline, _replacements_first(outcome), tracebacks]


def _replacements_first(outcome: Outcome) -> Check:
    """The launch hook's invariant: no old node of a batch went into Terminating:Wait
    before every replacement of that batch had its node Ready and its launch action
    completed with CONTINUE by the function."""
    problems = []
    for batch in outcome.batches:
        for instance, end in sorted(batch.launches.items()):
            if (end.get("result"), end.get("lifecycle_result")) != ("joined", "CONTINUE"):
                problems.append(f"{instance}: {end.get('result')}, {end.get('message', '')}")
        late = [i for i, at in batch.ready.items() if at > batch.terminating]
        if late or batch.launched > batch.terminating:
            problems.append(
                f"batch {batch.index + 1}: old nodes terminating at {batch.terminating:.1f} s, "
                f"before {', '.join(late) or 'the launch actions'} were done"
            )
    launches = sum(len(b.launches) for b in outcome.batches)
    gap = min(
        (b.terminating - max(b.ready.values(), default=0.0) for b in outcome.batches), default=0.0
    )
    return Check(
        "no old node terminated before its replacements were Ready",
        not problems and launches == outcome.config.nodes,
        "; ".join(problems)
        or f"{launches} launches held until their node was Ready (CONTINUE by the function); "
        f"each batch's old nodes went {gap:.1f} s or more after the last replacement was Ready",
    )


def _completions(outcome: Outcome) -> Check:
    problems = []
    drained = {d.instance for d in outcome.drains}
    by_instance: dict[str, list[dict[str, Any]]] = {}
    terminating = [a for a in outcome.actions if a["transition"].endswith("TERMINATING")]
    tokens = {a["token"] for a in terminating}
    completions = [c for c in outcome.completions if c["LifecycleActionToken"] in tokens]
    for action in terminating:
        by_instance.setdefault(action["instance_id"], []).append(action)
    for instance in sorted(drained | set(by_instance)):
        actions = by_instance.get(instance, [])
        if len(actions) != 1:
            problems.append(f"{instance}: {len(actions)} lifecycle actions")
            continue
        action = actions[0]
        calls = [c for c in completions if c["LifecycleActionToken"] == action["token"]]
        if (action["result"], action["closed_by"]) != ("CONTINUE", "complete") or len(calls) != 1:
            problems.append(
                f"{instance}: {action['result']} by {action['closed_by'] or 'nobody'}, "
                f"{len(calls)} CompleteLifecycleAction call(s)"
            )
        elif calls[0].get("error"):
            problems.append(f"{instance}: CompleteLifecycleAction answered {calls[0]['error']}")
    return Check(
        "each lifecycle action completed once, with CONTINUE",
        not problems and len(completions) == len(drained),
        "; ".join(problems)
        or f"{len(completions)} CompleteLifecycleAction calls for {len(drained)} drains",
    )


def drain_seconds(outcome: Outcome) -> float:
    """The drains' own time: in each batch, from its first drain's start to its last
    drain's end. What the total adds to it is the refresh's own turnover (each batch's
    replacements launched and Ready before its old instances go, the events reaching
    the function), which the pacing limit does not count."""
    spans: dict[int, tuple[float, float]] = {}
    for d in outcome.drains:
        start, end = spans.get(d.batch, (d.started, d.ended))
        spans[d.batch] = (min(start, d.started), max(end, d.ended))
    return sum(end - start for start, end in spans.values())


def figures(outcome: Outcome) -> dict[str, Any]:
    config = outcome.config
    limit = sum(b.limit for b in outcome.batches)
    draining = drain_seconds(outcome)
    evicted = sum(int(d.summary.get("evicted") or 0) for d in outcome.drains)
    requests = outcome.requests.total()
    return {
        "backend": config.backend,
        "nodes": config.nodes,
        "batch": config.batch,
        "pods": outcome.pods_at_start,
        "speed": config.speed,
        "times": config.times,
        "batches": len(outcome.batches),
        "drains": len(outcome.drains),
        "total_seconds": round(outcome.seconds, 2),
        "pacing_limit_seconds": round(limit, 2),
        "ratio": round(outcome.seconds / limit, 3) if limit else None,
        "drain_seconds": round(draining, 2),
        "drain_ratio": round(draining / limit, 3) if limit else None,
        "simulated_total_seconds": round(outcome.seconds * config.speed, 1),
        "simulated_pacing_limit_seconds": round(limit * config.speed, 1),
        "pods_evicted": evicted,
        "requests": requests,
        "requests_by_verb": outcome.requests.by_verb(),
        "requests_seen_by_kubesim": outcome.server_requests,
        "requests_per_pod": round(requests / evicted, 2) if evicted else None,
        "evictions_refused": outcome.requests.refused(),
        "pdb_refusals_reported": sum(
            int(d.summary.get("pdb_refusals") or 0) for d in outcome.drains
        ),
        "peak_rss_mb": round(outcome.rss_peak_mb, 1),
        "rss_at_start_mb": round(outcome.rss_start_mb, 1),
        "forecast": forecast.figures(outcome, draining, limit),
        "per_batch": [
            {
                "batch": b.index + 1,
                "instances": b.instances,
                "drained_seconds": round(b.drained - b.started, 3),
                "settled_seconds": round(b.settled - b.started, 3),
                "limit_seconds": round(b.limit, 3),
                "evictable_pods": sum(sum(p.values()) for p in b.placement.values()),
            }
            for b in outcome.batches
        ],
    }


def to_json(outcome: Outcome) -> dict[str, Any]:
    return {
        "figures": figures(outcome),
        "invariants": [
            {"name": c.name, "ok": c.ok, "detail": c.detail} for c in invariants(outcome)
        ],
        "drains": [
            {
                "batch": d.batch + 1,
                "instance": d.instance,
                "node": d.node,
                "started": round(d.started, 3),
                "ended": round(d.ended, 3),
                "result": d.summary.get("result"),
                "evicted": d.summary.get("evicted"),
                "pdb_refusals": d.summary.get("pdb_refusals"),
                "error": d.error,
            }
            for d in outcome.drains
        ],
    }


def text(outcome: Outcome, picture: str) -> str:
    f = figures(outcome)
    verbs = ", ".join(f"{k} {v}" for k, v in f["requests_by_verb"].items())
    seen = (
        f" (kubesim saw {f['requests_seen_by_kubesim']})"
        if f["requests_seen_by_kubesim"] is not None
        else ""
    )
    memory = "this process: the drains, moto, the soak's watch" + (
        " and kubesim" if f["backend"] == "kubesim" else "; the control plane's processes apart"
    )
    lines = [
        f"Instance refresh soak on {f['backend']}: {f['nodes']} nodes, {f['batch']} at a time "
        f"({f['batches']} batches), {f['pods']} pods, pod times divided by {f['speed']:g}"
        + (f" (the workload's own scaled by {f['times']:g})" if f["times"] != 1 else ""),
        "",
        f"  total time        {f['total_seconds']:.1f} s "
        f"(= {f['simulated_total_seconds']:.0f} s of the workload's time)",
        f"  pacing limit      {f['pacing_limit_seconds']:.1f} s "
        f"(= {f['simulated_pacing_limit_seconds']:.0f} s): what budgets and shutdowns force",
        f"  ratio             {f['ratio']}",
        f"  the drains' own   {f['drain_seconds']:.1f} s, {f['drain_ratio']} of the limit (each "
        "batch's first drain start to its last drain end; the rest is the refresh's turnover)",
        f"  drains            {f['drains']}, {f['pods_evicted']} pods evicted",
        f"  requests          {f['requests']}{seen}: {verbs}",
        f"  requests per pod  {f['requests_per_pod']}",
        f"  evictions refused {f['evictions_refused']} (429; the drains reported "
        f"{f['pdb_refusals_reported']} budget refusals)",
        f"  peak memory       {f['peak_rss_mb']:.0f} MB RSS ({memory}; "
        f"{f['rss_at_start_mb']:.0f} MB when the refresh began)",
        "",
        "  batch  drained s  settled s  limit s  pods",
    ]
    for b in f["per_batch"]:
        lines.append(
            f"  {b['batch']:>5}  {b['drained_seconds']:>9.1f}  {b['settled_seconds']:>9.1f}  "
            f"{b['limit_seconds']:>7.1f}  {b['evictable_pods']:>4}"
        )
    forecasted = forecast.text(f["forecast"], f["speed"])
    if forecasted:
        lines += ["", *forecasted]
    lines += ["", "Invariants"]
    for check in invariants(outcome):
        lines.append(f"  {'PASS' if check.ok else 'FAIL'}  {check.name}: {check.detail}")
    lines += ["", f"Timeline: {picture}"]
    return "\n".join(lines) + "\n"


def write(outcome: Outcome, picture: str) -> str:
    """report.json and summary.txt in the out directory; the text."""
    out = outcome.config.out
    (out / "report.json").write_text(json.dumps(to_json(outcome), indent=2) + "\n")
    summary = text(outcome, picture)
    (out / "summary.txt").write_text(summary)
    return summary


def passed(outcome: Outcome) -> bool:
    return all(c.ok for c in invariants(outcome))
