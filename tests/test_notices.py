"""The notices' text, and what SNS is sent (botocore's Stubber checks the call)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from drainer.lifecycle import ending, frame, notices
from drainer.lifecycle.events import parse_event
from drainer.lifecycle.events_hook import LifecycleEvent
from drainer.lifecycle.job import Run
from drainer.lifecycle.outcomes import Result, lifecycle_result
from drainer.lifecycle.settings import Settings

EVENTS = Path(__file__).parent / "events"
TOPIC = "arn:aws:sns:eu-west-1:123456789012:drains"


def _event(asg: str = "") -> LifecycleEvent:
    event = parse_event(json.loads((EVENTS / "terminate.json").read_text()))
    assert isinstance(event, LifecycleEvent)
    return dataclasses.replace(event, asg_name=asg) if asg else event


def test_subject__non_ascii_and_long__sent_as_under_100_printable_ascii() -> None:
    sns = boto3.client("sns", region_name="eu-west-1", aws_access_key_id="x",
                       aws_secret_access_key="x")  # fmt: skip
    subject, text, attributes = notices.start_notice(_event("nœuds-" + "x" * 120), "prod")
    sent = ("eks-node-drainer: draining " + _event().instance_id + " (n?uds-" + "x" * 120)[:99]
    with Stubber(sns) as stub:
        stub.add_response(
            "publish",
            {"MessageId": "1"},
            {
                "TopicArn": TOPIC,
                "Subject": sent,
                "Message": text,
                "MessageAttributes": {
                    k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()
                },
            },
        )
        assert notices.publish(sns, TOPIC, (subject, text, attributes))
        stub.assert_no_pending_responses()
    assert len(sent) == 99 and sent.isascii()


def test_publish_refused__false__never_raises() -> None:
    sns = boto3.client("sns", region_name="eu-west-1", aws_access_key_id="x",
                       aws_secret_access_key="x")  # fmt: skip
    with Stubber(sns) as stub:
        stub.add_client_error("publish", "AuthorizationError", "not allowed")
        assert notices.publish(sns, TOPIC, ("s", "t", {})) is False


def test_end_notice__budgets_and_pods_left_in_words() -> None:
    event = _event()
    _, text, attributes = notices.end_notice(
        event,
        {
            "result": "timed_out",
            "node": "n1",
            "cluster": "prod",
            "lifecycle_result": "CONTINUE",
            "seconds": 61.2,
            "evicted": 3,
            "budgets_holding": ["shop/web"],
            "left": {"shop/web-1": "PodDisruptionBudget shop/web allows no disruption"},
        },
    )
    assert text.splitlines() == [
        f"Instance {event.instance_id} of {event.asg_name}, node n1, cluster prod: timed_out.",
        "Lifecycle action: CONTINUE.",
        "Duration: 61 s. Pods evicted: 3.",
        "Budgets that held pods back: shop/web.",
        "Left on the node:",
        "  shop/web-1: PodDisruptionBudget shop/web allows no disruption",
    ]
    assert attributes["result"] == "timed_out"


def test_warm_pool__start_and_end_notices_say_where_the_instance_goes() -> None:
    event = dataclasses.replace(_event(), destination="WarmPool")
    _, start, _ = notices.start_notice(event, "prod")
    _, end, _ = notices.end_notice(
        event,
        {"result": "drained", "node": "n1", "cluster": "prod", "destination": "warm-pool"},
    )
    _, terminated, _ = notices.end_notice(_event(), {"result": "drained", "node": "n1"})

    assert "goes to the warm pool (stopped and kept for reuse), not terminated" in start
    assert "The instance goes to the warm pool" in end
    assert "warm pool" not in terminated


def _ec2_target(kind: str, **fields: str) -> object:
    from drainer import aws
    from drainer.lifecycle.ec2_events import Ec2Target
    from drainer.lifecycle.events_ec2 import Ec2Event, Ec2Kind

    event = Ec2Event(Ec2Kind(kind), "i-1", "e1", "2026-11-28T06:00:00Z", "us-east-1", "1", **fields)
    identity = aws.NodeIdentity(instance_id="i-1", private_dns_name="n1", availability_zone="a")
    return Ec2Target(event, identity, "prod", "workers")


@pytest.mark.parametrize(
    ("kind", "fields", "says"),
    [
        ("spot-interruption", {"instance_action": "terminate"}, "EC2 ends the instance"),
        ("spot-interruption", {"instance_action": "stop"}, "EC2 stops the instance"),
        ("spot-interruption", {"instance_action": "hibernate"}, "EC2 hibernates the instance"),
        ("rebalance-recommendation", {}, "EC2 may interrupt the instance"),
        ("state-change", {"detail_code": "stopping"}, "EC2 stops the instance"),
        ("state-change", {"detail_code": "shutting-down"}, "EC2 ends the instance"),
        ("scheduled-change", {"detail_code": "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED"},
         "EC2 reboots the instance"),
        ("scheduled-change", {"detail_code": "AWS_EC2_INSTANCE_STOP_SCHEDULED"},
         "EC2 stops the instance"),
        ("scheduled-change", {"detail_code": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"},
         "EC2 retires the instance (stops it, or ends it)"),
        ("scheduled-change", {"detail_code": "AWS_EC2_INSTANCE_NETWORK_MAINTENANCE_SCHEDULED"},
         "EC2 maintains the instance"),
        ("capacity-reservation-interruption", {}, "EC2 ends the instance"),
    ],
)  # fmt: skip
def test_end_notice__what_ec2_does__and_a_node_that_may_come_back_to_release(
    kind: str, fields: dict[str, str], says: str
) -> None:
    """Every EC2 trigger's notice said "EC2 ends the instance": a reboot, a stop, a
    hibernation or a rebalance recommendation too, whose instance may come back to a
    node left cordoned that nobody then thought to release."""
    summary = {"result": "drained", "node": "n1", "trigger": kind, "lifecycle_result": "none"}

    _, text, _ = notices.end_notice(_ec2_target(kind, **fields), summary)  # type: ignore[arg-type]

    assert f"(begun by the {kind}: {says})" in text
    back = "its node stays cordoned and out of the load balancers until "
    assert (back in text) == (says != "EC2 ends the instance"), text
    assert ("`eks-node-drainer release --node n1` once it is Ready" in text) == (back in text)
    closes = "until AWS Health closes the change, which releases it if the instance runs"
    runs_through = says in ("EC2 reboots the instance", "EC2 maintains the instance")
    assert (closes in text) == (kind == "scheduled-change" and runs_through), text
    cancelled = "Should AWS cancel the change before its window, its close releases it."
    assert (cancelled in text) == (kind == "scheduled-change" and not runs_through), text


def test_action_gone__notice_does_not_claim_the_group_was_told_continue() -> None:
    """The action timed out (or was completed elsewhere) during the drain: the heartbeat
    saw it gone, frame.answer sends nothing (completed False), and the hook's
    DefaultResult decided. The end line said `completed: false`; the notice, which
    had no such field, said "Lifecycle action: CONTINUE", the one thing that did
    not happen."""
    event = _event()
    run = Run(Result.DRAINED, cluster="prod", node="n1", action_gone=True)
    told = lifecycle_result(run.result, Settings())
    completed = frame.answer(None, event, told, action_gone=True)  # type: ignore[arg-type]
    assert completed is False

    summary = ending.summary_of(run, told, completed, 1.0)
    _, text, _ = notices.end_notice(event, summary)

    assert summary["action_gone"] is True
    assert "Lifecycle action: CONTINUE" not in text, text
    assert text.splitlines()[1] == (
        "Lifecycle action: no answer sent (the action was gone: the hook's DefaultResult "
        "or whoever completed it decided)."
    )


def test_answer_sent_but_not_completed__notice_says_what_was_sent() -> None:
    """An answer Auto Scaling refused for good, or found the action gone only then
    (`completed: false`, the heartbeat never saw it gone): CONTINUE was sent, and the
    notice says so, not that nothing was."""
    run = Run(Result.DRAINED, cluster="prod", node="n1")
    summary = ending.summary_of(run, "CONTINUE", False, 1.0)

    _, text, _ = notices.end_notice(_event(), summary)

    assert "action_gone" not in summary
    assert text.splitlines()[1] == "Lifecycle action: CONTINUE."
