"""The launch hook through launch.handle, on moto and kubesim: a duplicate (or late)
delivery of a launch event whose lifecycle action was answered already, and the
advice a notice gives for a node cordoned by someone else, fresh or back from the
warm pool."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from realapi import StaticToken
from support.clock import FakeClock
from support.metrics import emf_lines

from awssim import AwsSim
from awssim.world import create_node_group
from drainer import aws
from drainer.errors import AwsError
from drainer.k8s.client import RetryPolicy
from drainer.k8s.cordon import PROGRESS_ANNOTATION
from drainer.k8s.kube import Kube
from drainer.lifecycle import events, events_hook, launch, launch_release
from drainer.lifecycle.job import Tools
from drainer.lifecycle.settings import Settings
from kubesim import KubeSim
from kubesim.faults import Fault
from kubesim.testing import eventually
from testbed import workloads as objects

REGION = "us-east-1"
CLUSTER = "prod"
HOOK = "eks-node-drainer-launch"
TOPIC = "arn:aws:sns:us-east-1:123456789012:drains"


class RecordingSns:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def publish(self, **request: Any) -> dict[str, str]:
        self.sent.append(request)
        return {"MessageId": "1"}


@dataclass
class Launch:
    """A new instance in Pending:Wait on the launch hook (moto), its cluster
    (kubesim), and what the function publishes."""

    sim: AwsSim
    kubesim: KubeSim
    clients: aws.AwsClients
    sns: RecordingSns
    raw_event: dict[str, Any]
    retry: RetryPolicy | None = None

    @property
    def event(self) -> events_hook.LifecycleEvent:
        parsed = events.parse_event(self.raw_event)
        assert isinstance(parsed, events_hook.LifecycleEvent)
        return parsed

    @property
    def node(self) -> str:
        return aws.describe_instance(self.clients.ec2, self.event.instance_id).private_dns_name

    def kube(self, *_: object) -> Kube:
        client = Kube.for_cluster(
            self.kubesim.url, self.kubesim.ca_pem, StaticToken(self.kubesim.admin_token)
        )
        if self.retry is not None:
            client.retry = self.retry
        return client

    def register(self, *, cordoned: bool = False) -> None:
        """The instance's node registers, Ready (cordoned: by someone, not the drainer)."""
        node = objects.node(
            self.node, instance=self.event.instance_id, ready=True, unschedulable=cordoned
        )
        self.kubesim.apply(node)

    def handle(self, clock: FakeClock, **settings: Any) -> dict[str, Any]:
        chosen = Settings(
            launch_hook=True,
            cluster_name=CLUSTER,
            notification_topic_arn=TOPIC,
            launch_wait_daemonsets=False,
            **settings,
        )
        tools = Tools(chosen, self.clients, self.kube, clock, clock.sleep)
        return launch.handle(self.event, tools, None)


@pytest.fixture
def kubesim() -> Iterator[KubeSim]:
    with KubeSim() as running:
        yield running


@pytest.fixture
def launching(moto_aws: None, kubesim: KubeSim) -> Launch:
    made = aws.make_clients(boto3.Session(region_name=REGION))
    sns = RecordingSns()
    clients = aws.AwsClients(made.ec2, made.autoscaling, made.eks, lambda: None, sns=lambda: sns)
    group = create_node_group(
        clients.ec2, clients.autoscaling, asg_name="eks-workers", size=1, hook_name="drain",
        cluster_name=CLUSTER,
    )  # fmt: skip
    clients.autoscaling.put_lifecycle_hook(
        AutoScalingGroupName="eks-workers",
        LifecycleHookName=HOOK,
        LifecycleTransition="autoscaling:EC2_INSTANCE_LAUNCHING",
        HeartbeatTimeout=600,
        DefaultResult="CONTINUE",
    )
    sim = AwsSim(region=REGION)
    sim.point_cluster_at(CLUSTER, kubesim.url, kubesim.ca_data)
    token = sim.begin_launch("eks-workers", group.instance_ids[0], HOOK)
    return Launch(sim, kubesim, clients, sns, sim.event_for(token))


def _launch_counts(out: str) -> list[list[int]]:
    (metrics,) = emf_lines(out)
    return [metrics[name] for name in ("LaunchJoined", "LaunchNotJoined", "LaunchFailed")]


def test_duplicate_of_an_abandoned_launch__stale__no_wait_no_answer_no_notice(
    launching: Launch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """EventBridge delivers at least once: the first delivery waited, its node never
    came, it answered ABANDON and said so. The second finds no action (the first
    heartbeat says so): it waits for nothing, answers nothing, tells no one the node
    did not join, and counts no launch."""
    first = launching.handle(FakeClock(time.time()))
    assert (first["result"], first["lifecycle_result"]) == ("not_joined", "ABANDON"), first
    assert len(launching.sns.sent) == 1 and len(launching.sim.calls("complete")) == 1
    assert _launch_counts(capsys.readouterr().out) == [[0], [1], [0]]

    clock = FakeClock(time.time())
    caplog.clear()
    with caplog.at_level(logging.INFO):
        again = launching.handle(clock)

    assert again["result"] == "stale", again
    assert (again["lifecycle_result"], again["completed"]) == ("none", None)
    assert "already answered" in again["message"], again["message"]
    assert "duplicate or late" in again["message"]
    said = [r.getMessage() for r in caplog.records if "already answered" in r.getMessage()]
    assert said, "no log line says why nothing was waited for"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "a warning"
    assert clock.sleeps == [], "it waited for the node of an action already answered"
    assert len(launching.sim.calls("complete")) == 1, "answered again"
    assert len(launching.sns.sent) == 1, f"a second notice: {launching.sns.sent[-1]}"
    assert _launch_counts(capsys.readouterr().out) == [[0], [0], [0]]


def test_duplicate_of_a_launch_that_joined__stale__the_node_told_once(
    launching: Launch,
) -> None:
    """The first delivery answered CONTINUE once the node could take pods; a second
    delivery of the same event says nothing more about it (no second Event, no
    second answer)."""
    launching.register()
    first = launching.handle(FakeClock(time.time()))
    assert (first["result"], first["completed"], first["heartbeats"]) == ("joined", True, 1)

    def told() -> list[dict[str, Any]]:
        return [
            e
            for e in launching.kubesim.list("Event", "default")
            if e.get("involvedObject", {}).get("name") == launching.node
        ]

    # The Event is posted by the poster's thread, which may finish after the answer.
    eventually(told, timeout=10.0, what="the first delivery's Event on the node")

    again = launching.handle(FakeClock(time.time()))

    assert again["result"] == "stale", again
    assert len(launching.sim.calls("complete")) == 1
    assert launching.sns.sent == []
    assert len(told()) == 1, told()


def test_late_launch_event__action_timed_out__stale_not_not_joined(
    launching: Launch,
) -> None:
    """Lambda's queue may hold an event until after its action timed out
    (DefaultResult applied): no "did not join" for a launch nobody waits on."""
    launching.sim.expire_action(launching.event.instance_id)

    summary = launching.handle(FakeClock(time.time()))

    assert summary["result"] == "stale", summary
    assert summary["heartbeats"] == 0
    assert launching.sns.sent == []
    assert launching.sim.calls("complete") == []


@pytest.mark.parametrize(
    ("origin", "said", "not_said"),
    [
        ("EC2", ["LAUNCH_WAIT_FOR_UNCORDON", "kubectl uncordon"], []),
        (
            "WarmPool",
            ["before it went into the warm pool", "release --node", "kubectl uncordon"],
            ["LAUNCH_WAIT_FOR_UNCORDON"],
        ),
    ],
)
def test_joined_cordoned__the_notice_advises_what_applies(
    launching: Launch, origin: str, said: list[str], not_said: list[str]
) -> None:
    """A node Ready but cordoned by someone else: a fresh one was cordoned at
    registration (LAUNCH_WAIT_FOR_UNCORDON would wait for the uncordon); one back from
    the warm pool was cordoned before it went there, with no record of the drainer's
    to release (LAUNCH_WAIT_FOR_UNCORDON does nothing for it)."""
    launching.raw_event["detail"]["Origin"] = origin
    launching.register(cordoned=True)

    summary = launching.handle(FakeClock(time.time()))

    assert (summary["result"], summary["cordoned"]) == ("joined", True), summary
    (notice,) = launching.sns.sent
    text = notice["Message"]
    for words in said:
        assert words in text, text
    for words in not_said:
        assert words not in text, text
    assert launching.node in text


def test_back_from_the_warm_pool_never_untainted__the_notice_advises_what_it_lacked(
    launching: Launch,
) -> None:
    """Back from the warm pool, still cordoned by the drain that sent it there (the
    release undoes that once it is Ready) and keeping EC2's shutdown taint past the
    timeout: the notice is about the taint, whose owner is the cloud controller."""
    launching.raw_event["detail"]["Origin"] = "WarmPool"
    record = {"phase": "drained", "destination": "warm-pool", "added": ["cordon"]}
    node = objects.node(
        launching.node,
        instance=launching.event.instance_id,
        ready=True,
        unschedulable=True,
        taints=[{"key": launch.SHUTDOWN_TAINT, "effect": "NoSchedule"}],
        annotations={PROGRESS_ANNOTATION: json.dumps(record)},
    )
    launching.kubesim.apply(node)

    summary = launching.handle(FakeClock(time.time()))

    assert summary["result"] == "not_joined", summary
    (notice,) = launching.sns.sent
    text = notice["Message"]
    assert f"taint {launch.SHUTDOWN_TAINT}" in text
    assert "cloud controller" in text and "runs again" in text, text
    for wrong in ("LAUNCH_WAIT_FOR_UNCORDON", "LAUNCH_STARTUP_TAINTS", "not by eks-node-drainer"):
        assert wrong not in text, text
    assert "release --node" not in text, "ABANDON: the instance is terminated, nothing to release"


def test_back_from_the_warm_pool_never_untainted_continue__the_notice_says_to_release_it(
    launching: Launch,
) -> None:
    """The same with LAUNCH_TIMEOUT_RESULT=continue: the instance goes into service
    with its node still cordoned by the drain (never released, not being usable in
    time). The notice named the taint only, an ERROR line the release."""
    launching.raw_event["detail"]["Origin"] = "WarmPool"
    record = {"phase": "drained", "destination": "warm-pool", "added": ["cordon"]}
    node = objects.node(
        launching.node, instance=launching.event.instance_id, ready=True, unschedulable=True,
        taints=[{"key": launch.SHUTDOWN_TAINT, "effect": "NoSchedule"}],
        annotations={PROGRESS_ANNOTATION: json.dumps(record)},
    )  # fmt: skip
    launching.kubesim.apply(node)

    summary = launching.handle(FakeClock(time.time()), launch_timeout_result="continue")

    assert (summary["result"], summary["lifecycle_result"]) == ("not_joined", "CONTINUE")
    (notice,) = launching.sns.sent
    text = notice["Message"]
    assert f"taint {launch.SHUTDOWN_TAINT}" in text, text
    assert f"eks-node-drainer release --node {launching.node}" in text, text
    assert summary["not_released"] == "not_joined", summary


# -- an instance EC2 does not know ----------------------------------------------------


def test_late_launch_event__instance_gone_from_ec2__stale_no_failure_notice(
    launching: Launch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Lambda's queue held the event past the action's timeout, and EC2 has since
    forgotten the terminated instance: no node can join and no action waits, so the
    launch ends stale, saying EC2 no longer knows the instance: not `failed`, no
    failure notice, no launch failure counted."""
    instance = launching.event.instance_id
    launching.sim.expire_action(instance)
    launching.sim.fail_action("ec2", "DescribeInstances", "InvalidInstanceID.NotFound", 10)
    clock = FakeClock(time.time())

    with caplog.at_level(logging.INFO):
        summary = launching.handle(clock)

    assert summary["result"] == "stale", summary
    assert (summary["lifecycle_result"], summary["completed"]) == ("none", None)
    assert "no longer knows" in summary["message"], summary["message"]
    said = [r.getMessage() for r in caplog.records if "no longer knows" in r.getMessage()]
    assert said and instance in said[0], "no log line says EC2 no longer knows the instance"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "a warning"
    assert clock.sleeps == [], "it waited for an instance that is gone"
    assert launching.sns.sent == [], f"a notice: {launching.sns.sent}"
    assert launching.sim.calls("complete") == []
    assert _launch_counts(capsys.readouterr().out) == [[0], [0], [0]]


def test_just_launched_instance_not_yet_known_to_ec2__looked_for_again__joined(
    launching: Launch, capsys: pytest.CaptureFixture[str]
) -> None:
    """EC2's eventual consistency: DescribeInstances may answer NotFound for an
    instance launched a moment ago. Its action is alive (the heartbeat says so): the
    launch looks again, finds it, waits for its node and answers CONTINUE."""
    launching.register()
    launching.sim.fail_action("ec2", "DescribeInstances", "InvalidInstanceID.NotFound", 1)
    clock = FakeClock(time.time())

    summary = launching.handle(clock)

    assert (summary["result"], summary["lifecycle_result"]) == ("joined", "CONTINUE"), summary
    assert summary["completed"] is True
    assert launching.sim.pending_faults() == {}
    assert clock.sleeps, "looked again without a pause"
    assert launching.sns.sent == [], f"a notice: {launching.sns.sent}"
    assert _launch_counts(capsys.readouterr().out) == [[1], [0], [0]]


def test_instance_ec2_keeps_not_knowing__action_alive__raised_for_lambda_to_retry(
    launching: Launch, caplog: pytest.LogCaptureFixture
) -> None:
    """An action alive for an instance EC2 still does not know after a few looks:
    neither skipped nor abandoned nor told as failed; the invocation fails for Lambda
    to deliver the event again (the hook's timeout, DefaultResult, is the backstop)."""
    launching.sim.fail_action("ec2", "DescribeInstances", "InvalidInstanceID.NotFound", 50)

    with caplog.at_level(logging.INFO), pytest.raises(AwsError) as raised:
        launching.handle(FakeClock(time.time()))

    assert not aws.is_permanent(raised.value), raised.value
    assert launching.event.instance_id in str(raised.value)
    assert launching.sim.calls("complete") == [], "answered an action it could not place"
    assert launching.sns.sent == [], f"a notice: {launching.sns.sent}"
    (action,) = launching.sim.actions()
    assert action["closed_at"] is None and action["heartbeats"] >= 1, action
    assert [r for r in caplog.records if "retr" in r.getMessage()], "no line says it retries"


# -- a duplicate of a launch into the warm pool ---------------------------------------


def test_duplicate_of_a_launch_into_the_warm_pool__answered_already_said__not_counted(
    launching: Launch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Into the warm pool the action is answered at once, with no heartbeat. A second
    delivery finds it gone when it answers: it says so and counts no second launch."""
    launching.raw_event["detail"]["Destination"] = "WarmPool"
    first = launching.handle(FakeClock(time.time()))
    assert (first["result"], first["completed"]) == ("joined", True), first
    assert _launch_counts(capsys.readouterr().out) == [[1], [0], [0]]

    again = launching.handle(FakeClock(time.time()))

    assert again["result"] == "stale", again
    assert again["completed"] is False
    assert "answered already" in again["message"], again["message"]
    assert launching.sns.sent == []
    assert _launch_counts(capsys.readouterr().out) == [[0], [0], [0]]


# -- the action ends while the node is waited for -------------------------------------


class QuickBeats(aws.Heartbeat):
    """The real ticker, beating every few real milliseconds (not half the hook's
    HeartbeatTimeout), so that the test sees the beat that finds the action gone."""

    made: list[aws.Heartbeat] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, wait=lambda stopped, _: stopped.wait(0.005), **kwargs)
        QuickBeats.made.append(self)


class EndsAtFirstPause(FakeClock):
    """The fake clock of a launch whose action ends (`end`) at its first pause, once a
    heartbeat was recorded: the pause returns when the ticker has seen it gone."""

    def __init__(self, end: Any) -> None:
        super().__init__(time.time())
        self.end = end

    def sleep(self, seconds: float) -> None:
        if self.end is not None:
            (heartbeat,) = QuickBeats.made
            assert heartbeat.beats >= 1, "the action ends before any heartbeat"
            self.end()
            self.end = None
            until = time.monotonic() + 5
            while not heartbeat.gone and time.monotonic() < until:
                time.sleep(0.005)
        super().sleep(seconds)


@pytest.mark.parametrize("how", ["completed by hand", "timed out"])
def test_action_ends_during_the_wait__the_wait_stops__no_not_joined_notice(
    launching: Launch,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    how: str,
) -> None:
    """Someone completes the action by hand (`aws autoscaling complete-lifecycle-action`)
    or the hook times out while the node is waited for: the wait stops when the
    heartbeat finds the action gone, answers nothing, and tells no one the node did
    not join."""
    monkeypatch.setattr(QuickBeats, "made", [])
    monkeypatch.setattr(aws, "Heartbeat", QuickBeats)
    event = launching.event

    def end() -> None:
        if how == "timed out":
            launching.sim.expire_action(event.instance_id)
            return
        launching.clients.autoscaling.complete_lifecycle_action(
            AutoScalingGroupName=event.asg_name,
            LifecycleHookName=event.hook_name,
            LifecycleActionToken=event.action_token,
            LifecycleActionResult="CONTINUE",
        )

    clock = EndsAtFirstPause(end)
    with caplog.at_level(logging.INFO):
        summary = launching.handle(clock)

    assert summary["result"] == "action_gone", summary
    assert (summary["lifecycle_result"], summary["completed"]) == ("none", None)
    assert summary["heartbeats"] >= 1
    assert "answered elsewhere or timed out" in summary["message"], summary["message"]
    said = [r for r in caplog.records if "answered elsewhere or timed out" in r.getMessage()]
    assert said, "no log line says the action ended elsewhere"
    assert len(clock.sleeps) <= 2, f"waited on after the action ended: {len(clock.sleeps)}"
    assert launching.sns.sent == [], f"a notice: {launching.sns.sent}"
    by_hand = 1 if how == "completed by hand" else 0
    assert len(launching.sim.calls("complete")) == by_hand, "answered an action gone"
    assert _launch_counts(capsys.readouterr().out) == [[0], [0], [0]]


# --- a node back from the warm pool is released, whatever became of its action -----------


def _back_from_the_pool(launching: Launch, *, ready: bool) -> None:
    """The instance back from the warm pool; its node cordoned by the drain that sent
    it there, as its record says."""
    launching.raw_event["detail"]["Origin"] = "WarmPool"
    record = {"phase": "drained", "destination": "warm-pool", "added": ["cordon"],
              "since": time.time() - 3600, "at": time.time() - 3500}  # fmt: skip
    node = objects.node(
        launching.node,
        instance=launching.event.instance_id,
        ready=ready,
        unschedulable=True,
        annotations={PROGRESS_ANNOTATION: json.dumps(record)},
    )
    launching.kubesim.apply(node)


def _cordoned(launching: Launch) -> bool:
    return bool(launching.kubesim.get("Node", launching.node)["spec"].get("unschedulable"))


def test_warm_pool_return_late_past_the_hooks_timeout__node_released_all_the_same(
    launching: Launch,
) -> None:
    """Lambda's queue held the return past the hook's timeout: its DefaultResult put
    the instance in service, cordoned by the drain. The event ended stale and left
    the node cordoned, with nothing said."""
    _back_from_the_pool(launching, ready=True)
    launching.sim.expire_action(launching.event.instance_id)

    summary = launching.handle(FakeClock(time.time()))

    assert not _cordoned(launching), summary
    assert summary["result"] == "joined" and "uncordoned" in summary["released"], summary
    assert launching.sim.calls("complete") == [] or summary["completed"] is not True


def test_warm_pool_return_action_ends_mid_wait__released_once_ready(
    launching: Launch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The action ends before the node is back: the wait goes on to release it (it
    stopped with the node cordoned, an ERROR line the only sign)."""
    monkeypatch.setattr(QuickBeats, "made", [])
    monkeypatch.setattr(aws, "Heartbeat", QuickBeats)
    launching.raw_event["detail"]["Origin"] = "WarmPool"

    def ends_then_ready() -> None:  # the node registers again only after the action ended
        launching.sim.expire_action(launching.event.instance_id)
        _back_from_the_pool(launching, ready=True)

    class AfterABeat(EndsAtFirstPause):
        def sleep(self, seconds: float) -> None:
            if self.end is not None:
                (heartbeat,) = QuickBeats.made
                eventually(lambda: heartbeat.beats, what="a first beat recorded")
            super().sleep(seconds)

    summary = launching.handle(AfterABeat(ends_then_ready))

    assert summary["result"] == "joined", summary
    assert not _cordoned(launching)
    assert launching.sns.sent == []


def test_late_warm_pool_return__action_gone_instance_terminated__stale_not_a_timeout_notice(
    launching: Launch,
) -> None:
    """A warm-pool return event delivered late (Lambda's queue held it, or a duplicate):
    its action is gone at the first heartbeat and EC2 says the instance is terminated
    (terminated from the pool, or replaced since). The return path skips the first-beat
    check (so that a node put in service by the hook's timeout is still released), and
    never looked at the instance's state: it waited the whole LAUNCH_TIMEOUT_SECONDS for a
    node that cannot come back, then sent a 'cannot take pods: launch TIMED OUT'
    notice and counted a LaunchNotJoined for an instance that no longer exists."""
    _back_from_the_pool(launching, ready=False)
    shutdown = [{"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}]
    launching.kube().patch_node(launching.node, {"spec": {"taints": shutdown}})
    launching.sim.expire_action(launching.event.instance_id)
    launching.clients.ec2.terminate_instances(InstanceIds=[launching.event.instance_id])
    clock = FakeClock(time.time())

    summary = launching.handle(clock)

    assert launching.sns.sent == [], launching.sns.sent[0]["Subject"]
    assert summary["result"] == "stale", summary
    assert "EC2 says the instance is terminated" in summary["message"], summary["message"]
    assert sum(clock.sleeps) < 60, "waited for the node of a terminated instance"


def test_first_beat_failed_then_the_action_ended__said_ended_during_the_wait(
    launching: Launch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first beat was refused (AccessDenied), the action completed by hand before
    the next: the wait did begin, so not 'a duplicate or late delivery'."""
    monkeypatch.setattr(QuickBeats, "made", [])
    monkeypatch.setattr(aws, "Heartbeat", QuickBeats)
    launching.sim.fail_next("heartbeat", "AccessDenied", 1)

    class FailedThenEnds(EndsAtFirstPause):
        def sleep(self, seconds: float) -> None:
            if self.end is not None:
                (heartbeat,) = QuickBeats.made
                eventually(lambda: heartbeat.failures or heartbeat.beats, what="a first beat")
                self.end()
                self.end = None
                eventually(lambda: heartbeat.gone, what="the action seen gone")
            FakeClock.sleep(self, seconds)

    summary = launching.handle(
        FailedThenEnds(lambda: launching.sim.expire_action(launching.event.instance_id))
    )

    assert summary["result"] == "action_gone", summary


# --- the notice names what the node lacked, not a cordon it was not waiting on ----------


def _why(text: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith("Why: ")]
    return line


@pytest.mark.parametrize(
    ("wait_for_uncordon", "missing", "said", "not_said"),
    [
        (
            True,
            "ready, uncordon",
            ["never Ready", "LAUNCH_WAIT_FOR_UNCORDON=true waits for the uncordon",
             "to be Ready and to be uncordoned"],
            ["makes a launch wait for the uncordon instead"],
        ),
        (
            False,
            "ready",
            ["never Ready", "also cordoned", "kubectl uncordon"],
            ["waits for the uncordon", "to be uncordoned"],
        ),
    ],
)  # fmt: skip
def test_fresh_launch_cordoned_at_registration_never_ready__the_notice_names_what_it_lacked(
    launching: Launch,
    wait_for_uncordon: bool,
    missing: str,
    said: list[str],
    not_said: list[str],
) -> None:
    """A fresh node registered cordoned (--register-schedulable=false), then never
    Ready: the launch timed out for want of Ready (and, when it waits for the
    uncordon, of that too). The notice named only the cordon, and told the operator
    who had set LAUNCH_WAIT_FOR_UNCORDON=true to set it."""
    node = objects.node(
        launching.node, instance=launching.event.instance_id, ready=False, unschedulable=True
    )
    launching.kubesim.apply(node)

    summary = launching.handle(FakeClock(time.time()), launch_wait_for_uncordon=wait_for_uncordon)

    assert (summary["result"], summary["waiting_for"]) == ("not_joined", missing), summary
    (notice,) = launching.sns.sent
    text = notice["Message"]
    assert f"Still missing: {missing}." in text, text
    for words in said:
        assert words in text, text
    for words in not_said:
        assert words not in text, text


def test_fresh_launch_cordoned_with_a_startup_taint__every_lack_named_and_advised(
    launching: Launch,
) -> None:
    """Ready, cordoned at registration and keeping its CNI's startup taint past the
    timeout, LAUNCH_WAIT_FOR_UNCORDON=true: both are named, each with its advice."""
    taint = "node.cilium.io/agent-not-ready"
    node = objects.node(
        launching.node, instance=launching.event.instance_id, ready=True, unschedulable=True,
        taints=[{"key": taint, "effect": "NoSchedule"}],
    )  # fmt: skip
    launching.kubesim.apply(node)

    summary = launching.handle(FakeClock(time.time()), launch_wait_for_uncordon=True)

    assert summary["waiting_for"] == f"taint {taint}, uncordon", summary
    text = launching.sns.sent[0]["Message"]
    assert "take it out of LAUNCH_STARTUP_TAINTS" in text, text
    assert "LAUNCH_WAIT_FOR_UNCORDON=true waits for the uncordon" in text, text
    assert f"to lose the taint {taint} and to be uncordoned" in _why(text), text


@pytest.mark.parametrize("wait_for_uncordon", [False, True])
def test_fresh_launch_cordoned_by_our_own_drain__not_told_as_someone_elses_cordon(
    launching: Launch, wait_for_uncordon: bool
) -> None:
    """A new spot instance gets a rebalance recommendation (or its interruption) while
    its launch action waits: the drainer's own EC2-event path cordons the node and
    records it. The launch hook never read that record: it said the node is 'cordoned,
    not by eks-node-drainer (spec.unschedulable, set when it registered)', a Warning
    JoinedCordoned Event and a notice telling the operator to find who cordons new
    nodes and to `kubectl uncordon` it (undoing the drainer's own rebalance cordon);
    with LAUNCH_WAIT_FOR_UNCORDON=true it waited for that uncordon to its timeout."""
    record = {"phase": "cordoned", "trigger": "rebalance-recommendation",
              "since": int(time.time()), "added": ["cordon", "exclude-from-lb-label"]}  # fmt: skip
    node = objects.node(
        launching.node, instance=launching.event.instance_id, ready=True, unschedulable=True,
        annotations={PROGRESS_ANNOTATION: json.dumps(record)},
    )  # fmt: skip
    launching.kubesim.apply(node)
    clock = FakeClock(time.time())

    summary = launching.handle(clock, launch_wait_for_uncordon=wait_for_uncordon)

    assert "not by eks-node-drainer" not in summary["message"], summary["message"]
    for notice in launching.sns.sent:
        assert "kubectl uncordon" not in notice["Message"], notice["Message"]
    assert (summary["result"], summary["lifecycle_result"]) == ("joined", "CONTINUE"), summary
    assert "rebalance-recommendation drain of eks-node-drainer" in summary["message"], summary
    assert (summary["cordoned"], launching.sns.sent) == (False, []), summary
    assert sum(clock.sleeps) < 60, "waited for the uncordon of the drainer's own cordon"
    (told,) = eventually(lambda: _node_events(launching), timeout=10.0, what="the node's Event")
    assert (told["reason"], told["type"]) == ("Joined", "Normal"), told


@pytest.mark.parametrize("record", [False, True])
def test_back_from_the_warm_pool_cordoned_by_someone__the_why_line_says_cordoned(
    launching: Launch, record: bool
) -> None:
    """Back from the warm pool, Ready, cordoned not by the drainer (no record of a
    drain of ours; or a record whose drain found it cordoned already): the notice is
    about the cordon, and its Why line says so, not only that the node is Ready."""
    launching.raw_event["detail"]["Origin"] = "WarmPool"
    annotations = {}
    if record:  # the drain found it cordoned: its record does not add the cordon
        drained = {"phase": "drained", "destination": "warm-pool", "added": []}
        annotations = {PROGRESS_ANNOTATION: json.dumps(drained)}
    node = objects.node(
        launching.node, instance=launching.event.instance_id, ready=True, unschedulable=True,
        annotations=annotations,
    )  # fmt: skip
    launching.kubesim.apply(node)

    summary = launching.handle(FakeClock(time.time()))

    assert (summary["result"], summary["cordoned"]) == ("joined", True), summary
    why = _why(launching.sns.sent[0]["Message"])
    assert "back from the warm pool" in why and "cordoned" in why, why
    assert "not by eks-node-drainer" in why or "not by the drainer" in why, why


# --- a node back from the warm pool that the launch does not release is told ------------


def _node_events(launching: Launch) -> list[dict[str, Any]]:
    return [
        e
        for e in launching.kubesim.list("Event", "default")
        if e.get("involvedObject", {}).get("name") == launching.node
    ]


def _end_line(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    (line,) = [r for r in caplog.records if r.getMessage().startswith("launch finished")]
    return line


def test_warm_pool_return_release_refused__the_notice_event_and_end_line_say_so(
    launching: Launch, caplog: pytest.LogCaptureFixture
) -> None:
    """RBAC refuses the release's patch: the launch answers CONTINUE all the same (the
    node is there, Ready), but the node stays cordoned and out of the load balancers.
    An ERROR line was the only sign; the end line said `joined` at INFO."""
    _back_from_the_pool(launching, ready=True)
    refused = (
        f'nodes "{launching.node}" is forbidden: User "system:serviceaccount:kube-system:'
        'eks-node-drainer" cannot patch resource "nodes" in API group "" at the cluster scope'
    )
    launching.kubesim.faults.add(
        Fault(kind="status", method="PATCH", path=f"/api/v1/nodes/{launching.node}$",
              status=403, reason="Forbidden", message=refused)
    )  # fmt: skip

    with caplog.at_level(logging.INFO, logger="drainer.lifecycle.launch"):
        summary = launching.handle(FakeClock(time.time()))

    assert _cordoned(launching)
    assert (summary["result"], summary["lifecycle_result"]) == ("joined", "CONTINUE"), summary
    assert len(launching.sns.sent) == 1, "a node left cordoned, and no notice"
    (notice,) = launching.sns.sent
    assert launching.node in notice["Subject"] and "NOT RELEASED" in notice["Subject"], notice
    text = notice["Message"]
    assert "cannot patch" in text, text
    assert f"eks-node-drainer release --node {launching.node}" in text, text
    assert notice["MessageAttributes"]["result"]["StringValue"] == "not_released", notice
    (told,) = eventually(lambda: _node_events(launching), timeout=10.0, what="the node's Event")
    assert (told["reason"], told["type"]) == ("ReleaseFailed", "Warning"), told
    assert f"eks-node-drainer release --node {launching.node}" in told["message"], told
    assert summary["not_released"] == "release_failed", summary
    assert summary["released"] == [], summary
    assert _end_line(caplog).levelno == logging.WARNING


def test_warm_pool_return_record_of_a_later_drain__not_released_and_said(
    launching: Launch, caplog: pytest.LogCaptureFixture
) -> None:
    """The node's record is of a drain of ours begun and ended after this launch began
    (a late or repeated launch event): the release is rightly skipped, and the node
    stays cordoned by that later drain, said on the end line (a WARNING) and in a
    Normal Event; no notice telling the operator to release it (that drain's cordon
    is its own to keep: a retirement's, a later trip into the pool)."""
    launching.raw_event["detail"]["Origin"] = "WarmPool"
    now = time.time()
    record = {"phase": "drained", "destination": "warm-pool", "added": ["cordon"],
              "since": int(now + 60), "at": int(now + 100)}  # fmt: skip
    node = objects.node(
        launching.node, instance=launching.event.instance_id, ready=True, unschedulable=True,
        annotations={PROGRESS_ANNOTATION: json.dumps(record)},
    )  # fmt: skip
    launching.kubesim.apply(node)

    with caplog.at_level(logging.INFO, logger="drainer.lifecycle.launch"):
        summary = launching.handle(FakeClock(now + 130))

    assert _cordoned(launching), "a later trip's cordon undone"
    assert launching.sns.sent == [], "told to release a cordon that is a later drain's"
    (told,) = eventually(lambda: _node_events(launching), timeout=10.0, what="the node's Event")
    assert (told["reason"], told["type"]) == ("NotReleased", "Normal"), told
    assert "its cordon is that drain's" in (told.get("message") or told.get("note") or ""), told
    assert summary["not_released"] == "drained_since", summary
    assert _end_line(caplog).levelno == logging.WARNING


@pytest.mark.parametrize("begun", [-600, 5])
def test_warm_pool_return_a_drain_under_way__left_to_it__no_notice(
    launching: Launch, begun: int
) -> None:
    """A drain of ours is under way on the node (an AWS Health retirement, begun
    before the launch or during its wait): not a failure, and that drain tells its
    own end. The end line says why the node was not released; no notice; the Event
    is not a Warning. Begun during the wait, it was taken for a later trip's drain."""
    launching.raw_event["detail"]["Origin"] = "WarmPool"
    now = time.time()
    record = {"phase": "draining", "trigger": "scheduled-change", "added": ["cordon"],
              "since": int(now + begun), "until": int(now + 900)}  # fmt: skip
    node = objects.node(
        launching.node, instance=launching.event.instance_id, ready=True, unschedulable=True,
        annotations={PROGRESS_ANNOTATION: json.dumps(record)},
    )  # fmt: skip
    launching.kubesim.apply(node)

    summary = launching.handle(FakeClock(now + 10))

    assert _cordoned(launching), "left to that drain"
    assert "a scheduled-change drain is under way" in summary["message"], summary
    assert launching.sns.sent == []
    assert summary["not_released"] == "drain_under_way", summary
    (told,) = eventually(lambda: _node_events(launching), timeout=10.0, what="the node's Event")
    assert (told["reason"], told["type"]) == ("NotReleased", "Normal"), told


def test_warm_pool_return_an_ec2_drain_begun_and_ended_during_the_wait__not_told_to_release(
    launching: Launch,
) -> None:
    """Review of 4363f72: a drain of ours for an AWS Health scheduled change that began
    AND ended during this launch's wait (a node just back from the pool has hardly a
    pod: its drain takes seconds) leaves a `drained` record dated after the launch
    began. The launch rightly leaves its cordon (the change's close releases it,
    closed.py), but classes it `drained_since` and sends a Warning notice saying the
    launch event "came late, or the instance went out of service and back", telling
    the operator to run `eks-node-drainer release --node` once the instance is in
    service and no drain runs on it: all true minutes later, so the operator undoes the
    retirement's cordon and pods land on a node EC2 is about to retire."""
    launching.raw_event["detail"]["Origin"] = "WarmPool"
    now = time.time()
    record = {"phase": "drained", "trigger": "scheduled-change",
              "change": "arn:aws:health:us-east-1::event/EC2/INSTANCE_RETIREMENT_SCHEDULED/x",
              "added": ["cordon"], "since": int(now + 5), "at": int(now + 8)}  # fmt: skip
    node = objects.node(
        launching.node, instance=launching.event.instance_id, ready=True, unschedulable=True,
        annotations={PROGRESS_ANNOTATION: json.dumps(record)},
    )  # fmt: skip
    launching.kubesim.apply(node)

    summary = launching.handle(FakeClock(now + 10))

    assert _cordoned(launching), "the retirement's cordon stays"
    assert "late or repeated launch event" not in summary["message"], summary["message"]
    for notice in launching.sns.sent:
        assert "release --node" not in notice["Message"], notice["Message"]


def test_warm_pool_return_a_terminate_drain_record_left_draining__not_left_unsaid(
    launching: Launch,
) -> None:
    """Review of 4363f72 (older than it, but its promise is "never left so unsaid"): the
    terminate hook's drain that sent the instance to the pool died mid-way (Lambda
    killed, retries spent); the hook's timeout put the instance in the pool all the
    same, so the record still says `draining`, until its DRAIN_TIMEOUT_SECONDS deadline.
    Back within that deadline, the node is classed `drain_under_way`: no notice, a
    Normal Event, "that drain tells its own end". That drain is over (its action ended
    before the instance could go to the pool and come back): nothing ever tells, and
    the node stays cordoned and out of the load balancers."""
    launching.raw_event["detail"]["Origin"] = "WarmPool"
    now = time.time()
    record = {"phase": "draining", "trigger": launch_release.TERMINATE_HOOK_TRIGGER,
              "added": ["cordon"], "since": int(now - 900), "until": int(now + 2700)}  # fmt: skip
    node = objects.node(
        launching.node, instance=launching.event.instance_id, ready=True, unschedulable=True,
        annotations={PROGRESS_ANNOTATION: json.dumps(record)},
    )  # fmt: skip
    launching.kubesim.apply(node)

    summary = launching.handle(FakeClock(now + 10))

    assert _cordoned(launching) is False or len(launching.sns.sent) == 1, (
        f"left cordoned ({summary['not_released']}) and nothing tells it"
    )
