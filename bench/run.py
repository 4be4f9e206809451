"""Run the scenarios: a fresh cluster per run, each client in a process of its own.

On kubesim (the default backend) the figures come from kubesim's records. On the
real control plane (`--backend real`) every drain also gets a control plane of its
own (~4 s to start and stop): both clients start from the same state, and nothing
of one run (a ReplicaSet the garbage collector has yet to remove, kwok's pending
deletions, the disruption controller's memory of disrupted pods) reaches the next,
which cleaning up a shared one could not promise. The real apiserver keeps no
request records for us: the figures come from each client's own request log (see
bench.clients), and a watch of the bench's own sees when the node is empty.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import forecast, measure
from bench.clients import (
    KUBECTL_USER,
    OURS_USER,
    Process,
    run_floor,
    run_kubectl,
    run_lookup,
    run_ours,
)
from bench.scenarios import ApiSetup, Lookup, Scenario, SimSetup, lookups
from kubesim import KubeSim

if TYPE_CHECKING:
    from testbed.cluster import ApiClient
    from testbed.controlplane import ControlPlane

BACKENDS = ("kubesim", "real")
CLUSTER_NAME = "bench"

# Watch streams end when the client hangs up; kubesim notices at its next writes
# (bookmarks) and only then records the request: short bookmarks, and a wait until
# kubesim has recorded as many requests as our client says it made.
BOOKMARK_SECONDS = 0.2
RECORD_WAIT_SECONDS = 5.0


@dataclass
class RunResult:
    scenario: str
    client: str
    run: int
    ok: bool
    problem: str = ""
    backend: str = "kubesim"
    """Where every figure of this run comes from: "kubesim" (its records, its clock)
    or "real" (the control plane; the client's own request log, this host's clock)."""
    server: str = ""
    """The API server's version (real backend)."""
    window: float | None = None
    ideal: float | None = None
    wall: float = 0.0
    cpu: float = 0.0
    system_cpu: float = 0.0
    switches: int = 0
    work_cpu: float = 0.0
    """The drain's own CPU (user + system), its start-up apart: getrusage around the
    drain, in the client's process (bench/child.py Meter, bench/floor.py)."""
    work_system_cpu: float = 0.0
    work_switches: int = 0
    maxrss_mb: float = 0.0
    requests: int = 0
    verbs: dict[str, int] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)
    """kubesim: its handling time per request; real: the client's round trip."""
    sim_passes: int = 0
    sim_busy: float = 0.0
    """Seconds of the window during which kubesim's controllers held the store lock."""
    seconds: float | None = None
    """Scenario 5: find_node's own time, measured in the client."""
    setup: float = 0.0
    evict_first: float | None = None
    evict_last: float | None = None
    """When the first and the last eviction request arrived, seconds into the window."""
    accepted_last: float | None = None
    """When the answer to the last accepted eviction (2xx) came, seconds into the window."""
    accepted_ms: float | None = None
    """The median time an accepted eviction took, request to answer (kubesim: its
    handling; real: the client's round trip): the server's own pace."""
    emptied: float | None = None
    """Real backend: seconds from the client's cordon to the node's last pod gone
    (DaemonSet pods aside), as the bench's own watch saw it."""
    tracked: bool = False
    """The scenario's figure is `gone`, not the window (scenario 6)."""
    gone: float | None = None
    """Scenario 6: seconds from the client's cordon until the last budget-free pod was
    gone, as the bench saw it (kubesim: its store; real: a watch); None: some were
    still on the node when the client ended."""
    forecasted: bool = False
    """The plan ran before this drain (a scenario paced by a budget: bench/forecast.py)."""
    forecast_eta: float | None = None
    """The plan's ETA of the node's drain, seconds (None: no forecast)."""
    forecast_max: float | None = None
    """The plan's upper bound of it."""
    forecast_paced_by: str = ""
    forecast_deadlocked: bool = False
    forecast_problem: str = ""
    """Why the plan gave no forecast ("" when it did)."""

    @property
    def overhead(self) -> float | None:
        measured = self.gone if self.tracked else self.window
        if measured is None or self.ideal is None:
            return None
        return measured - self.ideal


Progress = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _daemon_pod(pod: dict[str, Any]) -> bool:
    owners = pod["metadata"].get("ownerReferences") or []
    return any(o.get("kind") == "DaemonSet" for o in owners)


def _pods_left(pods: list[dict[str, Any]], node: str, *apps: str) -> list[str]:
    """Pods still on the node, DaemonSet pods and those of `apps` (labels) aside."""
    return [
        pod["metadata"]["name"]
        for pod in pods
        if pod["spec"].get("nodeName") == node and not _daemon_pod(pod) and _app(pod) not in apps
    ]


def _app(pod: dict[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get("app", ""))


class PodsGone:
    """When the last of the node's pods that `counts` picks went: fed the pods on the
    node at `begin`, then every change after that; the epoch second it saw the last
    one go, or None."""

    def __init__(self, node: str, counts: Callable[[dict[str, Any]], bool]) -> None:
        self.node = node
        self.counts = counts
        self.emptied: float | None = None
        self._left: set[str] = set()
        self._lock = threading.Lock()

    def begin(self, pods: list[dict[str, Any]]) -> None:
        with self._lock:
            self._left = {
                p["metadata"]["uid"]
                for p in pods
                if (p.get("spec") or {}).get("nodeName") == self.node and self.counts(p)
            }

    def see(self, kind: str, pod: dict[str, Any]) -> bool:
        """One change of a pod; True once the last counted pod is gone."""
        if (pod.get("spec") or {}).get("nodeName") != self.node or not self.counts(pod):
            return self.emptied is not None
        with self._lock:
            if kind == "DELETED":
                self._left.discard(pod["metadata"]["uid"])
            else:
                self._left.add(pod["metadata"]["uid"])
            if not self._left and self.emptied is None:
                self.emptied = time.time()
            return self.emptied is not None


def _sim_pods_gone(sim: KubeSim, node: str, app: str) -> PodsGone:
    """PodsGone fed by kubesim's store itself: no request of its own, so none in the
    clients' records (kubectl's user is the admin)."""
    gone = PodsGone(node, lambda pod: _app(pod) == app)

    def hook(change: Any) -> None:
        if change.resource.plural == "pods":
            gone.see(change.type, change.obj)

    sim.store.add_hook(hook)
    gone.begin(sim.list("Pod"))
    return gone


def _answer(process: Process) -> dict[str, Any]:
    """Our client's answer: its last output line, JSON ({} if there is none)."""
    try:
        answer = json.loads(process.output.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {}
    return answer if isinstance(answer, dict) else {}


def _requests_made(process: Process, client: str) -> int:
    """The request count our client (or the floor) reports."""
    answer = _answer(process)
    if client == "floor":
        return len(answer.get("records") or [])
    try:
        return int(answer.get("requests", answer["report"]["api_requests"]))
    except (KeyError, ValueError, TypeError):
        return 0


def _records(sim: KubeSim, user: str, expected: int) -> list[Any]:
    """The user's requests kubesim recorded, once there are `expected` (or 5 s on)."""
    deadline = time.monotonic() + RECORD_WAIT_SECONDS
    records = sim.requests(user)
    while len(records) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
        records = sim.requests(user)
    return records


def _figures(result: RunResult, records: list[Any], window: measure.Window | None) -> None:
    result.requests = len(records)
    result.verbs = measure.by_verb(records)
    result.latency = asdict(measure.latency(records))
    if window is not None:
        result.window = window.seconds
        evictions = [r.at for r in records if r.resource == "pods/eviction"]
        if evictions:
            result.evict_first = min(evictions) - window.start
            result.evict_last = max(evictions) - window.start
        accepted = [r for r in records if r.resource == "pods/eviction" and 200 <= r.status < 300]
        if accepted:
            result.accepted_last = max(r.done for r in accepted) - window.start
            result.accepted_ms = statistics.median((r.done - r.at) * 1000 for r in accepted)


def _process(result: RunResult, process: Process, *, ends_on_timeout: bool = False) -> None:
    """`ends_on_timeout`: pods that never go are expected (scenario 6), and kubectl
    drain reports its --timeout with exit status 1."""
    result.wall = process.wall
    result.cpu = process.cpu
    result.system_cpu, result.switches = process.system_cpu, process.switches
    work = _answer(process).get("work") or {}
    if isinstance(work, dict) and work:
        result.work_system_cpu = float(work.get("system") or 0.0)
        result.work_cpu = float(work.get("user") or 0.0) + result.work_system_cpu
        result.work_switches = int(work.get("switches") or 0)
    result.maxrss_mb = process.maxrss_mb
    if process.timed_out:
        result.ok, result.problem = False, "timed out"
    elif process.returncode != 0 and not (ends_on_timeout and result.client != "ours"):
        tail = " | ".join(process.output.strip().splitlines()[-3:])
        result.ok, result.problem = False, f"exit {process.returncode}: {tail[:300]}"


def drain_once(
    scenario: Scenario,
    client: str,
    run: int,
    speed: float,
    kubectl: Path | None,
    *,
    backend: str = "kubesim",
) -> RunResult:
    speed = scenario.speed or speed
    if backend == "real":
        return _drain_real(scenario, client, run, speed, kubectl)
    result = RunResult(
        scenario.key, client, run, ok=True, ideal=scenario.ideal, tracked=bool(scenario.tracked)
    )
    sim = KubeSim(speed=speed, cluster_name=CLUSTER_NAME)
    sim.bookmark_interval = BOOKMARK_SECONDS
    with sim:
        controllers = measure.ControllerClock(sim)
        started = time.perf_counter()
        prepared = scenario.prepare(SimSetup(sim))
        result.setup = time.perf_counter() - started
        if scenario.forecast:
            forecast.budgets_counted(lambda: sim.list("PodDisruptionBudget"))
            forecast.record(
                result, forecast.plan_node(sim.kubeconfig, prepared.node, scenario.timeout)
            )
        gone = _sim_pods_gone(sim, prepared.node, scenario.tracked) if scenario.tracked else None
        planned = len(sim.requests(OURS_USER))  # the plan's, as the same user: not the drain's
        if client == "ours":
            process = run_ours(
                sim.kubeconfig, prepared.node, scenario.timeout, settings=scenario.env
            )
            user = OURS_USER
        elif client == "floor":
            process = run_floor(sim.kubeconfig, prepared.node, scenario.timeout)
            user = OURS_USER
        else:
            assert kubectl is not None
            process = run_kubectl(kubectl, sim.kubeconfig, prepared.node, scenario.timeout)
            user = KUBECTL_USER
        made = _requests_made(process, client) if client in ("ours", "floor") else 0
        skip = planned if user == OURS_USER else 0
        records = _records(sim, user, made + skip)[skip:]
        window = measure.drain_window(records)
        _figures(result, records, window)
        _process(result, process, ends_on_timeout=bool(scenario.stays))
        if window is not None:
            result.sim_passes, result.sim_busy = controllers.busy(window.start, window.end)
            if gone is not None and gone.emptied is not None:
                result.gone = gone.emptied - window.start
        elif result.ok:
            result.ok, result.problem = False, "no cordon request seen"
        _check_left(result, _pods_left(sim.list("Pod"), prepared.node, *_may_stay(scenario)))
    return result


def _may_stay(scenario: Scenario) -> tuple[str, ...]:
    """Labels of pods that may still be on the node at the end without failing the
    run: those that never go, and those whose going is the figure (still there:
    `gone` is None, which the report shows)."""
    return tuple(app for app in (scenario.stays, scenario.tracked) if app)


def _check_left(result: RunResult, left: list[str]) -> None:
    if left and result.ok:
        result.ok = False
        result.problem = f"{len(left)} pods left on the node: {', '.join(left[:5])}"


class NodeWatch:
    """When the node's last pod (DaemonSet pods aside; or the last that `counts`
    picks) went, as one watch of the bench's own (its own connection, as the admin)
    saw it: the pods are listed at start(), then every event after that list's
    resourceVersion counts."""

    def __init__(
        self,
        client: ApiClient,
        node: str,
        timeout: float,
        counts: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        self.client = client
        self.timeout = int(timeout)
        self.gone = PodsGone(node, counts or (lambda pod: not _daemon_pod(pod)))
        self.error = ""
        self._done = threading.Event()

    @property
    def emptied(self) -> float | None:
        return self.gone.emptied

    def start(self) -> None:
        listed = self.client.call(
            "GET", "/api/v1/pods", query={"fieldSelector": f"spec.nodeName={self.gone.node}"}
        )
        version = str(listed["metadata"]["resourceVersion"])
        self.gone.begin(listed["items"])
        threading.Thread(target=self._run, args=(version,), daemon=True).start()

    def _run(self, version: str) -> None:
        try:
            for event in self.client.watch("Pod", resource_version=version, timeout=self.timeout):
                kind, pod = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    self.error = str(pod.get("message") or pod)
                    return
                if kind != "BOOKMARK" and self.gone.see(str(kind), pod):
                    return
        except Exception as e:  # the plane stopped under it, or the stream broke
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self._done.set()

    def wait(self, timeout: float) -> float | None:
        """The epoch second the node was seen empty, or None."""
        self._done.wait(timeout)
        return self.emptied


def _control_plane(speed: float) -> ControlPlane:
    from testbed.controlplane import ControlPlane

    return ControlPlane(cluster_name=CLUSTER_NAME, speed=speed)


def _admin(plane: ControlPlane) -> ApiClient:
    from testbed.cluster import ApiClient

    return ApiClient(plane.url, plane.ca_pem, plane.admin_token, timeout=60)


def _client_records(client: str, process: Process) -> list[measure.ClientRecord]:
    if client == "ours":
        return measure.client_records(_answer(process).get("records") or [])
    if client == "floor":  # [sent, answered, method, path, status]
        return measure.client_records(
            [at, done, method, *measure.classify(method, path), status]
            for at, done, method, path, status in _answer(process).get("records") or []
        )
    return measure.kubectl_records(process.output)


def _drain_real(
    scenario: Scenario, client: str, run: int, speed: float, kubectl: Path | None
) -> RunResult:
    """One drain on a control plane of its own; figures from the client's side."""
    result = RunResult(
        scenario.key,
        client,
        run,
        ok=True,
        ideal=scenario.ideal,
        backend="real",
        tracked=bool(scenario.tracked),
    )
    with _control_plane(speed) as plane:
        admin = _admin(plane)
        result.server = str(plane.version_info().get("gitVersion", ""))
        started = time.perf_counter()
        prepared = scenario.prepare(ApiSetup(admin))
        result.setup = time.perf_counter() - started
        if scenario.forecast:
            forecast.budgets_counted(lambda: admin.list("PodDisruptionBudget"))
            forecast.record(
                result, forecast.plan_node(plane.kubeconfig, prepared.node, scenario.timeout)
            )
        watch = NodeWatch(_admin(plane), prepared.node, scenario.timeout + 60)
        watch.start()
        tracked = None
        if scenario.tracked:
            app = scenario.tracked
            tracked = NodeWatch(
                _admin(plane), prepared.node, scenario.timeout + 60, lambda p: _app(p) == app
            )
            tracked.start()
        if client == "ours":
            process = run_ours(
                plane.kubeconfig,
                prepared.node,
                scenario.timeout,
                records=True,
                settings=scenario.env,
            )
        elif client == "floor":
            process = run_floor(plane.kubeconfig, prepared.node, scenario.timeout)
        else:
            assert kubectl is not None
            process = run_kubectl(
                kubectl, plane.kubeconfig, prepared.node, scenario.timeout, log_requests=True
            )
        records = _client_records(client, process)
        window = measure.drain_window(records)
        _figures(result, records, window)
        _process(result, process, ends_on_timeout=bool(scenario.stays))
        made = _requests_made(process, client)
        if client in ("ours", "floor") and result.ok and made != len(records):
            result.ok = False
            result.problem = f"{client} made {made} requests but recorded {len(records)}"
        if window is not None:
            emptied = watch.wait(0.0 if scenario.stays else 5.0)
            if emptied is not None:
                result.emptied = emptied - window.start
            gone = tracked.wait(5.0) if tracked is not None else None
            if gone is not None:
                result.gone = gone - window.start
        elif result.ok:
            result.ok, result.problem = False, "no cordon request seen"
        plane.check()
        pods = admin.list("Pod", fieldSelector=f"spec.nodeName={prepared.node}")
        _check_left(result, _pods_left(pods, prepared.node, *_may_stay(scenario)))
    return result


def lookup_runs(
    lookup: Lookup, runs: int, progress: Progress, backend: str = "kubesim"
) -> list[RunResult]:
    """Scenario 5: one cluster of `lookup.nodes` nodes, `runs` lookups in fresh
    processes. The cluster is built once: lookups only read, so each run still
    starts from the same state."""
    if backend == "real":
        return _lookup_runs_real(lookup, runs, progress)
    client = _lookup_client(lookup)
    results = []
    sim = KubeSim(speed=1.0, cluster_name=CLUSTER_NAME)
    with sim:
        controllers = measure.ControllerClock(sim)
        setup = lookup.build(SimSetup(sim))
        progress(f"  5 {client}: {lookup.nodes} nodes created in {setup:.1f} s")
        for run in range(1, runs + 1):
            result = RunResult("5", client, run, ok=True, setup=setup)
            before = len(sim.requests(OURS_USER))
            process = run_lookup(sim.kubeconfig, lookup.target_dns, lookup.target_instance)
            records = sim.requests(OURS_USER)[before:]
            window = measure.lookup_window(records)
            _figures(result, records, window)
            _process(result, process)
            if window is not None:
                result.sim_passes, result.sim_busy = controllers.busy(window.start, window.end)
            _check_lookup(result, process, lookup)
            progress(_line(result))
            results.append(result)
    return results


def _lookup_client(lookup: Lookup) -> str:
    return "ours (PrivateDnsName)" if lookup.naming == "dns" else "ours (providerID)"


def _check_lookup(result: RunResult, process: Process, lookup: Lookup) -> None:
    if not result.ok:
        return
    answer = _answer(process)
    result.seconds = float(answer["seconds"])
    if answer["node"] != lookup.expected:
        result.ok = False
        result.problem = f"found {answer['node']!r}, expected {lookup.expected!r}"


def _lookup_runs_real(lookup: Lookup, runs: int, progress: Progress) -> list[RunResult]:
    client = _lookup_client(lookup)
    results = []
    with _control_plane(1.0) as plane:
        setup = lookup.build(ApiSetup(_admin(plane)))
        progress(f"  5 {client}: {lookup.nodes} nodes created in {setup:.1f} s (real)")
        for run in range(1, runs + 1):
            result = RunResult("5", client, run, ok=True, setup=setup, backend="real")
            result.server = str(plane.version_info().get("gitVersion", ""))
            process = run_lookup(
                plane.kubeconfig, lookup.target_dns, lookup.target_instance, records=True
            )
            records = _client_records("ours", process)
            _figures(result, records, measure.lookup_window(records))
            _process(result, process)
            _check_lookup(result, process, lookup)
            progress(_line(result))
            results.append(result)
    return results


def _line(result: RunResult) -> str:
    window = f"{result.window:.3f} s" if result.window is not None else "-"
    emptied = f", node empty at {result.emptied:.3f} s" if result.emptied is not None else ""
    status = "ok" if result.ok else f"FAILED: {result.problem}"
    return (
        f"  {result.scenario} {result.client:<22} run {result.run}: window {window}{emptied}, "
        f"wall {result.wall:.2f} s, {result.requests} requests, {result.maxrss_mb:.0f} MB, "
        f"{status}"
    )


def warm_up(
    speed: float, kubectl: Path | None, scenario: Scenario, backend: str = "kubesim"
) -> None:
    """One small throwaway run per client: loads kubesim's lazily imported code
    paths in this process (or the control plane's binaries) and both clients'
    files into the page cache."""
    drain_once(scenario, "ours", 0, speed, kubectl, backend=backend)
    drain_once(scenario, "floor", 0, speed, kubectl, backend=backend)
    if kubectl is not None:
        drain_once(scenario, "kubectl", 0, speed, kubectl, backend=backend)


def run_all(
    scenarios: tuple[Scenario, ...],
    *,
    runs: int,
    kubectl_runs: dict[str, int],
    scenario_runs: dict[str, int] | None = None,
    speed: float,
    kubectl: Path | None,
    lookup_nodes: int,
    backend: str = "kubesim",
    progress: Progress = _stderr,
) -> list[RunResult]:
    """Every scenario, our engine, the floor (bench/floor.py) and kubectl in turn, run
    by run, the order rotated each run so that none always goes first. `runs` each
    (`scenario_runs`: a scenario's own count instead), kubectl `kubectl_runs` at most."""
    results: list[RunResult] = []
    for scenario in scenarios:
        progress(f"scenario {scenario.key}: {scenario.title} (ideal {scenario.ideal:.2f} s)")
        for run in range(1, (scenario_runs or {}).get(scenario.key, runs) + 1):
            clients = ["ours", "floor"]
            if kubectl is not None and run <= kubectl_runs.get(scenario.key, runs):
                clients.append("kubectl")
            turn = (run - 1) % len(clients)
            for client in clients[turn:] + clients[:turn]:
                result = drain_once(scenario, client, run, speed, kubectl, backend=backend)
                progress(_line(result))
                results.append(result)
    if lookup_nodes:
        progress(f"scenario 5: node lookup among {lookup_nodes} nodes")
        for lookup in lookups(lookup_nodes):
            results.extend(lookup_runs(lookup, runs, progress, backend))
    return results
