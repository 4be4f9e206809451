"""kubectl's filter pipeline, as a table: which pods are evicted, skipped or waited for."""

from __future__ import annotations

from typing import Any

import pytest

from drainer.engine.filters import Action, FilterOptions, decide, warnings_by_message
from testbed import workloads as objects
from testbed.workloads import Obj


def pod(*, owner: str | None = "ReplicaSet", phase: str = "Running", **kw: Any) -> Obj:
    """ns/p, running under a ReplicaSet unless the case says otherwise."""
    return objects.pod("p", namespace="ns", uid="u1", owner=owner, phase=phase, **kw)


DEFAULT = FilterOptions()
STRICT = FilterOptions(evict_unreplicated=False, evict_emptydir=False)
DAEMONS = FilterOptions(evict_daemonset=True)


@pytest.mark.parametrize(
    ("case", "the_pod", "options", "action", "warning"),
    [
        ("replicated pod", pod(), DEFAULT, Action.EVICT, ""),
        # kubectl drain removes finished pods, warning neither for data nor controller.
        ("finished pod", pod(phase="Succeeded"), DEFAULT, Action.EVICT, ""),
        ("failed bare pod", pod(phase="Failed", owner=None), DEFAULT, Action.EVICT, ""),
        ("failed bare pod, strict", pod(phase="Failed", owner=None), STRICT, Action.EVICT, ""),
        (
            "finished emptyDir pod, strict",
            pod(phase="Succeeded", emptydir=True),
            STRICT,
            Action.EVICT,
            "",
        ),
        (
            "finished DaemonSet pod",
            pod(phase="Succeeded", owner="DaemonSet"),
            DEFAULT,
            Action.SKIP,
            "",
        ),
        (
            "finished mirror pod",
            pod(phase="Failed", owner=None, mirror=True),
            DEFAULT,
            Action.SKIP,
            "",
        ),
        ("mirror pod", pod(owner=None, mirror=True), DEFAULT, Action.SKIP, ""),
        ("terminating pod", pod(terminating=True), DEFAULT, Action.WAIT, ""),
        ("daemonset pod", pod(owner="DaemonSet"), DEFAULT, Action.SKIP, ""),
        ("daemonset pod, evict them", pod(owner="DaemonSet"), DAEMONS, Action.EVICT, ""),
        (
            "unreplicated pod",
            pod(owner=None),
            DEFAULT,
            Action.EVICT,
            "no controller will recreate this pod",
        ),
        (
            "unreplicated pod, strict",
            pod(owner=None),
            STRICT,
            Action.SKIP,
            "the pod dies with the node",
        ),
        (
            "emptyDir pod",
            pod(emptydir=True),
            DEFAULT,
            Action.EVICT,
            "emptyDir data is deleted with the pod",
        ),
        (
            "emptyDir pod, strict",
            pod(emptydir=True),
            STRICT,
            Action.SKIP,
            "emptyDir data dies with the node",
        ),
        (
            "unreplicated emptyDir pod",
            pod(owner=None, emptydir=True),
            DEFAULT,
            Action.EVICT,
            "emptyDir data is deleted with the pod; no controller will recreate this pod",
        ),
        (
            "daemonset pod with emptyDir",
            pod(owner="DaemonSet", emptydir=True),
            DEFAULT,
            Action.SKIP,
            "",
        ),
        (
            "terminating mirror pod",
            pod(owner=None, mirror=True, terminating=True),
            DEFAULT,
            Action.SKIP,
            "",
        ),
    ],
)
def test_decide(
    case: str, the_pod: dict[str, Any], options: FilterOptions, action: Action, warning: str
) -> None:
    decision = decide(the_pod, options)

    assert decision.action == action, case
    assert decision.warning == warning, case


def test_warnings__grouped_by_message_with_pod_names() -> None:
    first, second = pod(owner=None), pod(owner=None)
    second["metadata"]["name"] = "q"

    grouped = warnings_by_message(
        [decide(first, DEFAULT), decide(second, DEFAULT), decide(pod(), DEFAULT)]
    )

    assert grouped == {"no controller will recreate this pod": ["ns/p", "ns/q"]}
