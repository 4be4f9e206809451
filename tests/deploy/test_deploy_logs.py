"""`make logs`: the function's log lines, as the drainer writes them, read back
from (moto's) CloudWatch Logs and printed for people, filtered by instance or node."""

from __future__ import annotations

import io
import logging
import time
from typing import Any

import pytest

from drainer import logs as drainer_logs
from drainer.engine.report import DrainEvent, Kind, describe
from tools import logs
from tools.common import DeployError

GROUP = "/aws/lambda/eks-node-drainer"
NODE_A, NODE_B = "ip-10-0-1-1.ec2.internal", "ip-10-0-1-2.ec2.internal"


def _drainer_lines(instance: str, node: str) -> list[str]:
    """JSON lines exactly as the function writes them for one drain."""
    stream = io.StringIO()
    handler = drainer_logs.configure("INFO")
    before = handler.stream
    drainer_logs.configure("INFO", stream=stream)
    drainer_logs.bind(instance_id=instance, node_name=node, cluster="prod")
    log = logging.getLogger("drainer.engine.drain")
    for event in (
        DrainEvent(Kind.CORDONED),
        DrainEvent(Kind.EVICTED, pod="shop/web-1"),
        DrainEvent(Kind.GONE, pod="shop/web-1", seconds=2.5),
    ):
        drainer_logs.drain_event(log, describe(event, node), event.fields(), event.level)
    drainer_logs.reset()
    handler.setStream(before)  # the next test's logs go where they went
    return stream.getvalue().splitlines()


@pytest.fixture
def cloudwatch(moto_aws: None) -> Any:
    import boto3

    client = boto3.client("logs", region_name="us-east-1")
    client.create_log_group(logGroupName=GROUP)
    client.create_log_stream(logGroupName=GROUP, logStreamName="s1")
    return client


def _put(client: Any, lines: list[str]) -> None:
    if not lines:
        return
    now = int(time.time() * 1000)
    client.put_log_events(
        logGroupName=GROUP,
        logStreamName="s1",
        logEvents=[{"timestamp": now + i, "message": line} for i, line in enumerate(lines)],
    )


def _messages(printed: list[str]) -> list[str]:
    """The drainer's sentences, without the time, level, instance and node before them."""
    return [line.split(".internal  ", 1)[1] for line in printed]


def _show(client: Any, **options: Any) -> tuple[int, list[str]]:
    printed: list[str] = []
    code = logs.show(client, logs.Options(**options), printed.append)
    return code, printed


def test_readable_lines__lambda_lines_left_out__one_instance_only(cloudwatch: Any) -> None:
    _put(
        cloudwatch,
        [
            "START RequestId: 1 Version: $LATEST",
            *_drainer_lines("i-0aaaaaaaaaaaaaaaa", NODE_A),
            *_drainer_lines("i-0bbbbbbbbbbbbbbbb", NODE_B),
            "REPORT RequestId: 1 Duration: 5.0 ms",
        ],
    )

    code, printed = _show(cloudwatch, instance_id="i-0aaaaaaaaaaaaaaaa")

    assert code == 0
    assert len(printed) == 3, printed
    assert all(f"i-0aaaaaaaaaaaaaaaa {NODE_A}  " in line for line in printed)
    assert printed[0].endswith(f"cordoned node {NODE_A}")
    assert printed[2].endswith("shop/web-1 is gone after 2.5 s")
    assert " INFO " in printed[1]


def test_by_node__the_nodes_lines(cloudwatch: Any) -> None:
    _put(cloudwatch, [*_drainer_lines("i-1", NODE_A), *_drainer_lines("i-2", NODE_B)])

    _, printed = _show(cloudwatch, node=NODE_B)

    assert _messages(printed) == [
        f"cordoned node {NODE_B}",
        "evicted shop/web-1",
        "shop/web-1 is gone after 2.5 s",
    ]


def test_unfiltered__a_crash_traceback_is_shown_as_it_is(cloudwatch: Any) -> None:
    _put(cloudwatch, ["Traceback (most recent call last):", *_drainer_lines("i-1", NODE_A)])

    _, printed = _show(cloudwatch)

    assert printed[0] == "Traceback (most recent call last):"
    assert len(printed) == 4


def test_follow__new_lines_printed_once_each(cloudwatch: Any) -> None:
    _put(cloudwatch, _drainer_lines("i-1", NODE_A)[:1])
    printed: list[str] = []
    later = iter([_drainer_lines("i-1", NODE_A)[1:], []])

    def sleep(_: float) -> None:
        _put(cloudwatch, next(later))

    logs.show(cloudwatch, logs.Options(follow=True), printed.append, sleep=sleep, polls=3)

    assert _messages(printed) == [
        f"cordoned node {NODE_A}",
        "evicted shop/web-1",
        "shop/web-1 is gone after 2.5 s",
    ]


def test_nothing_there__says_so(cloudwatch: Any) -> None:
    _, printed = _show(cloudwatch, instance_id="i-0cccccccccccccccc")
    assert printed == [f"(no drainer log lines for i-0cccccccccccccccc in {GROUP})"]


def test_no_log_group__clear_error_naming_it(moto_aws: None) -> None:
    import boto3

    with pytest.raises(DeployError, match=f"no log group {GROUP}: is the stack"):
        _show(boto3.client("logs", region_name="us-east-1"))


def test_main__no_region__exit_3(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))

    assert logs.main([]) == 3
    assert "no AWS region" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("15m", 900), ("2h", 7200), ("7d", 604800)]
)
def test_since__durations(text: str, seconds: int) -> None:
    assert logs.since_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "0m", "2 hours", "-1h", "1w"])
def test_since__not_a_duration__usage_error(text: str) -> None:
    with pytest.raises(SystemExit):
        logs.parse_args(["--since", text])
