"""Lambda throttling makes events late: one invocation per draining node can use up
the account's concurrency in a spot wave or a large refresh, and a throttled event
waits in Lambda's queue. The stack tells the operator (alarms on the function's
Throttles and ConcurrentExecutions) and can reserve concurrency for the function."""

from __future__ import annotations

from typing import Any

import pytest

from .cfn import Stack
from .conftest import ASGS, CLUSTER
from .test_deploy_readme import OPERATIONS, REFERENCE, section

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")

TOPIC = "arn:aws:sns:eu-west-1:123456789012:oncall"


def stack(**parameters: str) -> Stack:
    defaults = {"ClusterName": CLUSTER, "AsgNames": ",".join(ASGS)}
    defaults |= {"CodeS3Bucket": "code-bucket", "CodeS3Key": "drainer.zip"}
    return Stack(defaults | parameters)


def _metric(alarm: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]]]:
    return alarm["Namespace"], alarm["MetricName"], alarm["Dimensions"]


def test_a_throttled_invocation_raises_an_alarm_that_notifies() -> None:
    alarm = stack(FailureTopicArn=TOPIC).resource("ThrottlesAlarm")

    assert _metric(alarm) == (
        "AWS/Lambda",
        "Throttles",
        [{"Name": "FunctionName", "Value": "eks-node-drainer"}],
    )
    assert alarm["Statistic"] == "Sum" and alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] == [TOPIC]
    assert "ReservedConcurrency" in alarm["AlarmDescription"]


@pytest.mark.parametrize(
    ("parameters", "threshold"),
    [({}, 200), ({"ConcurrencyAlarmThreshold": "40"}, 40)],
)
def test_many_drains_at_once_raise_an_alarm(parameters: dict[str, str], threshold: int) -> None:
    alarm = stack(FailureTopicArn=TOPIC, **parameters).resource("ConcurrencyAlarm")

    assert _metric(alarm) == (
        "AWS/Lambda",
        "ConcurrentExecutions",
        [{"Name": "FunctionName", "Value": "eks-node-drainer"}],
    )
    assert alarm["Statistic"] == "Maximum"
    assert int(alarm["Threshold"]) == threshold
    assert alarm["AlarmActions"] == [TOPIC]


@pytest.mark.parametrize(
    ("value", "reserved"),
    [(None, None), ("", None), ("0", None), ("50", "50")],
    ids=["default", "empty", "zero", "fifty"],
)
def test_reserved_concurrency__empty_or_0_unreserved(
    value: str | None, reserved: str | None
) -> None:
    parameters = {} if value is None else {"ReservedConcurrency": value}
    function = stack(**parameters).resource("DrainerFunction")

    assert function.get("ReservedConcurrentExecutions") == reserved


def test_the_arithmetic_and_the_parameters_are_documented() -> None:
    throttling = section(OPERATIONS, "## Throttling: many drains at once")
    for fact in (
        "1000",
        "ReservedConcurrency",
        "ConcurrencyAlarmThreshold",
        "hands over",
        "6 hours",
    ):
        assert fact in throttling, fact
    for parameter in ("ReservedConcurrency", "ConcurrencyAlarmThreshold"):
        assert f"| `{parameter}` |" in REFERENCE
