"""The function's drain, as the plan takes it. The function's settings map onto the
engine's options in one place (Settings.drain_options, drainer/lifecycle/settings.py):
its self-check plans with those options themselves (drainer/plan/groups.py), and the
plans an operator runs of the same drain (make preflight, the demo) ask for it with
the `plan` command's flags made here from those options, never from the settings
again."""

from __future__ import annotations

from drainer.engine import filters
from drainer.engine.options import DrainOptions

EVICTS_ALL = filters.Overrides(ignore_daemonsets=True, delete_emptydir_data=True, force=True)
"""The function refuses no pod as kubectl drain does without its override flags: its
filters (the options') decide which pods go, and the node goes away either way."""


def plan_flags(options: DrainOptions, timeout: float) -> list[str]:
    """`plan`'s flags for a drain with these options and `timeout` seconds: the pods
    its filters evict (the function evicts unreplicated and emptyDir pods by default,
    where kubectl's flags refuse them), its do-not-disrupt rule, and the time it has.
    `plan` has no flag for the eviction concurrency, the grace period, the critical
    reserve nor the stuck-pod wait: it takes the engine's defaults, which are the
    function's (the self-check's plan takes the options themselves)."""
    chosen = ["--timeout", f"{max(1, round(timeout))}s"]
    if options.filters.evict_unreplicated:
        chosen.append("--force")
    if options.filters.evict_emptydir:
        chosen.append("--delete-emptydir-data")
    chosen.append(
        "--evict-daemonset-pods" if options.filters.evict_daemonset else "--ignore-daemonsets"
    )
    if not options.honor_do_not_disrupt:
        chosen.append("--ignore-do-not-disrupt")
    return chosen
