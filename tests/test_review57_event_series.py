"""Review 57: an Event that repeats is one Event with a count, in the invocation a
drain is handed over to too (docs/operations.md, Kubernetes Events): the Event's
name is a hash of what makes it the same, so a new poster finds it (409
AlreadyExists), reads it and counts one more on the version read."""

from __future__ import annotations

import re
import threading
import time

import pytest
from support.clock import FakeClock
from test_kube_events import _ours

from drainer.errors import KubeConflict
from drainer.k8s.events import EventPoster, Regarding, micro_time
from drainer.k8s.kube import Kube
from kubesim import KubeSim
from kubesim.api import R

POD = Regarding("Pod", "web-1", "kube-system", "uid-1")
NOTE = "PodDisruptionBudget shop/web allows no disruption now; eks-node-drainer retries"
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _refuse(poster: EventPoster) -> None:
    poster.post(POD, "EvictionRefusedByBudget", "Evict", NOTE, warning=True)


def _wait_sent(poster: EventPoster, sent: int) -> None:
    deadline = time.monotonic() + 10
    while poster.sent + poster.failed < sent and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (poster.sent, poster.failed) == (sent, 0)


def test_event_repeated_in_the_invocation_a_drain_is_handed_over_to__a_second_event_not_a_count(
    sim: KubeSim, kube: Kube
) -> None:
    """docs/operations.md: an Event that repeats is one Event with a count, and a
    budget's refusal is told once per pod "however many retries". Each invocation
    of a handed-over drain has its own poster, which knows nothing of the Events
    before: the same refusal is a new Event each time (4 for an hour's drain)."""
    pod = Regarding("Pod", "web-1", "kube-system", "uid-1")
    note = "PodDisruptionBudget shop/web allows no disruption now; eks-node-drainer retries"
    for _invocation in range(2):
        poster = EventPoster(kube, clock=FakeClock(1_800_000_000.0))
        poster.post(pod, "EvictionRefusedByBudget", "Evict", note, warning=True)
        poster.close(timeout=10)

    ours = [e for e in sim.list("Event", "") if e.get("reportingComponent") == "eks-node-drainer"]
    assert len(ours) == 1, f"{len(ours)} EvictionRefusedByBudget Events on one pod"
    assert (ours[0].get("series") or {}).get("count") == 2


def test_four_invocations__one_event_counted_four_times_last_seen_by_the_last(
    sim: KubeSim, kube: Kube
) -> None:
    clock = FakeClock(1_800_000_000.0)
    posters = []
    for _invocation in range(4):
        poster = EventPoster(kube, clock=clock)
        _refuse(poster)
        poster.close(timeout=10)
        posters.append(poster)
        clock.advance(900)

    (event,) = _ours(sim)
    assert event["series"]["count"] == 4
    assert event["series"]["lastObservedTime"] == micro_time(1_800_002_700.0)
    assert event["eventTime"] == micro_time(1_800_000_000.0)
    assert [(p.sent, p.failed) for p in posters] == [(1, 0)] * 4


def test_a_stale_count_in_memory__conflict__read_again_and_counted(
    sim: KubeSim, kube: Kube
) -> None:
    """The first invocation still runs when the next counts the Event: its own
    count (1) is stale, its write on the version it knew is refused (409 Conflict),
    it reads the Event again and counts on it: 3, not 2 twice."""
    first = EventPoster(kube)
    _refuse(first)
    _wait_sent(first, 1)
    second = EventPoster(kube)
    _refuse(second)
    second.close(timeout=10)
    _refuse(first)
    first.close(timeout=10)

    (event,) = _ours(sim)
    assert event["series"]["count"] == 3
    assert (first.sent, first.failed) == (2, 0)
    writes = [(r.verb, r.status) for r in sim.requests() if "/events" in r.path]
    assert writes == [
        ("create", 201),  # the first
        ("create", 409),  # the second: AlreadyExists
        ("patch", 200),  # its read
        ("patch", 200),  # its count: 2
        ("patch", 409),  # the first's count on the version it knew: Conflict
        ("patch", 200),  # its read
        ("patch", 200),  # its count: 3
    ]


def test_two_invocations_post_at_once__one_creates_the_other_counts(
    sim: KubeSim, kube: Kube
) -> None:
    posters = [EventPoster(kube), EventPoster(kube)]
    start = threading.Barrier(2)

    def post(poster: EventPoster) -> None:
        start.wait()
        _refuse(poster)
        poster.close(timeout=10)

    threads = [threading.Thread(target=post, args=(p,)) for p in posters]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)

    (event,) = _ours(sim)
    assert event["series"]["count"] == 2
    assert sum(p.failed for p in posters) == 0


def test_event_gone_with_the_ttl__posted_anew(sim: KubeSim, kube: Kube) -> None:
    poster = EventPoster(kube)
    _refuse(poster)
    _refuse(poster)
    _wait_sent(poster, 2)
    (event,) = _ours(sim)
    assert event["series"]["count"] == 2
    sim.api.store.remove(R["events"], "kube-system", event["metadata"]["name"])  # expired

    _refuse(poster)
    poster.close(timeout=10)

    (again,) = _ours(sim)
    assert "series" not in again
    assert poster.failed == 0


def test_another_pod_of_the_same_name__another_event(sim: KubeSim, kube: Kube) -> None:
    poster = EventPoster(kube)
    _refuse(poster)
    poster.post(
        Regarding("Pod", "web-1", "kube-system", "uid-2"),
        "EvictionRefusedByBudget",
        "Evict",
        NOTE,
        warning=True,
    )
    poster.close(timeout=10)

    assert sorted(e["involvedObject"]["uid"] for e in _ours(sim)) == ["uid-1", "uid-2"]


def test_node_events_of_a_drain_handed_over__in_default__counted(sim: KubeSim, kube: Kube) -> None:
    node = Regarding("Node", "ip-10-0-1-2.eu-west-1.compute.internal", uid="u-n")
    for _invocation in range(2):
        poster = EventPoster(kube)
        poster.post(node, "DrainStarted", "Drain", "drains the node")
        poster.close(timeout=10)

    (event,) = _ours(sim)
    assert event["metadata"]["namespace"] == "default"
    assert event["series"]["count"] == 2


@pytest.mark.parametrize(
    "name",
    ["web-1", "ip-10-0-1-2.eu-west-1.compute.internal", "a" * 253, "a" * 235 + "." + "b" * 17],
)
def test_event_name__a_dns_subdomain_the_same_each_time(name: str) -> None:
    from drainer.k8s.events import event_name  # new with the fix

    pod = Regarding("Pod", name, "shop", "uid-1")
    made = event_name(pod, "Evicted", "Evict", "evicted", "Normal")

    assert len(made) <= 253
    assert SUBDOMAIN.fullmatch(made), made
    assert made == event_name(pod, "Evicted", "Evict", "evicted", "Normal")


def test_event_name__differs_by_object_uid_reason_action_note_and_type() -> None:
    from drainer.k8s.events import event_name  # new with the fix

    base = (POD, "Evicted", "Evict", "evicted", "Normal")
    others = [
        (Regarding("Pod", "web-1", "kube-system", "uid-2"), *base[1:]),
        (Regarding("Pod", "web-1", "shop", "uid-1"), *base[1:]),
        (Regarding("Node", "web-1", "", "uid-1"), *base[1:]),
        (POD, "EvictionDenied", *base[2:]),
        (POD, "Evicted", "Drain", *base[3:]),
        (POD, "Evicted", "Evict", "evicted again", "Normal"),
        (POD, "Evicted", "Evict", "evicted", "Warning"),
    ]

    names = {event_name(*base), *(event_name(*o) for o in others)}  # type: ignore[arg-type]

    assert len(names) == 1 + len(others)


def test_kubesim__a_patch_on_a_stale_resource_version__409_as_the_real_server(
    sim: KubeSim, kube: Kube
) -> None:
    poster = EventPoster(kube)
    _refuse(poster)
    poster.close(timeout=10)
    (event,) = _ours(sim)
    name, version = event["metadata"]["name"], event["metadata"]["resourceVersion"]
    kube.patch_event("kube-system", name, {"metadata": {"resourceVersion": version}})
    counted = kube.patch_event(
        "kube-system",
        name,
        {"metadata": {"resourceVersion": version}, "series": {"count": 2}},
    )
    assert counted["series"]["count"] == 2

    with pytest.raises(KubeConflict):
        kube.patch_event(
            "kube-system",
            name,
            {"metadata": {"resourceVersion": version}, "series": {"count": 5}},
        )
