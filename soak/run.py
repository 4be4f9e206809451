"""The instance refresh itself: a node group of `nodes` instances replaced `batch` at
a time, as Auto Scaling's instance refresh does with a MinHealthyPercentage: for
each batch, launch the replacements, each held in Pending:Wait on the launch hook
while the real handler waits for its node to join and be Ready (LAUNCH_HOOK), then
put the oldest instances in Terminating:Wait on the terminate hook, run the real
handler on each lifecycle event at once (threads: one Lambda invocation each), and
start the next batch only once every workload is Ready again.

Everything stays on this host: kubesim or the real control plane on 127.0.0.1,
moto (with awssim) in this process, fake AWS credentials.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubesim.testing import eventually
from soak import pacing
from soak.forecast import RefreshForecast, plan_refresh
from soak.requests import RequestLog
from soak.timeline import Timeline
from soak.workload import Service, mix, objects

if TYPE_CHECKING:
    from testbed.cluster import Cluster
    from testbed.world import World

Obj = dict[str, Any]
CLUSTER_NAME = "soak"
DRAINER_USER = "eks-node-drainer"
SETTLE_TIMEOUT = 600.0  # real seconds for the workload to be Ready again
LAUNCH_HOOK = "soak-launch"


@dataclass(frozen=True)
class Config:
    backend: str = "kubesim"
    nodes: int = 30
    batch: int = 3
    pods: int = 600
    speed: float = 5.0
    out: Path = Path("build/soak")
    drain_timeout: int = 600
    """DRAIN_TIMEOUT_SECONDS of every drain (the deadline invariant's)."""
    times: float = 1.0
    """The workload's start and stop times scaled by this (soak/workload.py's mix)."""

    def __post_init__(self) -> None:
        if self.backend not in ("kubesim", "real"):
            raise ValueError(f"backend must be kubesim or real, not {self.backend!r}")
        if not 1 <= self.batch <= self.nodes:
            raise ValueError(f"batch must be 1 to {self.nodes}, not {self.batch}")
        if self.speed <= 0:
            raise ValueError("speed must be positive")
        if self.times <= 0:
            raise ValueError("times must be positive")


@dataclass
class DrainRecord:
    batch: int
    instance: str
    node: str
    started: float  # seconds since the refresh began
    ended: float
    summary: dict[str, Any]
    left: list[str]  # pods the filters would evict, still on the node when it said drained
    error: str = ""


@dataclass
class BatchRecord:
    index: int
    instances: list[str]
    started: float
    drained: float = 0.0  # every drain of the batch over
    settled: float = 0.0  # every workload Ready again
    placement: dict[str, dict[str, int]] = field(default_factory=dict)
    limit: float = 0.0  # the pacing limit, real seconds
    launches: dict[str, dict[str, Any]] = field(default_factory=dict)
    """New instance -> the launch hook's end line for it."""
    ready: dict[str, float] = field(default_factory=dict)
    """New instance -> when its node was first seen Ready."""
    launched: float = 0.0  # every launch action of the batch completed
    terminating: float = 0.0  # the batch's old instances put in Terminating:Wait


@dataclass
class Outcome:
    """What a soak saw; soak.report turns it into figures and invariants."""

    config: Config
    services: list[Service]
    seconds: float
    batches: list[BatchRecord]
    drains: list[DrainRecord]
    requests: RequestLog
    server_requests: int | None  # kubesim's own count of the drainer's requests
    actions: list[dict[str, Any]]
    completions: list[dict[str, Any]]
    violations: dict[str, str]
    worst_margin: dict[str, int]
    samples: list[tuple[float, str, int]]
    tracebacks: list[str]
    rss_start_mb: float
    rss_peak_mb: float
    pods_at_start: int
    forecast: RefreshForecast | None = None
    """The plan of the refresh, made right before it began (soak/forecast.py)."""


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@contextmanager
def fake_aws() -> Iterator[None]:
    """moto in this process with fake credentials and nothing pointing at real AWS;
    the environment as it was afterwards."""
    from moto import mock_aws

    import awssim

    saved = dict(os.environ)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        }
    )
    awssim.install()
    try:
        with mock_aws():
            yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def backend(config: Config) -> Iterator[Cluster]:
    from testbed.cluster import Cluster

    if config.backend == "kubesim":
        from kubesim import KubeSim

        with KubeSim(speed=config.speed, cluster_name=CLUSTER_NAME) as sim:
            yield Cluster.of_kubesim(sim)
    else:
        from testbed.controlplane import ControlPlane

        with ControlPlane(cluster_name=CLUSTER_NAME, speed=config.speed) as plane:
            yield Cluster.of_control_plane(plane)


def wait_for(what: str, predicate: Any, timeout: float, interval: float = 0.2) -> None:
    """kubesim.testing.eventually, its failure a TimeoutError of the soak's."""
    try:
        eventually(predicate, timeout, interval, what=f"soak: {what}")
    except AssertionError as e:
        raise TimeoutError(str(e)) from None


def node_ready(cluster: Cluster, name: str) -> bool:
    found = cluster.find("Node", name)
    conditions = ((found or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def settled(cluster: Cluster, services: list[Service]) -> bool:
    """Every replicated workload has all its replicas Ready, every node its agents,
    and no pod is still terminating."""
    from testbed.world import workloads_ready

    replicated = [s for s in services if s.kind != "Pod"]
    if not workloads_ready(cluster, [o for s in replicated for o in s.objects()]):
        return False
    nodes = len(cluster.list("Node"))
    for service in replicated:
        if service.kind == "DaemonSet":
            status = cluster.get("DaemonSet", service.name, service.namespace).get("status") or {}
            if int(status.get("desiredNumberScheduled") or 0) != nodes:
                return False
    return not any(p["metadata"].get("deletionTimestamp") for p in cluster.list("Pod"))


def budgets_current(cluster: Cluster) -> bool:
    """The disruption controller has seen every budget's pods Ready."""
    for budget in cluster.list("PodDisruptionBudget"):
        status = budget.get("status") or {}
        if status.get("observedGeneration") != budget["metadata"].get("generation"):
            return False
        if int(status.get("currentHealthy") or 0) < int(status.get("expectedPods") or 1):
            return False
    return True


def _evictable(cluster: Cluster, node: str, filters: Any) -> list[dict[str, Any]]:
    """The pods on the node that the drain's filters would evict."""
    from drainer.engine.filters import Action, decide
    from testbed.world import pods_on

    return [p for p in pods_on(cluster, node) if decide(p, filters).action == Action.EVICT]


def placement(cluster: Cluster, node: str, filters: Any) -> dict[str, int]:
    """Pods of each service on the node that the drain will evict."""
    pods = _evictable(cluster, node, filters)
    apps = Counter((p["metadata"].get("labels") or {}).get("app", "") for p in pods)
    return dict(sorted(apps.items()))


def evictable_left(cluster: Cluster, node: str, filters: Any) -> list[str]:
    return sorted(
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in _evictable(cluster, node, filters)
    )


def instance_gone(cluster: Cluster, node: str) -> None:
    """What follows a terminated instance: the cloud controller deletes its Node and
    the pod garbage collector the pods still bound to it (its node agents)."""
    from testbed.world import pods_on

    cluster.delete("Node", node)
    for pod in pods_on(cluster, node):
        metadata = pod["metadata"]
        cluster.client.delete("Pod", metadata["name"], metadata["namespace"], gracePeriodSeconds=0)


class _Tracebacks(logging.Handler):
    """Every log record of this process with an exception, and every thread that died
    of one."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or "Traceback" in record.getMessage():
            self.found.append(f"{record.name}: {record.getMessage()[:300]}")


def run(config: Config, *, say: Any = None) -> Outcome:
    """The handler writes its CloudWatch metrics to stdout (embedded metric format,
    as Lambda wants them): they go to metrics.log; `say` (default: print to the
    terminal) tells the progress."""
    config.out.mkdir(parents=True, exist_ok=True)
    services = mix(config.nodes, config.pods, config.times)
    terminal = sys.stdout

    def tell(message: str) -> None:
        print(message, file=terminal, flush=True)

    with (
        (config.out / "metrics.log").open("w") as metrics,
        contextlib.redirect_stdout(metrics),
        fake_aws(),
        backend(config) as cluster,
    ):
        return _refresh(config, services, cluster, say or tell)


def _refresh(config: Config, services: list[Service], cluster: Cluster, say: Any) -> Outcome:
    from drainer import handler, logs
    from drainer.lifecycle.settings import Settings
    from testbed.world import World

    say(f"soak: {config.backend}, {config.nodes} nodes, {config.pods} pods, speed {config.speed:g}")
    world = World(cluster, size=config.nodes, asg_name="soak-workers", heartbeat_timeout=300)
    cluster.apply(objects(services))
    wait_for("the workload Ready", lambda: settled(cluster, services), SETTLE_TIMEOUT, 0.5)
    wait_for("the budgets' status", lambda: budgets_current(cluster), 120)
    pods_at_start = len(cluster.list("Pod"))
    planned = plan_refresh(world, config)
    say(
        f"soak: the plan forecasts {planned.total_eta_seconds} s of drains "
        f"(plan exit {planned.exit_code})"
    )
    say(f"soak: {pods_at_start} pods Ready on {len(world.nodes)} nodes; the refresh begins")

    environment = world.env(
        LOG_LEVEL="INFO",
        DRAIN_TIMEOUT_SECONDS=config.drain_timeout,
        LAUNCH_HOOK="true",
        LAUNCH_HOOK_NAME=LAUNCH_HOOK,
    )
    world.put_launch_hook(LAUNCH_HOOK)
    os.environ.update(environment)
    filters = Settings.from_env(environment).drain_options().filters
    drainer_log = (config.out / "drainer.log").open("w")
    logs.configure("INFO", stream=drainer_log)
    handler.reset()
    tracebacks = _Tracebacks()
    logging.getLogger().addHandler(tracebacks)
    thread_errors: list[str] = []
    previous_hook = threading.excepthook

    def on_thread_error(args: threading.ExceptHookArgs) -> None:
        thread_errors.append(
            f"thread {args.thread.name if args.thread else '?'}: {args.exc_value!r}"
        )
        previous_hook(args)

    threading.excepthook = on_thread_error
    requests = RequestLog()
    origin = time.time()
    timeline = Timeline(cluster, origin)
    timeline.start()
    rss_start = _rss_mb()
    batches: list[BatchRecord] = []
    drains: list[DrainRecord] = []
    old = set(world.instance_ids)
    order = _planned_order(world, planned)
    refresh = _Refresh(world, config, services, filters, origin, old, drains, order)
    try:
        with requests.recording():
            while True:
                waiting = [i for i in _group_instances(world) if i in old]
                if not waiting:
                    break
                record = _batch(refresh, len(batches), min(config.batch, len(waiting)))
                batches.append(record)
                say(
                    f"soak: batch {record.index + 1}: {', '.join(record.instances)} drained in "
                    f"{record.drained - record.started:.1f} s, settled in "
                    f"{record.settled - record.started:.1f} s (limit {record.limit:.1f} s)"
                )
    finally:
        seconds = time.time() - origin
        timeline.stop()
        threading.excepthook = previous_hook
        logging.getLogger().removeHandler(tracebacks)
        # The next user of this process (a test) gets the drainer's defaults back.
        logs.configure("INFO", stream=sys.stderr)
        handler.reset()
        drainer_log.close()
    found = list(tracebacks.found) + thread_errors
    sys.stdout.flush()
    for name in ("drainer.log", "metrics.log"):
        if "Traceback" in (config.out / name).read_text():
            found.append(f"{name} holds a traceback")
    if timeline.error is not None:
        found.append(f"the soak's watch failed: {timeline.error!r}")
    found.extend(_component_tracebacks(cluster))
    cluster.check()
    server_requests = None
    if cluster.backend == "kubesim":
        server_requests = len(cluster.kubesim.requests(DRAINER_USER))
    return Outcome(
        config=config,
        services=services,
        seconds=seconds,
        batches=batches,
        drains=drains,
        requests=requests,
        server_requests=server_requests,
        actions=world.aws.actions(),
        completions=world.aws.calls("complete"),
        violations=timeline.violations(),
        worst_margin=dict(timeline.worst),
        samples=list(timeline.samples),
        tracebacks=found,
        rss_start_mb=rss_start,
        rss_peak_mb=_rss_mb(),
        pods_at_start=pods_at_start,
        forecast=planned,
    )


def _planned_order(world: World, planned: RefreshForecast) -> list[list[str]]:
    """The plan's batches as instances (none when the plan made none): the soak
    replaces them in that order, so that each batch's forecast and measured time are
    of the same nodes."""
    instance_of = {node: instance for instance, node in world.nodes.items()}
    return [[instance_of[n] for n in batch if n in instance_of] for batch in planned.batches]


def _choose(world: World, chosen: list[str]) -> None:
    """Auto Scaling's scale-in takes the instances not protected from it: every
    instance of the group but `chosen` is protected, so the scale-in takes those."""
    everyone = _group_instances(world)
    for protected, ids in (True, [i for i in everyone if i not in chosen]), (False, chosen):
        if ids:
            world.autoscaling.set_instance_protection(
                InstanceIds=ids,
                AutoScalingGroupName=world.group.asg_name,
                ProtectedFromScaleIn=protected,
            )


def _group_instances(world: World) -> list[str]:
    groups = world.autoscaling.describe_auto_scaling_groups(
        AutoScalingGroupNames=[world.group.asg_name]
    )["AutoScalingGroups"]
    return [i["InstanceId"] for i in groups[0].get("Instances", [])]


@dataclass
class _Refresh:
    """What every batch of one refresh shares."""

    world: World
    config: Config
    services: list[Service]
    filters: Any
    origin: float
    old: set[str]
    drains: list[DrainRecord]
    order: list[list[str]] = field(default_factory=list)
    """The batches as the plan has them, instance ids (empty: Auto Scaling's order)."""


def _batch(refresh: _Refresh, index: int, size: int) -> BatchRecord:
    from drainer import handler
    from testbed import LambdaContext

    world, config, services, filters = (
        refresh.world,
        refresh.config,
        refresh.services,
        refresh.filters,
    )
    origin, old, drains = refresh.origin, refresh.old, refresh.drains
    cluster = world.cluster
    started = time.time() - origin
    # Launch before terminating, as an instance refresh keeps the healthy capacity.
    group = world.autoscaling.describe_auto_scaling_groups(
        AutoScalingGroupNames=[world.group.asg_name]
    )["AutoScalingGroups"][0]
    known = {i["InstanceId"] for i in group.get("Instances", [])}
    world.autoscaling.set_desired_capacity(
        AutoScalingGroupName=world.group.asg_name, DesiredCapacity=group["DesiredCapacity"] + size
    )
    fresh = [i for i in _group_instances(world) if i not in known]
    launches, ready = _launch(world, fresh)
    launched = time.time() - origin
    # The group is above its desired capacity by `size` once it is lowered again: Auto
    # Scaling terminates the oldest instances (here the plan's next batch: the others
    # are protected from scale-in), each on hold on the terminate hook.
    planned = [i for i in refresh.order[index] if i in old] if index < len(refresh.order) else []
    if len(planned) == size:
        _choose(world, planned)
    events = world.scale_in(size)
    instances = [e["detail"]["EC2InstanceId"] for e in events]
    if not set(instances) <= old:
        raise RuntimeError(f"the scale-in chose new instances: {instances}")
    record = BatchRecord(index, instances, started)
    record.launches = launches
    record.ready = {i: at - origin for i, at in ready.items()}
    record.launched = launched
    record.terminating = time.time() - origin
    record.placement = {
        world.nodes[i]: placement(cluster, world.nodes[i], filters) for i in instances
    }
    record.limit = (
        pacing.batch_limit(record.placement, {s.name: s.pace() for s in services}) / config.speed
    )
    lock = threading.Lock()

    def drain(event: Obj) -> None:
        instance = event["detail"]["EC2InstanceId"]
        node = world.nodes[instance]
        begun = time.time() - origin
        summary: dict[str, Any] = {}
        error = ""
        try:
            summary = handler.lambda_handler(event, LambdaContext(900))
        except Exception as e:
            error = repr(e)
        ended = time.time() - origin
        left = evictable_left(cluster, node, filters) if summary.get("result") == "drained" else []
        with lock:
            drains.append(DrainRecord(index, instance, node, begun, ended, summary, left, error))

    threads = [
        threading.Thread(target=drain, args=(e,), name=f"drain-{e['detail']['EC2InstanceId']}")
        for e in events
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(config.drain_timeout + 120)
    record.drained = time.time() - origin
    for instance in instances:
        old.discard(instance)
        instance_gone(cluster, world.nodes[instance])
    wait_for(
        f"batch {index + 1}'s workload Ready again",
        lambda: settled(cluster, services),
        SETTLE_TIMEOUT,
        0.1,
    )
    record.settled = time.time() - origin
    return record


def _launch(world: World, fresh: list[str]) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """Each new instance held on the launch hook while the real handler waits for its
    node, which joins meanwhile: the handler's end line for each, and when each node
    was first seen Ready (epoch seconds)."""
    from drainer import handler
    from testbed import LambdaContext

    cluster = world.cluster
    events = [
        world.aws.event_for(world.aws.begin_launch(world.group.asg_name, i, LAUNCH_HOOK))
        for i in fresh
    ]
    ends: dict[str, dict[str, Any]] = {}

    def wait(event: Obj) -> None:
        instance = event["detail"]["EC2InstanceId"]
        try:
            ends[instance] = handler.lambda_handler(event, LambdaContext(900))
        except Exception as e:
            ends[instance] = {"result": "error", "message": repr(e)}

    threads = [threading.Thread(target=wait, args=(e,), name="launch") for e in events]
    for thread in threads:
        thread.start()
    names = {i: world.add_node(i) for i in fresh}
    ready: dict[str, float] = {}

    def all_ready() -> bool:
        for instance, name in names.items():
            if instance not in ready and node_ready(cluster, name):
                ready[instance] = time.time()
        return len(ready) == len(names)

    wait_for("the new nodes Ready", all_ready, 60, 0.05)
    for thread in threads:
        thread.join(120)
    return ends, ready


def _component_tracebacks(cluster: Cluster) -> list[str]:
    """The real control plane's components: a Go panic is their traceback."""
    plane = getattr(cluster, "plane", None)
    if plane is None:
        return []
    found = []
    for path in sorted(Path(plane.dir).glob("*.log")):
        text = path.read_text(errors="replace")
        if "Traceback" in text or "\npanic:" in text or text.startswith("panic:"):
            found.append(f"{path.name} holds a panic or traceback")
    return found
