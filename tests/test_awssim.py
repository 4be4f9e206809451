"""awssim: the moto extension, in process and as `python -m awssim serve`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws
from support.clock import FakeClock

from awssim import AwsSim
from awssim.__main__ import main as awssim_main
from awssim.client import AwsSimClient, AwsSimError
from awssim.server import AwsSimServer
from awssim.world import NodeGroup, create_node_group
from drainer import aws
from drainer.errors import AwsError
from drainer.lifecycle.events import parse_event
from drainer.lifecycle.events_hook import LifecycleEvent

REGION = "us-east-1"
NO_RETRIES = Config(retries={"mode": "standard", "total_max_attempts": 1})
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Scene:
    ec2: Any
    autoscaling: Any
    sim: AwsSim
    group: NodeGroup
    clock: FakeClock


@pytest.fixture
def scene(moto_aws: None) -> Scene:
    ec2 = boto3.client("ec2", region_name=REGION)
    autoscaling = boto3.client("autoscaling", region_name=REGION, config=NO_RETRIES)
    group = create_node_group(
        ec2,
        autoscaling,
        asg_name="workers",
        size=3,
        hook_name="drain",
        heartbeat_timeout=300,
        default_result="ABANDON",
        notification_metadata="prod",
    )
    sim = AwsSim(region=REGION)
    clock = FakeClock(1_790_000_000.0)
    sim.set_clock(clock)
    return Scene(ec2, autoscaling, sim, group, clock)


def _lifecycle_states(scene: Scene) -> dict[str, str]:
    instances = scene.autoscaling.describe_auto_scaling_instances()["AutoScalingInstances"]
    return {i["InstanceId"]: i["LifecycleState"] for i in instances}


def _ec2_state(scene: Scene, instance_id: str) -> str:
    reservations = scene.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    return str(reservations[0]["Instances"][0]["State"]["Name"])


def _desired(scene: Scene) -> int:
    groups = scene.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["workers"])
    return int(groups["AutoScalingGroups"][0]["DesiredCapacity"])


def _complete(scene: Scene, result: str = "CONTINUE", **ids: str) -> None:
    scene.autoscaling.complete_lifecycle_action(
        AutoScalingGroupName="workers",
        LifecycleHookName=ids.pop("hook", "drain"),
        LifecycleActionResult=result,
        **ids,
    )


def _heartbeat(scene: Scene, **ids: str) -> None:
    scene.autoscaling.record_lifecycle_action_heartbeat(
        AutoScalingGroupName="workers", LifecycleHookName="drain", **ids
    )


def _error(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, str, int]:
    response = caught.value.response
    return (
        response["Error"]["Code"],
        response["Error"]["Message"],
        response["ResponseMetadata"]["HTTPStatusCode"],
    )


# --- scale-in and the events --------------------------------------------------------------


def test_scale_in__moves_instance_to_terminating_wait_and_lowers_desired(scene: Scene) -> None:
    [event] = scene.sim.scale_in("workers")

    instance_id = event["detail"]["EC2InstanceId"]
    assert _lifecycle_states(scene)[instance_id] == "Terminating:Wait"
    assert _desired(scene) == 2
    assert sum(s == "InService" for s in _lifecycle_states(scene).values()) == 2


def test_scale_in__event__has_the_shape_aws_sends(scene: Scene, load_event: Any) -> None:
    [event] = scene.sim.scale_in("workers")

    fixture = load_event("terminate")
    assert set(event) == set(fixture)
    assert set(event["detail"]) == set(fixture["detail"])
    assert event["source"] == "aws.autoscaling"
    assert event["detail-type"] == "EC2 Instance-terminate Lifecycle Action"
    assert event["account"] == "123456789012"
    assert event["region"] == REGION
    assert event["time"] == "2026-09-21T14:13:20Z"
    assert event["resources"][0].startswith("arn:aws:autoscaling:us-east-1:123456789012:")
    assert event["resources"][0].endswith(":autoScalingGroupName/workers")
    assert event["detail"]["NotificationMetadata"] == "prod"
    assert event["detail"]["Origin"] == "AutoScalingGroup"
    assert event["detail"]["Destination"] == "EC2"
    parsed = parse_event(json.loads(json.dumps(event)))
    assert isinstance(parsed, LifecycleEvent)
    assert parsed.hook_name == "drain"
    assert parsed.asg_name == "workers"


def _warm_pool(scene: Scene, *, reuse: bool = True, launch_hook: bool = True) -> None:
    scene.autoscaling.put_warm_pool(
        AutoScalingGroupName="workers",
        PoolState="Stopped",
        InstanceReusePolicy={"ReuseOnScaleIn": reuse},
    )
    if launch_hook:
        scene.autoscaling.put_lifecycle_hook(
            AutoScalingGroupName="workers",
            LifecycleHookName="join",
            LifecycleTransition="autoscaling:EC2_INSTANCE_LAUNCHING",
            HeartbeatTimeout=300,
            DefaultResult="CONTINUE",
        )


def _pool(scene: Scene) -> dict[str, str]:
    answer = scene.autoscaling.describe_warm_pool(AutoScalingGroupName="workers")
    return {i["InstanceId"]: i["LifecycleState"] for i in answer["Instances"]}


def test_warm_pool__scale_in__drained_into_the_pool_stopped__then_back_into_service(
    scene: Scene,
) -> None:
    _warm_pool(scene)
    [event] = scene.sim.scale_in("workers")
    instance_id = event["detail"]["EC2InstanceId"]

    assert event["detail-type"] == "EC2 Instance-terminate Lifecycle Action"
    assert (event["detail"]["Origin"], event["detail"]["Destination"]) == (
        "AutoScalingGroup",
        "WarmPool",
    )
    assert _lifecycle_states(scene)[instance_id] == "Warmed:Pending:Wait"
    parsed = parse_event(json.loads(json.dumps(event)))
    assert isinstance(parsed, LifecycleEvent) and parsed.into_warm_pool

    _complete(scene, LifecycleActionToken=event["detail"]["LifecycleActionToken"])

    assert _pool(scene) == {instance_id: "Warmed:Stopped"}
    assert _lifecycle_states(scene)[instance_id] == "Warmed:Stopped"
    assert _ec2_state(scene, instance_id) == "stopped", "stopped, not terminated"
    assert _desired(scene) == 2
    in_service = [i for i, s in _lifecycle_states(scene).items() if s == "InService"]
    assert len(in_service) == 2, "no replacement launched"

    back, [launch] = scene.sim.scale_out_from_warm_pool("workers")

    assert back == instance_id
    assert launch["detail-type"] == "EC2 Instance-launch Lifecycle Action"
    assert (launch["detail"]["Origin"], launch["detail"]["Destination"]) == (
        "WarmPool",
        "AutoScalingGroup",
    )
    assert launch["detail"]["LifecycleHookName"] == "join"
    parsed = parse_event(json.loads(json.dumps(launch)))
    assert isinstance(parsed, LifecycleEvent) and parsed.out_of_warm_pool and parsed.launching
    assert _lifecycle_states(scene)[instance_id] == "Pending:Wait"
    assert _ec2_state(scene, instance_id) == "running"
    assert _pool(scene) == {}
    assert _desired(scene) == 3

    scene.autoscaling.complete_lifecycle_action(
        AutoScalingGroupName="workers",
        LifecycleHookName="join",
        LifecycleActionToken=launch["detail"]["LifecycleActionToken"],
        LifecycleActionResult="CONTINUE",
    )
    assert _lifecycle_states(scene)[instance_id] == "InService"


def test_warm_pool__no_reuse_on_scale_in__scale_in_terminates(scene: Scene) -> None:
    _warm_pool(scene, reuse=False)
    [event] = scene.sim.scale_in("workers")

    assert event["detail"]["Destination"] == "EC2"
    _complete(scene, LifecycleActionToken=event["detail"]["LifecycleActionToken"])
    assert _ec2_state(scene, event["detail"]["EC2InstanceId"]) == "terminated"
    assert _pool(scene) == {}


def test_warm_pool__new_instance_warmed__waits_then_stopped_in_the_pool(scene: Scene) -> None:
    _warm_pool(scene)
    instance_id, [event] = scene.sim.launch_into_warm_pool("workers")

    assert (event["detail"]["Origin"], event["detail"]["Destination"]) == ("EC2", "WarmPool")
    assert event["detail"]["LifecycleTransition"] == "autoscaling:EC2_INSTANCE_LAUNCHING"
    assert _pool(scene) == {instance_id: "Warmed:Pending:Wait"}
    assert _desired(scene) == 3, "the pool is not the group's capacity"

    scene.autoscaling.complete_lifecycle_action(
        AutoScalingGroupName="workers",
        LifecycleHookName="join",
        LifecycleActionToken=event["detail"]["LifecycleActionToken"],
        LifecycleActionResult="CONTINUE",
    )

    assert _pool(scene) == {instance_id: "Warmed:Stopped"}
    assert _ec2_state(scene, instance_id) == "stopped"
    assert len(_lifecycle_states(scene)) == 4, "the group's 3 and the pool's 1"


def test_warm_pool__empty_pool__scale_out_from_it_refused(scene: Scene) -> None:
    _warm_pool(scene)
    with pytest.raises(ValueError, match="no stopped instance"):
        scene.sim.scale_out_from_warm_pool("workers")
    scene.autoscaling.delete_warm_pool(AutoScalingGroupName="workers")
    with pytest.raises(ValueError, match="no warm pool"):
        scene.sim.launch_into_warm_pool("workers")


def test_warm_pool__terminated_from_the_pool__warmed_terminating_wait_then_gone(
    scene: Scene,
) -> None:
    _warm_pool(scene)
    instance_id, [launch] = scene.sim.launch_into_warm_pool("workers")
    scene.autoscaling.complete_lifecycle_action(
        AutoScalingGroupName="workers",
        LifecycleHookName="join",
        LifecycleActionToken=launch["detail"]["LifecycleActionToken"],
        LifecycleActionResult="CONTINUE",
    )

    token = scene.sim.begin_termination("workers", instance_id, "drain")
    event = scene.sim.event_for(token)

    assert (event["detail"]["Origin"], event["detail"]["Destination"]) == ("WarmPool", "EC2")
    assert _pool(scene) == {instance_id: "Warmed:Terminating:Wait"}
    _complete(scene, LifecycleActionToken=token)
    assert _pool(scene) == {}
    assert _ec2_state(scene, instance_id) == "terminated"
    assert _desired(scene) == 3, "the group's capacity is not the pool's"


def test_scale_in__several_instances__one_event_each_with_distinct_tokens(scene: Scene) -> None:
    events = scene.sim.scale_in("workers", count=2)

    assert len({e["detail"]["EC2InstanceId"] for e in events}) == 2
    assert len({e["detail"]["LifecycleActionToken"] for e in events}) == 2
    assert len({e["id"] for e in events}) == 2
    assert _desired(scene) == 1


def test_scale_in__hook_without_metadata__event_has_no_metadata(moto_aws: None) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    autoscaling = boto3.client("autoscaling", region_name=REGION)
    create_node_group(ec2, autoscaling, asg_name="plain", size=1, notification_metadata=None)

    [event] = AwsSim().scale_in("plain")

    assert "NotificationMetadata" not in event["detail"]


def test_scale_in__two_terminate_hooks__instance_waits_for_both(scene: Scene) -> None:
    scene.autoscaling.put_lifecycle_hook(
        LifecycleHookName="deregister",
        AutoScalingGroupName="workers",
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
        HeartbeatTimeout=300,
    )
    events = scene.sim.scale_in("workers")
    assert sorted(e["detail"]["LifecycleHookName"] for e in events) == ["deregister", "drain"]
    instance_id = events[0]["detail"]["EC2InstanceId"]

    _complete(scene, InstanceId=instance_id)
    assert _lifecycle_states(scene)[instance_id] == "Terminating:Wait"

    _complete(scene, InstanceId=instance_id, hook="deregister")
    assert instance_id not in _lifecycle_states(scene)
    assert _ec2_state(scene, instance_id) == "terminated"


@pytest.mark.parametrize(
    ("asg", "count", "message"),
    [
        ("workers", 4, "3 instances are InService"),
        ("workers", 0, "cannot scale workers in by 0"),
        ("nope", 1, "no Auto Scaling group 'nope'"),
    ],
)
def test_scale_in__impossible__raises_value_error(
    scene: Scene, asg: str, count: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        scene.sim.scale_in(asg, count)


def test_scale_in__below_min_size__raises_value_error(scene: Scene) -> None:
    scene.autoscaling.update_auto_scaling_group(AutoScalingGroupName="workers", MinSize=3)

    with pytest.raises(ValueError, match="below MinSize 3"):
        scene.sim.scale_in("workers")


def test_scale_in__no_terminate_hook__raises_value_error(scene: Scene) -> None:
    scene.autoscaling.delete_lifecycle_hook(
        AutoScalingGroupName="workers", LifecycleHookName="drain"
    )

    with pytest.raises(ValueError, match="no terminate lifecycle hook"):
        scene.sim.scale_in("workers")


def test_begin_termination__gives_token_of_the_pending_action(scene: Scene) -> None:
    instance_id = scene.group.instance_ids[1]

    token = scene.sim.begin_termination("workers", instance_id, "drain")

    [action] = scene.sim.actions()
    assert action["token"] == token
    assert action["instance_id"] == instance_id
    assert action["deadline"] == scene.clock.now + 300
    assert action["global_deadline"] == scene.clock.now + 30000
    assert scene.sim.event_for(token)["detail"]["LifecycleActionToken"] == token
    assert _desired(scene) == 3


@pytest.mark.parametrize(
    ("instance", "hook", "message"),
    [
        ("i-00000000000000000", "drain", "is not in Auto Scaling group workers"),
        (None, "missing", "has no lifecycle hook 'missing'"),
    ],
)
def test_begin_termination__unknown_instance_or_hook__raises_value_error(
    scene: Scene, instance: str | None, hook: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        scene.sim.begin_termination("workers", instance or scene.group.instance_ids[0], hook)


def test_begin_termination__launch_hook__raises_value_error(scene: Scene) -> None:
    scene.autoscaling.put_lifecycle_hook(
        LifecycleHookName="warmup",
        AutoScalingGroupName="workers",
        LifecycleTransition="autoscaling:EC2_INSTANCE_LAUNCHING",
    )

    with pytest.raises(ValueError, match="not a terminate hook"):
        scene.sim.begin_termination("workers", scene.group.instance_ids[0], "warmup")


def test_begin_termination__twice__raises_value_error(scene: Scene) -> None:
    scene.sim.begin_termination("workers", scene.group.instance_ids[0], "drain")

    with pytest.raises(ValueError, match="already waits on hook drain"):
        scene.sim.begin_termination("workers", scene.group.instance_ids[0], "drain")


# --- CompleteLifecycleAction ------------------------------------------------------------


def test_complete__continue__records_call_and_terminates_instance(scene: Scene) -> None:
    [event] = scene.sim.scale_in("workers")
    token = event["detail"]["LifecycleActionToken"]
    instance_id = event["detail"]["EC2InstanceId"]
    scene.clock.advance(42)

    _complete(scene, LifecycleActionToken=token, InstanceId=instance_id)

    assert scene.sim.calls("complete") == [
        {
            "AutoScalingGroupName": "workers",
            "LifecycleHookName": "drain",
            "LifecycleActionToken": token,
            "InstanceId": instance_id,
            "LifecycleActionResult": "CONTINUE",
            "time": scene.clock.now,
            "error": None,
        }
    ]
    [action] = scene.sim.actions()
    assert (action["result"], action["closed_by"]) == ("CONTINUE", "complete")
    assert instance_id not in _lifecycle_states(scene)
    assert _ec2_state(scene, instance_id) == "terminated"
    assert len(_lifecycle_states(scene)) == 2, "scale-in lowered the desired capacity"


def test_complete__after_begin_termination__launches_a_replacement(scene: Scene) -> None:
    instance_id = scene.group.instance_ids[0]
    token = scene.sim.begin_termination("workers", instance_id, "drain")

    _complete(scene, LifecycleActionToken=token)

    states = _lifecycle_states(scene)
    assert instance_id not in states
    assert len(states) == 3


def test_complete__by_instance_id_only__closes_the_action(scene: Scene) -> None:
    [event] = scene.sim.scale_in("workers")

    _complete(scene, "ABANDON", InstanceId=event["detail"]["EC2InstanceId"])

    [action] = scene.sim.actions()
    assert action["result"] == "ABANDON"


def test_complete__abandon__closes_the_other_hooks_actions_too(scene: Scene) -> None:
    scene.autoscaling.put_lifecycle_hook(
        LifecycleHookName="deregister",
        AutoScalingGroupName="workers",
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
    )
    events = scene.sim.scale_in("workers")
    instance_id = events[0]["detail"]["EC2InstanceId"]

    _complete(scene, "ABANDON", InstanceId=instance_id)

    assert sorted(a["closed_by"] for a in scene.sim.actions()) == ["abandoned", "complete"]
    assert _ec2_state(scene, instance_id) == "terminated"


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ({"LifecycleActionToken": "0f5e5d1c-0000-4000-8000-000000000000"}, "with token 0f5e5d1c"),
        ({"InstanceId": "i-0123456789abcdef0"}, "with instance ID i-0123456789abcdef0"),
        ({}, "Either LifecycleActionToken or InstanceId must be specified"),
    ],
)
def test_complete__no_active_action__answers_validation_error(
    scene: Scene, ids: dict[str, str], message: str
) -> None:
    scene.sim.scale_in("workers")

    with pytest.raises(ClientError) as caught:
        _complete(scene, **ids)

    code, text, status = _error(caught)
    assert (code, status) == ("ValidationError", 400)
    assert message in text
    assert scene.sim.calls("complete")[0]["error"] == "ValidationError"


def test_complete__twice__second_answers_no_active_lifecycle_action(scene: Scene) -> None:
    [event] = scene.sim.scale_in("workers")
    token = event["detail"]["LifecycleActionToken"]
    _complete(scene, LifecycleActionToken=token)

    with pytest.raises(ClientError) as caught:
        _complete(scene, LifecycleActionToken=token)

    assert _error(caught)[1] == f"No active Lifecycle Action found with token {token}"


def test_complete__token_of_another_hook__is_not_found(scene: Scene) -> None:
    [event] = scene.sim.scale_in("workers")

    with pytest.raises(ClientError, match="No active Lifecycle Action found with token"):
        _complete(scene, hook="other", LifecycleActionToken=event["detail"]["LifecycleActionToken"])


def test_complete__invalid_result__answers_validation_error(scene: Scene) -> None:
    [event] = scene.sim.scale_in("workers")

    with pytest.raises(ClientError, match="lifecycleActionResult"):
        _complete(scene, "RETRY", LifecycleActionToken=event["detail"]["LifecycleActionToken"])

    assert scene.sim.actions()[0]["closed_at"] is None


# --- RecordLifecycleActionHeartbeat and timeouts -----------------------------------------


def test_heartbeat__extends_the_deadline_by_the_heartbeat_timeout(scene: Scene) -> None:
    [event] = scene.sim.scale_in("workers")
    token = event["detail"]["LifecycleActionToken"]

    scene.clock.advance(200)
    _heartbeat(scene, LifecycleActionToken=token)
    scene.clock.advance(200)

    [action] = scene.sim.actions()
    assert action["closed_at"] is None
    assert action["heartbeats"] == 1
    assert action["deadline"] == scene.clock.now - 200 + 300
    [call] = scene.sim.calls("heartbeat")
    assert call["LifecycleActionToken"] == token
    assert call["error"] is None


def test_heartbeat__unknown_token__answers_no_active_lifecycle_action(scene: Scene) -> None:
    with pytest.raises(ClientError) as caught:
        _heartbeat(scene, LifecycleActionToken="11111111-2222-4333-8444-555555555555")

    assert _error(caught) == (
        "ValidationError",
        "No active Lifecycle Action found with token 11111111-2222-4333-8444-555555555555",
        400,
    )


def test_no_heartbeat__past_timeout__default_result_applies(scene: Scene) -> None:
    [event] = scene.sim.scale_in("workers")
    token = event["detail"]["LifecycleActionToken"]
    instance_id = event["detail"]["EC2InstanceId"]

    scene.clock.advance(300)

    [timeout] = scene.sim.calls("timeout")
    assert (timeout["LifecycleActionToken"], timeout["LifecycleActionResult"]) == (token, "ABANDON")
    assert _ec2_state(scene, instance_id) == "terminated"
    with pytest.raises(ClientError, match="No active Lifecycle Action found with token"):
        _heartbeat(scene, LifecycleActionToken=token)


def test_heartbeats__cannot_outlast_the_global_timeout(scene: Scene) -> None:
    [event] = scene.sim.scale_in("workers")
    token = event["detail"]["LifecycleActionToken"]

    for _ in range(100):
        scene.clock.advance(299)
        _heartbeat(scene, LifecycleActionToken=token)
    scene.clock.advance(299)

    with pytest.raises(ClientError, match="No active Lifecycle Action"):
        _heartbeat(scene, LifecycleActionToken=token)
    assert scene.sim.actions()[0]["closed_by"] == "timeout"


def test_expire_action__times_out_now(scene: Scene) -> None:
    [event] = scene.sim.scale_in("workers")
    instance_id = event["detail"]["EC2InstanceId"]

    scene.sim.expire_action(instance_id)

    assert scene.sim.actions()[0]["closed_by"] == "timeout"
    assert _ec2_state(scene, instance_id) == "terminated"
    with pytest.raises(ValueError, match="no active lifecycle action"):
        scene.sim.expire_action(instance_id)


# --- fault injection ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "code", "status"),
    [
        ("heartbeat", "Throttling", 400),
        ("heartbeat", "ServiceUnavailable", 503),
        ("heartbeat", "ValidationError", 400),
        ("complete", "Throttling", 400),
        ("complete", "ServiceUnavailable", 503),
        ("complete", "InternalFailure", 500),
        ("complete", "AccessDenied", 403),
    ],
)
def test_fail_next__next_call_fails_with_code_then_calls_succeed(
    scene: Scene, kind: str, code: str, status: int
) -> None:
    [event] = scene.sim.scale_in("workers")
    token = event["detail"]["LifecycleActionToken"]
    call = _heartbeat if kind == "heartbeat" else _complete
    scene.sim.fail_next(kind, code, count=2, message="injected by the test")

    for _ in range(2):
        with pytest.raises(ClientError) as caught:
            call(scene, LifecycleActionToken=token)
        assert _error(caught) == (code, "injected by the test", status)
    call(scene, LifecycleActionToken=token)

    assert [c["error"] for c in scene.sim.calls(kind)] == [code, code, None]
    assert all(c.get("injected") for c in scene.sim.calls(kind)[:2])


@pytest.mark.parametrize(
    ("kind", "code", "message"),
    [
        ("describe", "Throttling", "fault kind must be one of"),
        ("complete", "Teapot", "fault code must be one of"),
    ],
)
def test_fail_next__unknown_kind_or_code__raises_value_error(
    scene: Scene, kind: str, code: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        scene.sim.fail_next(kind, code)


@pytest.mark.parametrize(
    ("service", "action", "code", "status"),
    [
        ("ec2", "DescribeInstances", "RequestLimitExceeded", 503),
        ("autoscaling", "DescribeAutoScalingGroups", "Throttling", 400),
        ("autoscaling", "DescribeLifecycleHooks", "ServiceUnavailable", 503),
    ],
)
def test_fail_action__next_calls_answer_the_code_in_the_service_protocol_then_moto(
    scene: Scene, service: str, action: str, code: str, status: int
) -> None:
    calls = {
        "DescribeInstances": lambda c: c.describe_instances(
            InstanceIds=[scene.group.instance_ids[0]]
        ),
        "DescribeAutoScalingGroups": lambda c: c.describe_auto_scaling_groups(),
        "DescribeLifecycleHooks": lambda c: c.describe_lifecycle_hooks(
            AutoScalingGroupName="workers"
        ),
    }
    client = boto3.client(service, region_name=REGION, config=NO_RETRIES)
    scene.sim.fail_action(service, action, code, count=2)

    for _ in range(2):
        with pytest.raises(ClientError) as caught:
            calls[action](client)
        assert (_error(caught)[0], _error(caught)[2]) == (code, status)
    calls[action](client)

    assert [(f["action"], f["code"]) for f in scene.sim.injected_faults()] == [(action, code)] * 2
    assert scene.sim.pending_faults() == {}


def test_fail_action__botocore_retries_ride_out_a_short_burst(scene: Scene) -> None:
    client = boto3.client(
        "ec2", region_name=REGION, config=Config(retries={"mode": "standard", "max_attempts": 5})
    )
    scene.sim.fail_action("ec2", "DescribeInstances", "RequestLimitExceeded", count=1)

    found = client.describe_instances(InstanceIds=[scene.group.instance_ids[0]])

    assert found["Reservations"][0]["Instances"][0]["InstanceId"] == scene.group.instance_ids[0]
    assert len(scene.sim.injected_faults()) == 1


@pytest.mark.parametrize(
    ("service", "code", "message"),
    [("lambda", "Throttling", "service must be one of"), ("ec2", "Teapot", "fault code")],
)
def test_fail_action__unknown_service_or_code__raises_value_error(
    scene: Scene, service: str, code: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        scene.sim.fail_action(service, "DescribeInstances", code)


def test_calls__unknown_kind__raises_value_error(scene: Scene) -> None:
    with pytest.raises(ValueError, match="call kind must be one of"):
        scene.sim.calls("describe")


def test_ledger__is_cleared_by_moto_reset(fake_aws_env: None) -> None:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        autoscaling = boto3.client("autoscaling", region_name=REGION)
        create_node_group(ec2, autoscaling, asg_name="workers", size=1)
        AwsSim().scale_in("workers")
        assert len(AwsSim().actions()) == 1

    with mock_aws():
        assert AwsSim().actions() == []


def test_ledger__is_per_region(scene: Scene) -> None:
    scene.sim.scale_in("workers")

    assert AwsSim(region="eu-west-1").actions() == []
    assert len(AwsSim(region=REGION).actions()) == 1


def test_put_lifecycle_hook__metadata__is_returned_by_describe(scene: Scene) -> None:
    hooks = scene.autoscaling.describe_lifecycle_hooks(AutoScalingGroupName="workers")

    assert hooks["LifecycleHooks"][0]["NotificationMetadata"] == "prod"


# --- EKS and Lambda -----------------------------------------------------------------------


def test_point_cluster_at__existing_cluster__describe_returns_new_endpoint(
    moto_aws: None,
) -> None:
    eks = boto3.client("eks", region_name=REGION)
    eks.create_cluster(
        name="prod",
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": []},
    )

    AwsSim().point_cluster_at("prod", "https://127.0.0.1:8443", "Q0E=")

    cluster = eks.describe_cluster(name="prod")["cluster"]
    assert cluster["endpoint"] == "https://127.0.0.1:8443"
    assert cluster["certificateAuthority"]["data"] == "Q0E="
    assert cluster["status"] == "ACTIVE"
    assert cluster["roleArn"] == "arn:aws:iam::123456789012:role/eks"


def test_point_cluster_at__missing_cluster__is_created(moto_aws: None) -> None:
    AwsSim().point_cluster_at("demo", "https://127.0.0.1:6443", "Q0E=")

    info = aws.describe_cluster(boto3.client("eks", region_name=REGION), "demo")
    assert (info.endpoint, info.certificate_authority_data) == ("https://127.0.0.1:6443", "Q0E=")


def test_async_invoke__is_queued_not_run_in_order(moto_aws: None) -> None:
    client = boto3.client("lambda", region_name=REGION)
    sim = AwsSim()

    for n in (1, 2):
        response = client.invoke(
            FunctionName="eks-node-drainer", InvocationType="Event", Payload=json.dumps({"n": n})
        )
        assert response["StatusCode"] == 202

    assert [i["payload"] for i in sim.pending_invocations()] == [{"n": 1}, {"n": 2}]
    first = sim.pop_invocation()
    assert first is not None
    assert first["function_name"] == "eks-node-drainer"
    assert first["payload"] == {"n": 1}
    assert [i["payload"] for i in sim.pending_invocations()] == [{"n": 2}]


def test_sync_invoke__still_goes_to_moto(moto_aws: None) -> None:
    client = boto3.client("lambda", region_name=REGION)

    with pytest.raises(ClientError) as caught:
        client.invoke(FunctionName="missing", Payload=b"{}")

    assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert AwsSim().pending_invocations() == []


# --- server mode ----------------------------------------------------------------------------


@pytest.fixture(params=["subprocess", "thread"])
def awssim_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """`python -m awssim serve` in a child process, or AwsSimServer in a thread."""
    if request.param == "thread":
        with AwsSimServer() as server:
            yield server.url
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = str(ROOT)
    process = subprocess.Popen(
        [sys.executable, "-m", "awssim", "serve", "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    watchdog = threading.Timer(60, process.kill)
    watchdog.start()
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), f"first line was {url!r}"
        yield url
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()


def test_server__scale_in_complete_and_admin_api_over_http(
    awssim_server: str, fake_aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", awssim_server)
    clients = aws.make_clients(boto3.Session(region_name=REGION))
    admin = AwsSimClient(awssim_server)
    assert admin.health()
    group = create_node_group(clients.ec2, clients.autoscaling, asg_name="workers", size=2)

    [raw] = admin.scale_in("workers")
    event = parse_event(raw)
    assert isinstance(event, LifecycleEvent)
    aws.record_heartbeat(clients.autoscaling, event)
    admin.fail_next("complete", "Throttling")
    no_retries = boto3.client("autoscaling", region_name=REGION, config=NO_RETRIES)
    with pytest.raises(AwsError, match="Throttling"):
        aws.complete_lifecycle_action(no_retries, event, "CONTINUE")
    assert aws.complete_lifecycle_action(clients.autoscaling, event, "CONTINUE")
    assert not aws.complete_lifecycle_action(clients.autoscaling, event, "CONTINUE")

    assert [c["error"] for c in admin.calls("heartbeat")] == [None]
    assert [c["error"] for c in admin.calls("complete")] == ["Throttling", None, "ValidationError"]
    assert admin.actions()[0]["closed_by"] == "complete"
    assert admin.event_for(event.action_token)["detail"]["EC2InstanceId"] == event.instance_id
    assert event.instance_id in group.instance_ids

    admin.point_cluster_at("demo", "https://127.0.0.1:6443", "Q0E=")
    assert aws.describe_cluster(clients.eks, "demo").endpoint == "https://127.0.0.1:6443"

    aws.invoke_self_async(clients.lambda_, "arn:aws:lambda:us-east-1:123456789012:function:d", {})
    assert len(admin.pending_invocations()) == 1
    invocation = admin.pop_invocation()
    assert invocation is not None
    assert invocation["payload"] == {}
    assert admin.pop_invocation() is None

    token = admin.begin_termination("workers", group.instance_ids[-1], group.hook_name)
    admin.expire_action(group.instance_ids[-1])
    assert [c["LifecycleActionToken"] for c in admin.calls("timeout")] == [token]

    with pytest.raises(AwsSimError, match=r"400.*no Auto Scaling group 'nope'"):
        admin.scale_in("nope")
    with pytest.raises(AwsSimError, match="404"):
        admin._call("GET", "nothing-here")
    assert AwsSimClient(awssim_server, region="eu-west-1").actions() == []


def test_client__non_loopback_url__is_refused() -> None:
    with pytest.raises(ValueError, match="loopback"):
        AwsSimClient("http://10.0.0.1:5000")


def test_cli__non_loopback_host__is_refused() -> None:
    with pytest.raises(SystemExit):
        awssim_main(["serve", "--host", "0.0.0.0"])


def test_twenty_threads_calling_eks_first_at_once__its_model_and_router_built_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """moto caches a service's model and router without a lock: twenty handler threads
    making their first DescribeCluster together each built their own (awssim.routing)."""
    from moto.core import routing, utils

    AwsSim()  # installs awssim's extensions, the lock among them
    routing.get_service_router.cache_clear()  # as in a fresh process
    model = utils.get_service_model  # awssim's lock around moto's cache, or the cache
    (model if hasattr(model, "cache_clear") else model.__wrapped__).cache_clear()
    routers: list[str] = []
    models: list[str] = []
    build_router = routing.RestRouter.__init__
    load_model = utils._load_service_model

    def counting_router(router: Any, service: Any) -> None:
        routers.append(service.service_name)
        build_router(router, service)

    def counting_model(service: str, model: str) -> Any:
        models.append(f"{service}/{model}")
        return load_model(service, model)

    monkeypatch.setattr(routing.RestRouter, "__init__", counting_router)
    monkeypatch.setattr(utils, "_load_service_model", counting_model)
    with mock_aws():
        eks = boto3.client("eks", region_name=REGION, config=NO_RETRIES)
        start = threading.Barrier(20)
        answers: list[str] = []

        def describe() -> None:
            start.wait()
            try:
                eks.describe_cluster(name="nowhere")
            except ClientError as e:
                answers.append(e.response["Error"]["Code"])

        threads = [threading.Thread(target=describe) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)

    assert answers == ["ResourceNotFoundException"] * 20
    assert routers == ["eks"]
    assert models.count("eks/service-2") == 1, models


def test_delete_lifecycle_hook__its_outstanding_actions_ended_first__as_aws_does(
    scene: Scene,
) -> None:
    """AWS's DeleteLifecycleHook: outstanding actions "are completed first (ABANDON for
    launching instances, CONTINUE for terminating instances)"; moto left them open."""
    scene.autoscaling.put_lifecycle_hook(
        LifecycleHookName="warmup",
        AutoScalingGroupName="workers",
        LifecycleTransition="autoscaling:EC2_INSTANCE_LAUNCHING",
    )
    leaving, joining = scene.group.instance_ids[0], scene.group.instance_ids[1]
    scene.sim.begin_termination("workers", leaving, "drain")
    scene.sim.begin_launch("workers", joining, "warmup")

    for hook in ("drain", "warmup"):
        scene.autoscaling.delete_lifecycle_hook(
            AutoScalingGroupName="workers", LifecycleHookName=hook
        )

    ended = {(c["InstanceId"], c["LifecycleActionResult"]) for c in scene.sim.calls("hook_deleted")}
    assert ended == {(leaving, "CONTINUE"), (joining, "ABANDON")}
    assert all(a["closed_by"] == "hook_deleted" for a in scene.sim.actions())
    assert _ec2_state(scene, leaving) in ("shutting-down", "terminated")
    assert _ec2_state(scene, joining) in ("shutting-down", "terminated")
