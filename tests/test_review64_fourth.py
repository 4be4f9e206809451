"""Review of 75c3129, 9477c7b and 4879f56 (the end's patch on the resourceVersion the
drain last saw; the moved change's start notice; a fired schedule made again under
its other name, `<name>-again`, settled by updates and the close).

Each test asserts what an operator expects and fails on 4879f56."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from realapi import ApiFront, front_kube
from support.clock import FakeClock
from test_drain import NODE, Settling, admin, place
from test_guard import ANNOTATION, Ledger, clock, front, sim
from test_review60_ec2 import _guarded, _invoke, _node, published, world
from test_review63_second import ROLE, _listed, _start

from awssim.instances import schedule_events
from drainer.engine.drain import Drain
from drainer.engine.options import DrainOptions
from drainer.errors import KubeServerError
from drainer.lifecycle.scheduled import other_name
from drainer.outcome import Outcome
from kubesim import KubeSim
from testbed import World
from testbed import workloads as objects

__all__ = ["clock", "front", "published", "sim", "world"]

LEAD = 3600
SCHEDULER = {"SCHEDULED_CHANGE_LEAD_SECONDS": LEAD, "SCHEDULER_ROLE_ARN": ROLE}


# --- 75c3129: the end's patch on the version the drain last saw ------------------------


class LabelledAtTheEnd(Ledger):
    """Someone labels the node as the drain asks for its end's patch (after its last
    look: the patch answers 409), and the API server then fails the next `reads` GETs
    of the node (a 503 the client's retries did not outlast)."""

    def __init__(self, sim: KubeSim, failing: list[int]) -> None:
        super().__init__()
        self.sim, self.failing = sim, failing

    def end(
        self, outcome: Outcome, now: float, evicted: int, *, cordoned: bool = False
    ) -> dict[str, Any]:
        if not any(asked[0] == "end" for asked in self.asked):
            admin(self.sim).patch("Node", NODE, {"metadata": {"labels": {"team": "b"}}})
            self.failing[0] = 2  # patch()'s name_taken GET, then record_end's read again
        return super().end(outcome, now, evicted, cordoned=cordoned)


def test_end_409_then_one_failed_read__taken_for_a_release_and_the_end_never_written(
    sim: KubeSim, front: ApiFront, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """guard.record_end: a 409 (a label, a kubelet status update: not a release) and
    one failed GET of the node afterwards. `_read_again` answers None for "unreadable"
    as for "gone", and None is taken for released: the drain logs that the node "was
    released as its drain ended", writes no end, and the node keeps the record of a
    drain under way though nobody released anything. A failed read should be tried
    again (or said as a failure to record), never reported as a release."""
    place(sim, objects.pod("web-0", node_name=NODE))
    failing = [0]
    kube = front_kube(front, sleep=clock.sleep)
    real_get = kube.get_node

    def get_node(name: str) -> Any:
        if failing[0] > 0:
            failing[0] -= 1
            raise KubeServerError(f"node {name}: 503 Service Unavailable", 503)
        return real_get(name)

    kube.get_node = get_node  # type: ignore[method-assign]
    record = LabelledAtTheEnd(sim, failing)
    engine = Drain(kube, NODE, DrainOptions(), record=record, waits=Settling(clock, front))
    with caplog.at_level(logging.INFO, logger="drainer.engine.drain"):
        try:
            engine.run(clock() + 60)
        finally:
            kube.close()

    assert engine.report.outcome == Outcome.DRAINED
    said = [r.getMessage() for r in caplog.records]
    assert not any("was released as its drain ended" in line for line in said), (
        "a failed read of the node reported as a release",
        said,
    )
    node = sim.get("Node", NODE)
    assert node["metadata"]["annotations"][ANNOTATION] == "drained, 1 evicted", (
        "the end never written: the node keeps the begun record",
        node["metadata"]["annotations"],
    )


# --- 4879f56: the schedule made again under its other name ------------------------------


def test_again_schedule_fires_for_a_moved_change_ec2_canceled__drains_the_node(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lead 1 h. The change's schedule fired before EC2's time (the owner moved the
    retirement a day later) and was made again as `<name>-again`. The owner then
    cancels the retirement; the close's settle of the -again is only a log line when
    Scheduler fails (_settle_other: "it fires, and its invocation reads EC2"), or the
    close ran between the fired invocation's read of EC2 and its CreateSchedule. The
    -again fires: EC2 lists the moved time canceled and nothing at the event's window,
    so the invocation reads the change as neither moved nor over (`_over` looks at the
    event's window only; `_last_read` needs a chain's mark) and drains the node, for a
    change EC2 canceled. A change canceled at its own window is left alone."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    change = world.scheduled_change([instance], starts_in=2 * 3600)
    window = _start(change)
    moved = window + 86400
    schedule_events(world.aws.account_id, world.region, instance, _listed((window, "")))
    made = _invoke(world, monkeypatch, change, lambda_seconds=10.0, **SCHEDULER)
    assert made["result"] == "scheduled", made

    # fired at window - lead with EC2 listing the change a day later: made again
    schedule_events(world.aws.account_id, world.region, instance, _listed((moved, "")))
    fired = {**change, "drainer_schedule": made["schedule"]}
    again = _invoke(world, monkeypatch, fired, lambda_seconds=10.0, **SCHEDULER)
    assert again["result"] == "scheduled", again
    assert again["schedule"] == other_name(made["schedule"])

    # the owner cancels; the -again is not settled (Scheduler failed the close's settle)
    schedule_events(world.aws.account_id, world.region, instance, _listed((moved, "[Canceled] ")))
    last = {**change, "drainer_schedule": again["schedule"]}
    ran = _invoke(world, monkeypatch, last, lambda_seconds=10.0, **SCHEDULER)

    assert ran["result"] == "skipped", ("a change EC2 canceled drained the node", ran)
    assert not _node(world, node)["spec"].get("unschedulable"), "cordoned for a canceled change"
