"""The steps every trigger's run shares (drainer/lifecycle/frame.py and
runner.node_for): an AWS error ends a run the same way whichever trigger met it,
and a node that cannot be found is told the same way whether it was to be drained
or only cordoned."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from realapi import StaticToken

from drainer import aws
from drainer.errors import AwsError, PermanentAwsError
from drainer.k8s.kube import Kube
from drainer.lifecycle import ec2_events, frame
from drainer.lifecycle.events import parse_event
from drainer.lifecycle.events_ec2 import Ec2Event
from drainer.lifecycle.job import Run, Tools
from drainer.lifecycle.settings import Settings
from drainer.outcome import Outcome
from kubesim import KubeSim
from testbed import workloads as objects

CLUSTER = "prod"
GONE_DNS = "ip-10-0-9-9.ec2.internal"
LoadEvent = Callable[[str], dict[str, Any]]


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim() as running:
        running.apply([objects.node("n2")])  # none of the rebalanced instance's
        yield running


def _kube(sim: KubeSim) -> Kube:
    from drainer.k8s.transport import Endpoint, Transport

    transport = Transport(Endpoint(sim.url, ca_pem=sim.ca_pem.decode()))
    return Kube(transport, StaticToken(sim.admin_token), request_timeout=5.0)


def test_rebalance_cordon__no_node__says_it_never_joined_or_is_gone(
    sim: KubeSim, load_event: LoadEvent
) -> None:
    event = parse_event(load_event("rebalance"))
    assert isinstance(event, Ec2Event), event
    identity = aws.NodeIdentity(event.instance_id, GONE_DNS, "us-east-1a")
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

    assert run.result == Outcome.NO_NODE
    assert run.message == (
        f"no Kubernetes node for instance {event.instance_id} (PrivateDnsName {GONE_DNS}): "
        "never joined or already gone"
    )


def test_aws_guarded__aws_fails_for_now__logged_and_raised_for_lambda_to_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def step() -> Run:
        raise AwsError("DescribeInstances: the endpoint could not be reached")

    with pytest.raises(AwsError), caplog.at_level(logging.ERROR):
        frame.aws_guarded(step)

    assert "AWS call failed; the invocation will be retried: DescribeInstances" in caplog.text


def test_aws_guarded__aws_refuses_for_good__failed_run_naming_it() -> None:
    def step() -> Run:
        raise PermanentAwsError("lifecycle hook eks-node-drainer not found on group workers")

    run = frame.aws_guarded(step)

    assert run.result == Outcome.FAILED
    assert run.message == (
        "lifecycle hook eks-node-drainer not found on group workers "
        "(permanent: the event is not retried)"
    )


def test_aws_guarded__step_runs__its_run() -> None:
    drained = Run(Outcome.DRAINED, "drained")

    assert frame.aws_guarded(lambda: drained) is drained
