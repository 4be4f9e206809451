"""End-to-end fixtures: one scenario, two Kubernetes backends.

Every scenario runs on `kubesim` (our emulator: a fresh one per test) and on `real`
(kube-apiserver, controller-manager, scheduler and etcd built from their Go modules,
kwok as the kubelets: one per test worker, shared by its tests, each test cleaning
up what it made). `E2E_KUBECONFIG=FILE` runs them on that cluster instead (contexts
`admin` and `drainer`). A scenario that needs what only kubesim can do (inject a
fault, read its request records) is marked `@pytest.mark.kubesim_only("why")` and
runs on kubesim alone. AWS is moto with the awssim extension; the real Lambda
handler sits between them.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from awssim.server import AwsSimServer
from drainer import handler, logs
from kubesim import KubeSim
from kubesim.faults import Fault
from kubesim.selectors import labels_match, selector_from_object
from testbed import LambdaContext, World
from testbed import workloads as w
from testbed.cluster import ApiError, Cluster, Outage
from testbed.world import is_pod_ready, place_on, wait_until

SPEED = 20.0
CLUSTER_NAME = "demo"


def backends() -> list[str]:
    """Both, or E2E_BACKEND's one (`make chaos BACKEND=real`); E2E_KUBECONFIG's cluster."""
    if os.environ.get("E2E_KUBECONFIG"):
        return ["external"]
    only = os.environ.get("E2E_BACKEND", "").strip()
    if only and only not in ("kubesim", "real"):
        raise pytest.UsageError(f"E2E_BACKEND={only!r}: use kubesim or real")
    return [only] if only else ["kubesim", "real"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    if any("backend" in str(m.args[0]) for m in metafunc.definition.iter_markers("parametrize")):
        return  # the test chose its own cases (test_chaos: so many seeds per backend)
    chosen = backends()
    only = metafunc.definition.get_closest_marker("kubesim_only")
    if only is not None:
        if not (only.args and str(only.args[0]).strip()):
            raise pytest.UsageError(
                f"{metafunc.definition.nodeid}: kubesim_only needs its reason, "
                '@pytest.mark.kubesim_only("what only kubesim can do here")'
            )
        chosen = [b for b in chosen if b == "kubesim"]
    metafunc.parametrize("backend", chosen, scope="function")


@pytest.fixture(scope="session")
def control_plane() -> Iterator[Any]:
    """The real control plane of this test worker (built once, then cached). A port
    picked free can be taken by another process before a component binds it (etcd:
    "address already in use"): the start is tried again on fresh ports, at most
    START_TRIES times, any other failure raised at once."""
    from testbed.controlplane import ControlPlane
    from testbed.controlplane.harness import ControlPlaneError

    for attempt in range(1, START_TRIES + 1):
        plane = ControlPlane(cluster_name=CLUSTER_NAME, speed=SPEED)
        try:
            plane.start()
        except ControlPlaneError as e:
            if "address already in use" not in str(e) or attempt == START_TRIES:
                raise
            continue
        break
    try:
        yield plane
    finally:
        plane.stop()


START_TRIES = 3


@pytest.fixture
def cluster(backend: str, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    if backend == "kubesim":
        with KubeSim(speed=SPEED, cluster_name=CLUSTER_NAME) as running:
            yield Cluster.of_kubesim(running)
        return
    if backend == "external":
        shared = Cluster.of_kubeconfig(Path(os.environ["E2E_KUBECONFIG"]), CLUSTER_NAME)
    else:
        shared = Cluster.of_control_plane(request.getfixturevalue("control_plane"))
    plane = shared.plane
    restarts = len(plane.restarts) if plane is not None else 0
    try:
        yield shared
    finally:
        if plane is not None and plane.restarts[restarts:]:
            # After a kube-apiserver restart the scheduler (never restarted itself) has
            # been seen keeping deleted nodes in its cache and binding the next test's
            # pods to them: the next test gets a scheduler that starts afresh (first,
            # so a failing check or clean-up does not leave it stale).
            plane.restart("kube-scheduler")
        shared.check()
        shared.clean_up()


@pytest.fixture
def sim(cluster: Cluster) -> KubeSim:
    """kubesim itself, for scenarios marked kubesim_only."""
    return cluster.kubesim


@pytest.fixture
def world(request: pytest.FixtureRequest, moto_aws: None, cluster: Cluster) -> World:
    """Parametrize indirectly with World keyword arguments to change it."""
    return World(cluster, **getattr(request, "param", {}))


@pytest.fixture
def aws_server(world: World) -> Iterator[str]:
    """awssim served from this process, for handlers run as processes (Lambda's, the
    chaos runner's): their AWS is the test's moto."""
    with AwsSimServer() as server:
        yield server.url


@dataclass
class LogCapture:
    stream: io.StringIO = field(default_factory=io.StringIO)

    @property
    def text(self) -> str:
        return self.stream.getvalue()

    def records(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.text.splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue
        return lines

    def messages(self) -> list[str]:
        return [str(r.get("message", "")) for r in self.records()]

    def events(self, kind: str) -> list[dict[str, Any]]:
        """The drain events of one kind (the `event` key of drainer/engine/report.py's log
        contract), in the order they were written."""
        return [r for r in self.records() if r.get("event") == kind]


@pytest.fixture
def drainer_logs() -> Iterator[LogCapture]:
    capture = LogCapture()
    logs.configure("DEBUG", stream=capture.stream)
    yield capture


Invoke = Callable[..., dict[str, Any]]


@pytest.fixture
def invoke(world: World, monkeypatch: pytest.MonkeyPatch, drainer_logs: LogCapture) -> Invoke:
    """Run the real handler on an event, with the world's settings plus overrides."""

    def run(event: dict[str, Any], timeout: float = 900.0, **env: Any) -> dict[str, Any]:
        for key, value in world.env(**env).items():
            monkeypatch.setenv(key, value)
        handler.reset()
        logs.configure("DEBUG", stream=drainer_logs.stream)
        return handler.lambda_handler(event, LambdaContext(timeout))

    return run


def invoke_meanwhile(
    invoke: Invoke,
    event: dict[str, Any],
    logs: LogCapture,
    said: str,
    then: Callable[[], object],
    **env: Any,
) -> tuple[dict[str, Any], float]:
    """Invoke the handler on `event`; once its log says `said` (what it waits for),
    `then()` happens meanwhile, as the world would (a kubelet registering, an
    instance booting). The end line, and when `then()` was done."""
    done: list[float] = []

    def meanwhile() -> None:
        wait_until(lambda: said in logs.text, 30)
        then()
        done.append(time.time())

    thread = threading.Thread(target=meanwhile)
    thread.start()
    summary = invoke(event, **env)
    thread.join()
    assert done, f"the function never said {said!r}"
    return summary, done[0]


@dataclass(frozen=True)
class PodEvent:
    """One change of a pod as a watch saw it; `seq` orders all pod changes."""

    seq: int
    type: str
    old: dict[str, Any] | None
    new: dict[str, Any]
    at: float = field(default_factory=time.time)
    """When the watcher saw the change (epoch seconds): scenarios that bound how soon."""

    @property
    def app(self) -> str:
        return str((self.new["metadata"].get("labels") or {}).get("app", ""))

    @property
    def evicted(self) -> bool:
        """This change is the one that started the pod's deletion."""
        was = bool(self.old and self.old["metadata"].get("deletionTimestamp"))
        return (
            self.type == "MODIFIED"
            and not was
            and bool(self.new["metadata"].get("deletionTimestamp"))
        )


class BudgetWatcher:
    """An independent observer, through the API: it watches every pod and
    PodDisruptionBudget, recomputes each budget's healthy pods from the pods
    themselves on every change and remembers the worst margin (healthy - desired)
    seen, so a test can assert the drain never went below. It also keeps every pod
    change in order (`events`), for scenarios about the order of things."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.worst: dict[str, int] = {}
        self.worst_at: dict[str, str] = {}
        self.events: list[PodEvent] = []
        self._pods: dict[str, dict[str, Any]] = {}
        self._budgets: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.error: BaseException | None = None
        self.budget_versions: list[dict[str, Any]] = []
        """Every version of every budget seen, in order, for eviction_violations()."""

    def start(self) -> None:
        ready = threading.Barrier(3)
        for kind in ("Pod", "PodDisruptionBudget"):
            thread = threading.Thread(
                target=self._follow, args=(kind, ready), daemon=True, name=f"watch-{kind}"
            )
            thread.start()
            self._threads.append(thread)
        ready.wait(30)

    def stop(self) -> None:
        self._stop.set()

    def _follow(self, kind: str, ready: threading.Barrier) -> None:
        client = self.cluster.client
        items, page_version = client.list_with_version(kind)
        with self._lock:
            for item in items:
                self._store(kind, "ADDED", item)
        # Check only once both lists are in: budgets without their pods look violated.
        ready.wait(30)
        with self._lock:
            self._check()
        outage = Outage()
        while not self._stop.is_set():
            try:
                for event in client.watch(kind, resource_version=page_version, timeout=5):
                    outage.over()
                    if self._stop.is_set():
                        return
                    obj = event.get("object") or {}
                    page_version = obj.get("metadata", {}).get("resourceVersion", page_version)
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        with self._lock:
                            self._store(kind, str(event["type"]), obj)
                            self._check()
                    elif event.get("type") == "ERROR":
                        raise ApiError(int(obj.get("code") or 500), obj, {}, f"watch {kind}")
            except BaseException as e:
                if self._stop.is_set():
                    return
                if _gone(e):
                    page_version = self._relist(kind)
                elif outage.ride_out(e):
                    self._stop.wait(0.1)  # the API server restarting: watch again from here
                else:
                    self.error = e
                    return

    def _relist(self, kind: str) -> str:
        """After 410 Gone: list again and store the differences as changes."""
        items, version = self.cluster.client.list_with_version(kind)
        with self._lock:
            table = self._pods if kind == "Pod" else self._budgets
            seen = {f"{i['metadata'].get('namespace', '')}/{i['metadata']['name']}" for i in items}
            for key in [k for k in table if k not in seen]:
                self._store(kind, "DELETED", table[key])
            for item in items:
                self._store(kind, "MODIFIED", item)
            self._check()
        return version

    def _store(self, kind: str, type_: str, obj: dict[str, Any]) -> None:
        key = f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
        table = self._pods if kind == "Pod" else self._budgets
        old = table.get(key)
        if type_ == "DELETED":
            table.pop(key, None)
        else:
            table[key] = obj
        if kind == "Pod":
            self.events.append(PodEvent(len(self.events), type_, old, obj))
        else:
            self.budget_versions.append(obj)

    def _check(self) -> None:
        for key, budget in self._budgets.items():
            healthy = _healthy_for(budget, self._pods.values())
            desired = int((budget.get("status") or {}).get("desiredHealthy", 0))
            margin = healthy - desired
            if margin < self.worst.get(key, margin + 1):
                self.worst[key] = margin
                self.worst_at[key] = (
                    f"after pod change {len(self.events)}: {healthy} healthy, {desired} desired"
                )

    def violations(self) -> dict[str, int]:
        if self.error is not None:
            raise AssertionError(f"the budget watcher failed: {self.error}")
        with self._lock:
            broken = {k: v for k, v in self.worst.items() if v < 0}
            for key in broken:
                print(f"budget {key} worst {self.worst_at[key]}; pod changes:")
                for e in self.events:
                    meta, status = e.new["metadata"], e.new.get("status") or {}
                    print(
                        f"  {e.seq} {e.type} {meta['name']} ready={is_pod_ready(e.new)} "
                        f"deleting={bool(meta.get('deletionTimestamp'))} "
                        f"node={e.new['spec'].get('nodeName')} phase={status.get('phase')}"
                    )
            return broken

    def pod_events(self) -> list[PodEvent]:
        with self._lock:
            return list(self.events)

    def eviction_violations(
        self, excused: Iterable[str] = (), *, namespaces: Iterable[str] = ()
    ) -> list[str]:
        """Budgets taken below their minimum by an eviction, not by anything else.

        When replicas are scaled up or a budget is edited, a budget is below its
        minimum for a while with no eviction involved; this looks only at the moments
        a pod's deletion began. Each such pod (but those in `excused`: namespace/name
        of pods the scenario deleted itself) is held against the budget version that
        allowed it, the one that first lists it in status.disruptedPods (the API
        server writes it there with the eviction), or else the newest version before
        the deletion. Healthy pods are counted from the pod history at that moment;
        the eviction of a pod that was not Ready takes nothing away.
        `namespaces`: namespaces the scenario deleted, whose pods went with them.
        A pod whose deletion began without the eviction API's DisruptionTarget
        condition (a ReplicaSet scaled down, a person's delete) is still judged
        itself, but while it terminates it counts as healthy when another pod's
        deletion is judged: a controller scaling down at the same moment as an
        eviction the budget allowed takes that pod, not the eviction."""
        if self.error is not None:
            raise AssertionError(f"the budget watcher failed: {self.error}")
        excused, gone = set(excused), set(namespaces)
        with self._lock:
            events, versions = list(self.events), list(self.budget_versions)
        pods: dict[str, dict[str, Any]] = {}
        others: dict[str, dict[str, Any]] = {}  # deleted by someone else, still terminating
        found: list[str] = []
        for e in events:
            meta = e.new["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            if e.type == "DELETED":
                pods.pop(key, None)
            else:
                pods[key] = e.new
            if e.type == "DELETED":
                others.pop(key, None)
            elif (
                e.evicted
                and not _through_eviction_api(e.new)
                and e.old is not None
                and is_pod_ready(e.old)
            ):
                others[key] = e.old  # counted as it was before it was deleted
            if not e.evicted or key in excused or meta["namespace"] in gone:
                continue
            if e.old is None or not is_pod_ready(e.old):
                continue  # evicting an unhealthy pod takes nothing from a budget
            at = int(meta.get("resourceVersion") or 0)
            for budget in _budgets_allowing(versions, meta, at):
                # Others' deletions under way count as healthy; this pod's own does not.
                counted = {**pods, **{k: p for k, p in others.items() if k != key}}
                healthy = _healthy_for(budget, counted.values())
                desired = int((budget.get("status") or {}).get("desiredHealthy", 0))
                if healthy < desired:
                    found.append(
                        f"{key} evicted (change {e.seq}) left budget "
                        f"{budget['metadata']['name']} at {healthy} healthy, {desired} desired"
                    )
                    _print_history(events, versions, budget)
        return found


def _through_eviction_api(pod: dict[str, Any]) -> bool:
    """The eviction API marks a pod before it deletes it (both backends)."""
    return any(
        c.get("type") == "DisruptionTarget" and c.get("reason") == "EvictionByEvictionAPI"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _healthy_for(budget: dict[str, Any], pods: Iterable[dict[str, Any]]) -> int:
    """The pods the budget counts as healthy: in its namespace, selected, Ready and
    not terminating (as the disruption controller counts them)."""
    namespace = budget["metadata"]["namespace"]
    selector = selector_from_object(budget["spec"].get("selector"))
    return sum(
        1
        for pod in pods
        if pod["metadata"]["namespace"] == namespace
        and labels_match(selector, pod["metadata"].get("labels"))
        and is_pod_ready(pod)
        and not pod["metadata"].get("deletionTimestamp")
    )


def _print_history(
    events: list[PodEvent], versions: list[dict[str, Any]], budget: dict[str, Any]
) -> None:
    """The budget's versions and its pods' changes, in resourceVersion order."""
    name, namespace = budget["metadata"]["name"], budget["metadata"]["namespace"]
    selector = selector_from_object(budget["spec"].get("selector"))
    lines: list[tuple[int, str]] = []
    for version in versions:
        if (version["metadata"]["name"], version["metadata"]["namespace"]) == (name, namespace):
            status = version.get("status") or {}
            lines.append(
                (
                    int(version["metadata"].get("resourceVersion") or 0),
                    f"budget {name}: desired={status.get('desiredHealthy')} "
                    f"current={status.get('currentHealthy')} "
                    f"allowed={status.get('disruptionsAllowed')} "
                    f"disrupted={sorted(status.get('disruptedPods') or {})}",
                )
            )
    for e in events:
        meta = e.new["metadata"]
        if meta["namespace"] == namespace and labels_match(selector, meta.get("labels")):
            lines.append(
                (
                    int(meta.get("resourceVersion") or 0),
                    f"pod {meta['name']} #{e.seq} {e.type} ready={is_pod_ready(e.new)} "
                    f"deleting={bool(meta.get('deletionTimestamp'))} "
                    f"node={e.new['spec'].get('nodeName')}",
                )
            )
    for at, line in sorted(lines, key=lambda item: item[0]):
        print(f"  rv {at}: {line}")


def _budgets_allowing(
    versions: list[dict[str, Any]], pod_meta: dict[str, Any], at: int
) -> list[dict[str, Any]]:
    """For each budget that selects the pod: its version that allowed the pod's
    eviction (the first listing it among status.disruptedPods, before `at`), else
    its newest version before `at`."""
    chosen: dict[str, dict[str, Any]] = {}
    allowing: dict[str, dict[str, Any]] = {}
    for budget in versions:
        meta = budget["metadata"]
        if meta["namespace"] != pod_meta["namespace"]:
            continue
        if int(meta.get("resourceVersion") or 0) > at:
            continue
        selector = selector_from_object(budget["spec"].get("selector"))
        if not labels_match(selector, pod_meta.get("labels")):
            continue
        name = meta["name"]
        chosen[name] = budget
        disrupted = (budget.get("status") or {}).get("disruptedPods") or {}
        if pod_meta["name"] in disrupted and name not in allowing:
            allowing[name] = budget
    return [allowing.get(name, budget) for name, budget in chosen.items()]


def _gone(error: BaseException) -> bool:
    return isinstance(error, ApiError) and error.status == 410


@pytest.fixture
def budgets(cluster: Cluster) -> Iterator[BudgetWatcher]:
    watcher = BudgetWatcher(cluster)
    yield watcher
    watcher.stop()


def place_guarded(world: World, replicas: int) -> str:
    """`replicas` pods of deployment "guarded" on the first instance's node, under
    budget "guard", which allows no disruption; the node's name."""
    node = world.nodes[world.instance_ids[0]]
    place_on(
        world,
        node,
        [
            w.deployment("guarded", replicas),
            w.budget("guard", {"app": "guarded"}, max_unavailable=0),
        ],
    )
    return node


# -- an admission policy ----------------------------------------------------------

POLICY = "pinned-pods"
POLICY_MESSAGE = "this pod is pinned by the operators"


def deny_evictions(world: World, pods: set[str], user: str = "") -> Callable[[], None]:
    """An admission policy that refuses the evictions of `pods` (namespace/name) with
    reason Forbidden (403), as Gatekeeper or Kyverno would: a ValidatingAdmissionPolicy
    and its binding on the real control plane; on kubesim, which has no CEL, the
    answer the real policy gives, injected per pod. Returns the clean-up."""
    names = sorted(p.split("/")[1] for p in pods)
    if world.cluster.backend == "kubesim":
        sim = world.cluster.kubesim
        for name in names:
            sim.faults.add(
                Fault(
                    kind="status",
                    method="POST",
                    path=f"/pods/{name}/eviction$",
                    status=403,
                    reason="Forbidden",
                    message=f'pods "{name}" is forbidden: ValidatingAdmissionPolicy '
                    f"'{POLICY}' with binding '{POLICY}' denied request: {POLICY_MESSAGE}",
                    user=user,
                )
            )
        return lambda: sim.faults.remove(lambda f: f.message.endswith(POLICY_MESSAGE))
    client = world.cluster.client
    group = "/apis/admissionregistration.k8s.io/v1"
    listed = ", ".join(f"'{n}'" for n in names)
    client.call(
        "POST",
        f"{group}/validatingadmissionpolicies",
        body={
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": POLICY},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods/eviction"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": f"!(object.metadata.name in [{listed}])",
                        "message": POLICY_MESSAGE,
                        "reason": "Forbidden",
                    }
                ],
            },
        },
    )
    client.call(
        "POST",
        f"{group}/validatingadmissionpolicybindings",
        body={
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": POLICY},
            "spec": {"policyName": POLICY, "validationActions": ["Deny"]},
        },
    )
    namespace, name = sorted(pods)[0].split("/")

    def refused() -> bool:  # the policy is in force once a dry-run eviction meets it
        try:
            client.call(
                "POST",
                f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
                query={"dryRun": "All"},
                body={
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": name, "namespace": namespace},
                },
            )
        except ApiError as e:
            return e.status == 403
        return False

    wait_until(refused, timeout=20)

    def clean_up() -> None:  # idempotent: a seed may lift the policy, then its test does
        for kind in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            try:
                client.call("DELETE", f"{group}/{kind}/{POLICY}")
            except ApiError as e:
                if e.status != 404:
                    raise

    return clean_up
