"""drainer.aws against moto + awssim: calls, error translation and the heartbeat ticker."""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from botocore.parsers import ResponseParserError
from botocore.stub import Stubber
from support.views import heartbeat_running

from awssim import AwsSim
from awssim.world import NodeGroup, create_node_group
from drainer import aws
from drainer.errors import (
    AwsError,
    ClusterNotFound,
    InstanceNotFound,
    LifecycleActionGone,
    PermanentAwsError,
)
from drainer.lifecycle.events import parse_event
from drainer.lifecycle.events_hook import LifecycleEvent
from kubesim.testing import eventually

REGION = "us-east-1"
NO_RETRIES = Config(retries={"mode": "standard", "total_max_attempts": 1})


@dataclass
class ScaleIn:
    """AWS (moto) with one node group whose instance is being scaled in: its
    lifecycle event, the drainer's clients, and a session for the test's own calls
    (not testbed's ScaleIn, which also holds a Kubernetes cluster)."""

    session: boto3.Session
    clients: aws.AwsClients
    sim: AwsSim
    group: NodeGroup
    event: LifecycleEvent

    def client(self, service: str) -> Any:
        """A client without retries, so an injected fault reaches the code under test."""
        return self.session.client(service, region_name=REGION, config=NO_RETRIES)


@pytest.fixture
def scaled(moto_aws: None) -> Iterator[ScaleIn]:
    session = boto3.Session(region_name=REGION)
    clients = aws.make_clients(session)
    group = create_node_group(
        clients.ec2,
        clients.autoscaling,
        asg_name="eks-workers",
        size=2,
        hook_name="drain",
        heartbeat_timeout=600,
        notification_metadata='{"cluster_name": "prod"}',
    )
    sim = AwsSim(region=REGION)
    [raw] = sim.scale_in(group.asg_name)
    event = parse_event(raw)
    assert isinstance(event, LifecycleEvent)
    yield ScaleIn(session, clients, sim, group, event)


def _client_error(code: str, message: str = "boom", status: int = 400) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "SomeOperation",
    )


# --- make_clients ---------------------------------------------------------------------


def test_make_clients__uses_region_timeouts_and_standard_retries(fake_aws_env: None) -> None:
    clients = aws.make_clients(boto3.Session(), region="eu-west-1")

    for client in (clients.ec2, clients.autoscaling, clients.eks, clients.lambda_):
        assert client.meta.region_name == "eu-west-1"
        assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 6}
        assert client.meta.config.connect_timeout == 5
        assert client.meta.config.read_timeout == 20
    assert clients.ec2.meta.service_model.service_name == "ec2"
    assert clients.autoscaling.meta.service_model.service_name == "autoscaling"
    assert clients.eks.meta.service_model.service_name == "eks"
    assert clients.lambda_.meta.service_model.service_name == "lambda"


def test_make_clients__no_region__uses_the_sessions(fake_aws_env: None) -> None:
    clients = aws.make_clients(boto3.Session(region_name="ap-south-1"))

    assert clients.ec2.meta.region_name == "ap-south-1"


# --- EC2 ------------------------------------------------------------------------------


def test_describe_instance__known_instance__gives_dns_name_and_zone(scaled: ScaleIn) -> None:
    identity = aws.describe_instance(scaled.clients.ec2, scaled.event.instance_id)

    assert identity.instance_id == scaled.event.instance_id
    assert identity.private_dns_name.endswith(".ec2.internal")
    assert identity.private_dns_name.startswith("ip-")
    assert identity.availability_zone == "us-east-1a"
    assert identity.provider_id_suffix == "/" + scaled.event.instance_id


def test_describe_instance__unknown_instance__raises_instance_not_found(scaled: ScaleIn) -> None:
    with pytest.raises(InstanceNotFound, match=r"i-0123456789abcdef0 in us-east-1"):
        aws.describe_instance(scaled.clients.ec2, "i-0123456789abcdef0")


def test_describe_instance__empty_reservations__raises_instance_not_found(
    fake_aws_env: None,
) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    with Stubber(ec2) as stub:
        stub.add_response("describe_instances", {"Reservations": []})
        with pytest.raises(InstanceNotFound, match="returned no instance i-0abc"):
            aws.describe_instance(ec2, "i-0abc")


def test_describe_instance__malformed_id__permanent_not_instance_not_found(
    fake_aws_env: None,
) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    with Stubber(ec2) as stub:
        stub.add_client_error("describe_instances", "InvalidInstanceID.Malformed")
        with pytest.raises(PermanentAwsError, match=r"InvalidInstanceID\.Malformed"):
            aws.describe_instance(ec2, "i-0abc")


def test_describe_instance__unreadable_answer__aws_error_not_a_parser_crash(
    scaled: ScaleIn,
) -> None:
    # moto echoes the id in its XML error: a NUL byte makes botocore's parser fail
    # (parse_event refuses such an id first; this is the boundary's own guard).
    with pytest.raises(AwsError, match="AWS's answer could not be read") as caught:
        aws.describe_instance(scaled.client("ec2"), "i-0a1b2c3d\x00")

    assert isinstance(caught.value.__cause__, ResponseParserError)
    assert not aws.is_permanent(caught.value)


def test_describe_instance__access_denied__says_which_permission(fake_aws_env: None) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    with Stubber(ec2) as stub:
        stub.add_client_error("describe_instances", "UnauthorizedOperation", http_status_code=403)
        with pytest.raises(AwsError, match="grant ec2:DescribeInstances"):
            aws.describe_instance(ec2, "i-0abc")


@pytest.mark.parametrize(
    ("dns_name", "candidates"),
    [
        (
            "ip-10-0-1-23.eu-west-1.compute.internal",
            ("ip-10-0-1-23.eu-west-1.compute.internal", "ip-10-0-1-23"),
        ),
        ("ip-10-0-1-23.ec2.internal", ("ip-10-0-1-23.ec2.internal", "ip-10-0-1-23")),
        ("ip-10-0-1-23", ("ip-10-0-1-23",)),
        ("", ()),
    ],
)
def test_node_identity__hostname_candidates__fqdn_then_short_name(
    dns_name: str, candidates: tuple[str, ...]
) -> None:
    identity = aws.NodeIdentity("i-0abc", dns_name, "eu-west-1a")

    assert identity.hostname_candidates == candidates


# --- Auto Scaling: hooks and tags -------------------------------------------------------


def test_lifecycle_hook__existing_hook__gives_timeouts_and_metadata(scaled: ScaleIn) -> None:
    hook = aws.lifecycle_hook(scaled.clients.autoscaling, "eks-workers", "drain")

    assert hook == aws.HookInfo(
        name="drain",
        asg_name="eks-workers",
        heartbeat_timeout=600,
        default_result="ABANDON",
        notification_metadata='{"cluster_name": "prod"}',
        global_timeout=172800,
    )
    assert hook.heartbeat_interval == 300


def test_lifecycle_hook__unknown_hook__raises_permanent_error_naming_it(scaled: ScaleIn) -> None:
    with pytest.raises(PermanentAwsError, match="has no lifecycle hook 'other'"):
        aws.lifecycle_hook(scaled.clients.autoscaling, "eks-workers", "other")


def test_lifecycle_hook__no_global_timeout__is_none(fake_aws_env: None) -> None:
    autoscaling = boto3.client("autoscaling", region_name=REGION)
    hook = {
        "LifecycleHookName": "drain",
        "AutoScalingGroupName": "g",
        "HeartbeatTimeout": 120,
        "DefaultResult": "CONTINUE",
    }
    with Stubber(autoscaling) as stub:
        stub.add_response("describe_lifecycle_hooks", {"LifecycleHooks": [hook]})
        info = aws.lifecycle_hook(autoscaling, "g", "drain")

    assert info.global_timeout is None
    assert info.global_timeout_seconds == 12000  # AWS's rule: 100 x HeartbeatTimeout
    assert info.notification_metadata == ""
    assert info.default_result == "CONTINUE"


@pytest.mark.parametrize(
    ("heartbeat_timeout", "global_timeout", "expected"),
    [
        (600, 7200, 7200),  # what DescribeLifecycleHooks says wins
        (600, None, 60000),  # else 100 x HeartbeatTimeout
        (7200, None, 172800),  # but never past 48 hours
    ],
)
def test_hook_info__global_timeout_seconds__answer_else_aws_rule(
    heartbeat_timeout: int, global_timeout: int | None, expected: int
) -> None:
    hook = aws.HookInfo("drain", "g", heartbeat_timeout, "ABANDON", "", global_timeout)

    assert hook.global_timeout_seconds == expected


def test_asg_tags__tagged_group__gives_tags(scaled: ScaleIn) -> None:
    tags = aws.asg_tags(scaled.clients.autoscaling, "eks-workers")

    assert tags["eks:cluster-name"] == "demo"


def test_asg_tags__kubernetes_io_cluster_tag__is_listed(moto_aws: None) -> None:
    clients = aws.make_clients(boto3.Session(region_name=REGION))
    create_node_group(
        clients.ec2, clients.autoscaling, asg_name="old", cluster_tag="kubernetes.io/cluster"
    )

    tags = aws.asg_tags(clients.autoscaling, "old")

    assert tags == {"kubernetes.io/cluster/demo": "owned"}
    assert aws.cluster_name_for("", tags, "") == "demo"


def test_asg_tags__unknown_group__is_empty(scaled: ScaleIn) -> None:
    assert aws.asg_tags(scaled.clients.autoscaling, "gone") == {}


@pytest.mark.parametrize(
    ("metadata", "tags", "configured", "expected"),
    [
        ("prod", {}, "", "prod"),
        ("  prod  ", {}, "", "prod"),
        ('{"cluster_name": "prod"}', {"eks:cluster-name": "other"}, "cfg", "prod"),
        ('{"cluster_name": "prod", "team": "x"}', {}, "", "prod"),
        ('{"team": "x"}', {"eks:cluster-name": "tagged"}, "", "tagged"),
        ('{"cluster_name": 5}', {}, "cfg", "cfg"),
        ("{not json", {}, "cfg", "cfg"),
        ('["prod"]', {}, "cfg", "cfg"),
        ("some free text", {"eks:cluster-name": "tagged"}, "", "tagged"),
        ("", {"eks:cluster-name": "tagged", "kubernetes.io/cluster/k": "owned"}, "", "tagged"),
        ("", {"kubernetes.io/cluster/k": "owned"}, "", "k"),
        ("", {"kubernetes.io/cluster/k": "shared"}, "cfg", "k"),
        ("", {"kubernetes.io/cluster/a": "owned", "kubernetes.io/cluster/b": "owned"}, "b", "b"),
        ("", {"kubernetes.io/cluster/a": "owned", "kubernetes.io/cluster/b": "owned"}, "", None),
        ("", {"kubernetes.io/cluster/a": "owned", "kubernetes.io/cluster/b": "owned"}, "c", "c"),
        ("", {"kubernetes.io/cluster/": "owned"}, "", None),
        ("", {"Name": "worker"}, "cfg", "cfg"),
        ("", {}, "", None),
    ],
)
def test_cluster_name_for__sources_in_order__metadata_tags_setting(
    metadata: str, tags: dict[str, str], configured: str, expected: str | None
) -> None:
    assert aws.cluster_name_for(metadata, tags, configured) == expected


# --- Auto Scaling: heartbeat and completion -------------------------------------------


def test_record_heartbeat__active_action__is_recorded(scaled: ScaleIn) -> None:
    aws.record_heartbeat(scaled.clients.autoscaling, scaled.event)

    [call] = scaled.sim.calls("heartbeat")
    assert call["LifecycleActionToken"] == scaled.event.action_token
    assert call["InstanceId"] == scaled.event.instance_id
    assert call["AutoScalingGroupName"] == "eks-workers"
    assert call["LifecycleHookName"] == "drain"
    assert call["error"] is None


def test_record_heartbeat__action_completed__raises_lifecycle_action_gone(scaled: ScaleIn) -> None:
    aws.complete_lifecycle_action(scaled.clients.autoscaling, scaled.event, "CONTINUE")

    with pytest.raises(LifecycleActionGone, match="No active Lifecycle Action found"):
        aws.record_heartbeat(scaled.clients.autoscaling, scaled.event)


@pytest.mark.parametrize(
    ("code", "message", "transient"),
    [
        ("Throttling", "Throttling: Rate exceeded", True),
        ("ServiceUnavailable", "ServiceUnavailable", True),
        ("InternalFailure", "InternalFailure", True),
        ("AccessDenied", "grant autoscaling:RecordLifecycleActionHeartbeat", False),
        ("ValidationError", "ValidationError: Injected", False),
    ],
)
def test_record_heartbeat__fault__raises_aws_error_that_says_what(
    scaled: ScaleIn, code: str, message: str, transient: bool
) -> None:
    scaled.sim.fail_next("heartbeat", code)

    with pytest.raises(AwsError, match=message) as caught:
        aws.record_heartbeat(scaled.client("autoscaling"), scaled.event)

    assert aws.is_transient(caught.value) is transient
    assert isinstance(caught.value.__cause__, ClientError)


def test_complete_lifecycle_action__active__completes_and_instance_terminates(
    scaled: ScaleIn,
) -> None:
    completed = aws.complete_lifecycle_action(scaled.clients.autoscaling, scaled.event, "CONTINUE")

    assert completed is True
    [call] = scaled.sim.calls("complete")
    assert call["LifecycleActionResult"] == "CONTINUE"
    assert call["LifecycleActionToken"] == scaled.event.action_token
    state = scaled.clients.ec2.describe_instances(InstanceIds=[scaled.event.instance_id])
    assert state["Reservations"][0]["Instances"][0]["State"]["Name"] == "terminated"


def test_complete_lifecycle_action__already_gone__returns_false_and_logs(
    scaled: ScaleIn, caplog: pytest.LogCaptureFixture
) -> None:
    aws.complete_lifecycle_action(scaled.clients.autoscaling, scaled.event, "CONTINUE")

    with caplog.at_level(logging.WARNING, logger="drainer.aws"):
        completed = aws.complete_lifecycle_action(
            scaled.clients.autoscaling, scaled.event, "ABANDON"
        )

    assert completed is False
    assert "already gone" in caplog.text
    assert scaled.event.instance_id in caplog.text


def test_complete_lifecycle_action__bad_result__raises_value_error(scaled: ScaleIn) -> None:
    with pytest.raises(ValueError, match="CONTINUE or ABANDON"):
        aws.complete_lifecycle_action(scaled.clients.autoscaling, scaled.event, "continue")
    assert scaled.sim.calls("complete") == []


@pytest.mark.parametrize("code", ["Throttling", "ServiceUnavailable", "AccessDenied"])
def test_complete_lifecycle_action__fault__raises_aws_error(scaled: ScaleIn, code: str) -> None:
    scaled.sim.fail_next("complete", code)

    with pytest.raises(AwsError, match=code):
        aws.complete_lifecycle_action(scaled.client("autoscaling"), scaled.event, "CONTINUE")


# --- EKS --------------------------------------------------------------------------------


def test_describe_cluster__known_cluster__gives_endpoint_and_ca(scaled: ScaleIn) -> None:
    scaled.sim.point_cluster_at("prod", "https://127.0.0.1:6443", "Q0EgZGF0YQ==")

    info = aws.describe_cluster(scaled.clients.eks, "prod")

    assert info.name == "prod"
    assert info.endpoint == "https://127.0.0.1:6443"
    assert info.certificate_authority_data == "Q0EgZGF0YQ=="
    assert info.status == "ACTIVE"
    assert info.arn.startswith("arn:aws:eks:us-east-1:")


def test_describe_cluster__unknown_cluster__names_cluster_and_region(scaled: ScaleIn) -> None:
    with pytest.raises(ClusterNotFound, match=r"'nope' not found in us-east-1") as caught:
        aws.describe_cluster(scaled.clients.eks, "nope")

    assert "CLUSTER_NAME" in str(caught.value)


def test_describe_cluster__access_denied__says_which_permission(fake_aws_env: None) -> None:
    eks = boto3.client("eks", region_name=REGION)
    with Stubber(eks) as stub:
        stub.add_client_error("describe_cluster", "AccessDeniedException", http_status_code=403)
        with pytest.raises(AwsError, match="grant eks:DescribeCluster"):
            aws.describe_cluster(eks, "prod")


# --- Lambda -----------------------------------------------------------------------------

FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:eks-node-drainer"


def test_invoke_self_async__queues_the_payload(scaled: ScaleIn) -> None:
    payload = {"detail": {"EC2InstanceId": "i-0abc"}, "drainer": {"handovers": 1}}

    aws.invoke_self_async(scaled.clients.lambda_, FUNCTION_ARN, payload)

    invocation = scaled.sim.pop_invocation()
    assert invocation is not None
    assert invocation["function_name"] == FUNCTION_ARN
    assert invocation["payload"] == payload
    assert scaled.sim.pop_invocation() is None


def test_invoke_self_async__not_found__raises_aws_error(fake_aws_env: None) -> None:
    client = boto3.client("lambda", region_name=REGION)
    with Stubber(client) as stub:
        stub.add_client_error("invoke", "ResourceNotFoundException", "Function not found")
        with pytest.raises(AwsError, match="ResourceNotFoundException: Function not found"):
            aws.invoke_self_async(client, FUNCTION_ARN, {})


def test_invoke_self_async__not_queued__raises_aws_error(fake_aws_env: None) -> None:
    client = boto3.client("lambda", region_name=REGION)
    with Stubber(client) as stub:
        stub.add_response("invoke", {"StatusCode": 200})
        with pytest.raises(AwsError, match="answered 200, expected 202"):
            aws.invoke_self_async(client, FUNCTION_ARN, {})


# --- error classification ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (_client_error("Throttling"), True),
        (_client_error("ThrottlingException"), True),
        (_client_error("RequestLimitExceeded"), True),
        (_client_error("ServiceUnavailable", status=503), True),
        (_client_error("SomethingNew", status=502), True),
        (_client_error("ValidationError"), False),
        (_client_error("AccessDenied", status=403), False),
        (EndpointConnectionError(endpoint_url="https://autoscaling.example"), True),
        (ReadTimeoutError(endpoint_url="https://autoscaling.example"), True),
        (ConnectTimeoutError(endpoint_url="https://autoscaling.example"), True),
        (RuntimeError("bug"), False),
        (AwsError("no cause"), False),
    ],
)
def test_is_transient__classifies_throttling_5xx_and_connection_errors(
    error: BaseException, transient: bool
) -> None:
    assert aws.is_transient(error) is transient


@pytest.mark.parametrize(
    ("error", "permanent"),
    [
        # What the same call meets again: the event is not retried.
        (_client_error("ValidationError"), True),  # an unknown group or hook
        (_client_error("InvalidInstanceID.Malformed"), True),
        (_client_error("AccessDenied", status=403), True),
        (_client_error("UnauthorizedOperation", status=403), True),
        (_client_error("ResourceNotFoundException", status=404), True),
        (PermanentAwsError("Auto Scaling group 'g' has no lifecycle hook 'h'"), True),
        # What another try may not meet: Lambda retries the event.
        (_client_error("Throttling"), False),
        (_client_error("ServiceUnavailable", status=503), False),
        (_client_error("SomethingNew", status=502), False),
        (_client_error("ExpiredToken"), False),
        (_client_error("RequestExpired"), False),
        (EndpointConnectionError(endpoint_url="https://autoscaling.example"), False),
        (ResponseParserError("Unable to parse response"), False),
        # Not AWS's answer at all: raised, as before.
        (RuntimeError("bug"), False),
        (AwsError("no cause"), False),
    ],
)
def test_is_permanent__refusals_that_a_retry_meets_again(
    error: BaseException, permanent: bool
) -> None:
    assert aws.is_permanent(error) is permanent
    try:
        raise AwsError("wrapped") from error
    except AwsError as wrapped:
        assert aws.is_permanent(wrapped) is (permanent and not isinstance(error, AwsError))


@pytest.mark.parametrize(
    ("code", "kind"),
    [("AccessDenied", PermanentAwsError), ("ValidationError", PermanentAwsError)],
)
def test_aws_error__permanent_code__raised_as_permanent_aws_error(
    scaled: ScaleIn, code: str, kind: type[AwsError]
) -> None:
    scaled.sim.fail_action("autoscaling", "DescribeLifecycleHooks", code)

    with pytest.raises(kind, match=code):
        aws.lifecycle_hook(scaled.client("autoscaling"), "eks-workers", "drain")


def test_aws_error__transient_code__plain_aws_error(scaled: ScaleIn) -> None:
    scaled.sim.fail_action("autoscaling", "DescribeLifecycleHooks", "InternalFailure")

    with pytest.raises(AwsError, match="InternalFailure") as caught:
        aws.lifecycle_hook(scaled.client("autoscaling"), "eks-workers", "drain")

    assert not isinstance(caught.value, PermanentAwsError)
    assert aws.is_transient(caught.value)


def test_is_transient__drainer_error__looks_at_its_cause() -> None:
    try:
        raise AwsError("wrapped") from _client_error("Throttling")
    except AwsError as wrapped:
        assert aws.is_transient(wrapped)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_connection_refused__raises_aws_error_naming_the_network(fake_aws_env: None) -> None:
    autoscaling = boto3.client(
        "autoscaling",
        region_name=REGION,
        endpoint_url=f"http://127.0.0.1:{_closed_port()}",
        config=Config(retries={"total_max_attempts": 1}, connect_timeout=1),
    )

    with pytest.raises(AwsError, match="check the network path") as caught:
        aws.asg_tags(autoscaling, "eks-workers")

    assert aws.is_transient(caught.value)


# --- Heartbeat --------------------------------------------------------------------------


class ScriptedWait:
    """Records each delay the ticker asks for; ends the ticker after `rounds` waits."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self.delays: list[float] = []
        self.finished = threading.Event()

    def __call__(self, stopped: threading.Event, seconds: float) -> bool:
        self.delays.append(seconds)
        if len(self.delays) > self.rounds or stopped.is_set():
            self.finished.set()
            return True
        return False


def _run(heartbeat: aws.Heartbeat, wait: ScriptedWait) -> None:
    heartbeat.start()
    assert wait.finished.wait(5), "heartbeat did not finish its scripted rounds"
    heartbeat.stop()
    assert not heartbeat_running(heartbeat)


def test_heartbeat__beats_at_once_then_every_interval(scaled: ScaleIn) -> None:
    wait = ScriptedWait(rounds=3)
    heartbeat = aws.Heartbeat(scaled.clients.autoscaling, scaled.event, interval=300, wait=wait)

    _run(heartbeat, wait)

    assert wait.delays == [0.0, 300, 300, 300]
    assert heartbeat.beats == 3
    assert heartbeat.failures == 0
    assert len(scaled.sim.calls("heartbeat")) == 3


def test_heartbeat__validation_error__stops_ticking(scaled: ScaleIn) -> None:
    aws.complete_lifecycle_action(scaled.clients.autoscaling, scaled.event, "CONTINUE")
    wait = ScriptedWait(rounds=5)
    heartbeat = aws.Heartbeat(scaled.clients.autoscaling, scaled.event, interval=300, wait=wait)

    heartbeat.start()
    heartbeat._thread.join(5)  # type: ignore[union-attr]

    assert not heartbeat_running(heartbeat)
    assert heartbeat.gone
    assert heartbeat.beats == 0
    assert wait.delays == [0.0]


@pytest.mark.parametrize(
    ("code", "interval", "expected_delay"),
    [
        ("Throttling", 300, 7.5),
        ("ServiceUnavailable", 300, 7.5),
        ("InternalFailure", 4, 3.0),
        ("AccessDenied", 300, 7.5),
    ],
)
def test_heartbeat__failed_beat__retries_sooner_without_dying(
    scaled: ScaleIn,
    caplog: pytest.LogCaptureFixture,
    code: str,
    interval: float,
    expected_delay: float,
) -> None:
    scaled.sim.fail_next("heartbeat", code, count=2)
    wait = ScriptedWait(rounds=3)
    heartbeat = aws.Heartbeat(
        scaled.client("autoscaling"),
        scaled.event,
        interval=interval,
        retry_after=10,
        wait=wait,
        rng=_HalfwayRandom(),
    )

    with caplog.at_level(logging.WARNING, logger="drainer.aws"):
        _run(heartbeat, wait)

    assert wait.delays == [0.0, expected_delay, expected_delay, interval]
    assert heartbeat.failures == 2
    assert heartbeat.beats == 1
    assert not heartbeat.gone
    assert caplog.text.count("heartbeat for") == 2
    assert [c["error"] for c in scaled.sim.calls("heartbeat")] == [code, code, None]


def test_heartbeat__retry_delay__has_jitter_between_half_and_full(scaled: ScaleIn) -> None:
    scaled.sim.fail_next("heartbeat", "Throttling", count=20)
    wait = ScriptedWait(rounds=20)
    heartbeat = aws.Heartbeat(
        scaled.client("autoscaling"),
        scaled.event,
        interval=60,
        wait=wait,
        rng=random.Random(7),
    )

    _run(heartbeat, wait)

    retries = wait.delays[1:]
    assert all(5.0 <= d <= 10.0 for d in retries)
    assert len(set(retries)) > 1


def test_heartbeat__unexpected_exception__is_logged_and_retried(
    scaled: ScaleIn, caplog: pytest.LogCaptureFixture
) -> None:
    wait = ScriptedWait(rounds=2)
    heartbeat = aws.Heartbeat(
        _BrokenAutoscaling(), scaled.event, interval=60, wait=wait, rng=_HalfwayRandom()
    )

    with caplog.at_level(logging.ERROR, logger="drainer.aws"):
        _run(heartbeat, wait)

    assert heartbeat.failures == 2
    assert heartbeat.beats == 0
    assert "not a real client" in caplog.text


def test_heartbeat__stop__is_immediate_with_the_real_wait(scaled: ScaleIn) -> None:
    heartbeat = aws.Heartbeat(scaled.clients.autoscaling, scaled.event, interval=3600)

    with heartbeat:
        eventually(lambda: heartbeat.beats == 1, interval=0.005, what="the first beat")
        assert heartbeat_running(heartbeat)

    assert not heartbeat_running(heartbeat)
    assert heartbeat.beats == 1


def test_heartbeat__small_interval__keeps_beating_until_stopped(scaled: ScaleIn) -> None:
    heartbeat = aws.Heartbeat(scaled.clients.autoscaling, scaled.event, interval=0.01).start()

    eventually(lambda: heartbeat.beats >= 3, interval=0.005, what="three beats")
    heartbeat.stop()
    beats = heartbeat.beats

    assert not heartbeat_running(heartbeat)
    assert len(scaled.sim.calls("heartbeat")) == beats


@pytest.mark.parametrize("interval", [0, -1])
def test_heartbeat__non_positive_interval__is_refused(scaled: ScaleIn, interval: float) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        aws.Heartbeat(scaled.clients.autoscaling, scaled.event, interval=interval)


def test_heartbeat__started_twice__is_refused(scaled: ScaleIn) -> None:
    heartbeat = aws.Heartbeat(scaled.clients.autoscaling, scaled.event, interval=3600).start()
    try:
        with pytest.raises(RuntimeError, match="already started"):
            heartbeat.start()
    finally:
        heartbeat.stop()


def test_heartbeat__stop_before_start__is_harmless(scaled: ScaleIn) -> None:
    heartbeat = aws.Heartbeat(scaled.clients.autoscaling, scaled.event, interval=3600)

    heartbeat.stop()

    assert not heartbeat_running(heartbeat)
    assert heartbeat.beats == 0


class _HalfwayRandom(random.Random):
    """uniform(a, b) is always the midpoint, so retry delays are exact in assertions."""

    def uniform(self, a: float, b: float) -> float:
        return (a + b) / 2


class _BrokenAutoscaling:
    """Stands in for a client whose call fails in a way nobody planned for."""

    def record_lifecycle_action_heartbeat(self, **params: str) -> None:
        raise RuntimeError("not a real client: " + json.dumps(sorted(params)))


def test_heartbeat__the_last_beat_before_a_hand_over__bounded_and_a_failure_not_retried(
    scaled: ScaleIn, caplog: pytest.LogCaptureFixture
) -> None:
    """The hand-over's last beat (Heartbeat.beat) runs after the ticker stopped. Auto
    Scaling slow then (botocore's retries and read timeouts: over a minute) must not
    eat the hand-over's margin: the beat is waited for a bounded time. A beat that
    fails is said as not retried, not "retrying in 7.5 s" from a ticker that is gone."""
    answer = threading.Event()
    client = scaled.client("autoscaling")

    def slow(**_: Any) -> None:
        answer.wait(10)  # Auto Scaling answering late

    client.meta.events.register("before-call.auto-scaling.RecordLifecycleActionHeartbeat", slow)
    heartbeat = aws.Heartbeat(client, scaled.event, interval=300)

    with caplog.at_level(logging.WARNING, logger="drainer.aws"):
        started = time.monotonic()
        heartbeat.beat(within=0.2)
        waited = time.monotonic() - started
        answer.set()
    assert waited < 2, f"the hand-over waited {waited:.1f} s for its last beat"
    assert "handing over without it" in caplog.text
    late = time.monotonic() + 10
    while heartbeat.beats == 0 and time.monotonic() < late:  # its late answer, counted
        time.sleep(0.01)
    assert heartbeat.beats == 1

    caplog.clear()
    client.meta.events.unregister("before-call.auto-scaling.RecordLifecycleActionHeartbeat", slow)
    scaled.sim.fail_next("heartbeat", "Throttling")
    with caplog.at_level(logging.WARNING, logger="drainer.aws"):
        heartbeat.beat()
    assert heartbeat.failures == 1
    assert "not retried" in caplog.text and "retrying in" not in caplog.text, caplog.text
