"""The drain engine against the answers the real apiserver (v1.33) gives where the
drainer used to assume otherwise: a 403 that is not RBAC, a 201 that is a failure,
a 429 with Retry-After. kubesim is the cluster; `ApiFront` (tests/realapi.py)
sends the exact real answers for the requests a test scripts. Time is a fake clock
that the drain's pauses advance: no test sleeps through a Retry-After."""

from __future__ import annotations

import gc
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from realapi import (
    EVICTED_201,
    LOGIN_REDIRECT_302,
    TWO_BUDGETS_201,
    TWO_BUDGETS_500,
    ApiFront,
    RealAnswer,
    budget_blocks_429,
    budget_lags_429,
    front_kube,
    namespace_terminating_403,
    policy_denied,
    rbac_403,
    status_body,
    throttled_429,
    webhook_denied_403,
)
from support.clock import FakeClock, SteppedWaits

from drainer.engine.context import heap_frozen
from drainer.engine.drain import Drain
from drainer.engine.options import DrainOptions
from drainer.engine.report import DrainReport
from drainer.errors import KubeError
from drainer.k8s.cordon import PROGRESS_ANNOTATION, ProgressRecord
from drainer.outcome import Outcome
from kubesim import KubeSim
from kubesim import testing as k
from testbed import workloads as objects
from testbed.cluster import ApiClient

NODE = "n1"


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim() as running:
        running.apply(
            [
                objects.node(NODE),
                objects.node("n2"),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
            ]
        )
        yield running


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(time.time())  # only the drain's (and the client's) sleeps move it


@pytest.fixture
def front(sim: KubeSim, clock: FakeClock) -> Iterator[ApiFront]:
    running = ApiFront(sim, clock)
    yield running
    running.close()


def place(sim: KubeSim, *objects: dict[str, Any]) -> None:
    sim.apply(list(objects))
    sim.settle()
    k.eventually(
        lambda: all(
            (p.get("status") or {}).get("phase") == "Running"
            for p in sim.list("Pod")
            if p["spec"].get("nodeName") == NODE
        ),
        what="pods running",
    )


def drain(
    front: ApiFront,
    clock: FakeClock,
    seconds: float,
    *,
    waits: SteppedWaits | None = None,
    **options: Any,
) -> tuple[Drain, DrainReport]:
    kube = front_kube(front, sleep=clock.sleep)
    waits = waits or Settling(clock, front)
    engine = Drain(kube, NODE, DrainOptions(**options), record=ProgressRecord(), waits=waits)
    try:
        return engine, engine.run(clock() + seconds)
    finally:
        kube.close()


class Settling(SteppedWaits):
    """SteppedWaits for a drain on kubesim through the front. Kubesim deletes an
    evicted pod, and sends the watch event of it, in real time, which a loaded machine
    (a fresh clone under coverage) can take longer for than the 20 ms SteppedWaits
    looks for answers. So the clock does not jump while a pod on the node is
    terminating with no finalizer (kubesim is about to remove it), nor while a pod
    that left the node has had no DELETED event through the front; never for more
    than `cap` real seconds in a row, so a pod that takes long to stop costs the test
    seconds once, not the drain's deadline."""

    def __init__(self, clock: FakeClock, front: ApiFront, cap: float = 5.0) -> None:
        super().__init__(clock, hold=self.settling)
        self.front, self.cap = front, cap
        self.since: float | None = None
        self.seen = {self._name(p) for p in self._on_node()}

    def _on_node(self) -> list[dict[str, Any]]:
        return [p for p in self.front.sim.list("Pod") if p["spec"].get("nodeName") == NODE]

    @staticmethod
    def _name(pod: dict[str, Any]) -> str:
        return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"

    def settling(self) -> bool:
        on_node = self._on_node()
        names = {self._name(p) for p in on_node}
        untold = (self.seen - names) - self.front.told_deleted
        self.seen = names | untold
        stopping = any(
            p["metadata"].get("deletionTimestamp") and not p["metadata"].get("finalizers")
            for p in on_node
        )
        if not (stopping or untold):
            self.since = None
            return False
        now = time.monotonic()
        if self.since is None:
            self.since = now
        return now - self.since < self.cap


def admin(sim: KubeSim) -> ApiClient:
    """The test side's Kubernetes client, as the admin of `sim`."""
    return ApiClient(sim.url, sim.ca_pem, sim.admin_token)


def eviction_path(namespace: str, name: str) -> str:
    return f"/namespaces/{namespace}/pods/{name}/eviction$"


def gone(sim: KubeSim, namespace: str, name: str) -> bool:
    return not any(p["metadata"]["name"] == name for p in sim.list("Pod", namespace))


# -- 403: judged by its causes ---------------------------------------------------


def test_namespace_terminating_403__waits_for_the_pod_not_an_rbac_error(
    sim: KubeSim, front: ApiFront, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    place(
        sim,
        objects.pod("web-0", namespace="shop", node_name=NODE),
        objects.pod("api-0", node_name=NODE),
    )
    # The real server refuses the eviction while the namespace controller deletes
    # the namespace's pods: here kubesim deletes the namespace as the 403 is sent.
    front.script(
        "POST",
        eviction_path("shop", "web-0"),
        namespace_terminating_403("web-0", "shop"),
        then=lambda: admin(sim).delete("Namespace", "shop"),
    )
    caplog.set_level(logging.WARNING, logger="drainer.engine.drain")

    _, report = drain(front, clock, 60)

    assert report.outcome == Outcome.DRAINED
    assert report.going_with_namespace == ["shop/web-0"]
    assert report.evicted == 1, "default/api-0 was evicted; shop/web-0 went with its namespace"
    assert report.errors == []
    assert report.summary()["going_with_namespace"] == 1
    assert len(front.requests("POST", eviction_path("shop", "web-0"))) == 1, "not evicted again"
    assert gone(sim, "shop", "web-0"), "the drain waited for it to be gone"
    assert "its namespace shop is being deleted" in caplog.text


def test_other_403_on_eviction__rbac_denial_stops_the_drain_naming_the_permission(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    place(sim, objects.pod("web-0", namespace="shop", node_name=NODE))
    front.script("POST", eviction_path("shop", "web-0"), rbac_403("web-0", "shop"))

    _, report = drain(front, clock, 60)

    assert report.outcome == Outcome.FAILED
    assert "RBAC denied 'create' on 'pods/eviction'" in report.stopped_by
    assert report.summary()["stopped_by"] == report.stopped_by
    assert len(front.requests("POST", eviction_path("shop", "web-0"))) == 1, "not retried"


ADMISSION_DENIALS = [
    pytest.param(
        policy_denied("web-0", "pinned", "pinned-binding", "web-0 is pinned"), id="policy-403"
    ),
    pytest.param(
        policy_denied("web-0", "pinned", "pinned-binding", "web-0 is pinned", code=422),
        id="policy-422",
    ),
    pytest.param(webhook_denied_403("pinned.example.com", "web-0 is pinned"), id="webhook-403"),
]


@pytest.mark.parametrize("answer", ADMISSION_DENIALS)
def test_admission_denial__refuses_that_pod_only_the_others_drain(
    sim: KubeSim, front: ApiFront, clock: FakeClock, answer: RealAnswer
) -> None:
    place(
        sim,
        objects.pod("web-0", namespace="shop", node_name=NODE),
        *(objects.pod(f"api-{i}", node_name=NODE) for i in range(4)),
    )
    front.script("POST", eviction_path("shop", "web-0"), answer, count=None)

    _, report = drain(front, clock, 60)

    assert report.outcome == Outcome.TIMED_OUT, "held to the deadline, not aborted"
    assert report.stopped_by == ""
    assert report.evicted == 4, "the other pods drained"
    assert report.remaining == ["shop/web-0"]
    assert "web-0 is pinned" in report.left["shop/web-0"]
    assert "web-0 is pinned" in report.denied["shop/web-0"]
    assert report.summary()["remaining"] == 1
    tries = len(front.requests("POST", eviction_path("shop", "web-0")))
    assert 3 <= tries <= 15, f"retried with backoff, not hammered: {tries} tries in 60 s"


def test_admission_denial__lifted_later__the_pod_goes(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    place(
        sim,
        objects.pod("web-0", namespace="shop", node_name=NODE),
        objects.pod("api-0", node_name=NODE),
    )
    denied = policy_denied("web-0", "pinned", "pinned-binding", "not yet")
    front.script("POST", eviction_path("shop", "web-0"), denied, count=3)

    _, report = drain(front, clock, 300)

    assert report.outcome == Outcome.DRAINED
    assert report.evicted == 2
    assert gone(sim, "shop", "web-0")


def test_admission_denial__force_policy_deletes_it_at_the_deadline(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    place(sim, objects.pod("web-0", namespace="shop", node_name=NODE))
    denied = webhook_denied_403("pinned.example.com", "pinned")
    front.script("POST", eviction_path("shop", "web-0"), denied, count=None)

    _, report = drain(front, clock, 30, force_on_timeout=True, force_grace_period_seconds=1)

    assert report.outcome == Outcome.TIMED_OUT
    assert report.forced == 1
    assert gone(sim, "shop", "web-0")


# -- two budgets: 201 with a Failure Status (v1.33) or a plain 500 (kubesim, older) ---


def two_budgets(sim: KubeSim) -> None:
    place(
        sim,
        objects.pod(
            "web-0", namespace="shop", node_name=NODE, labels={"app": "web", "tier": "front"}
        ),
        objects.pod("api-0", node_name=NODE, labels={"app": "api"}),
        objects.budget("web-a", {"app": "web"}, namespace="shop", max_unavailable=1),
        objects.budget("web-b", {"tier": "front"}, namespace="shop", max_unavailable=1),
        # Same selector, another namespace: not one of the pod's budgets.
        objects.budget("web-c", {"app": "web"}, namespace="default", max_unavailable=1),
    )


TWO_BUDGET_ANSWERS = [
    pytest.param(TWO_BUDGETS_201, id="201-Failure-v1.33"),
    pytest.param(None, id="500-kubesim"),
]


def script_two_budgets(front: ApiFront, answer: RealAnswer | None) -> None:
    if answer is not None:
        front.script("POST", eviction_path("shop", "web-0"), answer, count=None)


@pytest.mark.parametrize("answer", TWO_BUDGET_ANSWERS)
def test_pod_under_two_budgets__refused_naming_both_budgets__retried_until_timeout(
    sim: KubeSim, front: ApiFront, clock: FakeClock, answer: RealAnswer | None
) -> None:
    two_budgets(sim)
    script_two_budgets(front, answer)

    _, report = drain(front, clock, 30)

    assert report.outcome == Outcome.TIMED_OUT
    assert report.multiple_budgets == {"shop/web-0": ["shop/web-a", "shop/web-b"]}
    assert report.summary()["multiple_budgets"] == {"shop/web-0": "shop/web-a, shop/web-b"}
    (error,) = report.errors
    assert "shop/web-0" in error
    assert "shop/web-a, shop/web-b" in error
    assert "shop/web-a, shop/web-b" in report.timeout_message()
    assert report.evicted == 1, "default/api-0 only"
    assert not sim.get("Pod", "web-0", "shop")["metadata"].get("deletionTimestamp")
    attempts = [r.at for r in front.requests("POST", eviction_path("shop", "web-0"))]
    assert len(attempts) >= 2
    assert all(b - a >= 8.0 for a, b in itertools.pairwise(attempts)), attempts


@pytest.mark.parametrize("answer", TWO_BUDGET_ANSWERS)
def test_dry_run_pod_under_two_budgets__changes_nothing__names_both_budgets(
    sim: KubeSim, front: ApiFront, clock: FakeClock, answer: RealAnswer | None
) -> None:
    two_budgets(sim)
    script_two_budgets(front, answer)

    _, report = drain(front, clock, 30, dry_run=True)

    assert report.outcome == Outcome.DRY_RUN
    assert report.would_evict == ["default/api-0"]
    assert report.multiple_budgets == {"shop/web-0": ["shop/web-a", "shop/web-b"]}
    assert any("shop/web-a, shop/web-b" in e for e in report.errors)
    node = sim.get("Node", NODE)
    assert not node["spec"].get("unschedulable"), "not cordoned"
    assert not (node["metadata"].get("labels") or {}).get(
        "node.kubernetes.io/exclude-from-external-load-balancers"
    )
    assert not any(p["metadata"].get("deletionTimestamp") for p in sim.list("Pod"))
    writes = [r for r in front.requests() if r.method in ("POST", "PATCH", "PUT", "DELETE")]
    assert writes, "the dry run asked the server"
    for request in writes:
        assert request.query.get("dryRun") == ["All"], request.path
        if request.path.endswith("/eviction"):
            assert json.loads(request.body)["deleteOptions"]["dryRun"] == ["All"]


def test_two_budgets_fixed_mid_drain__pod_evicted__report_no_longer_says_it_cannot_be(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """The eviction API refuses a pod two budgets select (500); someone deletes one of
    them, as the drain's own message asks, and the next try evicts the pod. The report
    no longer says it cannot be evicted: neither `errors` (the runner's reason for a
    drained result, the node's Event, the notice) nor the end line's
    `multiple_budgets` name it, as an admission denial lifted the same way is cleared."""
    place(
        sim,
        objects.pod("web-0", namespace="shop", node_name=NODE, labels={"app": "web", "t": "f"}),
        objects.budget("web-a", {"app": "web"}, namespace="shop", min_available=0),
        objects.budget("web-b", {"t": "f"}, namespace="shop", min_available=0),
    )
    front.script(
        "POST",
        eviction_path("shop", "web-0"),
        TWO_BUDGETS_500,
        then=lambda: admin(sim).delete("PodDisruptionBudget", "web-b", "shop"),
    )

    _, report = drain(front, clock, 120)

    assert report.outcome == Outcome.DRAINED
    assert report.evicted == 1 and gone(sim, "shop", "web-0")
    assert report.multiple_budgets == {}, report.multiple_budgets
    assert report.errors == [], report.errors


# -- 429: never retried before its Retry-After ----------------------------------------


@pytest.mark.parametrize(
    ("answer", "refusals"),
    [
        pytest.param(budget_lags_429("web"), 1, id="budget-status-lags-10s"),
        pytest.param(throttled_429(3), 0, id="throttled-3s-client-waits"),
        pytest.param(throttled_429(45), 0, id="throttled-45s-drain-waits"),
    ],
)
def test_429_with_retry_after__next_eviction_not_before_it(
    sim: KubeSim, front: ApiFront, clock: FakeClock, answer: RealAnswer, refusals: int
) -> None:
    place(
        sim,
        objects.pod("web-0", namespace="shop", node_name=NODE, labels={"app": "web"}),
        objects.budget("web", {"app": "web"}, namespace="shop", min_available=0),
    )
    front.script("POST", eviction_path("shop", "web-0"), answer)
    retry_after = float(answer.headers["Retry-After"])

    _, report = drain(front, clock, 300)

    assert report.outcome == Outcome.DRAINED
    assert (report.evicted, report.refusals) == (1, refusals)
    first, second = front.requests("POST", eviction_path("shop", "web-0"))
    assert (first.status, second.status) == (429, 201)
    assert second.at - first.at >= retry_after
    assert retry_after in clock.sleeps


def test_retry_after_beyond_the_deadline__no_retry_before_it__drain_times_out(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    place(
        sim,
        objects.pod("web-0", namespace="shop", node_name=NODE, labels={"app": "web"}),
        objects.budget("web", {"app": "web"}, namespace="shop", min_available=0),
    )
    front.script("POST", eviction_path("shop", "web-0"), budget_lags_429("web"), count=None)
    started = clock()

    _, report = drain(front, clock, 5)

    assert report.outcome == Outcome.TIMED_OUT
    assert len(front.requests("POST", eviction_path("shop", "web-0"))) == 1
    assert clock() - started == pytest.approx(5.0)
    assert "shop/web" in report.timeout_message()


def test_budget_refuses_while_the_watch_shows_room__paced_not_hot__timeout_names_it(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """The budget watch lags the server (a broken watch re-listing, another drainer's
    eviction not seen yet): the watch says the budget allows one, the server refuses.
    A refusal at the version the drain sees means that version's room is not the
    server's: the pod waits for a change or its fallback timer, never re-sent at once."""
    place(
        sim,
        objects.pod("web-0", namespace="shop", node_name=NODE, labels={"app": "web"}),
        objects.budget("web", {"app": "web"}, namespace="shop", min_available=0),
    )
    refused = budget_blocks_429("web", desired=1, current=1)
    front.script("POST", eviction_path("shop", "web-0"), refused, count=40)

    _, report = drain(front, clock, 30)

    attempts = [r.at for r in front.requests("POST", eviction_path("shop", "web-0"))]
    assert report.outcome == Outcome.TIMED_OUT, (report.outcome, len(attempts))
    assert 1 <= len(attempts) <= 3, attempts
    assert all(b - a >= 15.0 for a, b in itertools.pairwise(attempts)), attempts
    assert report.blocked_by == {"shop/web": ["shop/web-0"]}
    assert "PodDisruptionBudget shop/web allows no disruption: shop/web-0" in (
        report.timeout_message()
    )


PODS_LIST = "^/api/v1/pods$"


def test_verify_list_throttled_with_retry_after__not_relisted_before_it(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """Every pod is gone and the drain lists the node's pods to agree; API priority and
    fairness answers 429 with Retry-After: 60 (longer than one call waits, so the
    client raises at once). The drain lists again after the Retry-After, not at once
    in a hot loop of LISTs against a server that asked for a minute's rest."""
    place(sim, objects.pod("web-0", node_name=NODE))

    def throttle_lists() -> None:
        front.script("GET", PODS_LIST, throttled_429(60), count=20)

    # The eviction is accepted (kubesim deletes the pod); from then on the LIST of the
    # node's pods is throttled, 20 times (the open watch is not a new request).
    front.script(
        "POST",
        eviction_path("default", "web-0"),
        EVICTED_201,
        then=lambda: (admin(sim).delete("Pod", "web-0", "default"), throttle_lists()),
    )

    drain(front, clock, 600)

    throttled = [r.at for r in front.requests("GET", PODS_LIST) if r.status == 429]
    assert throttled, "the final list was never throttled"
    gaps = [b - a for a, b in itertools.pairwise(throttled)]
    assert all(gap >= 60 for gap in gaps), (
        f"{len(throttled)} LISTs throttled with Retry-After 60, re-sent after {gaps} s"
    )


# -- pods that tolerate the cordon: each evicted once, replacements not chased -----


def tolerating(name: str, replicas: int) -> dict[str, Any]:
    """A Deployment whose pods tolerate every taint, the cordon's included (agents,
    log shippers and monitoring charts often do)."""
    deployment = objects.workload("Deployment", name, replicas=replicas)
    deployment["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
    return deployment


def test_pods_tolerating_the_cordon__evicted_once__replacements_reported_not_chased(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    # The only node that fits them: every replacement is scheduled back onto it.
    admin(sim).delete("Node", "n2")
    place(sim, tolerating("agent", 2), objects.pod("api-0", node_name=NODE))
    originals = {p["metadata"]["name"] for p in sim.list("Pod") if p["spec"]["nodeName"] == NODE}
    assert len(originals) == 3

    _, report = drain(front, clock, 120)

    evictions = front.requests("POST", "/eviction$")
    assert {r.path.split("/")[-2] for r in evictions} == originals, "each original once"
    assert len(evictions) == 3, "no pod evicted twice, no replacement evicted"
    assert report.outcome == Outcome.DRAINED
    assert report.evicted == 3
    back = {
        f"default/{p['metadata']['name']}" for p in sim.list("Pod") if p["spec"]["nodeName"] == NODE
    }
    assert back and set(report.tolerating) == back, "the replacements on the node, named"
    assert report.summary()["tolerating_cordon"] == sorted(back)


def test_pod_tolerating_only_other_taints__its_replacement_stays_away(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    deployment = objects.workload("Deployment", "web", replicas=1)
    deployment["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
    ]
    place(sim, deployment)

    _, report = drain(front, clock, 120)

    assert report.outcome == Outcome.DRAINED
    assert report.tolerating == []
    k.eventually(lambda: [p for p in sim.list("Pod") if p["spec"].get("nodeName") == "n2"])


def test_evicted_pod_whose_watch_events_are_lost__looked_at_again__drained_not_timed_out(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """A broken stream may lose the events of an evicted pod (its deletionTimestamp,
    its deletion): the drain looks again when the pod's grace period and
    STUCK_POD_SECONDS have passed, and a fresh list shows it gone."""
    place(sim, objects.pod("batch-0", node_name=NODE, grace=30))
    # Only the pod's events are lost: a BOOKMARK has no metadata name and passes (the
    # stream stays up and silent; a KeyError there broke the stream, and the re-list
    # that followed saw the pod gone at once, never reaching the stuck check).
    front.drop_event = lambda event: (
        ((event.get("object") or {}).get("metadata") or {}).get("name") == "batch-0"
    )
    start = clock()

    _, report = drain(front, clock, 300)

    assert report.outcome == Outcome.DRAINED
    assert report.evicted == 1
    assert gone(sim, "default", "batch-0")
    assert clock() - start <= 30 + 60 + 5, "at the stuck check, not the deadline"
    assert report.stuck == [], "gone (a fresh list says so), not stuck"


def test_pod_going_with_its_namespace__events_lost__looked_at_again_not_waited_to_the_deadline(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """As the evicted pod whose watch events are lost, for the pod the drain leaves to
    its terminating namespace (403 NamespaceTerminating): it gets a due time (its
    grace from now) and is looked at again at the stuck check, not waited for to the
    deadline naming a pod long gone ("going with its terminating namespace")."""
    place(sim, objects.pod("web-0", namespace="shop", node_name=NODE, grace=30))
    front.drop_event = lambda event: (
        ((event.get("object") or {}).get("metadata") or {}).get("name") == "web-0"
    )
    front.script(
        "POST",
        eviction_path("shop", "web-0"),
        namespace_terminating_403("web-0", "shop"),
        then=lambda: admin(sim).delete("Namespace", "shop"),
    )
    start = clock()

    _, report = drain(front, clock, 600)

    assert gone(sim, "shop", "web-0")
    assert report.outcome == Outcome.DRAINED, (report.outcome, report.left)
    assert clock() - start <= 30 + 60 + 5, "at the stuck check, not the deadline"


def test_terminating_namespace_pod_never_deleted__tried_again_every_5s__forced_by_the_deadline(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """A pod the namespace controller has not reached (no deletionTimestamp) is tried
    again every 5 s from its due time, as kubectl drain does, never faster, and counts
    once as going with its namespace; TIMEOUT_POLICY=force deletes it like any pod
    left, and the drain times out instead of calling it stuck."""
    place(sim, objects.pod("web-0", namespace="shop", node_name=NODE, grace=5))
    front.script(
        "POST",
        eviction_path("shop", "web-0"),
        namespace_terminating_403("web-0", "shop"),
        count=None,
    )

    _, report = drain(
        front, clock, 60, stuck_pod_seconds=10, force_on_timeout=True, force_grace_period_seconds=3
    )

    assert report.outcome == Outcome.TIMED_OUT
    assert report.forced == 1 and gone(sim, "shop", "web-0")
    assert report.forced_pods == {
        "shop/web-0": "going with its terminating namespace, not deleted yet"
    }
    assert report.stuck == []
    assert report.going_with_namespace == ["shop/web-0"]
    assert report.summary()["going_with_namespace"] == 1
    attempts = [r.at for r in front.requests("POST", eviction_path("shop", "web-0"))]
    assert len(attempts) >= 5, attempts
    assert all(b - a >= 5.0 for a, b in itertools.pairwise(attempts)), attempts


def test_terminating_namespace_pod_deleted_later__no_more_evictions__stuck_clock_from_then(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """Once the watch shows the namespace controller's deletion (a finalizer keeps the
    pod), the pod is terminating: not evicted again, and stuck STUCK_POD_SECONDS past
    its deletion's deadline, as any terminating pod."""
    pod = objects.pod("web-0", namespace="shop", node_name=NODE, grace=5)
    pod["metadata"]["finalizers"] = ["example.com/hold"]
    place(sim, pod)
    answered = itertools.count(1)

    def namespace_controller() -> None:
        if next(answered) == 3:
            admin(sim).delete("Pod", "web-0", "shop")

    front.script(
        "POST",
        eviction_path("shop", "web-0"),
        namespace_terminating_403("web-0", "shop"),
        count=None,
        then=namespace_controller,
    )

    _, report = drain(front, clock, 300, stuck_pod_seconds=10)

    assert report.outcome == Outcome.DRAINED
    assert report.stuck == ["shop/web-0"]
    assert report.going_with_namespace == ["shop/web-0"]
    assert 3 <= len(front.requests("POST", eviction_path("shop", "web-0"))) <= 5


# -- a node replaced by another of the same name: another machine, left alone -------


def replace_node(sim: KubeSim, *pods_on_new: dict[str, Any]) -> None:
    """Delete the node and register a new one of the same name (a reused private DNS
    name): a new UID and providerID, and pods of its own."""
    admin(sim).delete("Node", NODE)
    new = objects.node(NODE)
    new["spec"]["providerID"] = "aws:///us-east-1a/i-0fffffffffffffff0"
    sim.apply([new, *pods_on_new])


def test_node_replaced_mid_drain__new_node_never_cordoned_drained_or_recorded(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    place(sim, objects.pod("web-0", node_name=NODE), objects.pod("web-1", node_name=NODE))
    old_uid = sim.get("Node", NODE)["metadata"]["uid"]
    # web-0's eviction is accepted but the pod lingers; meanwhile the machine goes
    # and another registers under the name, with a pod the scheduler put there.
    front.script(
        "POST",
        eviction_path("default", "web-0"),
        EVICTED_201,
        then=lambda: replace_node(sim, objects.pod("newcomer", node_name=NODE)),
    )

    _, report = drain(front, clock, 120)

    node = sim.get("Node", NODE)
    assert node["metadata"]["uid"] != old_uid
    assert report.outcome == Outcome.NO_NODE
    assert "replaced" in report.stopped_by and node["metadata"]["uid"] in report.stopped_by
    assert not node["spec"].get("unschedulable"), "the new node was cordoned"
    assert "eks-node-drainer/progress" not in (node["metadata"].get("annotations") or {})
    newcomer = [p for p in sim.list("Pod") if p["metadata"]["name"] == "newcomer"]
    assert newcomer and not newcomer[0]["metadata"].get("deletionTimestamp")
    assert not front.requests("POST", eviction_path("default", "newcomer"))


def test_node_replaced_before_the_cordon__the_drain_touches_nothing(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    old_uid = sim.get("Node", NODE)["metadata"]["uid"]
    replace_node(sim, objects.pod("newcomer", node_name=NODE))
    kube = front_kube(front, sleep=clock.sleep)
    try:
        waits = Settling(clock, front)
        record = ProgressRecord()
        engine = Drain(kube, NODE, DrainOptions(), record=record, waits=waits, node_uid=old_uid)
        report = engine.run(clock() + 60)
    finally:
        kube.close()

    assert report.outcome == Outcome.NO_NODE
    assert "replaced" in report.stopped_by
    assert not sim.get("Node", NODE)["spec"].get("unschedulable")
    assert not front.requests("POST", "/eviction$")


# -- the end: evictions already sent are counted, in the report and on the node ------


def test_fatal_error_while_an_eviction_is_in_flight__its_acceptance_counted_in_the_record(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    from kubesim.faults import Fault

    place(
        sim,
        objects.pod("slow-0", node_name=NODE),
        objects.pod("web-0", namespace="shop", node_name=NODE),
    )
    # slow-0's eviction is accepted, but its answer takes a second; web-0's meets RBAC.
    sim.faults.add(Fault(kind="latency", method="POST", path="/pods/slow-0/eviction$", latency=1.0))
    front.script("POST", eviction_path("shop", "web-0"), rbac_403("web-0", "shop"))

    _, report = drain(front, clock, 60)

    assert report.outcome == Outcome.FAILED
    assert report.evicted == 1, "the eviction accepted while the drain stopped is counted"
    record = json.loads(
        sim.get("Node", NODE)["metadata"]["annotations"]["eks-node-drainer/progress"]
    )
    assert (record["phase"], record["evicted"]) == ("failed", 1)


def test_more_pods_than_the_concurrency__never_more_evictions_at_once__every_pod_goes(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """The workers send the next pod themselves as answers come (relay.py): still
    EVICTION_CONCURRENCY at a time at most, and every pod once."""
    place(sim, *(objects.pod(f"web-{i}", namespace="shop", node_name=NODE) for i in range(9)))
    kube = front_kube(front, sleep=clock.sleep)
    lock = threading.Lock()
    sent: list[str] = []
    flying, most = [0], [0]
    together = threading.Barrier(3, timeout=10)  # the first three are in flight at once
    evict = kube.evict

    def counted(pod: dict[str, Any], **kwargs: Any) -> None:
        with lock:
            sent.append(pod["metadata"]["name"])
            first = len(sent) <= 3
            flying[0] += 1
            most[0] = max(most[0], flying[0])
        try:
            if first:
                together.wait()
            evict(pod, **kwargs)
        finally:
            with lock:
                flying[0] -= 1

    kube.evict = counted  # type: ignore[method-assign]
    engine = Drain(
        kube,
        NODE,
        DrainOptions(concurrency=3),
        record=ProgressRecord(),
        waits=Settling(clock, front),
    )
    try:
        report = engine.run(clock() + 60)
    finally:
        kube.close()

    assert report.outcome == Outcome.DRAINED
    assert sorted(sent) == sorted(f"web-{i}" for i in range(9)), "each pod once"
    assert most[0] == 3


# -- pods that opt out: karpenter.sh/do-not-disrupt ------------------------------

DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}


def test_do_not_disrupt__held_to_the_deadline__never_evicted__named_why(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    place(
        sim,
        objects.pod("batch-0", node_name=NODE, annotations=DO_NOT_DISRUPT),
        objects.pod(
            "ours-0", node_name=NODE, annotations={"eks-node-drainer/do-not-disrupt": "True"}
        ),
        objects.pod(
            "batch-1", node_name=NODE, annotations={"karpenter.sh/do-not-disrupt": "false"}
        ),
        *(objects.pod(f"api-{i}", node_name=NODE) for i in range(2)),
    )

    _, report = drain(front, clock, 60)

    assert report.outcome == Outcome.TIMED_OUT
    assert report.evicted == 3, "the others drained, the one annotated false too"
    assert sorted(report.remaining) == ["default/batch-0", "default/ours-0"]
    assert report.do_not_disrupt == {
        "default/batch-0": "karpenter.sh/do-not-disrupt",
        "default/ours-0": "eks-node-drainer/do-not-disrupt",
    }
    assert "karpenter.sh/do-not-disrupt=true" in report.left["default/batch-0"]
    assert not front.requests("POST", eviction_path("default", "batch-0"))
    assert not front.requests("POST", eviction_path("default", "ours-0"))


def test_do_not_disrupt__force_policy__deleted_at_the_deadline(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    place(sim, objects.pod("batch-0", node_name=NODE, annotations=DO_NOT_DISRUPT, grace=1))

    _, report = drain(front, clock, 30, force_on_timeout=True, force_grace_period_seconds=1)

    assert report.outcome == Outcome.TIMED_OUT
    assert report.forced == 1
    assert not front.requests("POST", eviction_path("default", "batch-0")), "never evicted"
    assert gone(sim, "default", "batch-0")


def test_do_not_disrupt__ignored__evicted_like_any_pod(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    place(sim, objects.pod("batch-0", node_name=NODE, annotations=DO_NOT_DISRUPT))
    _, report = drain(front, clock, 60, honor_do_not_disrupt=False)

    assert report.outcome == Outcome.DRAINED
    assert report.evicted == 1
    assert report.do_not_disrupt == {}


class _LiftAnnotation(Settling):
    """batch-0's owner removes its do-not-disrupt annotation (its work is done) the
    first time the drain waits with nothing in flight once `when()` holds."""

    def __init__(self, clock: FakeClock, front: ApiFront, when: Callable[[], bool]) -> None:
        super().__init__(clock, front)
        self.sim, self.when = front.sim, when
        self.lifted_at: float | None = None

    def wait(self, cond: Any, until: Any, busy: bool = False) -> None:
        if self.lifted_at is None and not busy and self.when():
            self.lifted_at = self.clock()
            admin(self.sim).patch(
                "Pod",
                "batch-0",
                {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": None}}},
            )
            cond.wait(0.2)
            return
        super().wait(cond, until, busy)


def test_do_not_disrupt__annotation_removed_mid_drain__evicted_then_drained(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    place(
        sim,
        objects.pod("batch-0", node_name=NODE, annotations=DO_NOT_DISRUPT),
        objects.pod("api-0", node_name=NODE),
    )
    waits = _LiftAnnotation(clock, front, lambda: True)

    _, report = drain(front, clock, 300, waits=waits)

    assert waits.lifted_at is not None
    assert report.outcome == Outcome.DRAINED
    assert report.evicted == 2
    assert len(front.requests("POST", eviction_path("default", "batch-0"))) == 1
    assert report.do_not_disrupt == {"default/batch-0": "karpenter.sh/do-not-disrupt"}


# -- TIMEOUT_POLICY=force: every held pod deleted with its grace before the deadline ---


def test_force__held_pods_deleted_their_grace_before_the_deadline__each_gets_that_grace(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """A budget that never allows: each pod is deleted when only its grace period (at
    most FORCE_GRACE_PERIOD_SECONDS) is left, so SIGTERM and its grace come before
    the node goes; the drain ends timed out, naming what held each pod."""
    held = {"app": "db"}
    place(
        sim,
        objects.pod("db-short", node_name=NODE, labels=held, grace=10),
        objects.pod("db-mid", node_name=NODE, labels=held, grace=20),
        objects.pod("db-long", node_name=NODE, labels=held, grace=600),
        objects.budget("db", held, max_unavailable=0),
    )
    start = clock()

    _, report = drain(front, clock, 120, force_on_timeout=True, force_grace_period_seconds=30)

    deletions = {
        r.path.rsplit("/", 1)[1]: (r.at - start, json.loads(r.body)["gracePeriodSeconds"])
        for r in front.requests("DELETE", "/pods/")
    }
    assert set(deletions) == {"db-short", "db-mid", "db-long"}
    for name, grace in (("db-short", 10), ("db-mid", 20), ("db-long", 30)):
        at, given = deletions[name]
        assert given == grace, (name, deletions)
        assert 120 - grace - 2 <= at <= 120 - grace + 1, (name, deletions)
    assert report.outcome == Outcome.TIMED_OUT
    assert report.forced == 3
    assert set(report.forced_pods) == {"default/db-short", "default/db-mid", "default/db-long"}
    assert all("db" in why for why in report.forced_pods.values()), report.forced_pods
    assert not sim.list("Pod"), "gone by the deadline"


def place_held(sim: KubeSim, grace: int) -> None:
    """db-0, with `grace` seconds of grace, under a budget that never allows."""
    place(
        sim,
        objects.pod("db-0", node_name=NODE, labels={"app": "db"}, grace=grace),
        objects.budget("db", {"app": "db"}, max_unavailable=0),
    )


def test_force__grace_cut_to_the_time_left__a_pod_found_late_still_gets_sigterm(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """Less time than its grace: deleted at once, its grace cut to what is left."""
    place_held(sim, grace=60)

    _, report = drain(front, clock, 20, force_on_timeout=True, force_grace_period_seconds=60)

    [deletion] = front.requests("DELETE", "/pods/db-0")
    assert json.loads(deletion.body)["gracePeriodSeconds"] <= 20
    assert report.forced == 1 and report.outcome == Outcome.TIMED_OUT


def test_no_force_policy__held_pods_never_deleted(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    place_held(sim, grace=10)

    _, report = drain(front, clock, 60)

    assert not front.requests("DELETE", "/pods/")
    assert report.outcome == Outcome.TIMED_OUT and report.remaining == ["default/db-0"]


def test_force__early_deletion_fails_once__tried_again_before_the_deadline(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    place_held(sim, grace=10)
    refused = RealAnswer(422, status_body("the store said no", 422, "Invalid"))
    front.script("DELETE", "/pods/db-0$", refused, count=1)
    start = clock()

    _, report = drain(front, clock, 60, force_on_timeout=True, force_grace_period_seconds=30)

    deletions = front.requests("DELETE", "/pods/db-0$")
    assert len(deletions) == 2, "the failed deletion was tried again"
    assert deletions[1].at - start < 60 - 5, "well before the deadline"
    assert report.forced == 1 and gone(sim, "default", "db-0")


def test_do_not_disrupt__released_under_a_budget_that_refused__asked_at_once(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """Its budget refused another pod while it was held: released, it is still asked
    for at once (not only when that budget next changes)."""
    app = {"app": "db"}
    place(
        sim,
        objects.pod("api-0", node_name=NODE, labels=app),
        objects.pod("batch-0", node_name=NODE, labels=app, annotations=DO_NOT_DISRUPT),
        objects.budget("db", app, max_unavailable=0),
    )
    waits = _LiftAnnotation(
        clock, front, lambda: bool(front.requests("POST", eviction_path("default", "api-0")))
    )

    drain(front, clock, 300, waits=waits)

    assert waits.lifted_at is not None
    asked = front.requests("POST", eviction_path("default", "batch-0"))
    assert asked, "never asked for after its release"
    assert asked[0].at - waits.lifted_at < 2, "asked for at once, not on a fallback timer"


# -- a 409 on an eviction: the pod untouched, not gone ---------------------------------


def test_eviction_409_from_a_budget_conflict__pod_kept__evicted_on_a_later_try(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """kube-apiserver's eviction handler retries a budget's status update that keeps
    conflicting (EvictionsRetry), then answers with that 409: the pod is untouched.
    Taken for gone, the drain said DRAINED with the pod still on the node."""
    place(sim, objects.pod("web-0", namespace="shop", node_name=NODE))
    conflict = RealAnswer(
        409,
        status_body(
            'Operation cannot be fulfilled on poddisruptionbudgets.policy "web": the object '
            "has been modified; please apply your changes to the latest version and try again",
            409,
            "Conflict",
            {"name": "web", "group": "policy", "kind": "poddisruptionbudgets"},
        ),
    )
    front.script("POST", eviction_path("shop", "web-0"), conflict)

    _, report = drain(front, clock, 60)

    assert report.outcome == Outcome.DRAINED
    assert gone(sim, "shop", "web-0"), "reported drained with shop/web-0 still on the node"
    assert len(front.requests("POST", eviction_path("shop", "web-0"))) == 2
    assert report.evicted == 1


# -- a re-cordon refused for a moment: tried again, not left to chance -----------------

NODE_PATH = f"/api/v1/nodes/{NODE}$"
UNAVAILABLE = RealAnswer(503, status_body("etcdserver: leader changed", 503, "ServiceUnavailable"))


def _uncordon_while_node_writes_fail(sim: KubeSim, front: ApiFront, calls: int) -> None:
    """Someone uncordons the node while the API server refuses its next `calls`
    node writes (each of the client's 3 attempts per call)."""
    front.script("PATCH", NODE_PATH, UNAVAILABLE, count=3 * calls)
    admin(sim).patch("Node", NODE, {"spec": {"unschedulable": False}}, namespace="")
    sim.settle()


def test_recordon_refused_for_a_moment__tried_again_after_a_backoff_not_a_budgets_timer(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """Someone uncordons the node mid-drain while the API server refuses writes: the
    re-cordon fails (its client's retries spent). It used to wait for the watch to see
    the node change again (minutes, or never): the drain ended with its node
    schedulable while saying it had cordoned it again. Now it is tried again after a
    backoff, the loop woken for it: here nothing else would wake it for 15 s or more
    (the budget's fallback timer)."""
    place(
        sim,
        objects.budget("web", {"app": "web"}, min_available=1),
        objects.pod("web-0", node_name=NODE, labels={"app": "web"}),
    )
    refused = budget_blocks_429("web", 1, 1)
    first = lambda: _uncordon_while_node_writes_fail(sim, front, calls=1)  # noqa: E731
    front.script("POST", eviction_path("default", "web-0"), refused, then=first)
    front.script("POST", eviction_path("default", "web-0"), refused, count=None)

    _, report = drain(front, clock, 60)

    assert report.outcome == Outcome.TIMED_OUT
    failed = [p for p in front.requests("PATCH", NODE_PATH) if p.status == 503]
    took = [p for p in front.requests("PATCH", NODE_PATH) if p.status == 200][1:]
    assert len(failed) == 3 and took, "the re-cordon met the outage, then took"
    assert took[0].at - failed[-1].at < 10, "the retry waited for another timer"
    assert sim.get("Node", NODE)["spec"].get("unschedulable") is True
    assert report.recordons == 1, "a refused re-cordon is not one"


@pytest.mark.parametrize("refused", [1, 2], ids=["cordoned-with-the-record", "record-alone"])
def test_recordon_refused__the_pods_gone_before_its_retry__the_ends_patch_cordons(
    sim: KubeSim, front: ApiFront, clock: FakeClock, refused: int
) -> None:
    """The node's last pod goes while a refused re-cordon waits for its retry: the
    drain's end record cordons the node too, so a drain does not end with its node
    open; should that patch be refused as well, the record goes alone."""
    from drainer.backoff import Backoff

    place(sim, objects.pod("web-0", node_name=NODE))

    def evicted() -> None:  # before the eviction's answer
        _uncordon_while_node_writes_fail(sim, front, calls=refused)
        # the pod goes once the re-cordon was refused: the node's watch and the pods'
        # are two streams, and the pod's end could otherwise come first
        k.eventually(
            lambda: [p.status for p in front.requests("PATCH", NODE_PATH)][1:4] == [503] * 3,
            what="the re-cordon refused",
        )
        admin(sim).delete("Pod", "web-0", "default")

    front.script("POST", eviction_path("default", "web-0"), EVICTED_201, then=evicted)
    never = Backoff(first=3600.0, cap=3600.0)

    _, report = drain(front, clock, 60, denied_retry=never)

    assert report.outcome == Outcome.DRAINED
    assert [p.status for p in front.requests("PATCH", NODE_PATH)][1:4] == [503] * 3
    node = sim.get("Node", NODE)
    assert json.loads(node["metadata"]["annotations"][PROGRESS_ANNOTATION])["phase"] == "drained"
    assert node["spec"].get("unschedulable") is (refused == 1)
    assert report.recordons == (refused == 1)


# -- a pod that lands under a budget that refused -------------------------------------


class _LandsAfterARefusal(Settling):
    """db-1 lands on the node (the cordon briefly undone, a pod bound before it) once
    db-0's first eviction was refused."""

    def __init__(self, clock: FakeClock, front: ApiFront) -> None:
        super().__init__(clock, front)
        self.landed_at: float | None = None

    def wait(self, cond: Any, until: Any, busy: bool = False) -> None:
        if (
            self.landed_at is None
            and not busy
            and self.front.requests("POST", eviction_path("default", "db-0"))
        ):
            self.landed_at = self.clock()
            late = objects.pod(
                "db-1", node_name=NODE, labels={"app": "db"}, grace=30, phase="Running", ready=True
            )
            self.front.sim.apply([late])
            cond.wait(0.2)
            return
        super().wait(cond, until, busy)


def test_force__pod_landing_under_a_budget_that_refused__asked_on_its_timer_before_deleted(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """db-0's budget refuses; db-1 lands under it, and db-0 is deleted early by the
    force policy (its grace before the deadline). db-1 is asked on the budget's timer
    (it waited for a budget change that never came, and was deleted at the deadline
    never asked); never deleted early before it was asked: a pod never asked is not
    held (the force policy deletes only pods refused, or opted out, before the end)."""
    place_held(sim, grace=30)
    waits = _LandsAfterARefusal(clock, front)
    start = clock()

    _, report = drain(
        front, clock, 40, waits=waits, force_on_timeout=True, force_grace_period_seconds=30
    )

    assert waits.landed_at is not None
    asked = [r.at - start for r in front.requests("POST", eviction_path("default", "db-1"))]
    deleted = [r.at - start for r in front.requests("DELETE", "/pods/db-1$")]
    assert asked, f"db-1 never asked for; deleted at {deleted}"
    assert 15 <= asked[0] < 40 - 1, asked
    assert deleted and deleted[0] >= asked[0], (asked, deleted)
    assert report.forced == 2 and report.outcome == Outcome.TIMED_OUT


# -- answers that are not what they seem: a redirect, a 404 of the route -------------


def test_redirect_on_the_pod_list__the_drain_raises__never_drained_with_a_pod_running(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """A proxy's 302 with an empty body on the list of the node's pods was read as an
    empty list: the drain ended DRAINED, evicted 0, while web-0 ran on the node. It is
    an error now, raised as any failure of the drain's first list is (to retry)."""
    place(sim, objects.pod("web-0", namespace="shop", node_name=NODE))
    front.script("GET", PODS_LIST, LOGIN_REDIRECT_302, count=None)

    with pytest.raises(KubeError, match="redirect"):
        drain(front, clock, 60)

    assert [p["metadata"]["name"] for p in sim.list("Pod", "shop")] == ["web-0"]


def test_redirect_on_eviction__not_counted_evicted__retried_until_the_deadline(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    place(sim, objects.pod("web-0", namespace="shop", node_name=NODE))
    front.script("POST", eviction_path("shop", "web-0"), LOGIN_REDIRECT_302, count=None)

    _, report = drain(front, clock, 60)

    assert report.outcome == Outcome.TIMED_OUT
    assert report.evicted == 0
    assert not gone(sim, "shop", "web-0")
    assert "redirect" in report.left["shop/web-0"]


ROUTE_NOT_FOUND_404 = RealAnswer(
    404, status_body("the server could not find the requested resource", 404, "NotFound")
)


def test_eviction_route_404__the_pod_still_running_is_not_reported_drained(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """A 404 that names no pod (the route is not there: 'the server could not find the
    requested resource'; a gateway's '404 page not found') was read as "already
    gone": the pod marked GONE, never looked at again, and the drain ended DRAINED
    with it on the node. A 404 is gone only when the pod watch agrees; else the
    eviction is tried again, past the stuck check (no pod is "stuck terminating"
    that was never deleted)."""
    place(sim, objects.pod("web-0", namespace="shop", node_name=NODE))
    front.script("POST", eviction_path("shop", "web-0"), ROUTE_NOT_FOUND_404, count=None)

    _, report = drain(front, clock, 300)

    assert not gone(sim, "shop", "web-0")
    assert report.outcome == Outcome.TIMED_OUT, (
        f"reported {report.outcome} while web-0 still runs on the node"
    )
    assert report.stuck == []
    assert len(front.requests("POST", eviction_path("shop", "web-0"))) > 1


def test_pod_deleted_between_the_list_and_its_eviction__404__gone_at_once(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """The pod is deleted just before its eviction arrives (the eviction answers 404
    naming it): the watch confirms it gone, and the drain ends DRAINED at once."""
    place(sim, objects.pod("web-0", namespace="shop", node_name=NODE, grace=0))
    not_found = RealAnswer(
        404,
        status_body(
            'pods "web-0" not found', 404, "NotFound", details={"name": "web-0", "kind": "pods"}
        ),
    )
    front.script(
        "POST",
        eviction_path("shop", "web-0"),
        not_found,
        then=lambda: admin(sim).delete("Pod", "web-0", "shop"),
    )
    started = clock()

    _, report = drain(front, clock, 300)

    assert report.outcome == Outcome.DRAINED
    assert report.evicted == 0
    assert gone(sim, "shop", "web-0")
    assert clock() - started < 10, "gone when the watch said so, not at a stuck check"


# -- the heap ------------------------------------------------------------------------


def test_a_drain_leaves_what_lived_before_it_to_no_collection__and_gives_it_back_after(
    sim: KubeSim, front: ApiFront, clock: FakeClock
) -> None:
    """A drain's full collections scanned the whole process (the clients' models, the
    modules) and freed nothing of it: what lives before the drain is frozen while it
    runs, and unfrozen after (a cycle that dies later is still freed)."""
    place(sim, objects.pod("web-1", namespace="shop", node_name=NODE))
    before = gc.get_freeze_count()
    frozen: list[int] = []
    kube = front_kube(front, sleep=clock.sleep)
    engine = Drain(
        kube,
        NODE,
        DrainOptions(),
        record=ProgressRecord(),
        waits=Settling(clock, front),
        on_event=lambda event: frozen.append(gc.get_freeze_count()),
    )
    try:
        report = engine.run(clock() + 60)
    finally:
        kube.close()

    assert report.outcome is Outcome.DRAINED
    assert frozen and min(frozen) > 0, "frozen while the drain runs"
    assert gc.get_freeze_count() == before, "unfrozen after it (before: another's freeze, if any)"


def test_heap_frozen__someone_else_froze_first__left_as_they_left_it() -> None:
    gc.freeze()
    try:
        count = gc.get_freeze_count()
        with heap_frozen():
            pass
        assert gc.get_freeze_count() == count
    finally:
        gc.unfreeze()
