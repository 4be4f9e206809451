"""EC2's spot events, from the EventBridge event to the drain: which events are
acted on, which instances are ours, the drain's deadline and options, the record a
spot drain leaves on its node (and the terminate hook's drain that waits for it),
eviction grace periods cut to the deadline, and the notices.

AWS is moto (awssim builds the node groups); Kubernetes is kubesim, or a node
whose record a test scripts. Time is a clock the test holds: nothing sleeps for
real seconds.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from realapi import StaticToken
from support.clock import FakeClock, SteppedWaits

from awssim import AwsSim
from awssim import ec2_events as spot_events
from awssim.world import AMI_ID, create_node_group
from drainer import aws
from drainer.engine.drain import Drain, RealWaits
from drainer.engine.options import DrainOptions
from drainer.k8s.cordon import (
    PROGRESS_ANNOTATION,
    LiveDrain,
    ProgressRecord,
    cordon_patch,
    live_drain,
    progress_value,
)
from drainer.k8s.kube import Kube
from drainer.lifecycle import ec2_events, late, notices
from drainer.lifecycle.events import parse_event
from drainer.lifecycle.events_ec2 import (
    EC2_TRIGGERS,
    SPOT_NOTICE_SECONDS,
    STATE_CHANGE_NOTICE_SECONDS,
    Ec2Event,
    Ec2Kind,
    ScheduledChanges,
)
from drainer.lifecycle.events_fields import Skip
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER, WARM_POOL_NAME
from drainer.lifecycle.job import Run, Tools
from drainer.lifecycle.live import (
    LIVE_DRAIN_POLL_SECONDS,
    LIVE_DRAIN_SLACK_SECONDS,
    wait_for_live_drain,
)
from drainer.lifecycle.outcomes import Result
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.window import Deadline, Invocation
from drainer.outcome import Outcome
from kubesim import KubeSim
from kubesim import testing as k
from kubesim.controllers import SHUTDOWN
from testbed import workloads as objects

LoadEvent = Callable[[str], dict[str, Any]]

INSTANCE = "i-0a1b2c3d4e5f60718"  # the instance of tests/events/spot-interruption.json
WARNED_AT = datetime(2026, 11, 22, 2, 14, 10, tzinfo=UTC).timestamp()
REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's
CLUSTER = "prod"
NODE = "n1"
INTERRUPTION = str(Ec2Kind.INTERRUPTION)
REBALANCE = str(Ec2Kind.REBALANCE)
SCHEDULED = str(Ec2Kind.SCHEDULED_CHANGE)


def _spot_event(raw: dict[str, Any]) -> Ec2Event:
    parsed = parse_event(raw)
    assert isinstance(parsed, Ec2Event), parsed
    return parsed


def _found(event: Ec2Event, asg_name: str = "eks-spot-workers") -> ec2_events.Ec2Target:
    """The event's instance, as `ec2_events.target` finds it in a group of cluster prod."""
    tags = {aws.ASG_NAME_TAG: asg_name} if asg_name else {}
    identity = aws.NodeIdentity(
        instance_id=event.instance_id,
        private_dns_name="ip-10-0-1-23.eu-west-1.compute.internal",
        availability_zone="eu-west-1a",
        tags=tags,
    )
    return ec2_events.Ec2Target(event, identity, CLUSTER, asg_name)


# --- parse_event: the two spot events as AWS documents them -----------------------------


def test_parse_event__interruption_warning_fixture__gives_spot_event(
    load_event: LoadEvent,
) -> None:
    parsed = parse_event(load_event("spot-interruption"))

    assert parsed == Ec2Event(
        kind=Ec2Kind.INTERRUPTION,
        instance_id=INSTANCE,
        event_id="7e1c9a24-5b3d-4f8e-a6c2-0d9b8e7f6a51",
        event_time="2026-11-22T02:14:10Z",
        region="eu-west-1",
        account="123456789012",
        instance_action="terminate",
    )
    assert parsed.issued_at == WARNED_AT
    assert parsed.log_keys()["trigger"] == "spot-interruption"


def test_parse_event__rebalance_fixture__gives_spot_event_without_action(
    load_event: LoadEvent,
) -> None:
    parsed = parse_event(load_event("rebalance"))

    assert parsed == Ec2Event(
        kind=Ec2Kind.REBALANCE,
        instance_id=INSTANCE,
        event_id="c4f2e8d1-9a7b-4c36-b5e0-3f1a2d4c6e89",
        event_time="2026-11-22T02:05:42Z",
        region="eu-west-1",
        account="123456789012",
        instance_action="",
    )


def test_parse_event__awssim_builds_what_the_drainer_reads() -> None:
    raw = spot_events.interruption_warning(ACCOUNT, REGION, INSTANCE, age=30, action="stop")

    parsed = _spot_event(raw)

    assert (parsed.kind, parsed.instance_id, parsed.instance_action) == (
        Ec2Kind.INTERRUPTION,
        INSTANCE,
        "stop",
    )
    assert parsed.issued_at is not None
    assert time.time() - parsed.issued_at == pytest.approx(30, abs=5)


def _without(section: str, key: str) -> Callable[[dict[str, Any]], None]:
    def change(raw: dict[str, Any]) -> None:
        del (raw[section] if section else raw)[key]

    return change


def _closed(
    schedule: str = "", entities: list[Any] | None = None
) -> Callable[[dict[str, Any]], None]:
    """The change closed: delivered by its own schedule, or naming `entities`."""

    def change(raw: dict[str, Any]) -> None:
        raw["detail"]["statusCode"] = "closed"
        if schedule:
            raw["drainer_schedule"] = schedule
        if entities is not None:
            raw["detail"]["affectedEntities"] = entities

    return change


def _set(section: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(raw: dict[str, Any]) -> None:
        (raw[section] if section else raw)[key] = value

    return change


@pytest.mark.parametrize("fixture", ["spot-interruption", "rebalance"])
@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_without("detail", "instance-id"), "field 'detail.instance-id' is missing"),
        (_set("detail", "instance-id", 42), "field 'detail.instance-id' is a int, not a string"),
        (_set("detail", "instance-id", " "), "field 'detail.instance-id' is empty"),
        (_set("detail", "instance-id", "i-0a1b2c3d\x00"), "not an EC2 instance id"),
        (_set("detail", "instance-id", "arn:aws:ec2:x"), "not an EC2 instance id"),
        (_set("", "time", "yyyy-mm-ddThh:mm:ssZ"), "field 'time' is not an RFC 3339 time"),
        (_without("", "time"), "field 'time' is missing"),
        (_without("", "region"), "field 'region' is missing"),
        (_set("", "detail", "i-0a1b2c3d4e5f60718"), "field 'detail' is missing or not an object"),
        (_set("", "detail", [INSTANCE]), "field 'detail' is missing or not an object"),
        (_without("", "detail"), "field 'detail' is missing or not an object"),
    ],
    ids=[
        "no-instance-id",
        "instance-id-not-a-string",
        "instance-id-blank",
        "instance-id-nul-byte",
        "instance-id-not-an-id",
        "time-unparsable",
        "no-time",
        "no-region",
        "detail-a-string",
        "detail-a-list",
        "no-detail",
    ],
)
def test_parse_event__malformed_spot_event__skip_naming_the_field(
    load_event: LoadEvent,
    fixture: str,
    change: Callable[[dict[str, Any]], None],
    reason: str,
) -> None:
    raw = load_event(fixture)
    change(raw)

    parsed = parse_event(raw)

    assert isinstance(parsed, Skip)
    assert parsed.malformed
    assert reason in parsed.reason


def test_parse_event__malformed_interruption__skip_names_the_event_kind(
    load_event: LoadEvent,
) -> None:
    raw = load_event("spot-interruption")
    del raw["detail"]["instance-id"]

    parsed = parse_event(raw)

    assert parsed == Skip(
        "malformed spot-interruption event: field 'detail.instance-id' is missing", malformed=True
    )


def test_parse_event__state_change_to_running__skipped_not_malformed(
    load_event: LoadEvent,
) -> None:
    raw = load_event("ec2-state-change")
    raw["detail"]["state"] = "running"

    parsed = parse_event(raw)

    assert parsed == Skip(
        f"instance {INSTANCE} is running: only stopping and shutting-down begin a drain"
    )


def test_parse_event__spot_detail_type_from_another_source__skipped(
    load_event: LoadEvent,
) -> None:
    raw = load_event("spot-interruption")
    raw["source"] = "custom.chaos"  # anyone may put an event with this detail-type

    parsed = parse_event(raw)

    assert isinstance(parsed, Skip)
    assert "'custom.chaos'" in parsed.reason


# --- target: is the instance one of ours? (moto) -----------------------------------------


@pytest.fixture
def clients(moto_aws: None) -> aws.AwsClients:
    return aws.make_clients(boto3.Session(region_name=REGION))


def _group(
    clients: aws.AwsClients, *, cluster: str = CLUSTER, tag: str = "eks:cluster-name"
) -> str:
    """One instance in an ASG whose cluster tag (`tag`; "" for none) its instances
    carry, as EKS node groups do; its instance id."""
    group = create_node_group(
        clients.ec2,
        clients.autoscaling,
        asg_name="eks-spot-workers",
        size=1,
        cluster_name=cluster,
        cluster_tag=tag,
    )
    return group.instance_ids[0]


def _warning(instance_id: str, kind: Ec2Kind = Ec2Kind.INTERRUPTION) -> Ec2Event:
    """The event of `kind` about the instance, as awssim builds it."""
    raw = {
        Ec2Kind.INTERRUPTION: lambda: spot_events.interruption_warning(
            ACCOUNT, REGION, instance_id
        ),
        Ec2Kind.REBALANCE: lambda: spot_events.rebalance_recommendation(
            ACCOUNT, REGION, instance_id
        ),
        Ec2Kind.SCHEDULED_CHANGE: lambda: spot_events.scheduled_change(
            ACCOUNT, REGION, [instance_id], starts_in=3600
        ),
        Ec2Kind.STATE_CHANGE: lambda: spot_events.state_change(
            ACCOUNT, REGION, instance_id, "stopping"
        ),
        Ec2Kind.CAPACITY_RESERVATION: lambda: spot_events.capacity_interruption(
            ACCOUNT, REGION, instance_id
        ),
    }[kind]()
    return _spot_event(raw)


@pytest.mark.parametrize(
    "settings",
    [
        Settings(),
        Settings(cluster_name=CLUSTER, allowed_asgs=frozenset({"eks-spot-workers"})),
    ],
    ids=["any-group-cluster-from-tags", "listed-group-of-our-cluster"],
)
def test_target__instance_of_an_allowed_group_of_our_cluster__is_a_target(
    clients: aws.AwsClients, settings: Settings
) -> None:
    instance = _group(clients)
    event = _warning(instance)

    found = ec2_events.target(event, settings, clients)

    assert isinstance(found, ec2_events.Ec2Target), found
    assert (found.instance_id, found.asg_name, found.cluster) == (
        instance,
        "eks-spot-workers",
        CLUSTER,
    )
    assert found.event == event
    assert found.identity.private_dns_name, "the node is looked up by it"


def test_target__lifecycle_state_not_readable_for_good__acted_on_all_the_same__said(
    clients: aws.AwsClients, caplog: pytest.LogCaptureFixture
) -> None:
    """A role without autoscaling:DescribeAutoScalingInstances (a zip upgraded without
    its stack) must not cost a spot drain: the warm pool check is skipped, said."""
    instance = _group(clients)
    AwsSim(region=REGION).fail_action("autoscaling", "DescribeAutoScalingInstances", "AccessDenied")

    found = ec2_events.target(_warning(instance), Settings(), clients)

    assert isinstance(found, ec2_events.Ec2Target), found
    assert f"cannot tell whether {instance} is in a warm pool" in caplog.text
    assert "autoscaling:DescribeAutoScalingInstances" in caplog.text


def test_target__cluster_from_the_kubernetes_io_cluster_tag(clients: aws.AwsClients) -> None:
    instance = _group(clients, tag="kubernetes.io/cluster")

    found = ec2_events.target(_warning(instance), Settings(), clients)

    assert isinstance(found, ec2_events.Ec2Target), found
    assert found.cluster == CLUSTER


def test_target__instance_untagged__cluster_from_its_groups_tags(clients: aws.AwsClients) -> None:
    instance = _group(clients, tag="")  # no cluster tag at launch
    clients.autoscaling.create_or_update_tags(
        Tags=[
            {
                "ResourceId": "eks-spot-workers",
                "ResourceType": "auto-scaling-group",
                "Key": "eks:cluster-name",
                "Value": CLUSTER,
                "PropagateAtLaunch": False,
            }
        ]
    )

    found = ec2_events.target(_warning(instance), Settings(cluster_name=CLUSTER), clients)

    assert isinstance(found, ec2_events.Ec2Target), found
    assert found.cluster == CLUSTER


def test_target__spot_interruption_drain_off__skipped(clients: aws.AwsClients) -> None:
    instance = _group(clients)
    settings = Settings.from_env({"SPOT_INTERRUPTION_DRAIN": "false"})

    found = ec2_events.target(_warning(instance), settings, clients)

    assert isinstance(found, Skip)
    assert "SPOT_INTERRUPTION_DRAIN" in found.reason


@pytest.mark.parametrize(
    ("action", "acted_on"), [("off", False), ("cordon", True), ("drain", True)]
)
def test_target__rebalance__acted_on_unless_rebalance_action_off(
    clients: aws.AwsClients, action: str, acted_on: bool
) -> None:
    instance = _group(clients)
    settings = Settings.from_env({"REBALANCE_ACTION": action})

    found = ec2_events.target(_warning(instance, Ec2Kind.REBALANCE), settings, clients)

    if acted_on:
        assert isinstance(found, ec2_events.Ec2Target), found
    else:
        assert isinstance(found, Skip)
        assert "REBALANCE_ACTION" in found.reason


def test_target__rebalance_action_off__interruption_still_drained(
    clients: aws.AwsClients,
) -> None:
    instance = _group(clients)
    settings = Settings.from_env({"REBALANCE_ACTION": "off"})

    assert isinstance(
        ec2_events.target(_warning(instance), settings, clients), ec2_events.Ec2Target
    )


def test_target__group_not_in_allowed_asgs__skipped_naming_the_group(
    clients: aws.AwsClients,
) -> None:
    instance = _group(clients)
    settings = dataclasses.replace(Settings(), allowed_asgs=frozenset({"eks-ondemand-workers"}))

    found = ec2_events.target(_warning(instance), settings, clients)

    assert isinstance(found, Skip)
    assert instance in found.reason
    assert "eks-spot-workers is not in ALLOWED_ASGS (eks-ondemand-workers)" in found.reason


def test_target__instance_tagged_for_another_cluster__skipped_naming_it(
    clients: aws.AwsClients,
) -> None:
    instance = _group(clients, cluster="staging")

    found = ec2_events.target(_warning(instance), Settings(cluster_name=CLUSTER), clients)

    assert isinstance(found, Skip)
    assert f"instance {instance} belongs to cluster staging, not {CLUSTER}" in found.reason


def _lone_instance(clients: aws.AwsClients, tags: dict[str, str] | None = None) -> str:
    """An instance in no Auto Scaling group (launched by hand, or by another tool)."""
    spec: dict[str, Any] = {}
    if tags:
        spec["TagSpecifications"] = [
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ]
    launched = clients.ec2.run_instances(ImageId=AMI_ID, MinCount=1, MaxCount=1, **spec)
    return str(launched["Instances"][0]["InstanceId"])


@pytest.mark.parametrize(
    "settings",
    [
        Settings(allowed_asgs=frozenset({"eks-spot-workers"})),
        Settings(asg_tag="eks-node-drainer/enabled=true"),
    ],
    ids=["ALLOWED_ASGS", "ASG_TAG"],
)
def test_target__instance_in_no_group_when_groups_are_chosen__skipped(
    clients: aws.AwsClients, settings: Settings
) -> None:
    _group(clients)
    instance = _lone_instance(clients, {"eks:cluster-name": CLUSTER})

    found = ec2_events.target(_warning(instance), settings, clients)

    assert isinstance(found, Skip)
    assert f"instance {instance} is in no Auto Scaling group" in found.reason


def test_target__instance_in_no_group_without_cluster_tag__skipped(
    clients: aws.AwsClients,
) -> None:
    instance = _lone_instance(clients)

    found = ec2_events.target(_warning(instance), Settings(cluster_name=CLUSTER), clients)

    assert isinstance(found, Skip)
    assert "names no EKS cluster" in found.reason


def test_target__instance_in_no_group_tagged_for_our_cluster__a_target_without_group(
    clients: aws.AwsClients,
) -> None:
    instance = _lone_instance(clients, {"eks:cluster-name": CLUSTER})

    found = ec2_events.target(_warning(instance), Settings(), clients)

    assert isinstance(found, ec2_events.Ec2Target), found
    assert (found.cluster, found.asg_name) == (CLUSTER, "")


@pytest.mark.parametrize("kind", list(Ec2Kind))
def test_target__unknown_instance__skipped_not_raised(
    clients: aws.AwsClients, kind: Ec2Kind
) -> None:
    _group(clients)
    settings = Settings(rebalance_action="drain", state_change_drain=True)

    found = ec2_events.target(_warning("i-0000000000000dead", kind), settings, clients)

    assert isinstance(found, Skip)
    assert "i-0000000000000dead" in found.reason
    assert found.reason.startswith(str(kind))


# --- the deadline and the drain's options -------------------------------------------------


@pytest.mark.parametrize("margin", [0, 15, 40])
def test_deadline_of__interruption__warning_time_plus_two_minutes_less_the_margin(
    load_event: LoadEvent, margin: int
) -> None:
    found = _found(_spot_event(load_event("spot-interruption")))
    settings = Settings.from_env({"SPOT_DEADLINE_MARGIN_SECONDS": str(margin)})

    # Whenever it is asked (a late delivery, a retry), the deadline is the warning's.
    for now in (WARNED_AT + 3, WARNED_AT + 60):
        deadline = ec2_events.deadline_of(found, settings, now)

        assert deadline.at == WARNED_AT + 120 - margin
        assert deadline.source == (
            "spot interruption warning at 2026-11-22T02:14:10Z + 120 s "
            f"- SPOT_DEADLINE_MARGIN_SECONDS ({margin} s)"
        )
    assert SPOT_NOTICE_SECONDS == 120


def test_deadline_of__rebalance__now_plus_drain_timeout(load_event: LoadEvent) -> None:
    found = _found(_spot_event(load_event("rebalance")))
    settings = Settings.from_env({"DRAIN_TIMEOUT_SECONDS": "900"})
    now = WARNED_AT + 1000

    assert ec2_events.deadline_of(found, settings, now) == Deadline(
        now + 900, "DRAIN_TIMEOUT_SECONDS (900 s)"
    )


@pytest.mark.parametrize(
    ("window", "reserve", "expected_reserve"),
    [
        (105.0, 120, 35.0),  # the default reserve is more than the window: a third of it
        (105.0, 20, 20.0),  # a smaller setting stays
        (0.0, 120, 0.0),  # the deadline already passed
    ],
)
def test_approach_for__interruption__cuts_grace_reserves_at_most_a_third_waits_for_itself_only(
    load_event: LoadEvent, window: float, reserve: int, expected_reserve: float
) -> None:
    found = _found(_spot_event(load_event("spot-interruption")))
    settings = Settings(critical_reserve_seconds=reserve, eviction_concurrency=7)
    now = WARNED_AT + 10
    deadline = Deadline(now + window, "the warning's")

    approach = ec2_events.approach_for(found, settings, deadline, now)

    assert approach.options.trigger == "spot-interruption"
    assert approach.options.fit_grace_to_deadline is True
    assert approach.options.force_on_timeout is True, "held pods get SIGTERM before EC2 acts"
    assert approach.options.critical_reserve_seconds == pytest.approx(expected_reserve)
    assert approach.options.critical_reserve_seconds <= max(window, 0) / 3
    assert approach.options.concurrency == 7, "the rest comes from the settings"
    assert approach.waits_for == frozenset({"spot-interruption"})


def test_approach_for__waits_for__fixed_by_ec2_only_where_ec2_keeps_the_deadline(
    load_event: LoadEvent,
) -> None:
    """The warning's drain waits only for a drain that acts by EC2's moment (fixed_by_ec2);
    cut to this invocation's end (EC2 does not act then), for any of its trigger."""
    found = _found(_spot_event(load_event("spot-interruption")))
    now = WARNED_AT + 10
    deadline = Deadline(now + 90, "the warning's")

    kept = ec2_events.approach_for(found, Settings(), deadline, now)
    cut = ec2_events.approach_for(found, Settings(), deadline, now, fixed=False)

    assert kept.fixed_by_ec2
    assert not cut.fixed_by_ec2
    assert cut.waits_for == kept.waits_for == frozenset({INTERRUPTION})
    assert cut.own_deadline and not kept.own_deadline


def test_approach_for__rebalance__waits_for_every_ec2_trigger(load_event: LoadEvent) -> None:
    found = _found(_spot_event(load_event("rebalance")))
    settings = Settings(rebalance_action="drain")
    now = WARNED_AT
    deadline = ec2_events.deadline_of(found, settings, now)

    approach = ec2_events.approach_for(found, settings, deadline, now)

    assert approach.options.trigger == "rebalance-recommendation"
    assert approach.waits_for == EC2_TRIGGERS, "it waits for any of EC2's drains under way"
    assert approach.options.fit_grace_to_deadline is False, (
        "no reclaim deadline: the pods' own grace"
    )
    assert approach.options.critical_reserve_seconds == settings.critical_reserve_seconds


# --- the record a spot drain leaves on its node: is it live? ------------------------------


NOW = 1_800_000_000.0


def _recorded(patch: dict[str, Any]) -> dict[str, Any]:
    """A node carrying the progress record `patch` writes."""
    annotations = patch["metadata"]["annotations"]
    return {"metadata": {"name": NODE, "annotations": annotations}, "spec": {}}


def _record(**fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": NODE, "annotations": {PROGRESS_ANNOTATION: json.dumps(fields)}}}


def test_live_drain__spot_record__live_before_until_not_after() -> None:
    patch, _ = cordon_patch(objects.node(NODE), NOW, trigger=INTERRUPTION, until=NOW + 100)
    node = _recorded(patch)

    assert live_drain(node, NOW + 50, EC2_TRIGGERS) == LiveDrain(INTERRUPTION, NOW, NOW + 100)
    assert live_drain(node, NOW + 99, frozenset({INTERRUPTION})) is not None
    assert live_drain(node, NOW + 100, EC2_TRIGGERS) is None
    assert live_drain(node, NOW + 150, EC2_TRIGGERS) is None


@pytest.mark.parametrize("phase", ["drained", "timed_out", "failed", "cordoned"])
def test_live_drain__record_of_an_ended_drain_or_a_cordon__not_live(phase: str) -> None:
    text = progress_value(phase, frozenset(), trigger=INTERRUPTION, since=NOW, until=NOW + 100)
    node = {"metadata": {"annotations": {PROGRESS_ANNOTATION: text}}}

    assert live_drain(node, NOW + 1, EC2_TRIGGERS) is None


def test_live_drain__rebalance_cordon__does_not_hold_back_the_interruption_drain() -> None:
    patch, _ = cordon_patch(objects.node(NODE), NOW, trigger=REBALANCE, phase="cordoned")

    assert live_drain(_recorded(patch), NOW + 1, EC2_TRIGGERS) is None


def test_live_drain__trigger_not_waited_for__not_live() -> None:
    patch, _ = cordon_patch(objects.node(NODE), NOW, trigger=REBALANCE, until=NOW + 600)
    node = _recorded(patch)

    assert live_drain(node, NOW + 1, frozenset({INTERRUPTION})) is None
    assert live_drain(node, NOW + 1, frozenset()) is None
    assert live_drain(node, NOW + 1, EC2_TRIGGERS) is not None


@pytest.mark.parametrize("until", [None, NOW + 600])
def test_live_drain__scale_in_record_without_trigger__never_live(until: float | None) -> None:
    # What the terminate hook's own drain writes: the hand-over of that drain to the
    # next invocation must never wait for itself.
    patch, _ = cordon_patch(objects.node(NODE), NOW, until=until)
    node = _recorded(patch)

    assert "trigger" not in json.loads(patch["metadata"]["annotations"][PROGRESS_ANNOTATION])
    for triggers in (EC2_TRIGGERS, EC2_TRIGGERS | {""}):
        assert live_drain(node, NOW + 1, triggers) is None


@pytest.mark.parametrize(
    "node",
    [
        objects.node(NODE),
        {"metadata": {"annotations": {PROGRESS_ANNOTATION: "not json"}}},
        _record(phase="draining", trigger=INTERRUPTION),  # no until
        _record(phase="draining", trigger=INTERRUPTION, until="soon"),
        {},
    ],
    ids=["no-record", "garbled", "no-until", "until-not-a-number", "empty-node"],
)
def test_live_drain__no_usable_record__not_live(node: dict[str, Any]) -> None:
    assert live_drain(node, NOW, EC2_TRIGGERS) is None


# --- wait_for_live_drain: the terminate hook's drain waits for a spot drain under way ---


class ScriptedNode(Kube):
    """A cluster where only `get_node` answers, with the node's successive states (the
    last one repeated); any eviction or change of the node fails the test."""

    def __init__(self, *states: dict[str, Any] | None) -> None:
        from drainer.k8s.transport import Endpoint, Transport

        super().__init__(Transport(Endpoint("http://127.0.0.1:9")))
        self.states = list(states)
        self.reads = 0

    def get_node(self, name: str) -> dict[str, Any] | None:
        assert name == NODE
        self.reads += 1
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    def evict(
        self, pod: dict[str, Any], *, grace_period_seconds: int | None = None, dry_run: bool = False
    ) -> None:
        raise AssertionError("evicted a pod while another invocation drains the node")

    def patch_node(
        self, name: str, patch: dict[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        raise AssertionError("changed the node while another invocation drains it")


def _draining(trigger: str = INTERRUPTION, until: float = NOW + 100) -> dict[str, Any]:
    return _recorded(cordon_patch(objects.node(NODE), NOW, trigger=trigger, until=until)[0])


def _ended(phase: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {PROGRESS_ANNOTATION: progress_value(phase, frozenset())}}}


def _tools(clock: FakeClock) -> Tools:
    def no_kube(*_: Any) -> Kube:
        raise AssertionError("wait_for_live_drain is handed its client")

    clients = aws.AwsClients(None, None, None, lambda: None)
    return Tools(Settings(), clients, no_kube, clock, clock.sleep, random.Random(1), None)


def _wait(
    kube: ScriptedNode,
    clock: FakeClock,
    *,
    triggers: frozenset[str] = EC2_TRIGGERS,
    limit: float = NOW + 3600,
    deadline: float = NOW + 3600,
    fixed_by_ec2: bool = False,
    ends_at_deadline: bool = False,
) -> Run | None:
    """The Run that ends the invocation, or None where the caller drains (the node
    it drains on aside: test_wait_for_live_drain__drained_on__the_node_as_last_read)."""
    waited = wait_for_live_drain(
        _tools(clock), kube, NODE, triggers, limit=limit, deadline=deadline,
        fixed_by_ec2=fixed_by_ec2, ends_at_deadline=ends_at_deadline,
    )  # fmt: skip
    return waited if isinstance(waited, Run) else None


def test_wait_for_live_drain__drained_on__the_node_as_last_read() -> None:
    """Where the caller drains on after the followed drain, it is handed the node as
    the wait last read it: the cordon judges that record (the followed drain's end),
    not the one it began waiting on (drainer/k8s/cordon.py ProgressRecord.judged)."""
    ended = _ended("timed_out")
    kube = ScriptedNode(_draining(REBALANCE, until=NOW + 100), ended)
    clock = FakeClock(NOW + 5)

    waited = wait_for_live_drain(
        _tools(clock), kube, NODE, EC2_TRIGGERS, limit=NOW + 3600, deadline=NOW + 3600
    )

    assert waited is ended


@pytest.mark.parametrize(
    ("phase", "result"),
    [("drained", Outcome.DRAINED), ("timed_out", Outcome.TIMED_OUT), ("failed", Outcome.FAILED)],
)
def test_wait_for_live_drain__live_drain_ends__its_result_without_an_eviction(
    phase: str, result: Outcome
) -> None:
    kube = ScriptedNode(_draining(), _draining(), _draining(), _ended(phase))
    clock = FakeClock(NOW + 5)

    run = _wait(kube, clock)

    assert run is not None
    assert (run.result, run.node) == (result, NODE)
    assert f"the drain begun by the spot-interruption event ended: {phase}" in run.message
    assert kube.reads == 4
    assert clock.sleeps == [LIVE_DRAIN_POLL_SECONDS] * 3


@pytest.mark.parametrize(
    ("trigger", "phase", "deadline", "drains_here"),
    [
        (REBALANCE, "timed_out", NOW + 3600, True),  # cut to its invocation: time left
        (str(Ec2Kind.SCHEDULED_CHANGE), "timed_out", NOW + 3600, True),
        (REBALANCE, "timed_out", NOW + 100, False),  # its deadline was this drain's own
        (REBALANCE, "drained", NOW + 3600, False),
        (str(Ec2Kind.STATE_CHANGE), "timed_out", NOW + 3600, False),  # EC2 acts then
        (str(Ec2Kind.CAPACITY_RESERVATION), "timed_out", NOW + 3600, False),
    ],
    ids=["rebalance", "scheduled", "same-deadline", "drained", "state-change", "reservation"],
)
def test_wait_for_live_drain__timed_out_before_this_drains_deadline__drained_here_unless_ec2s(
    trigger: str, phase: str, deadline: float, drains_here: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A drain whose deadline was not EC2's taking of the instance (a rebalance's, cut
    to its one invocation; a scheduled change's) that timed out before this drain's
    own deadline is not this drain's answer: None, said in a log line, and the caller
    drains with its own deadline. A spot warning's (tested above), a state change's
    or a capacity reservation's timeout is taken: EC2 takes the instance then."""
    kube = ScriptedNode(_draining(trigger, until=NOW + 100), _ended(phase))
    clock = FakeClock(NOW + 5)
    caplog.set_level(logging.INFO, logger="drainer.lifecycle.live")

    run = _wait(kube, clock, deadline=deadline)

    assert (run is None) == drains_here, run
    assert ("draining here until this drain's deadline" in caplog.text) == drains_here
    if run is not None:
        assert run.result == Outcome(phase)


def test_wait_for_live_drain__node_disappears__no_node() -> None:
    kube = ScriptedNode(_draining(), _draining(), None)
    clock = FakeClock(NOW + 5)

    run = _wait(kube, clock)

    assert run is not None
    assert run.result == Outcome.NO_NODE
    assert f"node {NODE} went away during the spot-interruption drain" in run.message


def test_wait_for_live_drain__stale_record__waits_the_slack_then_none_so_the_caller_drains(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kube = ScriptedNode(_draining(until=NOW + 20))  # its invocation died: never ends
    clock = FakeClock(NOW + 5)
    caplog.set_level(logging.WARNING, logger="drainer.lifecycle.live")

    run = _wait(kube, clock)

    assert run is None
    assert clock() >= NOW + 20 + LIVE_DRAIN_SLACK_SECONDS
    assert clock() <= NOW + 20 + LIVE_DRAIN_SLACK_SECONDS + LIVE_DRAIN_POLL_SECONDS
    assert "past its deadline without an end" in caplog.text


def test_wait_for_live_drain__record_already_past_its_until__none_at_once() -> None:
    kube = ScriptedNode(_draining(until=NOW + 20))
    clock = FakeClock(NOW + 21)

    assert _wait(kube, clock) is None
    assert (kube.reads, clock.sleeps) == (1, [])


@pytest.mark.parametrize(
    "node",
    [
        _recorded(cordon_patch(objects.node(NODE), NOW)[0]),  # a scale-in drain's record
        objects.node(NODE),
        _ended("drained"),
        None,
    ],
    ids=["scale-in-record", "no-record", "ended", "no-node"],
)
def test_wait_for_live_drain__no_live_spot_drain__none_at_once(node: dict[str, Any] | None) -> None:
    kube = ScriptedNode(node)
    clock = FakeClock(NOW + 5)

    assert _wait(kube, clock) is None
    assert (kube.reads, clock.sleeps) == (1, [])


def test_wait_for_live_drain__interruption_plan__does_not_wait_for_a_rebalance_drain(
    load_event: LoadEvent,
) -> None:
    found = _found(_spot_event(load_event("spot-interruption")))
    approach = ec2_events.approach_for(found, Settings(), Deadline(WARNED_AT + 105, "x"), WARNED_AT)
    kube = ScriptedNode(_draining(trigger=REBALANCE, until=NOW + 3600))
    clock = FakeClock(NOW + 5)

    assert _wait(kube, clock, triggers=approach.waits_for) is None
    assert clock.sleeps == []


@pytest.mark.parametrize(
    ("deadline", "result"),
    [
        (NOW + 90, Outcome.HANDED_OVER),  # the limit is this invocation's stop
        (NOW + 30, Outcome.TIMED_OUT),  # the limit is the drain's own deadline
    ],
    ids=["stop-before-deadline", "deadline"],
)
def test_wait_for_live_drain__limit_before_the_live_drains_end__handed_over_or_timed_out(
    deadline: float, result: Outcome
) -> None:
    kube = ScriptedNode(_draining(until=NOW + 100))
    clock = FakeClock(NOW + 5)

    run = _wait(kube, clock, limit=NOW + 30, deadline=deadline)

    assert run is not None
    assert run.result == result
    assert "still waiting for the drain begun by the spot-interruption event" in run.message
    assert clock() == NOW + 30, "waited until the limit, not past it"


@pytest.mark.parametrize(
    ("own_deadline", "until"),
    [(True, NOW + 20), (False, NOW + 100)],
    ids=["own-deadline", "later-deadline"],
)
def test_wait_for_live_drain__deadline_fixed_by_ec2__live_drain_not_acting_by_it__drains_beside(
    own_deadline: bool, until: float, caplog: pytest.LogCaptureFixture
) -> None:
    """A drain whose deadline EC2 fixes does not wait for a live drain that will not act
    by that deadline (its own deadline, or a later one: a scheduled change's window
    moved earlier): None at once, said in a warning, and the caller drains."""
    patch, _ = cordon_patch(
        objects.node(NODE), NOW, trigger=SCHEDULED, until=until, own_deadline=own_deadline
    )
    kube = ScriptedNode(_recorded(patch))
    clock = FakeClock(NOW + 5)
    caplog.set_level(logging.INFO, logger="drainer.lifecycle.live")

    run = _wait(kube, clock, triggers=frozenset({SCHEDULED}), deadline=NOW + 30, fixed_by_ec2=True)

    assert run is None
    assert clock() == NOW + 5, "not waited for"
    assert "draining here beside it" in caplog.text
    assert "waiting for it instead" not in caplog.text


@pytest.mark.parametrize(
    ("until", "waited"), [(NOW + 31, False), (NOW + 30, True)], ids=["after-it", "at-it"]
)
def test_wait_for_live_drain__the_instance_goes_at_this_deadline__a_later_drain_not_waited_for(
    until: float, waited: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The terminate hook's drain (ends_at_deadline: the instance goes at its deadline):
    a live drain whose deadline is after the hook's, even by a second, is not waited
    for (drained beside, said in a warning); one that ends by it is, its end taken."""
    kube = ScriptedNode(_draining(until=until), _ended("drained"))
    clock = FakeClock(NOW + 5)
    caplog.set_level(logging.INFO, logger="drainer.lifecycle.live")

    run = _wait(kube, clock, deadline=NOW + 30, ends_at_deadline=True)

    if waited:
        assert run is not None and run.result == Outcome.DRAINED
        assert "waiting for it instead" in caplog.text
    else:
        assert run is None
        assert clock() == NOW + 5, "not waited for"
        assert "draining here beside it" in caplog.text


@pytest.mark.parametrize("fixed", [True, False], ids=["fixed-by-ec2", "plain"])
def test_wait_for_live_drain__duplicate_to_the_same_deadline__waited_for(fixed: bool) -> None:
    """EventBridge's duplicate of the event: the live drain's deadline is this one's,
    EC2's: waited for, its result taken, fixed deadline or not."""
    kube = ScriptedNode(_draining(until=NOW + 30), _ended("drained"))
    clock = FakeClock(NOW + 5)
    triggers = frozenset({INTERRUPTION})

    run = _wait(kube, clock, triggers=triggers, deadline=NOW + 30.7, fixed_by_ec2=fixed)

    assert run is not None
    assert run.result == Outcome.DRAINED


# --- kubesim: the record a spot drain writes, and its grace periods ------------------------


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    node = objects.node(NODE, instance=INSTANCE)  # the events' instance
    with KubeSim() as running:
        running.apply([node, objects.node("n2")])
        yield running


def _kube(sim: KubeSim) -> Kube:
    from drainer.k8s.transport import Endpoint, Transport

    transport = Transport(Endpoint(sim.url, ca_pem=sim.ca_pem.decode()))
    return Kube(transport, StaticToken(sim.admin_token), request_timeout=5.0)


class RecordingKube(Kube):
    """kubesim's client, remembering the grace period each eviction asked for."""

    def __init__(self, sim: KubeSim) -> None:
        from drainer.k8s.transport import Endpoint, Transport

        transport = Transport(Endpoint(sim.url, ca_pem=sim.ca_pem.decode()))
        super().__init__(transport, StaticToken(sim.admin_token), request_timeout=5.0)
        self.graces: dict[str, int | None] = {}

    def evict(
        self, pod: dict[str, Any], *, grace_period_seconds: int | None = None, dry_run: bool = False
    ) -> None:
        self.graces[pod["metadata"]["name"]] = grace_period_seconds
        super().evict(pod, grace_period_seconds=grace_period_seconds, dry_run=dry_run)


def test_spot_drain_cordon__record_read_back_live_until_the_deadline(sim: KubeSim) -> None:
    kube = _kube(sim)
    clock = FakeClock(time.time())
    deadline = clock() + 105
    try:
        options = DrainOptions(trigger=INTERRUPTION)
        record = ProgressRecord(INTERRUPTION)
        engine = Drain(kube, NODE, options, record=record, waits=RealWaits(clock))
        assert engine.cordon(deadline)
    finally:
        kube.close()

    node = sim.get("Node", NODE)
    assert node["spec"]["unschedulable"] is True
    live = live_drain(node, clock() + 1, EC2_TRIGGERS)
    assert live is not None
    assert (live.trigger, live.until) == (INTERRUPTION, int(deadline))
    assert live_drain(node, deadline + 1, EC2_TRIGGERS) is None


def _place(sim: KubeSim, *pods: dict[str, Any]) -> None:
    sim.apply(list(pods))
    k.eventually(
        lambda: all(
            (p.get("status") or {}).get("phase") == "Running"
            for p in sim.list("Pod")
            if p["spec"].get("nodeName") == NODE
        ),
        what="pods running",
    )


@pytest.mark.parametrize(
    ("fit", "grace_setting", "sent", "on_the_pod"),
    [
        (True, None, lambda g: g is not None and 1 <= g <= 40, lambda g: 1 <= g <= 40),
        (True, 20, lambda g: g == 20, lambda g: g == 20),  # GRACE_PERIOD_SECONDS is less
        (False, None, lambda g: g is None, lambda g: g == 600),  # the pod's own grace
    ],
    ids=["cut-to-deadline", "setting-already-shorter", "no-cut"],
)
def test_eviction_grace__fit_to_a_deadline_40s_away__pod_asking_600s_gets_at_most_40(
    sim: KubeSim,
    fit: bool,
    grace_setting: int | None,
    sent: Callable[[int | None], bool],
    on_the_pod: Callable[[int], bool],
) -> None:
    # A pod that takes all its grace period to stop: still terminating afterwards.
    _place(sim, objects.pod("batch-0", node_name=NODE, grace=600, annotations={SHUTDOWN: "3600"}))
    kube = RecordingKube(sim)
    clock = FakeClock(time.time())
    options = DrainOptions(
        trigger=INTERRUPTION, fit_grace_to_deadline=fit, grace_period_seconds=grace_setting
    )
    try:
        record = ProgressRecord(INTERRUPTION)
        Drain(kube, NODE, options, record=record, waits=SteppedWaits(clock)).run(clock() + 40)
    finally:
        kube.close()

    assert "batch-0" in kube.graces, "evicted"
    assert sent(kube.graces["batch-0"]), kube.graces
    pod = sim.get("Pod", "batch-0", "default")  # still terminating on kubesim
    assert on_the_pod(int(pod["metadata"]["deletionGracePeriodSeconds"])), pod["metadata"]


# --- notices ------------------------------------------------------------------------------


class RecordingSns:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def publish(self, **request: Any) -> dict[str, str]:
        self.sent.append(request)
        return {"MessageId": "1"}


SPOT_SUMMARY = {
    "result": "drained",
    "node": "ip-10-0-1-23.eu-west-1.compute.internal",
    "cluster": CLUSTER,
    "lifecycle_result": "none",
    "trigger": "spot-interruption",
    "seconds": 48.6,
    "evicted": 9,
}

# An EKS managed node group's Auto Scaling group name.
MANAGED_GROUP = "eks-spot-m5-large-0ec5a9f2-1b3d-4e6f-8a9c-2d4e6f8a0b1c"


@pytest.mark.parametrize(
    "notice",
    [
        lambda found: notices.ec2_start_notice(found, CLUSTER),
        lambda found: notices.end_notice(found, SPOT_SUMMARY),
    ],
    ids=["start", "end"],
)
@pytest.mark.parametrize("group", ["eks-spot-workers", MANAGED_GROUP, ""])
def test_spot_notices__subject_sent_within_sns_limits(
    load_event: LoadEvent,
    notice: Callable[[ec2_events.Ec2Target], tuple[str, str, dict[str, str]]],
    group: str,
) -> None:
    found = _found(_spot_event(load_event("spot-interruption")), group)
    sns = RecordingSns()

    assert notices.publish(sns, "arn:aws:sns:eu-west-1:123456789012:drains", notice(found))

    (sent,) = sns.sent
    subject = sent["Subject"]
    assert 0 < len(subject) < 100
    assert subject.isascii() and subject.isprintable()
    assert subject.startswith("eks-node-drainer: ")
    assert sent["MessageAttributes"]["instance_id"]["StringValue"] == INSTANCE


def test_ec2_start_notice__names_the_instance_and_ec2s_warning(load_event: LoadEvent) -> None:
    found = _found(_spot_event(load_event("spot-interruption")))

    subject, text, attributes = notices.ec2_start_notice(found, CLUSTER)

    assert subject == f"eks-node-drainer: draining spot {INSTANCE} (eks-spot-workers)"
    assert INSTANCE in text
    assert f"in cluster {CLUSTER}" in text
    assert "EC2 sent an interruption warning" in text
    assert attributes == {
        "result": "started",
        "cluster": CLUSTER,
        "asg_name": "eks-spot-workers",
        "instance_id": INSTANCE,
    }


def test_end_notice__spot_drain__names_the_instance_and_says_ec2_ends_it(
    load_event: LoadEvent,
) -> None:
    found = _found(_spot_event(load_event("spot-interruption")))

    subject, text, attributes = notices.end_notice(found, SPOT_SUMMARY)

    assert subject == "eks-node-drainer: ip-10-0-1-23.eu-west-1.compute.internal drained"
    lines = text.splitlines()
    assert lines[0] == (
        f"Instance {INSTANCE} of eks-spot-workers, node "
        "ip-10-0-1-23.eu-west-1.compute.internal, cluster prod: drained."
    )
    assert (
        lines[1]
        == "Lifecycle action: none (begun by the spot-interruption: EC2 ends the instance)."
    )
    assert lines[2] == "Duration: 49 s. Pods evicted: 9."
    assert attributes["result"] == "drained"


def test_end_notice__scale_in_summary__says_nothing_of_ec2(load_event: LoadEvent) -> None:
    found = _found(_spot_event(load_event("spot-interruption")))
    summary = {**SPOT_SUMMARY, "trigger": "terminate-hook", "lifecycle_result": "CONTINUE"}

    _, text, _ = notices.end_notice(found, summary)

    assert text.splitlines()[1] == "Lifecycle action: CONTINUE."


def test_end_notice__spot_instance_in_no_group__text_says_so(load_event: LoadEvent) -> None:
    found = _found(_spot_event(load_event("spot-interruption")), asg_name="")

    _, text, _ = notices.end_notice(found, SPOT_SUMMARY)

    assert text.splitlines()[0].startswith(f"Instance {INSTANCE} of no group, node ")


def test_rebalance_cordon__terminate_hook_drain_under_way__record_left_as_it_is(
    sim: KubeSim, load_event: LoadEvent
) -> None:
    # The hook's drain records its trigger and deadline: a rebalance cordon must not
    # overwrite them with its own.
    now = time.time()
    patch, _ = cordon_patch(
        sim.get("Node", NODE), now, trigger=TERMINATE_HOOK_TRIGGER, until=now + 600
    )
    kube = _kube(sim)
    try:
        kube.patch_node(NODE, patch)
    finally:
        kube.close()
    before = sim.get("Node", NODE)["metadata"]["annotations"][PROGRESS_ANNOTATION]
    event = _spot_event(load_event("rebalance"))
    identity = aws.NodeIdentity(event.instance_id, NODE, "us-east-1a")
    found = ec2_events.Ec2Target(event, identity, CLUSTER, "eks-spot-workers")
    tools = Tools(
        Settings(rebalance_action="cordon"),
        None,  # type: ignore[arg-type]  # no AWS call on this path
        lambda cluster, name, settings: _kube(sim),
        time.time,
        time.sleep,
        random.Random(1),
        None,
    )
    cluster = aws.ClusterInfo(CLUSTER, sim.url, "", "ACTIVE", "")

    run = ec2_events._cordon(tools, found, cluster)

    assert run.result == Result.CORDONED
    assert "being drained already" in run.message
    assert sim.get("Node", NODE)["metadata"]["annotations"][PROGRESS_ANNOTATION] == before


def _cordon_after(
    sim: KubeSim, load_event: LoadEvent, record: str, launched_at: float | None = None
) -> Run:
    """The rebalance recommendation's cordon (REBALANCE_ACTION=cordon) of the node
    cordoned with `record` (a drain's end)."""
    kube = _kube(sim)
    try:
        kube.patch_node(
            NODE,
            {
                "metadata": {"annotations": {PROGRESS_ANNOTATION: record}},
                "spec": {"unschedulable": True},
            },
        )
    finally:
        kube.close()
    event = _spot_event(load_event("rebalance"))
    identity = aws.NodeIdentity(event.instance_id, NODE, "us-east-1a", launched_at=launched_at)
    found = ec2_events.Ec2Target(event, identity, CLUSTER, "eks-spot-workers")
    tools = Tools(
        Settings(rebalance_action="cordon"),
        None,  # type: ignore[arg-type]  # no AWS call on this path
        lambda cluster, name, settings: _kube(sim),
        time.time,
        time.sleep,
        random.Random(1),
        None,
    )
    return ec2_events._cordon(tools, found, aws.ClusterInfo(CLUSTER, sim.url, "", "ACTIVE", ""))


@pytest.mark.parametrize(
    ("trigger", "phase"),
    [
        (INTERRUPTION, "drained"),
        (INTERRUPTION, "timed_out"),
        (str(Ec2Kind.CAPACITY_RESERVATION), "drained"),
        (str(Ec2Kind.STATE_CHANGE), "failed"),
    ],
)
def test_rebalance_cordon__drain_that_ends_with_the_instance_ended__node_and_record_left(
    sim: KubeSim, load_event: LoadEvent, caplog: pytest.LogCaptureFixture, trigger: str, phase: str
) -> None:
    """A recommendation delivered after the warning's drain ended: the record stays
    the drain's (not rewound to a cordon whose pods wait for that warning), and no
    `release` advice for an instance EC2 takes."""
    record = progress_value(phase, frozenset({"cordon"}), trigger=trigger, at=time.time() - 5)
    caplog.set_level(logging.INFO, logger="drainer.lifecycle.ec2_events")

    run = _cordon_after(sim, load_event, record)

    assert run.result == Result.CORDONED
    assert f"drained already by the {trigger} drain (it ended: {phase})" in run.message
    assert "left as they are" in run.message
    assert sim.get("Node", NODE)["metadata"]["annotations"][PROGRESS_ANNOTATION] == record
    assert "release --node" not in caplog.text


@pytest.mark.parametrize(
    ("trigger", "ended_ago", "launched_ago"),
    [
        (INTERRUPTION, 600, 60),  # stopped by the warning, started again since
        (str(Ec2Kind.REBALANCE), 5, None),  # a rebalance's own drain: EC2 has not decided
        (TERMINATE_HOOK_TRIGGER, 5, None),  # into the warm pool: it comes back
    ],
    ids=["earlier-life", "rebalance-drain", "terminate-hook-into-warm-pool"],
)
def test_rebalance_cordon__other_ended_record__cordoned_with_release_advice(
    sim: KubeSim,
    load_event: LoadEvent,
    caplog: pytest.LogCaptureFixture,
    trigger: str,
    ended_ago: float,
    launched_ago: float | None,
) -> None:
    now = time.time()
    where = WARM_POOL_NAME if trigger == TERMINATE_HOOK_TRIGGER else ""
    record = progress_value(
        "drained", frozenset({"cordon"}), trigger=trigger, destination=where, at=now - ended_ago
    )
    launched = None if launched_ago is None else now - launched_ago
    caplog.set_level(logging.INFO, logger="drainer.lifecycle.ec2_events")

    run = _cordon_after(sim, load_event, record, launched_at=launched)

    assert run.result == Result.CORDONED
    assert run.message.startswith(f"cordoned node {NODE} on the rebalance recommendation")
    after = json.loads(sim.get("Node", NODE)["metadata"]["annotations"][PROGRESS_ANNOTATION])
    assert (after["phase"], after["trigger"]) == ("cordoned", REBALANCE)
    assert f"release --node {NODE}" in caplog.text


# --- EC2's other events: scheduled changes, state changes, capacity reservations ----------

RETIRES_AT = datetime(2026, 11, 24, 9, 0, 0, tzinfo=UTC).timestamp()
"""The window's start in tests/events/health-scheduled-change.json."""
HEALTH_SENT_AT = datetime(2026, 11, 22, 2, 10, 0, tzinfo=UTC).timestamp()


def test_parse_event__health_scheduled_change__one_instance__ec2_event_with_its_window(
    load_event: LoadEvent,
) -> None:
    parsed = parse_event(load_event("health-scheduled-change"))

    assert isinstance(parsed, Ec2Event), parsed
    assert parsed.kind is Ec2Kind.SCHEDULED_CHANGE
    assert parsed.instance_id == INSTANCE
    assert parsed.acts_at == RETIRES_AT, "AWS Health's RFC 1123 startTime"
    assert parsed.detail_code == "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
    assert parsed.log_keys()["trigger"] == "scheduled-change"


def test_parse_event__health_change_naming_several_instances__one_event_each(
    load_event: LoadEvent,
) -> None:
    raw = load_event("health-scheduled-change")
    other = "i-0fedcba9876543210"
    raw["detail"]["affectedEntities"] = [
        {"entityValue": INSTANCE},
        {"entityValue": other},
        {"entityValue": "vol-0123456789abcdef0"},  # not an instance: not ours to drain
        {"entityValue": INSTANCE},  # named twice
    ]

    parsed = parse_event(raw)

    assert isinstance(parsed, ScheduledChanges), parsed
    assert [e.instance_id for e in parsed.events] == sorted([INSTANCE, other])
    assert {e.acts_at for e in parsed.events} == {RETIRES_AT}
    narrowed = parse_event(parsed.for_instance(other))
    assert isinstance(narrowed, Ec2Event)
    assert narrowed.instance_id == other
    assert narrowed.event_id == parsed.events[0].event_id, "the same event, for one instance"


@pytest.mark.parametrize(
    ("change", "reason", "malformed"),
    [
        (_set("detail", "service", "RDS"), "AWS Health event of 'RDS'", False),
        (_set("detail", "eventTypeCategory", "issue"), "category 'issue'", False),
        (_set("detail", "affectedEntities", []), "it names no EC2 instance", False),
        (_without("detail", "startTime"), "field 'detail.startTime' is missing", True),
        (_set("detail", "startTime", "next Tuesday"), "'next Tuesday', not a time", True),
        (_set("detail", "affectedEntities", "i-1"), "not a list", True),
        (_without("detail", "eventTypeCode"), "field 'detail.eventTypeCode' is missing", True),
        (_closed(schedule="eks-node-drainer-x"), "closed, the change is over", False),
        (_closed(entities=[]), "closed, the change is over", False),
    ],
    ids=[
        "other-service",
        "not-a-scheduled-change",
        "no-instance",
        "no-start-time",
        "start-time-not-a-time",
        "entities-not-a-list",
        "no-event-type",
        "closed-delivered-by-its-schedule",
        "closed-naming-no-instance",
    ],
)
def test_parse_event__health_events_we_do_not_act_on_or_malformed__skip_says_why(
    load_event: LoadEvent,
    change: Callable[[dict[str, Any]], None],
    reason: str,
    malformed: bool,
) -> None:
    raw = load_event("health-scheduled-change")
    change(raw)

    parsed = parse_event(raw)

    assert isinstance(parsed, Skip), parsed
    assert reason in parsed.reason
    assert parsed.malformed is malformed


def test_parse_event__state_change_and_capacity_warning__their_times(
    load_event: LoadEvent,
) -> None:
    change = _spot_event(load_event("ec2-state-change"))
    capacity = _spot_event(load_event("capacity-reservation-interruption"))

    assert (change.kind, change.detail_code, change.acts_at) == (
        Ec2Kind.STATE_CHANGE,
        "shutting-down",
        None,
    )
    assert capacity.kind is Ec2Kind.CAPACITY_RESERVATION
    assert capacity.acts_at == datetime(2026, 11, 22, 2, 18, tzinfo=UTC).timestamp()
    assert capacity.instance_action == "terminate"


def test_parse_event__capacity_warning_with_a_bad_termination_time__malformed(
    load_event: LoadEvent,
) -> None:
    raw = load_event("capacity-reservation-interruption")
    raw["detail"]["instance-termination-time"] = 1700000000

    parsed = parse_event(raw)

    assert parsed == Skip(
        "malformed capacity-reservation-interruption event: field "
        "'detail.instance-termination-time' is a int, not a string",
        malformed=True,
    )


def _shape(value: Any) -> Any:
    """A JSON value's keys, all the way down (lists by their first item)."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__


@pytest.mark.parametrize(
    ("fixture", "build"),
    [
        (
            "health-scheduled-change",
            lambda: spot_events.scheduled_change(ACCOUNT, REGION, [INSTANCE], starts_in=3600),
        ),
        (
            "ec2-state-change",
            lambda: spot_events.state_change(ACCOUNT, REGION, INSTANCE, "shutting-down"),
        ),
        (
            "capacity-reservation-interruption",
            lambda: spot_events.capacity_interruption(ACCOUNT, REGION, INSTANCE),
        ),
        ("spot-interruption", lambda: spot_events.interruption_warning(ACCOUNT, REGION, INSTANCE)),
    ],
)
def test_awssim_builds_each_event_with_the_fields_of_aws_documented_sample(
    load_event: LoadEvent, fixture: str, build: Callable[[], dict[str, Any]]
) -> None:
    """tests/events/ has each event as AWS documents it; awssim's has the same fields,
    and the drainer reads what it built."""
    built = build()

    assert _shape(built) == _shape(load_event(fixture))
    parsed = parse_event(built)
    assert isinstance(parsed, Ec2Event), parsed
    assert parsed.instance_id == INSTANCE


def test_awssim_scheduled_change__window_start_read_back_to_the_second() -> None:
    raw = spot_events.scheduled_change(ACCOUNT, REGION, [INSTANCE], starts_in=3600)

    parsed = _spot_event(raw)

    assert parsed.acts_at == pytest.approx(time.time() + 3600, abs=5)


@pytest.mark.parametrize(
    ("kind", "variable"),
    [
        (Ec2Kind.SCHEDULED_CHANGE, "SCHEDULED_CHANGE_DRAIN"),
        (Ec2Kind.STATE_CHANGE, "STATE_CHANGE_DRAIN"),
        (Ec2Kind.CAPACITY_RESERVATION, "CAPACITY_RESERVATION_DRAIN"),
        (Ec2Kind.INTERRUPTION, "SPOT_INTERRUPTION_DRAIN"),
    ],
)
def test_target__each_kind_turned_off__skipped_naming_its_setting_before_any_aws_call(
    kind: Ec2Kind, variable: str
) -> None:
    event = Ec2Event(kind, INSTANCE, "id", "2026-11-22T02:14:10Z", REGION, ACCOUNT)
    settings = Settings.from_env({variable: "false"})

    found = ec2_events.target(event, settings, NO_AWS)

    assert isinstance(found, Skip)
    assert found.reason.endswith(f"{variable} is off")


def test_settings__state_change_off_by_default__the_others_on() -> None:
    settings = Settings()

    assert (
        settings.scheduled_change_drain,
        settings.state_change_drain,
        settings.capacity_reservation_drain,
    ) == (True, False, True)


def _scheduled(starts_at: float) -> ec2_events.Ec2Target:
    event = Ec2Event(
        Ec2Kind.SCHEDULED_CHANGE,
        INSTANCE,
        "id",
        "2026-11-22T02:10:00Z",
        REGION,
        ACCOUNT,
        acts_at=starts_at,
        detail_code="AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
    )
    return _found(event)


def test_scheduled_change__window_within_the_drain_timeout__deadline_is_its_start_pods_forced() -> (
    None
):
    settings = Settings.from_env(
        {"DRAIN_TIMEOUT_SECONDS": "900", "SPOT_DEADLINE_MARGIN_SECONDS": "15"}
    )
    now = RETIRES_AT - 600
    found = _scheduled(RETIRES_AT)

    deadline = ec2_events.deadline_of(found, settings, now)
    approach = ec2_events.approach_for(found, settings, deadline, now)

    assert deadline.at == RETIRES_AT - 15
    assert "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED starting 2026-11-24T09:00:00Z" in (
        deadline.source
    )
    assert approach.options.force_on_timeout, "EC2 acts then: held pods get their grace first"
    assert approach.options.fit_grace_to_deadline
    assert approach.waits_for == frozenset({"scheduled-change"})


@pytest.mark.parametrize(("policy", "forced"), [("continue", False), ("force", True)])
def test_scheduled_change__window_within_the_timeout__cut_to_this_invocation__policy_at_its_end(
    policy: str, forced: bool
) -> None:
    """A window 30 minutes away, the drain cut to this invocation's end (EC2 drains do
    not hand over): EC2's grace-fitting does not apply at that end, but TIMEOUT_POLICY
    does, the last moment this drain has before EC2 acts (the review's fix of the
    rebalance case had taken it away here too)."""
    settings = Settings.from_env({"TIMEOUT_POLICY": policy})
    now = RETIRES_AT - 1800
    found = _scheduled(RETIRES_AT)
    cut = Deadline(now + 840, "cut to this invocation's time")

    approach = ec2_events.approach_for(found, settings, cut, now, fixed=False)

    assert approach.options.force_on_timeout is forced
    assert not approach.options.fit_grace_to_deadline


@pytest.mark.parametrize("policy", ["continue", "force"])
def test_scheduled_change__window_days_away__drain_timeout_budgets_respected_nothing_forced(
    policy: str,
) -> None:
    """TIMEOUT_POLICY=force too: the window is days away, EC2 takes nothing at the
    drain's deadline (force deleted the held pods there)."""
    settings = Settings.from_env({"DRAIN_TIMEOUT_SECONDS": "900", "TIMEOUT_POLICY": policy})
    now = HEALTH_SENT_AT
    found = _scheduled(RETIRES_AT)

    deadline = ec2_events.deadline_of(found, settings, now)
    approach = ec2_events.approach_for(found, settings, deadline, now)

    assert deadline == Deadline(now + 900, "DRAIN_TIMEOUT_SECONDS (900 s)")
    assert not approach.options.force_on_timeout, "the window is days away: no pod deleted for it"
    assert not approach.options.fit_grace_to_deadline


def test_rebalance_drain__timeout_policy_force__pods_still_held_stay(
    load_event: LoadEvent,
) -> None:
    """A rebalance recommendation's drain ends within its invocation; EC2 has decided
    nothing: the pods a budget still holds then stay (force deleted them)."""
    found = _found(_spot_event(load_event("rebalance")))
    settings = Settings.from_env({"REBALANCE_ACTION": "drain", "TIMEOUT_POLICY": "force"})
    now = found.event.issued_at or 0.0

    deadline = ec2_events.deadline_of(found, settings, now)
    approach = ec2_events.approach_for(found, settings, deadline, now)

    assert not approach.options.force_on_timeout
    assert not approach.options.fit_grace_to_deadline


def test_deadline_of__state_change__a_minute_from_the_event_less_the_margin(
    load_event: LoadEvent,
) -> None:
    found = _found(_spot_event(load_event("ec2-state-change")))
    sent = datetime(2026, 11, 22, 2, 20, 30, tzinfo=UTC).timestamp()
    settings = Settings.from_env({"SPOT_DEADLINE_MARGIN_SECONDS": "10"})

    deadline = ec2_events.deadline_of(found, settings, sent + 2)
    approach = ec2_events.approach_for(found, settings, deadline, sent + 2)

    assert deadline.at == sent + STATE_CHANGE_NOTICE_SECONDS - 10
    assert deadline.source.startswith("instance shutting-down at 2026-11-22T02:20:30Z + 60 s")
    assert approach.options.force_on_timeout and approach.options.fit_grace_to_deadline


def test_scheduled_change__window_already_begun__budgets_respected_nothing_forced() -> None:
    """Health's update of a change under way ("open"): its start is past; deleting
    every pod at once would be the worst answer."""
    settings = Settings.from_env({"DRAIN_TIMEOUT_SECONDS": "900"})
    now = RETIRES_AT + 120
    found = _scheduled(RETIRES_AT)

    deadline = ec2_events.deadline_of(found, settings, now)

    assert deadline == Deadline(now + 900, "DRAIN_TIMEOUT_SECONDS (900 s)")
    assert not ec2_events.approach_for(found, settings, deadline, now).options.force_on_timeout


def test_deadline_of__state_change__the_margin_takes_half_the_minute_at_most(
    load_event: LoadEvent,
) -> None:
    found = _found(_spot_event(load_event("ec2-state-change")))
    sent = datetime(2026, 11, 22, 2, 20, 30, tzinfo=UTC).timestamp()
    settings = Settings.from_env({"SPOT_DEADLINE_MARGIN_SECONDS": "100"})

    assert ec2_events.deadline_of(found, settings, sent).at == sent + 30


def test_deadline_of__capacity_warning__its_termination_time_less_the_margin(
    load_event: LoadEvent,
) -> None:
    found = _found(_spot_event(load_event("capacity-reservation-interruption")))
    settings = Settings.from_env({"SPOT_DEADLINE_MARGIN_SECONDS": "15"})
    terminates = datetime(2026, 11, 22, 2, 18, tzinfo=UTC).timestamp()

    deadline = ec2_events.deadline_of(found, settings, terminates - 100)

    assert deadline == Deadline(
        terminates - 15,
        "capacity reservation's termination at 2026-11-22T02:18:00Z "
        "- SPOT_DEADLINE_MARGIN_SECONDS (15 s)",
    )


@pytest.mark.parametrize(
    ("fixture", "words"),
    [
        ("health-scheduled-change", "AWS Health scheduled AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"),
        ("ec2-state-change", "EC2 says the instance is shutting-down"),
        ("capacity-reservation-interruption", "terminating it at 2026-11-22 02:18:00 UTC"),
    ],
)
def test_ec2_start_notice__says_what_ec2_announced(
    load_event: LoadEvent, fixture: str, words: str
) -> None:
    subject, text, _ = notices.ec2_start_notice(_found(_spot_event(load_event(fixture))), CLUSTER)

    assert words in text
    assert subject == f"eks-node-drainer: draining {INSTANCE} (eks-spot-workers)"


class NoClient:
    """A client the code under test must not use: any call fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected AWS call: {name}")


NO_CLIENT: Any = NoClient()
NO_AWS = aws.AwsClients(NO_CLIENT, NO_CLIENT, NO_CLIENT, lambda: NO_CLIENT)


def _no_kube(*args: Any) -> Kube:
    raise AssertionError("unexpected Kubernetes client")


class RecordingLambda:
    """A Lambda client that queues nothing, remembering each asynchronous invocation."""

    def __init__(self) -> None:
        self.invoked: list[dict[str, Any]] = []

    def invoke(self, **request: Any) -> dict[str, int]:
        self.invoked.append(request)
        return {"StatusCode": 202}


def test_fan_out__each_instance_in_an_invocation_of_its_own__narrowed_to_it(
    load_event: LoadEvent,
) -> None:
    raw = load_event("health-scheduled-change")
    others = ["i-0fedcba9876543210", "i-00000000000000001"]
    raw["detail"]["affectedEntities"] += [{"entityValue": i} for i in others]
    changes = parse_event(raw)
    assert isinstance(changes, ScheduledChanges)
    recording = RecordingLambda()
    clients = aws.AwsClients(NO_CLIENT, NO_CLIENT, NO_CLIENT, lambda: recording)
    arn = "arn:aws:lambda:eu-west-1:123456789012:function:drainer"
    invocation = Invocation(remaining_seconds=lambda: 900.0, function_arn=arn)

    result = ec2_events.fan_out(changes, Tools(Settings(), clients, _no_kube), invocation)

    assert result == {"result": "fanned_out", "instances": sorted([INSTANCE, *others])}
    assert {r["FunctionName"] for r in recording.invoked} == {arn}
    assert {r["InvocationType"] for r in recording.invoked} == {"Event"}
    drained = []
    for request in recording.invoked:
        single = parse_event(json.loads(request["Payload"]))
        assert isinstance(single, Ec2Event), single
        drained.append(single.instance_id)
    assert sorted(drained) == sorted([INSTANCE, *others])


# --- an event that comes late: checked against EC2's state of the instance now ----------


def _as_now(found: ec2_events.Ec2Target, state: str, launched_at: float | None) -> Any:
    identity = dataclasses.replace(found.identity, state=state, launched_at=launched_at)
    return dataclasses.replace(found, identity=identity)


@pytest.mark.parametrize(
    ("fixture", "moment"),
    [("spot-interruption", WARNED_AT + 120), ("ec2-state-change", None)],
)
@pytest.mark.parametrize("state", ["pending", "running"])
def test_late_event__moment_passed_instance_still_running__own_deadline_budgets_no_force(
    load_event: LoadEvent, fixture: str, moment: float | None, state: str
) -> None:
    event = _spot_event(load_event(fixture))
    found = _as_now(_found(event), state, launched_at=WARNED_AT - 86400)
    acts = late.acts_at(event)
    assert acts is not None and (moment is None or acts == moment)
    settings = Settings.from_env({"TIMEOUT_POLICY": "force"})
    now = acts + 15 * 60

    deadline = ec2_events.deadline_of(found, settings, now)
    approach = ec2_events.approach_for(found, settings, deadline, now)

    assert late.is_late(found.event, found.identity, now)
    assert deadline.at == now + late.LATE_EVENT_DRAIN_SECONDS
    assert f"is still {state}" in deadline.source
    assert not approach.options.force_on_timeout, "a late event's drain deletes nothing"
    assert not approach.options.fit_grace_to_deadline
    assert approach.own_deadline, "its record says EC2 does not keep its deadline"
    assert late.restarted(found.event, found.identity) is None


@pytest.mark.parametrize("state", ["stopping", "shutting-down", "stopped", ""])
def test_late_event__instance_going_or_state_unknown__drained_as_ec2_fixes_it(
    load_event: LoadEvent, state: str
) -> None:
    found = _as_now(_found(_spot_event(load_event("spot-interruption"))), state, None)
    now = WARNED_AT + 600

    deadline = ec2_events.deadline_of(found, Settings(), now)

    assert not late.is_late(found.event, found.identity, now)
    assert deadline.at == WARNED_AT + 120 - 15
    approach = ec2_events.approach_for(found, Settings(), deadline, now)
    assert approach.options.force_on_timeout and not approach.own_deadline


def test_late_event__moment_not_passed__not_late(load_event: LoadEvent) -> None:
    found = _as_now(_found(_spot_event(load_event("spot-interruption"))), "running", None)

    assert not late.is_late(found.event, found.identity, WARNED_AT + 119)
    assert late.is_late(found.event, found.identity, WARNED_AT + 120)


def test_restarted__launched_after_the_event__skip_naming_both_times(
    load_event: LoadEvent,
) -> None:
    event = _spot_event(load_event("spot-interruption"))

    before = _as_now(_found(event), "running", WARNED_AT - 1)
    after = _as_now(_found(event), "running", WARNED_AT + 300)
    skip = late.restarted(after.event, after.identity)

    assert late.restarted(before.event, before.identity) is None
    assert late.restarted(event, _as_now(_found(event), "running", None).identity) is None
    assert isinstance(skip, Skip) and not skip.malformed
    assert skip.reason == (
        "spot interruption warning of 2026-11-22T02:14:10Z about instance "
        f"{INSTANCE}, which was started again at 2026-11-22T02:19:10Z, after it: the event "
        "no longer applies; its node is left alone"
    )


def test_describe_instance__reads_state_and_launch_time(clients: aws.AwsClients) -> None:
    """awssim starts its instances a day ago, and a restart moves LaunchTime to now."""
    instance = _lone_instance(clients)

    first = aws.describe_instance(clients.ec2, instance)
    clients.ec2.stop_instances(InstanceIds=[instance])
    clients.ec2.start_instances(InstanceIds=[instance])
    again = aws.describe_instance(clients.ec2, instance)

    assert first.state == "running"
    assert first.launched_at is not None and first.launched_at < time.time() - 86000
    assert again.launched_at is not None and again.launched_at > time.time() - 60


@pytest.mark.parametrize(
    ("name", "notice"),
    [("spot-interruption", SPOT_NOTICE_SECONDS), ("ec2-state-change", STATE_CHANGE_NOTICE_SECONDS)],
)
def test_deadline_of__an_event_time_after_its_delivery__counted_from_the_delivery(
    load_event: LoadEvent, name: str, notice: int
) -> None:
    """A warning's time later than its delivery (a clock's skew, a hand-made event)
    gave the drain EC2's notice from that time: decades for 2090, a drain cut and
    handed over, invocation after invocation, on a node EC2 takes two minutes after
    the real warning. The warning was issued by the time it came, at the latest."""
    raw = load_event(name)
    raw["time"] = "2090-01-01T00:00:00Z"
    found = _found(_spot_event(raw))
    now = datetime(2026, 11, 22, 2, 20, 30, tzinfo=UTC).timestamp()

    deadline = ec2_events.deadline_of(found, Settings(), now)

    assert now < deadline.at <= now + notice


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("spot-interruption", "time"),
        ("ec2-state-change", "time"),
        ("capacity-reservation-interruption", "instance-termination-time"),
    ],
)
@pytest.mark.parametrize("moment", ["9999-12-31T23:59:00-12:00", "0001-01-01T00:00:00+14:00"])
def test_parse_event__a_time_no_clock_can_show__malformed__not_a_traceback(
    load_event: LoadEvent, name: str, key: str, moment: str
) -> None:
    """A time whose UTC falls outside the years a datetime holds parsed, and the
    deadline's log line, the notice and the schedule raised ValueError on it (year
    10000 is out of range): a traceback, and Lambda's retries into the same one."""
    raw = load_event(name)
    (raw if key == "time" else raw["detail"])[key] = moment

    parsed = parse_event(raw)

    assert isinstance(parsed, Skip) and parsed.malformed, parsed
    assert "not" in parsed.reason and key in parsed.reason, parsed.reason


def test_parse_event__capacity_warning_naming_no_termination_time__two_minutes_from_its_time(
    load_event: LoadEvent,
) -> None:
    """A capacity reservation's warning without `instance-termination-time` was
    dropped as malformed: no drain, and EC2 took the instance two minutes later with
    its pods. The deadline's own fallback (the warning's time + 120 s) never ran."""
    raw = load_event("capacity-reservation-interruption")
    del raw["detail"]["instance-termination-time"]

    parsed = parse_event(raw)

    assert isinstance(parsed, Ec2Event) and parsed.acts_at is None, parsed
    issued = parsed.issued_at or 0.0
    found = _found(parsed)
    settings = Settings.from_env({"SPOT_DEADLINE_MARGIN_SECONDS": "15"})
    assert (
        ec2_events.deadline_of(found, settings, issued + 5).at == issued + SPOT_NOTICE_SECONDS - 15
    )
