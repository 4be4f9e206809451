"""Review 57: the target-group step and what the operator is told.

Each test shows a user-visible misbehaviour of the current code."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from support.clock import FakeClock

from awssim import elbv2 as elb_sim
from drainer import aws
from drainer.engine.report import PodAddress
from drainer.k8s.events import Regarding
from drainer.lifecycle.handover import HANDOVER_KEY, Handover, parse_handover, with_handover
from drainer.lifecycle.job import Approach, DrainJob, Run, Tools
from drainer.lifecycle.outcomes import Result
from drainer.lifecycle.runner import _leave_target_groups
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.targets import CLUSTER_TAG, leave_target_groups
from drainer.lifecycle.window import Deadline, Window

INSTANCE = "i-0000000000000005"


@pytest.fixture
def elbv2(moto_aws: None) -> Iterator[Any]:
    elb_sim.reset()
    yield boto3.client("elbv2", region_name="us-east-1")
    elb_sim.reset()


@pytest.fixture
def elb_clock() -> Iterator[FakeClock]:
    clock = FakeClock(1000.0)
    elb_sim.set_clock(clock)
    try:
        yield clock
    finally:
        elb_sim.set_clock(time.time)


def _group(elbv2: Any, name: str, kind: str, targets: tuple[str, ...], delay: int) -> str:
    vpc = boto3.client("ec2", region_name="us-east-1").create_vpc(CidrBlock="10.0.0.0/16")
    arn = str(
        elbv2.create_target_group(
            Name=name,
            Protocol="HTTP",
            Port=80,
            VpcId=vpc["Vpc"]["VpcId"],
            TargetType=kind,
            Tags=[{"Key": CLUSTER_TAG, "Value": "prod"}],
        )["TargetGroups"][0]["TargetGroupArn"]
    )
    elbv2.register_targets(TargetGroupArn=arn, Targets=[{"Id": t} for t in targets])
    elbv2.modify_target_group_attributes(
        TargetGroupArn=arn,
        Attributes=[{"Key": "deregistration_delay.timeout_seconds", "Value": str(delay)}],
    )
    return arn


def _states(elbv2: Any, arn: str) -> list[str]:
    health = elbv2.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
    return [h["TargetHealth"]["State"] for h in health]


def test_throttled_delay_lookup__the_wait_is_abandoned__continue_while_the_instance_drains(
    elbv2: Any, elb_clock: FakeClock
) -> None:
    """Reading an ip group's deregistration delay (only for the short-grace warning)
    is throttled beyond botocore's retries: the whole wait ends at once with "target
    groups not checked", although the instance was just deregistered and its
    connections drain for 20 s more: CONTINUE drops them."""
    mine = _group(elbv2, "k8s-web", "instance", (INSTANCE,), delay=20)
    _group(elbv2, "k8s-web-ip", "ip", ("10.0.1.11",), delay=20)

    def throttled(model: Any, **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if model.name != "DescribeTargetGroupAttributes":
            return None
        error = {"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}
        return AWSResponse("https://elasticloadbalancing", 400, {}, None), error

    elbv2.meta.events.register("before-call.*", throttled)
    clock = elb_clock

    found = leave_target_groups(
        elbv2,
        INSTANCE,
        "prod",
        [],
        pods={"default/web-1": PodAddress("10.0.1.11", grace=60)},
        until=clock() + 60,
        clock=clock,
        sleep=clock.sleep,
    )

    assert _states(elbv2, mine) == [], "the instance was deregistered and has drained by now"
    assert found.error == "", found.describe()
    assert found.seconds >= 20, f"CONTINUE after {found.seconds:.0f} s, mid-drain of its targets"


def _tools(elbv2: Any, clock: FakeClock, wait: int) -> Tools:
    clients = aws.AwsClients(None, None, None, lambda: None, elbv2=lambda: elbv2)
    settings = Settings(target_group_wait_seconds=wait)
    return Tools(settings, clients, kube_factory=None, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]


def _job(deadline: float, stop_at: float, handed_over: Handover | None = None) -> DrainJob:
    identity = aws.NodeIdentity(INSTANCE, "ip-10-0-1-5.ec2.internal", "us-east-1a")
    cluster = aws.ClusterInfo("prod", "https://x", "", "ACTIVE", "arn:aws:eks:::cluster/prod")
    window = Window(Deadline(deadline, "DRAIN_TIMEOUT_SECONDS (3600 s)"), stop_at)
    approach = Approach(Settings().drain_options(), frozenset())
    return DrainJob(identity, cluster, window, approach, handed_over)


def _handed_on(first: Run, started: float, now: float) -> Handover | None:
    """What the next invocation reads of the first one's hand-over: its payload's
    "drainer" key, through JSON and the parser."""
    assert first.targets is not None
    handover = Handover(started, 0, 0).handed_on(0, target_wait_began=first.targets.began_at)
    payload = json.loads(json.dumps(with_handover({}, handover)))
    return parse_handover(payload[HANDOVER_KEY], None, now)


def test_target_wait_handed_over__starts_again_in_the_next_invocation__longer_than_promised(
    elbv2: Any, elb_clock: FakeClock
) -> None:
    """TARGET_GROUP_WAIT_SECONDS=300 promises at most 300 s of waiting for the target
    groups. The first invocation waits 200 s and hands over; the next one waits 300 s
    more from its own start: 500 s in all before CONTINUE."""
    _group(elbv2, "k8s-slow", "instance", (INSTANCE,), delay=3000)
    clock = elb_clock
    tools = _tools(elbv2, clock, wait=300)
    started = clock()
    deadline = started + 3600

    first = _leave_target_groups(
        tools, Run(Result.DRAINED, node="n1"), _job(deadline, stop_at=started + 200)
    )
    assert first.result == Result.HANDED_OVER
    handed_over = _handed_on(first, started, clock())
    second = _leave_target_groups(
        tools, Run(Result.DRAINED, node="n1"), _job(deadline, clock() + 800, handed_over)
    )

    assert second.result == Result.DRAINED
    waited = clock() - started
    assert waited <= 300 + 10, f"waited {waited:.0f} s for the target groups, promised 300"


class _Poster:
    folded = 0
    limit = 200

    def __init__(self) -> None:
        self.notes: list[tuple[str, str]] = []

    def post(self, regarding: Regarding, reason: str, action: str, note: str, **_: Any) -> None:
        self.notes.append((reason, note))


def test_drained_event_after_a_hand_over__counts_the_pods_evicted_before_it() -> None:
    """The node's Drained Event says "every pod is gone: N evicted": after a hand-over
    N is the drain's, the 40 pods the invocations before evicted with the 3 of the
    last, not the last invocation's 3 alone."""
    from drainer.engine.report import DrainReport
    from drainer.lifecycle.told import DrainStory

    poster = _Poster()
    story = DrainStory(poster, "n1", "uid", "terminate-hook", evicted_before=40)  # type: ignore[arg-type]

    story.ended(DrainReport("n1", evicted=3), lambda _: "CONTINUE")

    assert poster.notes == [
        (
            "Drained",
            "every pod is gone: 43 evicted (40 before a hand-over); the Auto "
            "Scaling group is told CONTINUE",
        )
    ]


NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    "claimed",
    [
        NOW + 301,  # in the future, past the clock skew
        NOW - 1000 - 301,  # before the drain began, past the clock skew
        float("nan"),
        True,
        "1800000000",
        10**400,  # no float: never an OverflowError
        -5,
    ],
)
@pytest.mark.parametrize("key", ["target_wait_began", "volume_wait_began"])
def test_hand_over_claiming_a_wait_start_out_of_bounds__malformed(claimed: object, key: str):
    from drainer.lifecycle.events_fields import Malformed

    raw = {"started_at": NOW - 1000, "handovers": 1, "heartbeats": 2, key: claimed}
    with pytest.raises(Malformed, match=key):
        parse_handover(raw, None, NOW)


@pytest.mark.parametrize("count", [-1, 10**7, 2.5, True, "3"])
@pytest.mark.parametrize("key", ["evicted", "forced"])
def test_hand_over_claiming_a_count_out_of_bounds__malformed(count: object, key: str) -> None:
    from drainer.lifecycle.events_fields import Malformed

    raw = {"started_at": NOW - 1000, "handovers": 1, "heartbeats": 2, key: count}
    with pytest.raises(Malformed, match=key):
        parse_handover(raw, None, NOW)


def test_hand_over_of_a_version_before__no_eviction_count_no_target_wait() -> None:
    raw = {"started_at": NOW - 1000, "handovers": 1, "heartbeats": 2}

    parsed = parse_handover(raw, None, NOW)

    assert parsed == Handover(NOW - 1000, 1, 2, evicted=0, target_wait_began=None)
    assert with_handover({}, Handover(NOW - 1000, 1, 2))[HANDOVER_KEY] == raw, "unchanged"


def test_hand_over_carries_its_counts_and_the_target_wait_s_first_start() -> None:
    first = Handover(NOW - 1000, 0, 0).handed_on(3, evicted=40, target_wait_began=NOW - 200)
    second = first.handed_on(2, evicted=1)  # an invocation that began no wait of its own

    assert second == Handover(NOW - 1000, 2, 5, evicted=41, target_wait_began=NOW - 200)
    assert parse_handover(with_handover({}, second)[HANDOVER_KEY], None, NOW) == second
    # The pods force-deleted add up; the volume wait keeps its first start.
    third = second.handed_on(1, forced=2, volume_wait_began=NOW - 100).handed_on(1, forced=1)
    assert (third.forced, third.volume_wait_began) == (3, NOW - 100)
    assert parse_handover(with_handover({}, third)[HANDOVER_KEY], None, NOW) == third


def test_target_wait_start_claimed_in_the_future__waits_no_longer_than_one_begun_now(
    elbv2: Any, elb_clock: FakeClock
) -> None:
    """A start within the clock skew but past this invocation's clock (a forged or
    skewed claim) counts as now: TARGET_GROUP_WAIT_SECONDS from now at the most."""
    _group(elbv2, "k8s-slow", "instance", (INSTANCE,), delay=3000)
    clock = elb_clock
    tools = _tools(elbv2, clock, wait=300)
    started = clock()
    claim = Handover(started, 1, 0, target_wait_began=started + 299)

    run = _leave_target_groups(
        tools, Run(Result.DRAINED, node="n1"), _job(started + 3600, started + 800, claim)
    )

    assert run.result == Result.DRAINED and run.targets is not None
    assert run.targets.began_at == started
    assert clock() - started <= 300 + 10
