"""Medians, the table, and the issue's targets, met or not."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench import floor as floor_client
from bench.coldstart import TARGET_SECONDS, TARGET_ZIP_MB, ColdStart
from bench.run import RunResult
from bench.scenarios import CPU_PODS, Scenario
from bench.startup import STARTUP_TARGET_SECONDS, Startup
from drainer.k8s.kube import PAGE_SIZE

VERB_ORDER = ("evict", "get", "list", "watch", "patch", "delete", "discovery", "other")


@dataclass
class Summary:
    scenario: str
    client: str
    runs: int
    failed: int
    ideal: float | None
    backend: str = "kubesim"
    """Where its figures come from (RunResult.backend)."""
    window: float | None = None
    window_min: float | None = None
    window_max: float | None = None
    overhead: float | None = None
    wall: float = 0.0
    wall_min: float = 0.0
    wall_max: float = 0.0
    peak_mb: float = 0.0
    peak_mb_max: float = 0.0
    cpu: float = 0.0
    system_cpu: float = 0.0
    switches: float = 0.0
    work_cpu: float = 0.0
    """The drain's own CPU, start-up apart (RunResult.work_cpu); 0: not reported."""
    work_system_cpu: float = 0.0
    work_switches: float = 0.0
    requests: float = 0.0
    verbs: dict[str, float] = field(default_factory=dict)
    latency_p50_ms: float = 0.0
    latency_p99_ms: float = 0.0
    latency_max_ms: float = 0.0
    sim_busy: float | None = None
    """Median share of the window during which kubesim's controllers held the lock."""
    lookup_seconds: float | None = None
    emptied: float | None = None
    """Real backend: median seconds from the cordon to the node empty (a watch's view)."""
    evict_first: float | None = None
    evict_last: float | None = None
    accepted_last: float | None = None
    accepted_ms: float | None = None
    tracked: bool = False
    gone: float | None = None
    """Scenario 6: median seconds from the cordon until the last budget-free pod was
    gone, over the runs where they all went."""
    gone_runs: int = 0
    """Scenario 6: runs where they all went (the others ended with some still there)."""
    problems: list[str] = field(default_factory=list)


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def summarise(results: Sequence[RunResult]) -> list[Summary]:
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for result in results:
        groups.setdefault((result.scenario, result.client), []).append(result)
    summaries = []
    for (scenario, client), runs in groups.items():
        good = [r for r in runs if r.ok]
        summary = Summary(
            scenario,
            client,
            len(runs),
            len(runs) - len(good),
            runs[0].ideal,
            runs[0].backend,
            problems=[r.problem for r in runs if not r.ok],
        )
        summaries.append(summary)
        if not good:
            continue
        summary.tracked = runs[0].tracked
        gone = [r.gone for r in good if r.gone is not None]
        summary.gone = _median(gone) if gone else None
        summary.gone_runs = len(gone)
        windows = [r.window for r in good if r.window is not None]
        if windows:
            summary.window = _median(windows)
            summary.window_min, summary.window_max = min(windows), max(windows)
            measured = summary.gone if summary.tracked else summary.window
            if summary.ideal is not None and measured is not None:
                summary.overhead = measured - summary.ideal
            shares = [r.sim_busy / r.window for r in good if r.window]
            summary.sim_busy = _median(shares) if shares else None
        walls = [r.wall for r in good]
        summary.wall, summary.wall_min, summary.wall_max = _median(walls), min(walls), max(walls)
        summary.peak_mb = _median([r.maxrss_mb for r in good])
        summary.peak_mb_max = max(r.maxrss_mb for r in good)
        summary.cpu = _median([r.cpu for r in good])
        summary.system_cpu = _median([r.system_cpu for r in good])
        summary.switches = _median([r.switches for r in good])
        summary.work_cpu = _median([r.work_cpu for r in good])
        summary.work_system_cpu = _median([r.work_system_cpu for r in good])
        summary.work_switches = _median([r.work_switches for r in good])
        summary.requests = _median([r.requests for r in good])
        verbs = {v for r in good for v in r.verbs}
        summary.verbs = {v: _median([r.verbs.get(v, 0) for r in good]) for v in verbs}
        summary.latency_p50_ms = _median([r.latency.get("median_ms", 0.0) for r in good])
        summary.latency_p99_ms = max(r.latency.get("p99_ms", 0.0) for r in good)
        summary.latency_max_ms = max(r.latency.get("max_ms", 0.0) for r in good)
        firsts = [r.evict_first for r in good if r.evict_first is not None]
        lasts = [r.evict_last for r in good if r.evict_last is not None]
        if firsts and lasts:
            summary.evict_first, summary.evict_last = _median(firsts), _median(lasts)
        accepted = [r.accepted_last for r in good if r.accepted_last is not None]
        summary.accepted_last = _median(accepted) if accepted else None
        paces = [r.accepted_ms for r in good if r.accepted_ms is not None]
        summary.accepted_ms = _median(paces) if paces else None
        emptied = [r.emptied for r in good if r.emptied is not None]
        summary.emptied = _median(emptied) if emptied else None
        lookups = [r.seconds for r in good if r.seconds is not None]
        summary.lookup_seconds = _median(lookups) if lookups else None
    return summaries


def _number(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.1f}"


def verbs_text(summary: Summary) -> str:
    ordered = sorted(
        summary.verbs.items(),
        key=lambda item: VERB_ORDER.index(item[0]) if item[0] in VERB_ORDER else 99,
    )
    parts = [f"{verb} {_number(n)}" for verb, n in ordered if n]
    return f"{_number(summary.requests)}: " + ", ".join(parts)


def _seconds(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def table(
    summaries: Sequence[Summary], scenarios: Sequence[Scenario], backend: str = "kubesim"
) -> str:
    """One row per scenario and client; its `backend` column says where the row's
    figures come from. kubesim: its clock and records, its handling time per request
    (sim ms) and how busy its controllers were; real: the client's own clock and
    request log, its round trip per request (rtt ms) and when a watch saw the node
    empty (empty s, from the cordon)."""
    titles = {s.key: s.title for s in scenarios}
    real = backend == "real"
    latency_head, last_head = (
        ("rtt ms p50/p99", "empty s") if real else ("sim ms p50/p99", "sim busy")
    )
    header = (
        f"{'#':<2} {'client':<22} {'backend':<7} {'window s median [min-max]':<26} {'ideal':>6} "
        f"{'overhead':>8}  {'requests: by verb (median)':<52} {'wall s':>6} {'peak MB':>7} "
        f"{latency_head:>14} {last_head:>8}"
    )
    lines = [header, "-" * len(header)]
    current = ""
    for summary in summaries:
        if summary.scenario != current:
            current = summary.scenario
            title = titles.get(current, "node lookup (find_node)")
            lines.append(f"{current}  {title}")
        runs = f" ({summary.runs - summary.failed}/{summary.runs} ok)" if summary.failed else ""
        if summary.window is None:
            window = "-"
        else:
            window = f"{summary.window:.2f} [{summary.window_min:.2f}-{summary.window_max:.2f}]"
        if summary.backend == "real":
            last = _seconds(summary.emptied)
        else:
            last = f"{summary.sim_busy * 100:.0f}%" if summary.sim_busy is not None else "-"
        latency = f"{summary.latency_p50_ms:.1f}/{summary.latency_p99_ms:.0f}"
        lines.append(
            f"{'':<2} {summary.client + runs:<22} {summary.backend:<7} {window:<26} "
            f"{_seconds(summary.ideal):>6} {_seconds(summary.overhead, signed=True):>8}  "
            f"{verbs_text(summary):<52} {summary.wall:>6.2f} {summary.peak_mb:>7.0f} "
            f"{latency:>14} {last:>8}"
        )
    return "\n".join(lines)


def evictions_text(summaries: Sequence[Summary]) -> str:
    """When each client's evictions went out, and at what rate the server took them."""
    lines = ["Evictions (medians, seconds into the window: first - last, rate while evicting)"]
    for summary in summaries:
        if summary.evict_first is None or summary.evict_last is None:
            continue
        evictions = summary.verbs.get("evict", 0)
        span = summary.evict_last - summary.evict_first
        rate = f", {evictions / span:.0f}/s" if span > 0.05 and evictions > 1 else ""
        lines.append(
            f"  {summary.scenario} {summary.client:<8} {summary.evict_first:.2f} - "
            f"{summary.evict_last:.2f} ({_number(evictions)} requests{rate})"
        )
    return "\n".join(lines)


def head_of_line_text(summaries: Sequence[Summary], scenarios: Sequence[Scenario]) -> str:
    """Scenario 6: how soon the budget-free pods were gone, ours and kubectl drain's,
    and the ratio."""
    scenario = next((s for s in scenarios if s.key == "6"), None)
    rows = {s.client: s for s in summaries if s.scenario == "6"}
    if scenario is None or not rows:
        return ""
    lines = [
        f"Head of line (scenario 6: {scenario.title}; both clients stop on their "
        f"{scenario.timeout:g} s timeout): from the cordon until the last budget-free "
        "pod was gone (medians)"
    ]
    for client in ("ours", "floor", "kubectl"):
        summary = rows.get(client)
        if summary is None:
            continue
        lines.append(f"  {client:<8} {_gone_text(summary, scenario)}{_pace_text(summary)}")
    ours, theirs = rows.get("ours"), rows.get("kubectl")
    if ours and theirs and ours.gone and theirs.gone:
        lines.append(f"  kubectl drain / ours: {theirs.gone / ours.gone:.1f}x")
    return "\n".join(lines)


def floor_text(summaries: Sequence[Summary], scenarios: Sequence[Scenario]) -> str:
    """Each client against the floor (bench/floor.py) in the same run: the ratio of
    their medians, from process start to exit (wall; scenario 6: from the cordon until
    the last budget-free pod was gone), and from the cordon to the last request."""
    by = {(s.scenario, s.client): s for s in summaries}
    lines = [
        "Against the floor (bench/floor.py, standard library only: cordon, one list, every "
        f"eviction at once on {floor_client.CONNECTIONS} connections, a watch for the end; "
        "same run, medians)"
    ]
    for scenario in scenarios:
        floor = by.get((scenario.key, "floor"))
        tracked = bool(scenario.tracked)
        if floor is None or not (base := floor.gone if tracked else floor.wall):
            continue
        what = "gone" if tracked else "wall"
        parts = [f"floor {base:.2f} s {what}"]
        for client in ("ours", "kubectl"):
            summary = by.get((scenario.key, client))
            if summary is None:
                continue
            measured = summary.gone if tracked else summary.wall
            if not measured:
                continue
            part = f"{client}/floor {measured / base:.2f}x"
            if not tracked and summary.window and floor.window:
                part += f" (window {summary.window / floor.window:.2f}x)"
            parts.append(part)
        lines.append(f"  {scenario.key} {scenario.title}: " + "; ".join(parts))
    return "\n".join(lines) if len(lines) > 1 else ""


def _pace_text(summary: Summary) -> str:
    """Where the time went: the evictions the server accepted (scenario 6: the
    budget-free pods'), the last one's answer and each one's time at the server, then
    the rest, which is the last pod's shutdown as the server and the kubelet run it."""
    if summary.gone is None or summary.accepted_last is None or summary.accepted_ms is None:
        return ""
    return (
        f": its last accepted eviction answered at {summary.accepted_last:.2f} s (each "
        f"{summary.accepted_ms:.0f} ms, median), then {summary.gone - summary.accepted_last:.2f} "
        "s to that pod's end"
    )


def _gone_text(summary: Summary, scenario: Scenario) -> str:
    ok = summary.runs - summary.failed
    if summary.gone is None:
        return (
            f"still on the node when the client stopped ({scenario.timeout:g} s): "
            "held behind the budget-blocked pods"
        )
    some = (
        f" ({summary.gone_runs} of {ok} runs; the others never)" if summary.gone_runs < ok else ""
    )
    return f"{summary.gone:.2f} s (ideal {scenario.ideal:.2f} s){some}"


@dataclass(frozen=True)
class Target:
    name: str
    target: str
    measured: str
    met: bool | None  # None: could not be measured


def _find(summaries: Sequence[Summary], scenario: str, client: str) -> Summary | None:
    for summary in summaries:
        if summary.scenario == scenario and summary.client == client and summary.window:
            return summary
    return None


def targets(
    summaries: Sequence[Summary],
    scenarios: Sequence[Scenario],
    coldstart: ColdStart | None,
    lookup_nodes: int = 0,
    startup: Startup | None = None,
) -> list[Target]:
    pods = {s.key: s.pods for s in scenarios}
    found: list[Target] = []
    ours, theirs = _find(summaries, "1", "ours"), _find(summaries, "1", "kubectl")
    if ours and theirs and ours.window is not None and theirs.window is not None:
        found.append(
            Target(
                "1: window and requests vs kubectl drain",
                "window <= kubectl's, fewer requests",
                f"window {ours.window:.2f} s vs {theirs.window:.2f} s; "
                f"requests {_number(ours.requests)} vs {_number(theirs.requests)}",
                ours.window <= theirs.window and ours.requests < theirs.requests,
            )
        )
    else:
        found.append(Target("1: window and requests vs kubectl drain", "", "not measured", None))
    ours = _find(summaries, "2", "ours")
    if ours and ours.overhead is not None:
        limit = 2 * pods["2"] + 10
        found.append(
            Target(
                "2: overhead",
                "< 0.5 s",
                f"{ours.overhead:.2f} s (window {ours.window:.2f} s, ideal {ours.ideal:.2f} s)",
                ours.overhead < 0.5,
            )
        )
        found.append(
            Target(
                "2: requests",
                f"<= 2 per pod + 10 = {limit}",
                f"{_number(ours.requests)} for {pods['2']} pods",
                ours.requests <= limit,
            )
        )
        found.append(
            Target(
                "2: peak memory",
                "< 150 MB",
                f"{ours.peak_mb_max:.0f} MB (max of runs)",
                ours.peak_mb_max < 150,
            )
        )
    ours = _find(summaries, "3", "ours")
    if ours and ours.overhead is not None and ours.ideal:
        found.append(
            Target(
                "3: overhead under a PDB",
                f"<= 20% of ideal = {0.2 * ours.ideal:.2f} s",
                f"{ours.overhead:.2f} s ({ours.overhead / ours.ideal * 100:.0f}%)",
                ours.overhead <= 0.2 * ours.ideal,
            )
        )
    ours = _find(summaries, "4", "ours")
    if ours and ours.overhead is not None:
        found.append(
            Target("4: overhead", "< 0.5 s", f"{ours.overhead:.2f} s", ours.overhead < 0.5)
        )
    found.extend(_head_of_line_target(summaries))
    dns, provider = _find(summaries, "5", "ours (PrivateDnsName)"), None
    provider = _find(summaries, "5", "ours (providerID)")
    if dns:
        found.append(
            Target(
                "5: lookup by PrivateDnsName",
                "<= 3 requests",
                f"{_number(dns.requests)} requests, {(dns.lookup_seconds or 0) * 1000:.0f} ms",
                dns.requests <= 3,
            )
        )
    if provider:
        # Records carry no query string: a paged listing shows as one list request
        # per page (plus the hostname-label list before it), an unbounded one as one.
        lists = provider.verbs.get("list", 0)
        pages = math.ceil(lookup_nodes / PAGE_SIZE) if lookup_nodes else 1
        found.append(
            Target(
                "5: lookup by providerID only",
                f"paged listing ({pages} pages of <= {PAGE_SIZE} for {lookup_nodes} nodes)",
                f"{_number(provider.requests)} requests: {_number(lists)} lists "
                f"(1 by hostname label + pages), {(provider.lookup_seconds or 0) * 1000:.0f} ms",
                lists - 1 >= pages,
            )
        )
    if coldstart is not None and not coldstart.skipped:
        total = coldstart.median.get("total", 0.0)
        found.append(
            Target(
                "cold start: import + clients",
                f"<= {TARGET_SECONDS} s",
                f"{total:.3f} s median of {coldstart.runs} ({coldstart.runtime} {coldstart.arch})",
                total <= TARGET_SECONDS,
            )
        )
    if coldstart is not None and coldstart.zips:
        found.append(
            Target(
                "zip size",
                f"<= {TARGET_ZIP_MB:g} MB",
                "; ".join(f"{mb:.1f} MB ({label})" for label, mb in coldstart.zips.items()),
                all(mb <= TARGET_ZIP_MB for mb in coldstart.zips.values()),
            )
        )
    for key in ("1", "7"):  # issue 28: within 20 % of the floor, budget-free pods
        mine, floor = _find(summaries, key, "ours"), _find(summaries, key, "floor")
        name = f"{key}: ours / floor, {pods.get(key, '?')} pods (process start to exit)"
        if mine and floor and floor.wall:
            ratio = mine.wall / floor.wall
            found.append(
                Target(
                    name,
                    "<= 1.20x",
                    f"{ratio:.2f}x ({mine.wall:.2f} s vs {floor.wall:.2f} s)",
                    ratio <= 1.2,
                )
            )
        elif key in pods:
            found.append(Target(name, "<= 1.20x", "not measured", None))
    if any(s.key.startswith("cpu") for s in scenarios):
        found.extend(_cpu_target(summaries))
    if startup is not None:  # issue 28: the CLI's start-up
        found.append(
            Target(
                "CLI: process start to its first request",
                f"<= {STARTUP_TARGET_SECONDS:.2f} s",
                f"{startup.median:.3f} s (median of {len(startup.runs)})"
                + (f"; the floor's {startup.floor_median:.3f} s" if startup.floor_median else ""),
                startup.median <= STARTUP_TARGET_SECONDS,
            )
        )
    return found


CPU_SLOPE_TARGET = 1.5
"""Issue 39, item 10: the CPU each pod costs our drain (as deployed) at most 1.5x what
it costs the floor."""


@dataclass(frozen=True)
class CpuSlope:
    client: str
    small: float
    large: float
    pods: tuple[int, int]
    system: tuple[float, float] = (0.0, 0.0)
    """The kernel's CPU seconds at the two sizes (part of small and large)."""
    switches: tuple[float, float] = (0.0, 0.0)
    """Voluntary context switches at the two sizes."""
    process: tuple[float, float] | None = None
    """The whole process's CPU at the two sizes, when small and large are the drain's
    own (both clients report it: getrusage around the drain, the start-up apart)."""

    @property
    def per_pod_ms(self) -> float:
        """CPU milliseconds per pod, the start-up apart: the slope between the sizes."""
        return self._slope(self.small, self.large) * 1000

    @property
    def system_per_pod_ms(self) -> float:
        return self._slope(*self.system) * 1000

    @property
    def switches_per_pod(self) -> float:
        return self._slope(*self.switches)

    def _slope(self, small: float, large: float) -> float:
        return (large - small) / (self.pods[1] - self.pods[0])


def cpu_slopes(summaries: Sequence[Summary]) -> dict[str, CpuSlope]:
    """Each client's CPU per drain at the CPU scenarios' two sizes, and the slope: the
    drain's own CPU when both clients report it at both sizes (a process's start-up,
    which compiling its modules makes vary by a tenth of a second from run to run, is
    then out of the slope's noise too), else the process's."""
    few, many = CPU_PODS
    pairs = {}
    for client in ("ours", "floor"):
        low = _find(summaries, f"cpu{few}", client)
        high = _find(summaries, f"cpu{many}", client)
        if low is not None and high is not None and low.cpu and high.cpu:
            pairs[client] = (low, high)
    own = bool(pairs) and all(low.work_cpu and high.work_cpu for low, high in pairs.values())
    found = {}
    for client, (low, high) in pairs.items():
        figures = [
            (s.work_cpu, s.work_system_cpu, s.work_switches)
            if own
            else (s.cpu, s.system_cpu, s.switches)
            for s in (low, high)
        ]
        (small, small_system, small_switches), (large, large_system, large_switches) = figures
        found[client] = CpuSlope(
            client,
            small,
            large,
            CPU_PODS,
            (small_system, large_system),
            (small_switches, large_switches),
            (low.cpu, high.cpu) if own else None,
        )
    return found


def cpu_text(summaries: Sequence[Summary]) -> str:
    """CPU seconds (user + system, getrusage) per drain beside the wall time, and per
    pod: the CPU, the kernel's share of it, and the voluntary context switches (a
    thread waiting and woken: the GIL, a lock, a socket), for ours as deployed and the
    floor. The drain's own CPU where both report it, the process's beside it."""
    slopes = cpu_slopes(summaries)
    if not slopes:
        return ""
    own = any(slope.process is not None for slope in slopes.values())
    lines = [
        "CPU per drain (user + system; "
        + (
            "the drain's own, from its first request to its last Event: getrusage "
            "around it in the client's process, the start-up apart"
            if own
            else "of the process"
        )
        + "; ours as deployed: forecast and ETA, Events, JSON log):"
    ]
    for client, slope in slopes.items():
        sizes = []
        for i, n in enumerate(slope.pods):
            found = _find(summaries, f"cpu{n}", client)
            wall = found.wall if found is not None else 0.0
            cpu = (slope.small, slope.large)[i]
            beside = f"the process {slope.process[i]:.2f} s, " if slope.process else ""
            sizes.append(f"{n} pods {cpu:.2f} s CPU ({beside}wall {wall:.2f} s)")
        lines.append(
            f"  {client:<6} {sizes[0]}, {sizes[1]}: "
            f"{slope.per_pod_ms:.2f} ms per pod ({slope.system_per_pod_ms:.2f} ms of it "
            f"in the kernel), {slope.switches_per_pod:.1f} context switches per pod"
        )
    if len(slopes) == 2 and slopes["floor"].per_pod_ms > 0:
        ours, floor = slopes["ours"], slopes["floor"]
        ratio = f"  ours/floor per pod: {ours.per_pod_ms / floor.per_pod_ms:.2f}x"
        if floor.switches_per_pod > 0:
            ratio += f" (context switches {ours.switches_per_pod / floor.switches_per_pod:.1f}x)"
        lines.append(ratio)
    return "\n".join(lines)


def _cpu_target(summaries: Sequence[Summary]) -> list[Target]:
    slopes = cpu_slopes(summaries)
    name = f"CPU per pod, ours (as deployed) / the floor's, {CPU_PODS[0]} to {CPU_PODS[1]} pods"
    if len(slopes) < 2 or slopes["floor"].per_pod_ms <= 0:
        return [Target(name, f"<= {CPU_SLOPE_TARGET:.1f}x", "not measured", None)]
    ours, floor = slopes["ours"].per_pod_ms, slopes["floor"].per_pod_ms
    return [
        Target(
            name,
            f"<= {CPU_SLOPE_TARGET:.1f}x",
            f"{ours / floor:.2f}x ({ours:.2f} ms vs {floor:.2f} ms per pod)",
            ours / floor <= CPU_SLOPE_TARGET,
        )
    ]


def _head_of_line_target(summaries: Sequence[Summary]) -> list[Target]:
    """Scenario 6: budget-blocked pods hold no budget-free pod back: the free ones go
    no later than kubectl drain's (which evicts every pod at once)."""
    ours, theirs = _find(summaries, "6", "ours"), _find(summaries, "6", "kubectl")
    if ours is None:
        return []
    name, target = "6: budget-free pods past budget-blocked ones", "gone no later than kubectl's"
    if ours.gone is None:
        return [Target(name, target, "never gone: held behind the budget-blocked pods", False)]
    if theirs is None or theirs.gone is None:
        measured = f"ours {ours.gone:.2f} s; kubectl's never gone or not run"
        return [Target(name, target, measured, True if theirs is not None else None)]
    return [
        Target(
            name,
            target,
            f"ours {ours.gone:.2f} s vs kubectl {theirs.gone:.2f} s "
            f"({theirs.gone / ours.gone:.1f}x)",
            ours.gone <= theirs.gone,
        )
    ]


def targets_text(found: Sequence[Target], quick: bool, backend: str = "kubesim") -> str:
    notes = []
    if quick:
        notes.append("quick mode: reduced sizes, not a verdict")
    if backend == "real":
        notes.append("on the real control plane, figures from the clients' side")
    lines = ["Targets" + (f" ({'; '.join(notes)})" if notes else "")]
    for target in found:
        verdict = {True: "met", False: "NOT MET", None: "not measured"}[target.met]
        lines.append(f"  {verdict:<12} {target.name}: {target.measured}  [target {target.target}]")
    return "\n".join(lines)


def coldstart_text(result: ColdStart) -> str:
    if result.skipped:
        return f"Cold start: skipped ({result.skipped})"
    median = result.median
    lines = [
        f"Cold start ({result.runtime}, {result.arch}, {result.zip_path}, {result.zip_mb:.1f} MB "
        f"zip / {result.unpacked_mb:.0f} MB unpacked; median of {result.runs} fresh interpreters)",
        f"  import drainer.handler {median['import_handler']:.3f} s + settings "
        f"{median['settings']:.3f} s + boto3 clients {median['boto3_clients']:.3f} s + "
        f"Kube.for_cluster {median['kube_client']:.3f} s = {median['total']:.3f} s "
        f"(min {min(result.phases['total']):.3f}, max {max(result.phases['total']):.3f}); "
        f"then the first EKS token {median['first_token'] * 1000:.0f} ms",
        "  import time by package (self, python -X importtime): "
        + ", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in result.importtime),
    ]
    return "\n".join(lines)
