"""An evicted pod's IP given again to a pod on another node, which the load balancer
controller registered in the same IP target group: the drain must not take that
target out (the controller would not put it back before the Service's endpoints
change again), nor wait for it to leave."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.clock import FakeClock
from test_targets import EVICTED, _delay, _elb_clock, _group, _states_by_id, elbv2

from drainer.lifecycle.targets import TargetWait, leave_target_groups

__all__ = ["elbv2"]  # the fixture, imported for the tests below


def leave(
    elbv2: Any,
    clock: FakeClock,
    holder: Callable[[str], str],
    *,
    wait: float = 60.0,
    sleep: Callable[[float], None] | None = None,
) -> TargetWait:
    """The evicted pods' IPs (EVICTED) out of the cluster "prod"'s target groups, on
    the test's clock, with `holder` asked which pod elsewhere holds an IP."""
    return leave_target_groups(
        elbv2,
        "i-0abc",
        "prod",
        [],
        pods=EVICTED,
        until=clock() + wait,
        clock=clock,
        sleep=sleep or clock.sleep,
        holder=holder,
    )


def web_group(elbv2: Any) -> str:
    """The IP target group of web-1's and web-2's IPs (EVICTED), a 20 s delay."""
    arn = _group(elbv2, "k8s-web-ip", "prod", targets=("10.0.1.11", "10.0.1.12"))
    _delay(elbv2, arn, 20)
    return arn


def test_an_evicted_pods_ip_held_now_elsewhere__left_registered__not_waited_for__named(
    elbv2: Any, caplog: pytest.LogCaptureFixture
) -> None:
    arn = web_group(elbv2)
    clock = FakeClock(1000.0)
    asked: list[str] = []

    def holder(ip: str) -> str:
        asked.append(ip)
        return "default/web-9" if ip == "10.0.1.11" else ""

    with _elb_clock(clock):
        found = leave(elbv2, clock, holder)

    assert sorted(asked) == ["10.0.1.11", "10.0.1.12"]
    assert _states_by_id(elbv2, arn) == {"10.0.1.11": "healthy"}, "web-9's target stays"
    assert found.reused == {"10.0.1.11": "default/web-9"}
    assert found.pending == [], "the wait ends when web-2's IP has left"
    assert 20 <= found.seconds < 30
    assert "left registered, held now by pods elsewhere: 10.0.1.11 (default/web-9)" in (
        found.describe()
    )
    (warning,) = [r.getMessage() for r in caplog.records if "held now by pod" in r.getMessage()]
    assert "default/web-1" in warning and "default/web-9" in warning


def test_every_ip_held_elsewhere__nothing_deregistered__no_wait(elbv2: Any) -> None:
    arn = web_group(elbv2)
    clock = FakeClock(1000.0)

    with _elb_clock(clock):
        found = leave(elbv2, clock, lambda ip: f"default/new-{ip}")

    assert _states_by_id(elbv2, arn) == {"10.0.1.11": "healthy", "10.0.1.12": "healthy"}
    assert found.pending == [] and found.pod_groups == []
    assert clock() == 1000.0, "nothing of the drain's to wait for"


def test_the_cluster_cannot_be_asked__taken_out_as_before__said_once(
    elbv2: Any, caplog: pytest.LogCaptureFixture
) -> None:
    arn = web_group(elbv2)
    clock = FakeClock(1000.0)
    asked: list[str] = []

    def holder(ip: str) -> str:
        asked.append(ip)
        raise ConnectionError("the API server is unreachable")

    with _elb_clock(clock):
        found = leave(elbv2, clock, holder)

    assert len(asked) == 1, "not asked again once the cluster failed to answer"
    assert _states_by_id(elbv2, arn) == {}, "both evicted pods' IPs let go, as before"
    assert found.reused == {} and found.pending == []
    (warning,) = [
        r.getMessage() for r in caplog.records if "could not ask the cluster" in r.getMessage()
    ]
    assert "unreachable" in warning
