"""`make logs`: the drainer function's log as readable lines, with boto3 alone.

    python -m tools.logs [--cluster-name prod | --stack-name eks-node-drainer-prod] [--region R]
        [--instance-id i-...] [--node ip-...] [--since 1h] [--follow]

The AWS CLI v1 (the one many distributions and the bundled installer ship) has no
`aws logs tail`, so this reads CloudWatch Logs itself. Each JSON line of the
function becomes one line: time, level, instance, node and the sentence the
drainer wrote (the log contract's `message`); Lambda's own START/END/REPORT lines
are left out. `--instance-id` and `--node` keep the lines of one drain: CloudWatch
is asked for lines holding the name (a quoted filter term), then each is checked
field by field. `--follow` polls every few seconds until Ctrl-C. Which stack:
`--stack-name`, else `--cluster-name`'s (tools/stacks.py: eks-node-drainer-<cluster>,
or an older eks-node-drainer of that cluster), else the region's one stack of ours.

Exit status: 0, 2 bad arguments, 3 no region or credentials, 1 no such log group.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError

from tools.common import DeployError, connect, run_tool

Client = Any
Say = Callable[[str], None]

_SINCE = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_LATE_MS = 60_000
_LAMBDA_LINES = ("START RequestId", "END RequestId", "REPORT RequestId", "INIT_START")


def since_seconds(text: str) -> int:
    """'90s', '15m', '2h', '7d' -> seconds."""
    match = _SINCE.fullmatch(text.strip())
    if not match or int(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30m, 2h or 7d")
    return int(match.group(1)) * _UNITS[match.group(2)]


@dataclass(frozen=True)
class Options:
    stack_name: str = "eks-node-drainer"
    region: str = ""
    profile: str = ""
    instance_id: str = ""
    node: str = ""
    since: int = 3600
    follow: bool = False
    poll_seconds: float = 3.0
    cluster_name: str = ""
    """Find the stack by its cluster when no stack name is given (main)."""

    @property
    def log_group(self) -> str:
        return f"/aws/lambda/{self.stack_name}"  # template.yaml's DrainerLogGroup


def render(message: str, options: Options) -> str | None:
    """One log event as a readable line; None when it is not one to show."""
    text = message.strip()
    if text.startswith(_LAMBDA_LINES):
        return None
    try:
        record = json.loads(text)
    except ValueError:
        record = None
    if not isinstance(record, dict):  # a line the runtime printed (a crash's traceback)
        return None if options.instance_id or options.node else text
    if "_aws" in record:  # the metrics line (CloudWatch's embedded format), no sentence
        return None
    if options.instance_id and record.get("instance_id") != options.instance_id:
        return None
    if options.node and record.get("node_name") != options.node:
        return None
    when = str(record.get("timestamp", ""))[:19].replace("T", " ")
    level = str(record.get("level", ""))
    who = " ".join(str(record.get(k) or "-") for k in ("instance_id", "node_name"))
    line = f"{when} {level:<7} {who}  {record.get('message', '')}"
    if record.get("exception"):
        line += "\n" + str(record["exception"])
    return line


def events(logs: Client, options: Options, start_ms: int) -> Iterator[dict[str, Any]]:
    """The log events since `start_ms`, every page."""
    request: dict[str, Any] = {"logGroupName": options.log_group, "startTime": start_ms}
    term = options.instance_id or options.node
    if term:
        request["filterPattern"] = f'"{term}"'
    while True:
        page = logs.filter_log_events(**request)
        yield from page.get("events", [])
        token = page.get("nextToken")
        if not token:
            return
        request["nextToken"] = token


def show(
    logs: Client,
    options: Options,
    say: Say = print,
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    polls: int | None = None,
) -> int:
    """Print the log; with `follow`, poll until Ctrl-C (or `polls` polls, for tests)."""
    start_ms = int((clock() - options.since) * 1000)
    seen: set[str] = set()
    newest = start_ms
    shown = 0
    done = 0
    while True:
        try:
            batch = list(events(logs, options, start_ms))
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                raise DeployError(
                    f"no log group {options.log_group}: is the stack {options.stack_name!r} "
                    "deployed in this region (make deploy), and has the function run yet?",
                    1,
                ) from e
            raise
        for event in sorted(batch, key=lambda e: (e.get("timestamp", 0), e.get("eventId", ""))):
            if event.get("eventId") in seen:
                continue
            seen.add(str(event.get("eventId")))
            newest = max(newest, int(event.get("timestamp", 0)))
            line = render(str(event.get("message", "")), options)
            if line is not None:
                say(line)
                shown += 1
        done += 1
        if not options.follow or (polls is not None and done >= polls):
            break
        # Look a minute back each time: a line of another stream (two drains at once)
        # may arrive late with an earlier timestamp; `seen` drops the repeats.
        start_ms = max(start_ms, newest - _LATE_MS)
        sleep(options.poll_seconds)
    if not shown and not options.follow:
        what = options.instance_id or options.node
        say(f"(no drainer log lines{' for ' + what if what else ''} in {options.log_group})")
    return 0


def parse_args(argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m tools.logs", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--stack-name", default="", help="(make: STACK_NAME)")
    parser.add_argument("--cluster-name", default="", help="its stack's (make: CLUSTER_NAME)")
    parser.add_argument("--region", default="", help="default: the AWS CLI's (REGION)")
    parser.add_argument("--profile", default="", help="AWS profile (default: AWS_PROFILE)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--instance-id", default="", help="one instance's drain (INSTANCE)")
    which.add_argument("--node", default="", help="one node's drain (NODE)")
    parser.add_argument(
        "--since", type=since_seconds, default=3600, help="how far back: 30m, 2h, 7d (SINCE)"
    )
    parser.add_argument("--follow", action="store_true", help="keep printing new lines (FOLLOW)")
    args = parser.parse_args(argv)
    return Options(
        stack_name=args.stack_name,
        region=args.region,
        profile=args.profile,
        instance_id=args.instance_id,
        node=args.node,
        since=args.since,
        follow=args.follow,
        cluster_name=args.cluster_name,
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)

    def body() -> int:
        aws = connect(options.region, options.profile, unchanged="")
        from tools import stacks

        cfn = aws.client("cloudformation")
        name, note = stacks.resolve(cfn, options.stack_name, options.cluster_name)
        if note:
            print(note, file=sys.stderr)
        chosen = replace(options, stack_name=name)
        return show(aws.client("logs"), chosen, lambda line: print(line, flush=True))

    return run_tool("logs", body, on_ctrl_c=0)  # Ctrl-C is how FOLLOW=1 ends


if __name__ == "__main__":
    sys.exit(main())
