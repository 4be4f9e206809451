"""Review 60: EC2's and AWS Health's events other than the terminate hook, through the
real handler (moto with awssim, kubesim): a scheduled change's drain cut to one
invocation, a maintenance the instance runs through, a spot warning delivered late,
a rebalance after the terminate hook's drain, a start notice for a cordon, and an
update of a change delivered after its close."""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Iterator
from email.utils import formatdate, parsedate_to_datetime
from typing import Any

import pytest

from awssim import ec2_events as spot
from awssim.instances import schedule_events
from drainer import handler
from drainer.k8s.cordon import EXCLUDE_LB_LABEL, PROGRESS_ANNOTATION, progress_value
from drainer.lifecycle import notices
from drainer.lifecycle.ec2_handover import HANDED_OVER
from kubesim import KubeSim
from testbed import LambdaContext, World
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import place_on, pods_on

TOPIC = "arn:aws:sns:us-east-1:123456789012:drains"


@pytest.fixture
def world(moto_aws: None) -> Iterator[World]:
    with KubeSim(speed=20, cluster_name="demo") as running:
        yield World(Cluster.of_kubesim(running), size=2)


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The notices the function sends: (subject, text), in order."""
    sent: list[tuple[str, str]] = []

    def publish(sns: Any, topic: str, notice: notices.Notice) -> bool:
        subject, text, _ = notice
        sent.append((subject, text))
        return True

    monkeypatch.setattr(notices, "publish", publish)
    return sent


def _invoke(
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    event: dict[str, Any],
    *,
    lambda_seconds: float = 900.0,
    **env: Any,
) -> dict[str, Any]:
    for key, value in world.env(**env).items():
        monkeypatch.setenv(key, value)
    handler.reset()
    return handler.lambda_handler(json.loads(json.dumps(event)), LambdaContext(lambda_seconds))


def _node(world: World, name: str) -> dict[str, Any]:
    return world.cluster.client.get("Node", name)


def _record(world: World, name: str) -> dict[str, Any]:
    raw = (_node(world, name)["metadata"].get("annotations") or {}).get(PROGRESS_ANNOTATION)
    return json.loads(raw) if raw else {}


def _guarded(world: World, node: str) -> None:
    """One pod its budget holds (maxUnavailable 0) on `node`."""
    place_on(
        world,
        node,
        [
            w.deployment("db", 1, grace=5, labels={"app": "db"}),
            w.budget("db", {"app": "db"}, max_unavailable=0),
        ],
    )


def close_change(
    world: World, monkeypatch: pytest.MonkeyPatch, update: dict[str, Any]
) -> dict[str, Any]:
    """AWS Health closes the change `update` is about (carried out, or cancelled):
    the function's answer to the close."""
    close = copy.deepcopy(update)
    close["id"] = str(uuid.uuid4())
    close["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    close["detail"]["statusCode"] = "closed"
    close["detail"]["lastUpdatedTime"] = formatdate(time.time(), usegmt=True)
    closed = _invoke(world, monkeypatch, close)
    assert closed["result"] == "closed", closed
    return closed


def _db_pods(world: World, node: str) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in pods_on(world.cluster, node)
        if p["metadata"]["name"].startswith("db-") and not p["metadata"].get("deletionTimestamp")
    ]


def test_scheduled_change_window_within_drain_timeout_beyond_one_invocation__held_pod_left_to_die(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/operations.md: a scheduled change's pods its budget still holds are 'deleted
    each its grace before the window' when the window is within DRAIN_TIMEOUT_SECONDS.
    ec2_events.drain cuts the drain to this invocation's end and never hands over
    (fixed=False there: no forcing), so a window further than one invocation (here a
    10 s Lambda and a window 10 minutes away; in production 900 s and e.g.
    SCHEDULED_CHANGE_LEAD_SECONDS=3600) ends timed_out with the held pod on the node
    and nothing arranged to delete it before the window: it dies with the instance."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)

    event = world.scheduled_change([instance], starts_in=600)
    summary = _invoke(world, monkeypatch, event, lambda_seconds=10.0)

    handed_over = bool(world.aws.pending_invocations())
    assert handed_over or not _db_pods(world, node), (
        "the held pod stays, and no later invocation will delete it before the window",
        summary,
    )
    # Now: the same event goes to the next invocation, which drains on.
    assert summary["result"] == "handed_over", summary
    (queued,) = world.aws.pending_invocations()
    payload = queued["payload"]
    payload = json.loads(payload) if isinstance(payload, str) else payload
    mark = payload.pop(HANDED_OVER)
    assert payload == event, "the same event, marked handed over"
    assert (mark["handovers"], mark["forced"]) == (1, 0), mark
    assert mark["evicted"] == summary["evicted"], (mark, summary)

    # The next invocation drains on, and its end line counts the drain as a whole.
    world.aws.pop_invocation()
    later = _invoke(world, monkeypatch, {**event, HANDED_OVER: mark}, lambda_seconds=10.0)
    assert later["result"] == "handed_over", later
    assert later["handovers_so_far"] == 1, later
    assert later["evicted_total"] == mark["evicted"] + later["evicted"], later
    assert later["drain_seconds_total"] >= later["seconds"], later


def test_network_maintenance_the_instance_runs_through__budget_held_pod_not_force_deleted(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A network maintenance: AWS says the instance only loses its network for a short
    while (no stop, no reboot); the code's own fate says 'EC2 maintains the instance'
    (RUNS_THROUGH). TIMEOUT_POLICY's own words: an EC2 event's drain deletes held pods
    only where EC2 takes the instance at the deadline. fixed_by_ec2 is True for every
    scheduled change within DRAIN_TIMEOUT_SECONDS, so the pod its budget holds is
    force-deleted before the window, its budget broken, on an instance that stays."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    event = spot.scheduled_change(
        world.aws.account_id,
        world.region,
        [instance],
        starts_in=25,
        code="AWS_EC2_INSTANCE_NETWORK_MAINTENANCE_SCHEDULED",
    )

    summary = _invoke(world, monkeypatch, event, lambda_seconds=10.0)

    assert _db_pods(world, node), ("the budget-held pod was force-deleted", summary)
    assert not summary.get("forced"), summary


def test_spot_warning_an_hour_late_instance_still_running__cordon_left_unsaid(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """A warning delivered an hour late (Lambda's async queue keeps it up to 6 h) about
    an instance still running, never restarted: EC2 did not take it at its moment. The
    late path drains it (its own 120 s) and leaves the node cordoned and out of the load
    balancers, but the end notice says 'EC2 ends the instance' and nothing about the
    cordon or `release` (fate says the instance does not come back): a node left
    cordoned, unsaid."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2)])

    summary = _invoke(
        world,
        monkeypatch,
        world.spot_warning(instance, age=3600),
        NOTIFICATION_TOPIC_ARN=TOPIC,
    )

    assert summary["result"] == "drained", summary
    assert "came after EC2's moment to act" in summary["deadline_source"], summary
    assert _node(world, node)["spec"].get("unschedulable"), "the node is left cordoned"
    ends = [text for subject, text in published if "drained" in subject]
    assert ends, published
    assert "cordoned" in ends[-1], ends[-1]


def test_rebalance_after_the_terminate_hooks_drain__record_and_end_line_not_rewound(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The terminate hook drained the node (its record: drained); the rebalance
    recommendation, delivered late, rewrites the record as a rebalance cordon and its
    end line says the pods stay until the interruption warning or the terminate hook
    drains it: the hook did that already, and the instance is terminating.
    _drained_already knows only ENDS_WITH_THE_INSTANCE (review 57's fix for the spot
    warning), not the terminate hook."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    world.terminate(instance)  # Terminating:Wait: the hook's drain, then CONTINUE
    ended = progress_value(
        "drained",
        frozenset({"cordon", "exclude-from-lb-label"}),
        trigger="terminate-hook",
        at=time.time() - 5,
        evicted=3,
    )
    world.cluster.client.patch(
        "Node",
        node,
        {
            "metadata": {
                "labels": {EXCLUDE_LB_LABEL: "true"},
                "annotations": {PROGRESS_ANNOTATION: ended},
            },
            "spec": {"unschedulable": True},
        },
    )

    summary = _invoke(world, monkeypatch, world.rebalance(instance), REBALANCE_ACTION="cordon")

    assert "stay until the interruption warning" not in summary.get("message", ""), summary
    assert _record(world, node).get("trigger") == "terminate-hook", _record(world, node)


def test_rebalance_cordon_with_notify_on_start__no_draining_notice_for_a_cordon(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """REBALANCE_ACTION=cordon drains nothing, and its end (cordoned) sends no notice;
    with NOTIFY_ON_START the operator is still told 'draining spot i-...' ('Draining
    spot instance ...'), a drain that never happens and never ends."""
    instance = world.instance_ids[0]
    place_on(world, world.nodes[instance], [w.deployment("web", 2)])

    summary = _invoke(
        world,
        monkeypatch,
        world.rebalance(instance),
        REBALANCE_ACTION="cordon",
        NOTIFY_ON_START="true",
        NOTIFICATION_TOPIC_ARN=TOPIC,
    )

    assert summary["result"] == "cordoned", summary
    assert not [s for s, _ in published if "draining" in s.lower()], published


def test_update_delivered_after_the_changes_close__lead_zero__drains_and_cordons(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWS Health cancelled the change (closed), and EC2 lists its event canceled; an
    older update of it comes after the close (the rule retries a delivery for up to
    24 h, Lambda's queue keeps it up to 6 h). With the default
    SCHEDULED_CHANGE_LEAD_SECONDS=0 the close leaves no mark (the mark is made only
    with a lead), so the late update drained the node of an instance nothing will
    happen to and left it cordoned. EC2's own list says the window is over: the
    update is left alone."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2)])
    update = world.scheduled_change([instance], starts_in=5 * 86400, age=3600)

    close_change(world, monkeypatch, update)
    # EC2, for its part, lists the change's event at that window as canceled.
    window = parsedate_to_datetime(update["detail"]["startTime"])
    event = {"Code": "instance-retirement", "Description": "[Canceled] ", "NotBefore": window}
    schedule_events(world.aws.account_id, world.region, instance, [event])
    late = _invoke(world, monkeypatch, update)

    assert late["result"] != "drained", late
    assert not _node(world, node)["spec"].get("unschedulable"), "cordoned for a cancelled change"
