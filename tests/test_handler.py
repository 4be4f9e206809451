"""The handler's edge: the outcome table, skipped events, invalid settings."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from awssim import AwsSim
from awssim.world import NodeGroup, create_node_group
from drainer import aws, handler
from drainer.engine.report import DrainReport
from drainer.errors import AwsError, SettingsError
from drainer.lifecycle import ec2_events, ending, scale_in
from drainer.lifecycle.events import parse_event
from drainer.lifecycle.events_hook import LifecycleEvent
from drainer.lifecycle.job import Run, Tools
from drainer.lifecycle.settings import Settings
from drainer.outcome import Outcome


@pytest.fixture
def clean_handler(monkeypatch: pytest.MonkeyPatch) -> Callable[..., dict[str, Any]]:
    def run(event: Any, **env: str) -> dict[str, Any]:
        for key in ("DRAIN_TIMEOUT_SECONDS", "TIMEOUT_POLICY"):
            monkeypatch.delenv(key, raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        handler.reset()
        return handler.lambda_handler(event, None)

    return run


@pytest.mark.parametrize(
    "event",
    ["test-notification", "launch", "ec2-state-change", "malformed-missing-instance"],
)
def test_event_not_for_us__skipped_without_any_aws_call(
    event: str,
    load_event: Callable[[str], dict[str, Any]],
    clean_handler: Callable[..., dict[str, Any]],
) -> None:
    # No AWS credentials or endpoint exist here: any AWS call would fail the test.
    result = clean_handler(load_event(event))

    assert result["result"] == "skipped"
    assert result["reason"]


def test_health_change_closed__through_the_handler__nothing_asked_of_aws_when_off(
    load_event: Callable[[str], dict[str, Any]],
    clean_handler: Callable[..., dict[str, Any]],
) -> None:
    """A closed change reaches drainer/lifecycle/closed.py; with no function to invoke
    (no context), nothing was ever scheduled, and with SCHEDULED_CHANGE_DRAIN off no
    node is released: nothing is asked of AWS."""
    event = load_event("health-scheduled-change")
    event["detail"]["statusCode"] = "closed"

    result = clean_handler(
        event, SCHEDULED_CHANGE_LEAD_SECONDS="3600", SCHEDULED_CHANGE_DRAIN="false"
    )

    assert result == {
        "result": "closed",
        "reason": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED: closed, the change is over",
        "settled": [],
        "released": [],
        "kept": {},
    }


@pytest.mark.parametrize("garbage", [None, "text", 42, [], {"detail": "not a dict"}])
def test_garbage_event__skipped(garbage: Any, clean_handler: Callable[..., dict[str, Any]]) -> None:
    assert clean_handler(garbage)["result"] == "skipped"


def test_invalid_setting__fails_naming_the_variable(
    load_event: Callable[[str], dict[str, Any]], clean_handler: Callable[..., dict[str, Any]]
) -> None:
    with pytest.raises(SettingsError, match="DRAIN_TIMEOUT_SECONDS"):
        clean_handler(load_event("terminate"), DRAIN_TIMEOUT_SECONDS="soon")


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("HTTPS_PROXY", "socks5://proxy.internal:1080", "a SOCKS proxy is not supported"),
        ("https_proxy", "https://proxy.internal:3128", "TLS to the proxy itself"),
        ("HTTP_PROXY", "http://proxy.internal:port", "no valid port"),
    ],
)
def test_unusable_proxy_in_the_environment__fails_naming_it_before_any_aws_call(
    load_event: Callable[[str], dict[str, Any]],
    clean_handler: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    value: str,
    said: str,
) -> None:
    """Not a ValueError at the drain's first request: the invocation fails at once, the
    variable named, as any setting that does not read (no AWS endpoint exists here)."""
    for other in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(other, raising=False)

    with pytest.raises(SettingsError, match=f"^{name}: not a proxy the function can use .*{said}"):
        clean_handler(load_event("terminate"), **{name: value})


@pytest.mark.parametrize(
    ("remaining", "margin", "expected"),
    [
        (900.0, 60.0, 840.0),  # the usual case: hand over a minute before the deadline
        (64.0, 60.0, 5.0),  # a short function still drains a few seconds each time
        (60.0, 60.0, 5.0),  # never hand over at once, forever
        (6.0, 600.0, 3.0),  # and never past half of what is left
    ],
)
def test_work_time__never_hands_over_without_progress(
    remaining: float, margin: float, expected: float
) -> None:
    from drainer.lifecycle.window import work_time

    assert work_time(remaining, margin) == expected


# --- the end line: one drain_finished line, the summary as its keys --------------------


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def handler_lines() -> Iterator[_Lines]:
    lines = _Lines()
    logger = logging.getLogger("drainer.lifecycle.ending")
    logger.addHandler(lines)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    yield lines
    logger.removeHandler(lines)
    logger.setLevel(level)


def test_end_line__drain_finished_event__summary_keys_and_human_text(
    handler_lines: _Lines,
) -> None:
    report = DrainReport(
        "ip-10-0-0-1.ec2.internal",
        Outcome.TIMED_OUT,
        evicted=3,
        refusals=4,
        blocked_by={"shop/web": ["shop/web-1"]},
        remaining=["shop/web-1"],
        left={"shop/web-1": "PodDisruptionBudget shop/web allows no disruption"},
    )
    run = Run(
        Outcome.TIMED_OUT,
        "drain timed out at its deadline, DRAIN_TIMEOUT_SECONDS (3600 s) "
        "(TIMEOUT_POLICY=continue): " + report.timeout_message(),
        cluster="prod",
        node="ip-10-0-0-1.ec2.internal",
        report=report,
    )
    summary = ending.summary_of(run, "CONTINUE", True, 12.5)

    ending.log_end_line(summary)

    (line,) = handler_lines.records
    fields = line.__dict__
    assert fields["event"] == "drain_finished"
    assert (fields["result"], fields["lifecycle_result"], fields["completed"]) == (
        "timed_out",
        "CONTINUE",
        True,
    )
    assert (fields["cluster"], fields["node"], fields["seconds"]) == (
        "prod",
        "ip-10-0-0-1.ec2.internal",
        12.5,
    )
    assert (fields["evicted"], fields["pdb_refusals"], fields["remaining"]) == (3, 4, 1)
    assert fields["budgets_holding"] == ["shop/web"]
    assert fields["left"] == {"shop/web-1": "PodDisruptionBudget shop/web allows no disruption"}
    # The message, under `reason` (logging keeps `message` for the text), names the pod.
    assert "shop/web-1" in fields["reason"]
    text = line.getMessage()
    assert text.startswith("drain finished: result=timed_out, lifecycle_result=CONTINUE, ")
    assert "message=drain timed out at its deadline" in text
    assert "PodDisruptionBudget shop/web allows no disruption: shop/web-1" in text


def test_end_line__no_drain_ran__counts_still_there(handler_lines: _Lines) -> None:
    run = Run(Outcome.NO_NODE, "no Kubernetes node for instance i-0abc", cluster="prod")

    ending.log_end_line(ending.summary_of(run, "CONTINUE", True, 0.5))

    (line,) = handler_lines.records
    fields = line.__dict__
    assert fields["event"] == "drain_finished"
    assert fields["result"] == "no_node"
    assert (fields["evicted"], fields["pdb_refusals"], fields["remaining"]) == (0, 0, 0)
    assert (fields["budgets_holding"], fields["left"]) == ([], {})


# --- events the handler must end, never raise: malformed, or refused by AWS for good ----


def _with(event: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    """`event` with the dotted `path` set to `value`."""
    *parents, last = path.split(".")
    target = event
    for parent in parents:
        target = target[parent]
    target[last] = value
    return event


def _handover(started_at: object) -> dict[str, object]:
    return {"started_at": started_at, "handovers": 1, "heartbeats": 4}


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        # OverflowError, uncaught, before: Lambda retried the same event.
        ("drainer", _handover(10**400), "started_at must be positive epoch seconds"),
        # A forged hand-over: with TIMEOUT_POLICY=force its deadline was long past,
        # and budget-held pods were force-deleted at once.
        ("drainer", _handover(1), "before the event's own time"),
        ("drainer", _handover(float(2**62)), "in the future"),
        # A botocore parser error, uncaught, before.
        ("detail.EC2InstanceId", "i-0a1b2c3d\x00", "not an EC2 instance id"),
        ("detail.AutoScalingGroupName", "eks-workers-a\x00", "which AWS does not accept"),
    ],
    ids=["started-at-huge", "started-at-1", "started-at-future", "instance-nul", "group-nul"],
)
def test_malformed_lifecycle_event__an_error_in_the_log__returned_not_raised_no_aws_call(
    load_event: Callable[[str], dict[str, Any]],
    clean_handler: Callable[..., dict[str, Any]],
    handler_lines: _Lines,
    path: str,
    value: object,
    reason: str,
) -> None:
    event = _with(load_event("terminate"), "time", _now_rfc3339())
    event = _with(event, path, value)

    # No AWS credentials or endpoint exist here: any AWS call would fail the test.
    result = clean_handler(event, TIMEOUT_POLICY="force", DRAIN_TIMEOUT_SECONDS="60")

    assert (result["result"], result["malformed"]) == ("skipped", True)
    assert reason in result["reason"]
    errors = [r for r in handler_lines.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        f"malformed event, nothing done (not retried): {result['reason']}"
    ]


def _now_rfc3339() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class _Aws:
    clients: aws.AwsClients
    sim: AwsSim
    group: NodeGroup
    event: dict[str, Any]


@pytest.fixture
def moto_group(moto_aws: None) -> _Aws:
    """A group with a terminate hook (moto + awssim), one instance in Terminating:Wait."""
    import boto3

    clients = aws.make_clients(boto3.Session(region_name="us-east-1"))
    group = create_node_group(
        clients.ec2,
        clients.autoscaling,
        asg_name="eks-workers",
        size=2,
        hook_name="drain",
        heartbeat_timeout=600,
        notification_metadata='{"cluster_name": "prod"}',
    )
    sim = AwsSim(region="us-east-1")
    token = sim.begin_termination(group.asg_name, group.instance_ids[0], group.hook_name)
    return _Aws(clients, sim, group, sim.event_for(token))


def _no_kube(*args: object) -> Any:
    raise AssertionError("no drain may start: AWS refused before the cluster was known")


def _handle(found: _Aws, event: dict[str, Any]) -> dict[str, Any]:
    parsed = parse_event(event)
    assert isinstance(parsed, LifecycleEvent), parsed
    tools = Tools(Settings(), found.clients, _no_kube)
    return scale_in.handle(parsed, tools, None, raw_event=event)


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        # The group has no such hook (deleted, or a hand-made event): moto answers an
        # empty list.
        (None, "Auto Scaling group 'eks-workers' has no lifecycle hook 'other'"),
        # AWS answers an unknown group or hook with a ValidationError.
        (("autoscaling", "DescribeLifecycleHooks", "ValidationError"), "ValidationError"),
        (
            ("autoscaling", "DescribeLifecycleHooks", "AccessDenied"),
            "grant autoscaling:DescribeLifecycleHooks",
        ),
        (("ec2", "DescribeInstances", "AccessDenied"), "grant ec2:DescribeInstances"),
    ],
    ids=["unknown-hook", "validation-error", "access-denied-autoscaling", "access-denied-ec2"],
)
def test_permanent_aws_error__drain_failed_naming_it__returned_not_raised(
    moto_group: _Aws, handler_lines: _Lines, fault: tuple[str, str, str] | None, message: str
) -> None:
    event = moto_group.event
    if fault is None:
        event["detail"]["LifecycleHookName"] = "other"
    else:
        moto_group.sim.fail_action(*fault)

    summary = _handle(moto_group, event)

    assert summary["result"] == "failed"
    assert message in summary["message"]
    assert "permanent: the event is not retried" in summary["message"]
    errors = [r.getMessage() for r in handler_lines.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith("drain failed: "), errors
    assert message in errors[0]


def test_permanent_aws_error__the_outcome_table_still_applies(moto_group: _Aws) -> None:
    moto_group.sim.fail_action("ec2", "DescribeInstances", "AccessDenied")

    summary = _handle(moto_group, moto_group.event)

    # FAILED -> FAILURE_RESULT (ABANDON by default), as for any failed drain.
    assert (summary["lifecycle_result"], summary["completed"]) == ("ABANDON", True)
    [call] = moto_group.sim.calls("complete")
    assert call["LifecycleActionResult"] == "ABANDON"


def test_transient_aws_error__raised_for_lambda_to_retry(moto_group: _Aws) -> None:
    moto_group.sim.fail_action("autoscaling", "DescribeLifecycleHooks", "InternalFailure")
    moto_group.clients.autoscaling = boto3_client_without_retries("autoscaling")

    with pytest.raises(AwsError, match="InternalFailure") as raised:
        _handle(moto_group, moto_group.event)

    assert not aws.is_permanent(raised.value)


def boto3_client_without_retries(service: str) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "total_max_attempts": 1})
    return boto3.Session(region_name="us-east-1").client(service, config=config)


def test_spot_event__permanent_aws_error__failed_naming_it__returned_not_raised(
    moto_group: _Aws,
) -> None:
    from awssim import ec2_events as spot_events
    from drainer.lifecycle.events_ec2 import Ec2Event

    raw = spot_events.interruption_warning(
        "123456789012", "us-east-1", moto_group.group.instance_ids[1]
    )
    event = parse_event(raw)
    assert isinstance(event, Ec2Event)
    moto_group.sim.fail_action("ec2", "DescribeInstances", "AccessDenied")

    result = ec2_events.handle(event, Tools(Settings(), moto_group.clients, _no_kube), None)

    assert result["result"] == "failed"
    assert "grant ec2:DescribeInstances" in result["message"]
