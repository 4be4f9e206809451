"""drainer/k8s/events.py against kubesim: one Event per thing that happened, a
repeat counted in its series, a bound per drain, and `close` that never hangs."""

from __future__ import annotations

from typing import Any

from support.clock import FakeClock

from drainer.engine.report import DrainEvent, DrainReport, Kind
from drainer.k8s.events import EventPoster, Regarding, micro_time
from drainer.k8s.kube import Kube
from drainer.lifecycle.told import DrainStory
from drainer.outcome import Outcome
from kubesim import KubeSim


def _ours(sim: KubeSim) -> list[dict[str, Any]]:
    return [e for e in sim.list("Event", "") if e.get("reportingComponent") == "eks-node-drainer"]


NODE = Regarding("Node", "n1", uid="6f1d0c2e-0000-4000-8000-000000000001")


def test_record__one_event_as_kubectl_reads_it(sim: KubeSim, kube: Kube) -> None:
    clock = FakeClock(1_800_000_000.0)
    poster = EventPoster(kube, instance="eks-node-drainer-test", clock=clock)

    poster.post(NODE, "Cordoned", "Cordon", "marked unschedulable")
    poster.close(timeout=10)

    (event,) = _ours(sim)
    assert event["metadata"]["namespace"] == "default"
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "n1",
        "uid": NODE.uid,
    }
    assert (event["reason"], event["action"], event["type"]) == ("Cordoned", "Cordon", "Normal")
    assert event["message"] == "marked unschedulable"
    assert event["eventTime"] == micro_time(1_800_000_000.0)
    assert event["reportingInstance"] == "eks-node-drainer-test"
    assert poster.sent == 1


def test_record__the_same_event_again__one_event_whose_series_counts_it(
    sim: KubeSim, kube: Kube
) -> None:
    clock = FakeClock(1_800_000_000.0)
    poster = EventPoster(kube, clock=clock)
    pod = Regarding("Pod", "web-1", "kube-system", "uid-1")

    for _ in range(3):
        poster.post(pod, "StuckTerminating", "Drain", "still terminating", warning=True)
        clock.advance(5)
    poster.post(pod, "Evicted", "Evict", "evicted")
    poster.close(timeout=10)

    events = {e["reason"]: e for e in _ours(sim)}
    assert set(events) == {"StuckTerminating", "Evicted"}
    stuck = events["StuckTerminating"]
    assert stuck["metadata"]["namespace"] == "kube-system"
    assert stuck["type"] == "Warning"
    assert stuck["series"]["count"] == 3
    assert stuck["series"]["lastObservedTime"] == micro_time(1_800_000_010.0)


def test_record__past_the_bound__no_more_events(sim: KubeSim, kube: Kube) -> None:
    poster = EventPoster(kube, limit=3)

    for i in range(10):
        poster.post(Regarding("Pod", f"p{i}", "default"), "Evicted", "Evict", "evicted")
    poster.close(timeout=10)

    assert len(_ours(sim)) == 3


def test_close__nothing_recorded__no_thread_no_request(sim: KubeSim, kube: Kube) -> None:
    before = len(sim.requests())

    EventPoster(kube).close()

    assert len(sim.requests()) == before


def test_record__note_cut_to_what_the_api_takes(sim: KubeSim, kube: Kube) -> None:
    poster = EventPoster(kube)

    poster.post(NODE, "DrainTimedOut", "Drain", "x" * 5000, warning=True)
    poster.close(timeout=10)

    (event,) = _ours(sim)
    assert len(event["message"]) == 1024


def test_record__a_long_note_of_wide_characters__cut_to_1024_bytes_not_refused(
    sim: KubeSim, kube: Kube
) -> None:
    poster = EventPoster(kube)

    poster.post(NODE, "EvictionDenied", "Evict", "refusé " * 400, warning=True)
    poster.close(timeout=10)

    (event,) = _ours(sim)
    assert len(event["message"].encode()) <= 1024
    assert event["message"].startswith("refusé refusé")


def test_record__a_note_utf8_cannot_hold__recorded_with_a_question_mark(
    sim: KubeSim, kube: Kube
) -> None:
    """A lone surrogate in a note (a message echoed from a server or a forged name)
    raised UnicodeEncodeError in post(): the Event was lost, with a traceback."""
    poster = EventPoster(kube)

    poster.post(NODE, "EvictionDenied", "Evict", "denied: pod \ud800 bad", warning=True)
    poster.close(timeout=10)

    (event,) = _ours(sim)
    assert event["message"] == "denied: pod ? bad"


def test_record__past_the_bound__node_events_still_recorded__pods_folded_counted(
    sim: KubeSim, kube: Kube
) -> None:
    poster = EventPoster(kube, limit=3)

    poster.post(NODE, "DrainStarted", "Drain", "drains the node")
    for i in range(10):
        poster.post(Regarding("Pod", f"p{i}", "default"), "Evicted", "Evict", "evicted")
    poster.post(NODE, "Drained", "Drain", "every pod is gone")
    poster.close(timeout=10)

    events = _ours(sim)
    assert sorted(e["reason"] for e in events if e["involvedObject"]["kind"] == "Node") == [
        "DrainStarted",
        "Drained",
    ]
    assert len([e for e in events if e["involvedObject"]["kind"] == "Pod"]) == 3
    assert poster.folded == 7


def test_close__a_node_event_after_it__not_recorded(sim: KubeSim, kube: Kube) -> None:
    poster = EventPoster(kube)
    poster.post(NODE, "DrainStarted", "Drain", "drains the node")
    poster.close(timeout=10)

    poster.post(NODE, "Drained", "Drain", "every pod is gone")

    assert [e["reason"] for e in _ours(sim)] == ["DrainStarted"]


def test_story__timed_out_past_the_bound__the_end_event_says_how_many_were_folded(
    sim: KubeSim, kube: Kube
) -> None:
    poster = EventPoster(kube, limit=2)
    story = DrainStory(poster, "n1", NODE.uid, "spot-interruption")
    why = "PodDisruptionBudget default/db allows no disruption"
    left = {f"default/p{i}": why for i in range(5)}
    for pod in left:
        story(DrainEvent(Kind.LEFT, pod=pod, reason=why))

    story.ended(DrainReport("n1", Outcome.TIMED_OUT, left=left), lambda outcome: None)
    poster.close(timeout=10)

    (end,) = [e for e in _ours(sim) if e["reason"] == "DrainTimedOut"]
    assert end["type"] == "Warning"
    assert end["message"].startswith("PodDisruptionBudget default/db allows no disruption: ")
    assert end["message"].endswith("; 3 pod Events not recorded (2 per drain: the log has each)")
    assert [e["reason"] for e in _ours(sim)].count("LeftOnNode") == 2
