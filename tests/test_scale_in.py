"""The terminate hook's trigger: the drain's deadline, the result of each report, and what
happens before a drain can start (the allow-list, the cluster, a failing API server).

AWS is moto with awssim; Kubernetes is kubesim. Time is a clock the test holds: the
workflow's pauses between retries advance it, and nothing sleeps for real.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import boto3
import hypothesis
import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from realapi import StaticToken
from support.clock import FakeClock

from awssim import AwsSim
from awssim.world import NodeGroup, create_node_group
from drainer import aws
from drainer.engine.options import DrainOptions
from drainer.engine.report import DrainReport
from drainer.k8s.client import RetryPolicy
from drainer.k8s.cordon import PROGRESS_ANNOTATION, cordon_patch, progress_value
from drainer.k8s.kube import Kube
from drainer.lifecycle import admission, ending, runner, scale_in, window
from drainer.lifecycle.events import parse_event
from drainer.lifecycle.events_ec2 import Ec2Kind
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER, LifecycleEvent
from drainer.lifecycle.handover import HANDOVER_KEY, Handover, parse_handover, with_handover
from drainer.lifecycle.job import Run, Tools
from drainer.lifecycle.notices import end_notice
from drainer.lifecycle.outcomes import Result, lifecycle_result
from drainer.lifecycle.runner import API_RETRY
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.settings_drain import TimeoutPolicy
from drainer.lifecycle.window import Deadline, Invocation
from drainer.outcome import Outcome
from kubesim import KubeSim
from kubesim.faults import Fault

REGION = "us-east-1"
CLUSTER = "prod"
WAITED_AT = "2026-11-22T02:15:30Z"  # the time of tests/events/terminate.json
WAITED_AT_EPOCH = datetime(2026, 11, 22, 2, 15, 30, tzinfo=UTC).timestamp()


@dataclass
class Scene:
    """An Auto Scaling group with a terminate hook (moto), its cluster (kubesim) and
    one instance waiting in Terminating:Wait."""

    clients: aws.AwsClients
    sim: AwsSim
    kubesim: KubeSim
    group: NodeGroup
    raw_event: dict[str, Any]

    @property
    def event(self) -> LifecycleEvent:
        parsed = parse_event(self.raw_event)
        assert isinstance(parsed, LifecycleEvent)
        return parsed

    @property
    def node_name(self) -> str:
        """The instance's node, as the workflow looks it up: its PrivateDnsName."""
        return aws.describe_instance(self.clients.ec2, self.event.instance_id).private_dns_name

    def kube(self, cluster: aws.ClusterInfo, name: str, settings: Settings) -> Kube:
        """The KubeFactory: the admin identity, and no retries of its own, so a failing
        server reaches the workflow's retry loop at once."""
        from drainer.k8s.transport import Endpoint, Transport

        ca_pem = base64.b64decode(cluster.certificate_authority_data)
        transport = Transport(Endpoint(cluster.endpoint, ca_pem=ca_pem.decode()))
        token = StaticToken(self.kubesim.admin_token)
        return Kube(transport, token, request_timeout=5.0, retry=RetryPolicy(attempts=1))

    def drain(
        self,
        settings: Settings,
        clock: Callable[[], float],
        *,
        event: LifecycleEvent | None = None,
        invocation: Invocation | None = None,
    ) -> Run:
        tools = Tools(
            settings,
            self.clients,
            self.kube,
            clock=clock,
            sleep=clock.sleep if isinstance(clock, FakeClock) else _no_sleep,
            rng=random.Random(7),
        )
        return scale_in.drain_instance(event or self.event, tools, invocation)


def _no_sleep(seconds: float) -> None:
    raise AssertionError(f"the workflow slept {seconds} s in a test that expects no retry")


@pytest.fixture
def kubesim() -> Iterator[KubeSim]:
    with KubeSim(speed=20) as running:
        yield running


@pytest.fixture
def scene_for(moto_aws: None, kubesim: KubeSim) -> Callable[..., Scene]:
    def build(
        *,
        metadata: str | None = '{"cluster_name": "prod"}',
        global_timeout: int | None = None,
        waited: float = 0.0,
    ) -> Scene:
        session = boto3.Session(region_name=REGION)
        clients = aws.make_clients(session)
        group = create_node_group(
            clients.ec2,
            clients.autoscaling,
            asg_name="eks-workers",
            size=2,
            hook_name="drain",
            heartbeat_timeout=600,
            cluster_name=CLUSTER,
            cluster_tag="",
            notification_metadata=metadata,
        )
        sim = AwsSim(region=REGION)
        sim.point_cluster_at(CLUSTER, kubesim.url, kubesim.ca_data)
        if global_timeout is not None:
            sim.set_global_timeout(group.asg_name, group.hook_name, global_timeout)
        token = sim.begin_termination(
            group.asg_name, group.instance_ids[0], group.hook_name, age=waited
        )
        return Scene(clients, sim, kubesim, group, sim.event_for(token))

    return build


def _node(kubesim: KubeSim, name: str) -> None:
    kubesim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})


# --- the deadline: the drain's own, within what Auto Scaling allows ----------------------


def _event(load_event: Callable[[str], dict[str, Any]], time_text: str) -> LifecycleEvent:
    raw = load_event("terminate")
    raw["time"] = time_text
    parsed = parse_event(raw)
    assert isinstance(parsed, LifecycleEvent)
    return parsed


def _hook(global_timeout: int | None, heartbeat_timeout: int = 600) -> aws.HookInfo:
    return aws.HookInfo("drain", "eks-workers", heartbeat_timeout, "ABANDON", "", global_timeout)


@pytest.mark.parametrize(
    ("waited", "hook", "expected_in", "source"),
    [
        # The hook allows more than DRAIN_TIMEOUT_SECONDS: the setting decides.
        (0, _hook(172800), 3600, "DRAIN_TIMEOUT_SECONDS (3600 s)"),
        # The hook allows less: its GlobalTimeout, less the margin, decides.
        (0, _hook(1800), 1740, "lifecycle hook GlobalTimeout (1800 s) minus 60 s margin"),
        # ... counted from when the instance began to wait, not from the drain's start.
        (1000, _hook(1800), 740, "lifecycle hook GlobalTimeout (1800 s) minus 60 s margin"),
        # The setting counts from then too: an event delivered again (Lambda's retry
        # after a crash, a duplicate) keeps the first delivery's deadline.
        (1000, _hook(172800), 2600, "DRAIN_TIMEOUT_SECONDS (3600 s)"),
        # No GlobalTimeout in the answer: AWS's rule, 100 x HeartbeatTimeout.
        (
            0,
            _hook(None, heartbeat_timeout=30),
            2940,
            "lifecycle hook GlobalTimeout (3000 s, 100 x HeartbeatTimeout) minus 60 s margin",
        ),
        # A deadline already behind: the timeout policy applies at once.
        (2000, _hook(1800), -260, "lifecycle hook GlobalTimeout (1800 s) minus 60 s margin"),
    ],
)
def test_effective_deadline__the_earlier_of_the_drain_timeout_and_the_hooks_limit(
    load_event: Callable[[str], dict[str, Any]],
    waited: float,
    hook: aws.HookInfo,
    expected_in: float,
    source: str,
) -> None:
    event = _event(load_event, WAITED_AT)
    started_at = WAITED_AT_EPOCH + waited

    deadline = window.effective_deadline(started_at, event, hook, Settings())

    assert deadline == Deadline(started_at + expected_in, source)


@pytest.mark.parametrize(
    "time_text",
    [
        "yesterday",  # not RFC 3339: counted from the drain's start
        "2026-11-22T03:15:30Z",  # after the drain began (clock skew): from its start too
    ],
)
def test_effective_deadline__unusable_event_time__counts_from_the_drain_start(
    load_event: Callable[[str], dict[str, Any]], time_text: str
) -> None:
    event = _event(load_event, time_text)

    deadline = window.effective_deadline(WAITED_AT_EPOCH, event, _hook(1800), Settings())

    assert deadline.at == WAITED_AT_EPOCH + 1740


def test_effective_deadline__margin_is_the_setting(
    load_event: Callable[[str], dict[str, Any]],
) -> None:
    event = _event(load_event, WAITED_AT)
    settings = Settings(global_timeout_margin_seconds=300)

    deadline = window.effective_deadline(WAITED_AT_EPOCH, event, _hook(1800), settings)

    assert deadline == Deadline(
        WAITED_AT_EPOCH + 1500, "lifecycle hook GlobalTimeout (1800 s) minus 300 s margin"
    )


# --- the deadline window's arithmetic, over every timing ---------------------------------

PROPERTIES = hypothesis.settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
timeouts = st.integers(min_value=1, max_value=172800)
margins = st.integers(min_value=0, max_value=3600)


@PROPERTIES
@given(
    remaining=st.floats(min_value=0.0, max_value=900.0, allow_nan=False),
    margin=st.floats(min_value=0.0, max_value=900.0, allow_nan=False),
)
def test_work_time__within_the_invocation_and_never_without_progress(
    remaining: float, margin: float
) -> None:
    work = window.work_time(remaining, margin)

    assert work <= remaining, "never past the invocation's own time"
    assert work >= min(remaining / 2, window.MIN_WORK_SECONDS), "a few seconds of progress"
    if remaining - margin >= window.MIN_WORK_SECONDS:
        assert work == remaining - margin, "the margin kept for the hand-over"


@PROPERTIES
@given(
    waited=st.integers(min_value=0, max_value=2 * 86400),
    later=st.integers(min_value=0, max_value=86400),
    timeout=timeouts,
    global_timeout=st.integers(min_value=30, max_value=172800),
    margin=margins,
)
def test_effective_deadline__every_delivery_of_one_action__the_same_earlier_of_the_two_limits(
    load_event: Callable[[str], dict[str, Any]],
    waited: int,
    later: int,
    timeout: int,
    global_timeout: int,
    margin: int,
) -> None:
    event = _event(load_event, WAITED_AT)
    settings = Settings(drain_timeout_seconds=timeout, global_timeout_margin_seconds=margin)
    hook = _hook(global_timeout)

    first = window.effective_deadline(WAITED_AT_EPOCH + waited, event, hook, settings)
    again = window.effective_deadline(WAITED_AT_EPOCH + waited + later, event, hook, settings)

    assert first == again, "a hand-over or a retry keeps the first delivery's deadline"
    assert first.at == WAITED_AT_EPOCH + min(timeout, global_timeout - margin)


@PROPERTIES
@given(skew=st.integers(min_value=1, max_value=86400), timeout=timeouts, margin=margins)
def test_effective_deadline__event_time_after_the_start__counts_from_the_start(
    load_event: Callable[[str], dict[str, Any]], skew: int, timeout: int, margin: int
) -> None:
    event = _event(load_event, WAITED_AT)
    started_at = WAITED_AT_EPOCH - skew  # the writer's clock ahead of this invocation's
    settings = Settings(drain_timeout_seconds=timeout, global_timeout_margin_seconds=margin)

    deadline = window.effective_deadline(started_at, event, _hook(172800), settings)

    assert deadline.at == started_at + min(timeout, 172800 - margin), "later, never earlier"


def test_drain__hook_limit_shorter_than_drain_timeout__deadline_shortened_and_named(
    scene_for: Callable[..., Scene],
) -> None:
    scene = scene_for(global_timeout=1800, waited=600)
    waited_at = scene.event.waiting_since
    assert waited_at is not None

    # No node in the cluster: the drain ends at once, its deadline decided.
    run = scene.drain(Settings(), FakeClock(time.time()))

    assert run.result == Outcome.NO_NODE
    assert run.deadline == Deadline(
        waited_at + 1740, "lifecycle hook GlobalTimeout (1800 s) minus 60 s margin"
    )


# --- a hand-over's claim never sets the deadline ----------------------------------------


def _handed_over(scene: Scene, handover: Handover) -> LifecycleEvent:
    event = parse_event(with_handover(scene.raw_event, handover))
    assert isinstance(event, LifecycleEvent), event
    return event


def test_drain__hand_over_claiming_an_earlier_start__deadline_from_the_event(
    scene_for: Callable[..., Scene],
) -> None:
    scene = scene_for()
    waited_at = scene.event.waiting_since
    assert waited_at is not None
    # Within the clock skew a hand-over may show, but before the event itself.
    event = _handed_over(scene, Handover(started_at=waited_at - 250, handovers=2, heartbeats=5))

    run = scene.drain(Settings(drain_timeout_seconds=3600), FakeClock(time.time()), event=event)

    assert run.result == Outcome.NO_NODE
    assert run.deadline == Deadline(waited_at + 3600, "DRAIN_TIMEOUT_SECONDS (3600 s)")


def _guarded_pod(scene: Scene) -> str:
    """A pod on the instance's node that its budget never lets go."""
    from testbed import workloads as w
    from testbed.cluster import Cluster
    from testbed.world import pods_on, wait_until

    node = scene.node_name
    _node(scene.kubesim, node)
    scene.kubesim.apply(
        [
            w.pod("guarded", node_name=node, labels={"app": "guarded"}),
            w.budget("guard", {"app": "guarded"}, max_unavailable=0),
        ]
    )
    cluster = Cluster.of_kubesim(scene.kubesim)
    wait_until(lambda: pods_on(cluster, node)[0]["status"].get("phase") == "Running")
    return node


def test_drain__its_action_gone__no_hand_over__its_end_says_so(
    scene_for: Callable[..., Scene],
) -> None:
    """The lifecycle action is gone while the drain runs (completed by hand, or timed
    out): the heartbeat sees it. A run cut by its invocation's time still handed
    over, and the next invocations drained (a warm pool's stopped node evicted, then
    forced) for an action nobody waits on, up to its deadline. It ends there,
    timed out, saying why: the instance goes whatever the drain does."""
    scene = scene_for()
    _guarded_pod(scene)
    scene.sim.expire_action(scene.event.instance_id)
    short = Invocation(remaining_seconds=lambda: 4.0, function_arn="arn:aws:lambda:x")

    run = scene.drain(Settings(), time.time, invocation=short)

    assert run.result == Outcome.TIMED_OUT, run
    assert run.handover is None and run.action_gone
    assert "the lifecycle action is gone" in run.message, run.message
    assert "no invocation goes on with the drain" in run.message, run.message
    node = scene.kubesim.get("Node", run.node)
    record = json.loads(node["metadata"]["annotations"][PROGRESS_ANNOTATION])
    assert record["phase"] == "timed_out", "its record said draining, to its deadline"


def test_drain__its_action_gone_mid_drain__the_last_beat_finds_it__record_ended(
    scene_for: Callable[..., Scene],
) -> None:
    """The action goes while the drain runs, after the ticker's first beat: the beat
    made as the drain hands over is the one that finds it gone. The record was ended
    only on what the ticker had seen, so it stayed draining to the deadline."""
    scene = scene_for()
    _guarded_pod(scene)
    expiry = threading.Timer(1.0, scene.sim.expire_action, args=(scene.event.instance_id,))
    expiry.start()
    short = Invocation(remaining_seconds=lambda: 4.0, function_arn="arn:aws:lambda:x")

    try:
        run = scene.drain(Settings(), time.time, invocation=short)
    finally:
        expiry.cancel()

    assert run.result == Outcome.TIMED_OUT and run.action_gone, run
    node = scene.kubesim.get("Node", run.node)
    record = json.loads(node["metadata"]["annotations"][PROGRESS_ANNOTATION])
    assert record["phase"] == "timed_out", record


def test_drain__hand_overs_under_force__forged_start_never_brings_the_force_forward(
    scene_for: Callable[..., Scene],
) -> None:
    scene = scene_for()
    node = _guarded_pod(scene)
    waited_at = scene.event.waiting_since
    assert waited_at is not None
    settings = Settings(timeout_policy=TimeoutPolicy.FORCE, drain_timeout_seconds=60)
    # Each invocation drains 2 s, then hands over.
    short = Invocation(remaining_seconds=lambda: 4.0, function_arn="arn:aws:lambda:x")

    first = scene.drain(settings, time.time, invocation=short)
    assert first.result == Outcome.HANDED_OVER, first.message
    assert first.handover is not None and first.deadline is not None
    record = scene.kubesim.get("Node", node)["metadata"]["annotations"][PROGRESS_ANNOTATION]
    assert f'"trigger": "{TERMINATE_HOOK_TRIGGER}"' in record
    assert f'"until": {int(first.deadline.at)}' in record

    # The hand-over the drain wrote: the same deadline.
    second = scene.drain(
        settings, time.time, event=_handed_over(scene, first.handover), invocation=short
    )
    assert second.result == Outcome.HANDED_OVER, second.message
    assert second.deadline == first.deadline

    # A forged one claims the drain began before its event: its deadline long past,
    # the guarded pod force-deleted at once, before.
    forged = _handed_over(scene, Handover(started_at=waited_at - 250, handovers=3, heartbeats=0))
    third = scene.drain(settings, time.time, event=forged, invocation=short)

    assert third.result == Outcome.HANDED_OVER, third.message
    assert third.deadline is not None and third.deadline.at == first.deadline.at
    assert third.report is not None and third.report.forced == 0
    assert scene.kubesim.get("Pod", "guarded", "default") is not None


# --- the result of each report -----------------------------------------------------------


DEADLINE = Deadline(0.0, "lifecycle hook GlobalTimeout (1800 s) minus 60 s margin")


@pytest.mark.parametrize(
    ("report", "result", "message"),
    [
        (DrainReport("n", Outcome.DRAINED), Outcome.DRAINED, ""),
        (DrainReport("n", Outcome.NO_NODE), Outcome.NO_NODE, ""),
        (DrainReport("n", Outcome.HANDED_OVER), Outcome.HANDED_OVER, ""),
        (DrainReport("n", Outcome.DRY_RUN), Outcome.DRY_RUN, ""),
        (
            DrainReport("n", Outcome.FAILED, stopped_by="RBAC denied 'create' on 'pods/eviction'"),
            Outcome.FAILED,
            "RBAC denied 'create' on 'pods/eviction'",
        ),
        (
            DrainReport("n", Outcome.DRAINED, errors=["shop/db: more than one budget"]),
            Outcome.DRAINED,
            "shop/db: more than one budget",
        ),
        (
            DrainReport(
                "n", Outcome.TIMED_OUT, left={"shop/web-1": "PodDisruptionBudget shop/web"}
            ),
            Outcome.TIMED_OUT,
            "drain timed out at its deadline, lifecycle hook GlobalTimeout (1800 s) minus "
            "60 s margin (TIMEOUT_POLICY=continue): PodDisruptionBudget shop/web: shop/web-1",
        ),
        (
            DrainReport("n", Outcome.TIMED_OUT, left={}, forced=2),
            Outcome.TIMED_OUT,
            "drain timed out at its deadline, lifecycle hook GlobalTimeout (1800 s) minus "
            "60 s margin (TIMEOUT_POLICY=force): nothing left on the node; "
            "force-deleted 2 pods",
        ),
    ],
)
def test_result_for__each_outcome__its_result_and_message(
    report: DrainReport, result: Outcome, message: str
) -> None:
    policy = "TIMEOUT_POLICY=force" if report.forced else "TIMEOUT_POLICY=continue"
    assert runner.result_for(report, DEADLINE, policy) == (result, message)


def test_result_for__covers_every_outcome() -> None:
    for outcome in Outcome:
        runner.result_for(DrainReport("n", outcome), DEADLINE, "TIMEOUT_POLICY=continue")


@pytest.mark.parametrize(
    ("options", "policy", "said"),
    [
        (DrainOptions(trigger="terminate-hook"), "continue", "TIMEOUT_POLICY=continue"),
        (DrainOptions(trigger="terminate-hook"), "abandon", "TIMEOUT_POLICY=abandon"),
        (
            DrainOptions(trigger="terminate-hook", force_on_timeout=True),
            "force",
            "TIMEOUT_POLICY=force",
        ),
        # EC2 fixes the deadline: its drain deletes what is held, whatever the policy.
        (
            DrainOptions(
                trigger="spot-interruption", force_on_timeout=True, fit_grace_to_deadline=True
            ),
            "continue",
            "EC2 acts then: pods still held were deleted, each with the grace left",
        ),
        # A late event's drain (the instance still runs): nothing deleted, whatever the policy.
        (
            DrainOptions(trigger="state-change"),
            "force",
            "no lifecycle action: nothing deleted past its budget",
        ),
    ],
)
def test_deadline_policy__names_what_applied__never_continue_beside_a_deletion(
    options: DrainOptions, policy: str, said: str
) -> None:
    settings = Settings(timeout_policy=TimeoutPolicy(policy))

    assert runner.deadline_policy(options, settings) == said


# --- before a drain can start --------------------------------------------------------------


def test_asg_not_allowed__not_allowed__no_heartbeat(scene_for: Callable[..., Scene]) -> None:
    scene = scene_for()

    run = scene.drain(Settings(allowed_asgs=frozenset({"other-workers"})), FakeClock(time.time()))

    assert run.result == Result.NOT_ALLOWED
    assert "eks-workers is not in ALLOWED_ASGS (other-workers)" in run.message
    assert scene.sim.calls("heartbeat") == []


def _tag(scene: Scene, **tags: str) -> None:
    scene.clients.autoscaling.create_or_update_tags(
        Tags=[
            {
                "ResourceId": scene.group.asg_name,
                "ResourceType": "auto-scaling-group",
                "Key": key,
                "Value": value,
                "PropagateAtLaunch": False,
            }
            for key, value in tags.items()
        ]
    )


def test_asg_tagged_but_not_named__drained(scene_for: Callable[..., Scene]) -> None:
    scene = scene_for()
    _tag(scene, **{"eks-node-drainer/enabled": "true"})
    _node(scene.kubesim, scene.node_name)
    settings = Settings(
        cluster_name=CLUSTER,
        allowed_asgs=frozenset({"other-workers"}),
        asg_tag="eks-node-drainer/enabled=true",
    )

    run = scene.drain(settings, time.time)

    assert run.result == Outcome.DRAINED, run.message
    assert not admission.group_refused(settings, scene.clients.autoscaling, scene.group.asg_name)


@pytest.mark.parametrize(
    ("tags", "why"),
    [
        ({}, "not tagged eks-node-drainer/enabled=true"),
        ({"eks-node-drainer/enabled": "false"}, "not tagged eks-node-drainer/enabled=true"),
        (
            {"eks-node-drainer/enabled": "true", "eks:cluster-name": "staging"},
            "tagged for cluster staging, not prod",
        ),
    ],
    ids=["untagged", "other-value", "other-cluster"],
)
def test_asg_neither_named_nor_tagged__not_allowed__message_names_both(
    scene_for: Callable[..., Scene], tags: dict[str, str], why: str
) -> None:
    scene = scene_for()
    if tags:
        _tag(scene, **tags)
    settings = Settings(cluster_name=CLUSTER, asg_tag="eks-node-drainer/enabled=true")

    run = scene.drain(settings, FakeClock(time.time()))

    assert run.result == Result.NOT_ALLOWED
    assert run.message == (
        "Auto Scaling group eks-workers is not in ALLOWED_ASGS (none) and ASG_TAG "
        f"eks-node-drainer/enabled=true does not admit it ({why}); leaving its "
        "lifecycle action alone"
    )
    assert scene.sim.calls("heartbeat") == []


def test_no_cluster_anywhere__failed__says_where_to_name_it(
    scene_for: Callable[..., Scene],
) -> None:
    scene = scene_for(metadata=None)  # no metadata, no tag, no CLUSTER_NAME

    run = scene.drain(Settings(), FakeClock(time.time()))

    assert run.result == Outcome.FAILED
    assert "no cluster for Auto Scaling group eks-workers" in run.message
    assert "CLUSTER_NAME" in run.message


def test_cluster_from_setting__when_hook_and_tags_say_nothing(
    scene_for: Callable[..., Scene],
) -> None:
    scene = scene_for(metadata=None)

    run = scene.drain(Settings(cluster_name=CLUSTER), FakeClock(time.time()))

    assert (run.result, run.cluster) == (Outcome.NO_NODE, CLUSTER)


def test_cluster_from_a_hook_whose_metadata_names_its_stack__read_as_before(
    scene_for: Callable[..., Scene],
) -> None:
    from drainer.lifecycle.hooks import HookSpec

    stack = "arn:aws:cloudformation:us-east-1:123456789012:stack/eks-node-drainer/5b3f4c60"
    written = HookSpec.from_settings(Settings(cluster_name=CLUSTER, stack_id=stack))
    scene = scene_for(metadata=written.notification_metadata)

    run = scene.drain(Settings(), FakeClock(time.time()))  # no CLUSTER_NAME, no tag

    assert (run.result, run.cluster) == (Outcome.NO_NODE, CLUSTER), run.message


def test_no_node_for_the_instance__no_node(scene_for: Callable[..., Scene]) -> None:
    scene = scene_for()

    run = scene.drain(Settings(), FakeClock(time.time()))

    assert run.result == Outcome.NO_NODE
    assert f"no Kubernetes node for instance {scene.event.instance_id}" in run.message
    assert run.cluster == CLUSTER


# --- the API server failing: the whole drain again, paced by API_RETRY --------------------


def _failing(kubesim: KubeSim, status: int = 503, retry_after: float | None = None) -> None:
    fault: dict[str, Any] = {"kind": "status", "status": status, "path": ".*"}
    if retry_after is not None:
        fault["retry_after"] = retry_after
    kubesim.faults.add(Fault.from_json(fault))


def test_api_server_failing__retried_with_backoff__then_timed_out_naming_the_deadline(
    scene_for: Callable[..., Scene],
) -> None:
    scene = scene_for()
    _failing(scene.kubesim)
    clock = FakeClock(time.time())
    began = clock()

    run = scene.drain(Settings(drain_timeout_seconds=300), clock)

    assert run.result == Outcome.TIMED_OUT
    assert "the API server kept failing" in run.message
    assert "DRAIN_TIMEOUT_SECONDS (300 s)" in run.message
    assert clock.sleeps, "retried before giving up"
    for attempt, pause in enumerate(clock.sleeps):
        assert API_RETRY.base(attempt) / 2 <= pause <= API_RETRY.base(attempt)
    assert clock() <= began + 300, "never slept past the deadline"
    assert len(scene.kubesim.requests()) >= len(clock.sleeps) + 1


def test_api_server_throttling__never_retried_before_retry_after(
    scene_for: Callable[..., Scene],
) -> None:
    scene = scene_for()
    _failing(scene.kubesim, status=429, retry_after=50)
    clock = FakeClock(time.time())

    run = scene.drain(Settings(drain_timeout_seconds=300), clock)

    assert run.result == Outcome.TIMED_OUT
    assert clock.sleeps and all(pause >= 50 for pause in clock.sleeps)


def test_api_server_failing_past_the_hand_over__handed_over_from_the_same_start(
    scene_for: Callable[..., Scene],
) -> None:
    scene = scene_for()
    _failing(scene.kubesim)
    clock = FakeClock(time.time())
    began = clock()
    invocation = Invocation(remaining_seconds=lambda: 180.0, function_arn="arn:aws:lambda:x")

    run = scene.drain(Settings(handover_margin_seconds=60), clock, invocation=invocation)

    assert run.result == Outcome.HANDED_OVER
    assert run.handover is not None
    assert (run.handover.started_at, run.handover.handovers) == (began, 1)
    assert clock() <= began + 120, "handed over before the invocation's own deadline"


def test_fatal_error_before_the_drain__failed_at_once(scene_for: Callable[..., Scene]) -> None:
    scene = scene_for()
    _failing(scene.kubesim, status=403)

    run = scene.drain(Settings(), FakeClock(time.time()))

    assert run.result == Outcome.FAILED
    assert run.message


# --- through the engine -----------------------------------------------------------------


def test_empty_node__drained(scene_for: Callable[..., Scene]) -> None:
    scene = scene_for()
    _node(scene.kubesim, scene.node_name)

    run = scene.drain(Settings(), time.time)

    assert run.result == Outcome.DRAINED, run.message
    assert run.node == scene.node_name
    assert run.report is not None and run.report.outcome == Outcome.DRAINED


def test_hook_limit_cuts_the_drain__timed_out__message_names_the_hook_and_the_pod(
    scene_for: Callable[..., Scene],
) -> None:
    scene = scene_for(global_timeout=65)  # the deadline: 5 s after the instance began to wait
    _guarded_pod(scene)
    settings = Settings(timeout_policy=TimeoutPolicy.CONTINUE)

    run = scene.drain(settings, time.time)

    assert run.result == Outcome.TIMED_OUT, run.message
    assert "lifecycle hook GlobalTimeout (65 s) minus 60 s margin" in run.message
    assert "default/guarded" in run.message
    assert run.report is not None and set(run.report.left) == {"default/guarded"}


@pytest.mark.parametrize(
    ("code", "status", "ends"),
    [
        ("TooManyRequestsException", 429, False),  # Lambda's throttling: retried (a 5xx too)
        ("AccessDeniedException", 403, True),  # the role lacks lambda:InvokeFunction
    ],
)
def test_hand_over_refused__for_now_raised_for_lambda_to_retry__for_good_ends_the_drain(
    scene_for: Callable[..., Scene], code: str, status: int, ends: bool
) -> None:
    """A drain held by a budget past the invocation's time hands over; when Lambda's
    Invoke fails for now (throttled, a 5xx, after botocore's retries) the invocation
    raises as every other AWS call does, so that Lambda runs the event again while the
    hook's heartbeat timeout keeps the instance: the action is not ended with the pod
    still on it. Refused for good, the drain ends FAILED (FAILURE_RESULT)."""
    from botocore.exceptions import ClientError

    from drainer.errors import AwsError

    scene = scene_for()
    _guarded_pod(scene)
    invoke = boto3.Session(region_name=REGION).client("lambda")

    def refuse(**_: Any) -> None:
        error = {"Error": {"Code": code, "Message": "no"}, "ResponseMetadata": {}}
        error["ResponseMetadata"]["HTTPStatusCode"] = status
        raise ClientError(error, "Invoke")

    invoke.meta.events.register("before-parameter-build.lambda.Invoke", refuse)
    c = scene.clients
    clients = aws.AwsClients(c.ec2, c.autoscaling, c.eks, lambda: invoke)
    invocation = Invocation(  # half of the 2 s left to drain (window.work_time), then hand over
        remaining_seconds=lambda: 2.0, function_arn="arn:aws:lambda:us-east-1:1:function:f"
    )
    tools = Tools(Settings(handover_margin_seconds=60), clients, scene.kube)

    if ends:
        summary = scale_in.handle(scene.event, tools, invocation, raw_event=scene.raw_event)
        assert summary["result"] == Result.FAILED, summary
        assert "could not hand over to a new invocation" in summary["message"]
        assert [c["LifecycleActionResult"] for c in scene.sim.calls("complete")] == ["ABANDON"]
        return
    with pytest.raises(AwsError, match=f"asynchronous hand-over.*{code}"):
        scale_in.handle(scene.event, tools, invocation, raw_event=scene.raw_event)
    assert scene.sim.calls("complete") == [], "the instance let go with its pod still held"


def test_hand_over__a_heartbeat_just_before_it__the_gap_is_never_half_a_timeout_more(
    scene_for: Callable[..., Scene],
) -> None:
    """The ticker beats every half HeartbeatTimeout; the invocation it hands over to
    beats first after Lambda's queue, a start and its admission. With a 30 s timeout
    (15 s beats) a beat up to 15 s old at the hand-over left the action some 15 s for
    all that: a slow queue let Auto Scaling apply the hook's DefaultResult, the
    instance terminated with its pods still held. The hand-over beats first."""
    from botocore.awsrequest import AWSResponse

    scene = scene_for()
    _guarded_pod(scene)
    invoke = boto3.Session(region_name=REGION).client("lambda")
    invoked: list[float] = []

    def queued(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        invoked.append(time.time())  # Lambda's answer to an asynchronous Invoke
        return AWSResponse("https://lambda", 202, {}, None), {"StatusCode": 202}

    invoke.meta.events.register("before-call.lambda.Invoke", queued)
    c = scene.clients
    clients = aws.AwsClients(c.ec2, c.autoscaling, c.eks, lambda: invoke)
    invocation = Invocation(  # 2 s to drain (window.work_time), then hand over
        remaining_seconds=lambda: 4.0, function_arn="arn:aws:lambda:us-east-1:1:function:f"
    )
    tools = Tools(Settings(handover_margin_seconds=60), clients, scene.kube)

    summary = scale_in.handle(scene.event, tools, invocation, raw_event=scene.raw_event)

    assert summary["result"] == Result.HANDED_OVER, summary
    [handed_over] = invoked
    beats = [call["time"] for call in scene.sim.calls("heartbeat") if call["error"] is None]
    assert beats and handed_over - max(beats) < 0.5, (
        f"the last heartbeat came {handed_over - max(beats):.1f} s before the hand-over"
    )
    assert scene.sim.calls("complete") == []


STACK_A = "arn:aws:cloudformation:us-east-1:123456789012:stack/eks-node-drainer-prod/aaaa"
STACK_B = "arn:aws:cloudformation:us-east-1:123456789012:stack/eks-node-drainer-staging/bbbb"


@pytest.mark.parametrize(
    ("hook_cluster", "hook_stack", "why"),
    [
        # Stack A put the hook first on a group both stacks' ASG_TAG admit (no cluster
        # tag): its function drains the node; B's must not answer the action.
        (CLUSTER, STACK_A, f"was put by the stack {STACK_A}, not this one"),
        # ... nor drain a cluster it cannot read and ABANDON the action (B's role may
        # not describe A's cluster: moto knows no prod-a).
        ("prod-a", STACK_A, f"was put by the stack {STACK_A}, not this one"),
        # A 0.1.0 hook names only its cluster.
        (CLUSTER, "", f"names the cluster {CLUSTER}, not staging (CLUSTER_NAME)"),
    ],
)
def test_hook_of_another_deployment__its_action_left_alone(
    scene_for: Callable[..., Scene], hook_cluster: str, hook_stack: str, why: str
) -> None:
    from drainer.lifecycle.hooks import HookSpec

    put = Settings(cluster_name=hook_cluster, stack_id=hook_stack)
    scene = scene_for(metadata=HookSpec.from_settings(put).notification_metadata)
    _tag(scene, **{"eks-node-drainer/enabled": "true"})
    ours = Settings(
        cluster_name="staging", asg_tag="eks-node-drainer/enabled=true", stack_id=STACK_B
    )
    tools = Tools(ours, scene.clients, scene.kube, clock=FakeClock(time.time()))

    summary = scale_in.handle(scene.event, tools, None, raw_event=scene.raw_event)

    assert summary["result"] == Result.NOT_ALLOWED, summary
    assert why in summary["message"] and "leaving its lifecycle action alone" in summary["message"]
    assert scene.sim.calls("complete") == [] and scene.sim.calls("heartbeat") == []


@pytest.mark.parametrize("stack", [STACK_B, ""])
def test_hook_of_this_stack_or_of_no_stack__drained_as_before(
    scene_for: Callable[..., Scene], stack: str
) -> None:
    from drainer.lifecycle.hooks import HookSpec

    put = Settings(cluster_name=CLUSTER, stack_id=stack)
    scene = scene_for(metadata=HookSpec.from_settings(put).notification_metadata)

    run = scene.drain(Settings(cluster_name=CLUSTER, stack_id=STACK_B), FakeClock(time.time()))

    assert (run.result, run.cluster) == (Outcome.NO_NODE, CLUSTER), run.message


def _late_into_the_warm_pool(moto_aws: None, kubesim: KubeSim, back: bool) -> Scene:
    """A scale-in into the warm pool whose event reaches the function late (Lambda's
    queue keeps an event up to 6 h while the function is throttled): meanwhile the
    action timed out (DefaultResult CONTINUE) and, when `back`, the instance came out
    of the pool, InService, its node Ready and running a pod again."""
    from testbed import workloads as w

    clients = aws.make_clients(boto3.Session(region_name=REGION))
    group = create_node_group(
        clients.ec2, clients.autoscaling, asg_name="eks-workers", size=2, hook_name="drain",
        heartbeat_timeout=600, default_result="CONTINUE", cluster_name=CLUSTER,
        notification_metadata='{"cluster_name": "prod"}',
    )  # fmt: skip
    clients.autoscaling.put_warm_pool(
        AutoScalingGroupName="eks-workers",
        PoolState="Stopped",
        InstanceReusePolicy={"ReuseOnScaleIn": True},
    )
    sim = AwsSim(region=REGION)
    sim.point_cluster_at(CLUSTER, kubesim.url, kubesim.ca_data)
    (late,) = sim.scale_in("eks-workers")
    instance = late["detail"]["EC2InstanceId"]
    sim.expire_action(instance)
    if back:
        assert sim.scale_out_from_warm_pool("eks-workers")[0] == instance
    scene = Scene(clients, sim, kubesim, group, late)
    node = scene.node_name
    bare = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
    kubesim.apply([bare, w.pod("web", node_name=node, owner="ReplicaSet")])
    return scene


def test_late_scale_in_into_the_warm_pool__instance_back_in_service__node_left_alone(
    moto_aws: None, kubesim: KubeSim
) -> None:
    scene = _late_into_the_warm_pool(moto_aws, kubesim, back=True)
    assert scene.event.into_warm_pool
    tools = Tools(Settings(cluster_name=CLUSTER), scene.clients, scene.kube, sleep=_no_sleep)

    summary = scale_in.handle(scene.event, tools, None, raw_event=scene.raw_event)

    assert summary["result"] == Result.STALE, summary
    assert "is InService again: the event is stale" in summary["message"]
    assert summary["lifecycle_result"] == "none" and scene.sim.calls("complete") == []
    node = kubesim.get("Node", scene.node_name)
    assert not node["spec"].get("unschedulable"), "an InService node cordoned by a stale event"
    assert kubesim.get("Pod", "web", namespace="default") is not None


def test_late_scale_in__action_gone__instance_not_in_service__drained_as_before(
    moto_aws: None, kubesim: KubeSim
) -> None:
    """Only both signals make an event stale: an action gone with its instance still
    in the pool (or terminating) drains as it did."""
    scene = _late_into_the_warm_pool(moto_aws, kubesim, back=False)
    tools = Tools(Settings(cluster_name=CLUSTER), scene.clients, scene.kube)

    summary = scale_in.handle(scene.event, tools, None, raw_event=scene.raw_event)

    assert summary["result"] == Result.DRAINED, summary
    assert kubesim.get("Node", scene.node_name)["spec"].get("unschedulable") is True


def test_late_event_past_its_deadline__action_gone__instance_in_a_new_action__left_alone(
    moto_aws: None, kubesim: KubeSim
) -> None:
    """A scale-in into the warm pool whose event comes hours late, after its deadline:
    meanwhile its action timed out, the instance came back and was scaled in again
    (a new action, its own token and its own event). The late event's deadline is
    past, and under TIMEOUT_POLICY=force a drain on it force-deleted every pod at
    once, budgets bypassed, on an instance whose own action had barely begun. Its
    action is gone (the heartbeat with its token is refused): the event is stale,
    the node left to the new action's own drain, that action left unanswered."""
    scene = _late_into_the_warm_pool(moto_aws, kubesim, back=True)
    instance = scene.event.instance_id
    token = scene.sim.begin_termination("eks-workers", instance, "drain")
    settings = Settings(cluster_name=CLUSTER, timeout_policy=TimeoutPolicy.FORCE)
    hours_later = FakeClock(time.time() + 2 * 3600)
    tools = Tools(settings, scene.clients, scene.kube, clock=hours_later, sleep=_no_sleep)

    summary = scale_in.handle(scene.event, tools, None, raw_event=scene.raw_event)

    assert summary["result"] == Result.STALE, summary
    assert "came after its deadline" in summary["message"], summary["message"]
    assert summary["lifecycle_result"] == "none" and scene.sim.calls("complete") == []
    assert kubesim.get("Pod", "web", namespace="default") is not None, "a pod force-deleted"
    assert not kubesim.get("Node", scene.node_name)["spec"].get("unschedulable")
    (current,) = [a for a in scene.sim.actions() if a["token"] == token]
    assert current["closed_at"] is None, "the new action was answered by the old event"


def test_late_event_before_its_deadline__action_gone__instance_in_a_new_action__left_alone(
    moto_aws: None, kubesim: KubeSim
) -> None:
    """The same, the event twenty minutes late: its deadline (DRAIN_TIMEOUT_SECONDS from
    its time) still ahead, earlier than the new action's. It drained to it beside the
    new action's drain, and at it TIMEOUT_POLICY=force deleted the pods a budget held,
    the new action's drain still within its time; its end line and notice spoke of an
    action gone. The instance waits in a lifecycle action and the event's is gone:
    the event is stale."""
    scene = _late_into_the_warm_pool(moto_aws, kubesim, back=True)
    instance = scene.event.instance_id
    token = scene.sim.begin_termination("eks-workers", instance, "drain")
    settings = Settings(cluster_name=CLUSTER, timeout_policy=TimeoutPolicy.FORCE)
    twenty_minutes_on = FakeClock(time.time() + 1200)
    tools = Tools(settings, scene.clients, scene.kube, clock=twenty_minutes_on, sleep=_no_sleep)

    summary = scale_in.handle(scene.event, tools, None, raw_event=scene.raw_event)

    assert summary["result"] == Result.STALE, summary
    assert "waits in a new action of its hook (Terminating:Wait)" in summary["message"], summary
    assert summary["lifecycle_result"] == "none" and scene.sim.calls("complete") == []
    assert not kubesim.get("Node", scene.node_name)["spec"].get("unschedulable")
    (current,) = [a for a in scene.sim.actions() if a["token"] == token]
    assert current["closed_at"] is None, "the new action was answered by the old event"


def test_late_event__action_gone__instance_held_by_another_tools_hook__drained_what_can_be(
    moto_aws: None, kubesim: KubeSim
) -> None:
    """The same late event, the instance held this time by another tool's terminate
    hook, not by a new action of ours: it goes when that hook lets it, so its node is
    drained, as before (not stale)."""
    scene = _late_into_the_warm_pool(moto_aws, kubesim, back=True)
    instance = scene.event.instance_id
    scene.clients.autoscaling.put_lifecycle_hook(
        AutoScalingGroupName="eks-workers",
        LifecycleHookName="other-tool",
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
        HeartbeatTimeout=600,
    )
    scene.sim.begin_termination("eks-workers", instance, "other-tool")
    twenty_minutes_on = FakeClock(time.time() + 1200)
    tools = Tools(
        Settings(cluster_name=CLUSTER), scene.clients, scene.kube, clock=twenty_minutes_on
    )

    summary = scale_in.handle(scene.event, tools, None, raw_event=scene.raw_event)

    assert summary["result"] != Result.STALE, summary
    assert kubesim.get("Node", scene.node_name)["spec"].get("unschedulable"), summary


def test_event_past_its_deadline__action_alive__drained_with_its_timeout_policy(
    moto_aws: None, kubesim: KubeSim
) -> None:
    """An event that comes after its deadline while its own action is still alive (a
    retry after a crash, just past DRAIN_TIMEOUT_SECONDS): the drain is the action's,
    and TIMEOUT_POLICY applies at once, as before."""
    scene = _late_into_the_warm_pool(moto_aws, kubesim, back=False)
    instance = scene.event.instance_id
    scene.sim.scale_out_from_warm_pool("eks-workers")
    token = scene.sim.begin_termination("eks-workers", instance, "drain")
    event = parse_event(scene.sim.event_for(token))
    assert isinstance(event, LifecycleEvent)
    settings = Settings(
        cluster_name=CLUSTER, timeout_policy=TimeoutPolicy.FORCE, drain_timeout_seconds=60
    )
    later = FakeClock(time.time() + 120)
    tools = Tools(settings, scene.clients, scene.kube, clock=later, sleep=_no_sleep)

    summary = scale_in.handle(event, tools, None, raw_event=scene.sim.event_for(token))

    assert summary["result"] == Result.TIMED_OUT, summary
    assert kubesim.get("Node", scene.node_name)["spec"].get("unschedulable") is True


def test_into_warm_pool_timed_out_launch_hook_off__end_line_still_says_to_release(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """docs/operations.md (Warm pools): without the launch hook nothing releases the
    node, and "the drain's end line and its warning line say so". The advice was put
    in with `setdefault("message", ...)`: any run with a message of its own (every
    timed_out run, a drained run with errors) kept that one, and the end line, the
    notice built from it and the warning line never said the node stays cordoned
    until someone runs `release`."""
    timed_out = (
        "drain timed out at its deadline, DRAIN_TIMEOUT_SECONDS (3600 s) "
        "(TIMEOUT_POLICY=continue): 1 pod left"
    )
    run = Run(Result.TIMED_OUT, timed_out, cluster="prod", node="ip-10-0-0-1.ec2.internal")
    summary = {"result": "timed_out", "message": run.message}

    with caplog.at_level(logging.WARNING, logger="drainer.lifecycle.scale_in"):
        said = scale_in._into_warm_pool(summary, run, Settings(launch_hook=False))

    assert said["message"].startswith(timed_out + "; "), "the run's own message kept, first"
    assert "`eks-node-drainer release --node ip-10-0-0-1.ec2.internal`" in said["message"], said
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert (
        warning.startswith("LAUNCH_HOOK is off")
        and "`eks-node-drainer release --node ip-10-0-0-1.ec2.internal`" in warning
    )


@pytest.mark.parametrize(
    ("metadata", "refused"),
    [
        (json.dumps({"cluster_name": "prod", "stack_id": STACK_B}), ""),
        (json.dumps({"cluster_name": "prod", "stack_id": STACK_A}), f"stack {STACK_A}"),
        ('{"cluster_name": "prod-a"}', "names the cluster prod-a, not prod (CLUSTER_NAME)"),
        ('{"cluster_name": "prod"}', ""),
        # A hook made by hand (CREATE_LIFECYCLE_HOOKS=false) may hold a plain name,
        # read as the drain reads it (it would be drained against that cluster), or
        # text that names no cluster: the group decides, as before.
        ("staging", "names the cluster staging, not prod (CLUSTER_NAME)"),
        (" prod ", ""),
        ("drain before terminate", ""),
        ("", ""),
    ],
)
def test_hook_refused__only_json_metadata_naming_another_stack_or_cluster(
    load_event: Callable[[str], dict[str, Any]], metadata: str, refused: str
) -> None:
    hook = aws.HookInfo("drain", "eks-workers", 600, "CONTINUE", metadata, None)
    raw = load_event("terminate")
    raw["detail"].pop("NotificationMetadata", None)
    event = parse_event(raw)
    assert isinstance(event, LifecycleEvent)
    settings = Settings(cluster_name=CLUSTER, stack_id=STACK_B)

    why = admission.hook_refused(settings, event, hook)

    assert (refused in why and bool(why)) if refused else why == "", why


def test_this_stacks_hook_on_a_group_no_longer_tagged__said_with_the_fix(
    scene_for: Callable[..., Scene], caplog: pytest.LogCaptureFixture
) -> None:
    """A group tagged, hooked by the sync, then untagged: the function may no longer
    delete the hook (its role acts on tagged groups only), so each termination waits
    the hook's HeartbeatTimeout, undrained. It was an INFO line naming the group;
    the hook is this stack's own, and the way out is the operator's."""
    from drainer.lifecycle.hooks import HookSpec

    stack = "arn:aws:cloudformation:us-east-1:123456789012:stack/eks-node-drainer/5b3f4c60"
    settings = Settings(
        cluster_name=CLUSTER, asg_tag="eks-node-drainer/enabled=true", stack_id=stack
    )
    scene = scene_for(metadata=HookSpec.from_settings(settings).notification_metadata)

    with caplog.at_level(logging.INFO, logger="drainer.lifecycle"):
        run = scene.drain(settings, FakeClock(time.time()))

    assert run.result == Result.NOT_ALLOWED
    assert "its hook drain is this stack's" in run.message
    assert "each termination of the group waits its HeartbeatTimeout" in run.message
    assert "aws autoscaling delete-lifecycle-hook --auto-scaling-group-name eks-workers" in (
        run.message
    )
    assert "--lifecycle-hook-name drain --region " in run.message
    assert any(
        r.levelno == logging.WARNING and "this stack's" in r.getMessage() for r in caplog.records
    )


class _FollowedDrainEnds:
    """The hook's sleep while it waits for a live drain: the first time it sleeps, the
    followed drain's invocation records its end, timed_out (an empty node here: the
    pods it waited for went since, their budget free again)."""

    def __init__(self, scene: Scene, clock: FakeClock, trigger: str) -> None:
        self.scene, self.clock, self.trigger = scene, clock, trigger
        self.ended = False

    def __call__(self, seconds: float) -> None:
        if not self.ended:
            self.ended = True
            sim, node = self.scene.kubesim, self.scene.node_name
            current = sim.get("Node", node)
            current["metadata"]["annotations"][PROGRESS_ANNOTATION] = progress_value(
                str(Outcome.TIMED_OUT), frozenset({"cordon", "label"}), trigger=self.trigger
            )
            sim.api.update(sim.resource_for(current), current, "", node)
        self.clock.sleep(seconds)


@pytest.mark.parametrize(
    ("own_deadline", "drains_on"),
    [
        # A late warning (EC2's moment passed, the instance still running): its drain
        # has 120 s of its own, which EC2 does not keep.
        (True, True),
        # A warning on time: its deadline is EC2's; the instance goes then.
        (False, False),
    ],
)
def test_live_spot_drain_timed_out__hook_drains_on_only_past_a_deadline_of_its_own(
    scene_for: Callable[..., Scene], own_deadline: bool, drains_on: bool
) -> None:
    """A spot warning that comes after EC2's moment, its instance still running, is
    drained with 120 s of its own, nothing forced (lifecycle/late.py). Its drain timed
    out with the budget-held pods on the node, and the terminate hook's event that
    followed (the group scaling in the instance EC2 had not taken) took that timeout
    as its own, as if EC2 had taken the instance: CONTINUE with the pods its own drain,
    an hour from its deadline, would have waited for."""
    scene = scene_for()
    node = scene.node_name
    clock = FakeClock(time.time())
    now = clock()
    spot = str(Ec2Kind.INTERRUPTION)
    bare: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
    patch, _ = cordon_patch(bare, now - 60, trigger=spot, until=now + 60, own_deadline=own_deadline)
    scene.kubesim.apply(
        {**bare, "metadata": {"name": node, **patch["metadata"]}, "spec": {"unschedulable": True}}
    )
    sleep = _FollowedDrainEnds(scene, clock, spot)
    settings = Settings(drain_timeout_seconds=3600, timeout_policy=TimeoutPolicy.CONTINUE)
    tools = Tools(
        settings, scene.clients, scene.kube, clock=clock, sleep=sleep, rng=random.Random(7)
    )

    run = scale_in.drain_instance(scene.event, tools, None)

    assert sleep.ended, "the hook waited for the spot drain"
    expected = Result.DRAINED if drains_on else Result.TIMED_OUT
    assert run.result == expected, run.message


def test_live_rebalance_drain_timed_out_at_its_invocations_end__hook_with_time_left_drains_itself(
    scene_for: Callable[..., Scene], caplog: pytest.LogCaptureFixture
) -> None:
    """RebalanceAction=drain: the rebalance drain's deadline is cut to its one
    invocation (ec2_events.drain), so it records `timed_out` after at most ~14 min.
    The terminate hook's event for the same instance (Capacity Rebalancing terminates
    the at-risk instance) waited for it and took that `timed_out` as its own, though
    its own deadline (DRAIN_TIMEOUT_SECONDS from its event) was most of an hour away:
    under TIMEOUT_POLICY=continue it answered CONTINUE and the instance was terminated
    with the pods the budgets held, which its own drain would have waited for."""
    scene = scene_for()
    node = scene.node_name
    clock = FakeClock(time.time())
    now = clock()
    rebalance = str(Ec2Kind.REBALANCE)
    bare: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
    patch, _ = cordon_patch(bare, now - 60, trigger=rebalance, until=now + 300)
    scene.kubesim.apply(
        {**bare, "metadata": {"name": node, **patch["metadata"]}, "spec": {"unschedulable": True}}
    )
    sleep = _FollowedDrainEnds(scene, clock, rebalance)  # its invocation ran out of time
    settings = Settings(drain_timeout_seconds=3600, timeout_policy=TimeoutPolicy.CONTINUE)
    tools = Tools(
        settings, scene.clients, scene.kube, clock=clock, sleep=sleep, rng=random.Random(7)
    )

    with caplog.at_level(logging.INFO, logger="drainer.lifecycle.live"):
        run = scale_in.drain_instance(scene.event, tools, None)

    assert sleep.ended, "the hook waited for the rebalance drain"
    assert run.deadline is not None and run.deadline.at - clock() > 3000, "an hour left"
    assert run.result == Result.DRAINED, (
        f"the hook ended {run.result} {run.deadline.at - clock():.0f} s before its own "
        f"deadline, answering {lifecycle_result(run.result, settings)}: {run.message}"
    )
    assert "timed out at its own deadline" in caplog.text and "draining here" in caplog.text


# --- the drain as a whole, across hand-overs ---------------------------------------------


@dataclass
class _Beats:
    beats: int
    gone: bool = False


def test_drain_handed_over__the_end_counts_every_invocation_s_evictions() -> None:
    """A drain evicts 40 pods, hands over, and its next invocation evicts 3 more: the
    end line keeps the invocation's own `evicted` (3: the PodsEvicted metric) and
    says the drain's `evicted_total` (43), which the notice's "Pods evicted" tells,
    beside the total Duration."""
    began = time.time() - 3600
    first = Run(Result.HANDED_OVER, report=DrainReport("n1", Outcome.INTERRUPTED, evicted=40))
    event = SimpleNamespace(handover=None)  # the first invocation's: no hand-over yet
    handed = scale_in._with_heartbeat(first, _Beats(4), event, began).handover  # type: ignore[arg-type]
    assert handed is not None
    payload = json.loads(json.dumps(with_handover({"time": WAITED_AT}, handed)))
    last = Run(Result.DRAINED, report=DrainReport("n1", evicted=3), heartbeats=1)

    claim = parse_handover(payload[HANDOVER_KEY], None, time.time())
    assert claim is not None
    summary = ending.across_invocations(
        {"result": "drained", "evicted": 3, "seconds": 20.0}, last, claim
    )

    assert (summary["evicted"], summary["evicted_total"]) == (3, 43)
    subject = SimpleNamespace(instance_id="i-1", asg_name="g")
    _, text, _ = end_notice(subject, summary)
    assert "Pods evicted: 43." in text, text
