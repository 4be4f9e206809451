"""A stack updated from 0.1.0 while its drains run: what 0.1.0 wrote (tests/data/v0.1.0/,
made by 0.1.0's own code) taken up by today's handler and CLI, on both backends.

- A drain 0.1.0 began and handed over (its payload, the node as 0.1.0 left it) is
  finished by today's invocation, its counts carried on.
- `eks-node-drainer release` undoes a drain 0.1.0 recorded, and only what it added.
- The input of a Scheduler schedule 0.1.0 created drains the node when it fires.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3

from drainer.k8s.cordon import EXCLUDE_LB_LABEL, PROGRESS_ANNOTATION, progress_of
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on

from .conftest import BudgetWatcher, Invoke

ROOT = Path(__file__).resolve().parents[2]
V010 = ROOT / "tests" / "data" / "v0.1.0"


def v010(name: str) -> Any:
    return json.loads((V010 / f"{name}.json").read_text())


def _as_0_1_0_left(world: World, node: str, record: str, **times: float) -> None:
    """The node as 0.1.0 left it: its cordon, label and progress record (`record` of
    tests/data/v0.1.0/progress.json), with `times` (since, until) moved to now."""
    left = v010("progress")[record]
    progress = json.loads(left["metadata"]["annotations"][PROGRESS_ANNOTATION])
    progress.update({k: int(v) for k, v in times.items()})
    labels = {k: v for k, v in left["metadata"]["labels"].items() if k == EXCLUDE_LB_LABEL}
    world.cluster.patch(
        "Node",
        node,
        {
            "metadata": {
                "labels": labels,
                "annotations": {PROGRESS_ANNOTATION: json.dumps(progress)},
            },
            "spec": {"unschedulable": bool(left["spec"].get("unschedulable"))},
        },
    )


def event_time(event: dict[str, Any]) -> float:
    """The event's time, epoch seconds: when the lifecycle action began."""
    return datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()


def _release(world: World, node: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "drainer", "release", "--node", node]
    argv += ["--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False)


def test_a_drain_0_1_0_handed_over__finished_by_today_s_invocation__counts_carried_on(
    world: World, invoke: Invoke, budgets: BudgetWatcher
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(
        world,
        node,
        [w.deployment("web", 3), w.budget("web", {"app": "web"}, max_unavailable=1)],
    )
    budgets.start()
    event = world.terminate(instance, age=120)
    handed = v010("handover")["drainer"]
    assert set(handed) == {"started_at", "handovers", "heartbeats"}
    started = handed["started_at"] = event_time(event)
    _as_0_1_0_left(world, node, "draining", since=started, until=started + 3600)

    summary = invoke({**event, "drainer": handed})

    assert summary["result"] == "drained", summary
    assert summary["lifecycle_result"] == "CONTINUE"
    assert summary["handovers_so_far"] == handed["handovers"]
    assert summary["heartbeats_total"] > handed["heartbeats"], "0.1.0's heartbeats counted on"
    assert budgets.violations() == {}
    assert [c["LifecycleActionResult"] for c in world.completions()] == ["CONTINUE"]
    gone = [p for p in pods_on(world.cluster, node) if not p["metadata"].get("deletionTimestamp")]
    assert gone == []
    record = progress_of(world.cluster.get("Node", node)) or {}
    assert record.get("phase") == "drained"
    assert record.get("added") == ["cordon", "exclude-from-lb-label"], (
        "what 0.1.0 added stays recorded, so that release undoes it"
    )


def test_release__a_drain_0_1_0_ended__uncordoned_label_and_record_gone(world: World) -> None:
    node = world.nodes[world.instance_ids[0]]
    _as_0_1_0_left(world, node, "drained")

    released = _release(world, node)

    assert released.returncode == 0, released.stderr
    after = world.cluster.get("Node", node)
    assert not after["spec"].get("unschedulable")
    assert EXCLUDE_LB_LABEL not in (after["metadata"].get("labels") or {})
    assert PROGRESS_ANNOTATION not in (after["metadata"].get("annotations") or {})


def test_release__a_0_1_0_drain_of_a_node_cordoned_before__stays_cordoned(world: World) -> None:
    node = world.nodes[world.instance_ids[0]]
    _as_0_1_0_left(world, node, "timed_out_cordoned_before")

    released = _release(world, node)

    assert released.returncode == 0, released.stderr
    after = world.cluster.get("Node", node)
    assert after["spec"].get("unschedulable") is True, "the cordon was someone else's"
    assert EXCLUDE_LB_LABEL not in (after["metadata"].get("labels") or {})
    assert "cordoned before the drain" in released.stdout + released.stderr


def test_a_schedule_0_1_0_created__fires__the_node_is_drained_not_scheduled_again(
    world: World, invoke: Invoke
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2)])
    lead = 3600
    scheduled = v010("schedule")
    old_instance = scheduled["input"]["detail"]["affectedEntities"][0]["entityValue"]
    name = scheduled["name"].replace(old_instance, instance)
    # The schedule fires `lead` before the window, with the event as 0.1.0 stored it.
    event = {**world.scheduled_change([instance], starts_in=lead), "drainer_schedule": name}
    assert set(scheduled["input"]) == set(event), "0.1.0's input is the event plus its name"

    summary = invoke(
        event,
        SCHEDULED_CHANGE_LEAD_SECONDS=lead,
        SCHEDULER_ROLE_ARN="arn:aws:iam::123456789012:role/drainer-SchedulerRole-ABC123",
    )

    assert summary["result"] == "drained", summary
    assert summary["trigger"] == "scheduled-change"
    assert pods_on(world.cluster, node) == []
    scheduler = boto3.client("scheduler", region_name=world.region)
    assert scheduler.list_schedules()["Schedules"] == []
