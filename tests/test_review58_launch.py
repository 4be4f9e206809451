"""Review 58 of the launch hook and warm pools (drainer/lifecycle/launch.py and its
helpers), through launch.handle on moto and kubesim, as tests/test_launch_answered.py
runs it."""

from __future__ import annotations

import json
import time

from support.clock import FakeClock
from test_launch_answered import Launch, kubesim, launching  # noqa: F401  (fixtures)

from drainer.k8s.client import RetryPolicy
from drainer.k8s.cordon import PROGRESS_ANNOTATION
from kubesim.faults import Fault
from testbed import workloads as objects


def _back_from_the_pool(launching: Launch, *, ready: bool) -> None:  # noqa: F811
    """The event of a return from the warm pool, its node as the drain into the pool
    left it: cordoned, with the drain's record."""
    launching.raw_event["detail"]["Origin"] = "WarmPool"
    record = {"phase": "drained", "destination": "warm-pool", "added": ["cordon"],
              "since": time.time() - 3600, "at": time.time() - 3500}  # fmt: skip
    node = objects.node(
        launching.node, instance=launching.event.instance_id, ready=ready, unschedulable=True,
        annotations={PROGRESS_ANNOTATION: json.dumps(record)},
    )  # fmt: skip
    launching.kubesim.apply(node)


def test_api_server_unreachable_for_the_whole_wait__not_abandoned_as_never_registered(
    launching: Launch,  # noqa: F811
) -> None:
    """The node registered and is Ready, but the function cannot reach the API server
    for the whole wait (the Lambda's VPC cannot route to a private endpoint, a
    security group, a long control-plane outage: every call a 5xx or a timeout).
    Each look's KubeError is swallowed at INFO ("failed for now") and the timeout
    reports the empty first `Look()`: `not_joined`, waiting for `registration`,
    ABANDON, and a notice saying "The node never registered: see the instance's
    kubelet, its user data...". Every healthy instance is terminated and an instance
    refresh stops, for the drainer's own outage, where "the cluster cannot be read at
    all" promises CONTINUE (`failed`): a broken drainer never stops a group from
    launching."""
    node = objects.node(launching.node, instance=launching.event.instance_id, ready=True)
    launching.kubesim.apply(node)
    launching.retry = RetryPolicy(attempts=1)  # no real back-off sleeps in the test
    launching.kubesim.faults.add(Fault(kind="status", status=503, reason="ServiceUnavailable"))

    summary = launching.handle(FakeClock(time.time()))

    assert summary.get("waiting_for") != "registration", (
        f"a node that registered reported as never registered: {summary}"
    )
    assert summary["lifecycle_result"] == "CONTINUE", (
        f"a healthy instance abandoned because the API server could not be reached: {summary}"
    )
    for notice in launching.sns.sent:
        assert "never registered" not in notice["Message"], notice["Message"]


def test_warm_pool_return_action_gone_then_not_ready_in_time__not_told_as_abandoned(
    launching: Launch,  # noqa: F811
) -> None:
    """A return from the warm pool whose action is gone (Lambda's queue held the event
    past the hook's timeout: DefaultResult CONTINUE put the instance in service) is
    waited for all the same, so that its node, cordoned by the drain into the pool,
    is released. When that node is not usable by LAUNCH_TIMEOUT_SECONDS, the launch
    ends `not_joined` with lifecycle result ABANDON (nothing is sent: the action is
    gone), and its notice says "ABANDON: Auto Scaling terminates the instance and
    launches another", with no word of the release. The instance is in fact in
    service, its node cordoned and out of the load balancers by the drain, and nothing
    ever releases it: `not_released` is empty, no ERROR line names the release
    command (as it does for the same node with LAUNCH_TIMEOUT_RESULT=continue)."""
    _back_from_the_pool(launching, ready=False)
    launching.sim.expire_action(launching.event.instance_id)

    # The late event: LAUNCH_TIMEOUT_SECONDS from its time has passed, one look.
    summary = launching.handle(FakeClock(time.time() + 900))

    assert summary["completed"] is not True, summary
    assert launching.kubesim.get("Node", launching.node)["spec"].get("unschedulable")
    assert summary["not_released"], f"in service, cordoned by the drain, and unsaid: {summary}"
    (notice,) = launching.sns.sent
    text = notice["Message"]
    assert "Auto Scaling terminates the instance" not in text, text
    assert f"release --node {launching.node}" in text, text


def test_warm_pool_return_api_unreachable__the_cordon_left_said_with_a_release_by_instance(
    launching: Launch,  # noqa: F811
) -> None:
    """An instance back from the warm pool while the function cannot reach the API
    server: the launch ends `failed` and answers CONTINUE (a broken drainer never stops
    a group from launching). The instance goes into service with its node as the drain
    into the pool left it, cordoned and out of the load balancers, and nothing releases
    it. With no look that worked, the function knows no node name, and said nothing of
    the release: no `not_released`, no ERROR line, a notice with no advice. It is said,
    with the release by the instance's id, which finds the node once the API answers."""
    _back_from_the_pool(launching, ready=True)
    launching.retry = RetryPolicy(attempts=1)
    launching.kubesim.faults.add(Fault(kind="status", status=503, reason="ServiceUnavailable"))

    summary = launching.handle(FakeClock(time.time()))

    assert (summary["result"], summary["lifecycle_result"]) == ("failed", "CONTINUE"), summary
    assert summary.get("not_released") == "failed", f"a cordon left unsaid: {summary}"
    release = f"release --instance-id {launching.event.instance_id}"
    (notice,) = launching.sns.sent
    assert release in notice["Message"], notice["Message"]
