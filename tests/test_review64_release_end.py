"""Session 64: a release that lands as the drain ends, after its last look at the node
(the watch) and before the end's patch. The end's patch wrote the drain's record back
and, the node being uncordoned by the release, cordoned it again: the release did not
hold, and `release` had said it did. The end's patch is now conditional on the node as
the drain last saw it (its resourceVersion): the release makes it fail (409), and the
node, read again, is left released."""

from __future__ import annotations

from typing import Any

from test_drain import NODE, admin, place
from test_guard import ANNOTATION, Ledger, _drain, clock, front, sim

from drainer.outcome import Outcome
from kubesim import KubeSim
from testbed import workloads as objects

__all__ = ["clock", "front", "sim"]


class ChangedAtTheEnd(Ledger):
    """The caller's record; someone patches the node the moment the drain asks for its
    end's patch: after the drain's last look, before its write."""

    def __init__(self, sim: KubeSim, patch: dict[str, Any]) -> None:
        super().__init__()
        self.sim, self.patch = sim, patch

    def end(
        self, outcome: Outcome, now: float, evicted: int, *, cordoned: bool = False
    ) -> dict[str, Any]:
        if not any(asked[0] == "end" for asked in self.asked):
            admin(self.sim).patch("Node", NODE, self.patch)
        return super().end(outcome, now, evicted, cordoned=cordoned)


RELEASE = {"metadata": {"annotations": {ANNOTATION: None}}, "spec": {"unschedulable": None}}


def test_released_after_the_last_look__the_end_leaves_it_released(
    sim: KubeSim, front: Any, clock: Any
) -> None:
    place(sim, objects.pod("web-0", node_name=NODE))

    engine = _drain(front, clock, ChangedAtTheEnd(sim, RELEASE), 60)

    assert engine.report.outcome == Outcome.DRAINED
    node = sim.get("Node", NODE)
    assert ANNOTATION not in (node["metadata"].get("annotations") or {}), "record written back"
    assert not node["spec"].get("unschedulable"), "cordoned again after the release"


def test_node_changed_otherwise_after_the_last_look__the_end_still_recorded(
    sim: KubeSim, front: Any, clock: Any
) -> None:
    """A label, not a release: the end is written on the node as it is now."""
    place(sim, objects.pod("web-0", node_name=NODE))

    _drain(front, clock, ChangedAtTheEnd(sim, {"metadata": {"labels": {"team": "b"}}}), 60)

    node = sim.get("Node", NODE)
    assert node["metadata"]["annotations"][ANNOTATION] == "drained, 1 evicted"
    assert node["metadata"]["labels"]["team"] == "b"
