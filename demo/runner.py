"""`python -m demo.runner --timeout SECONDS`: one Lambda invocation, in this process.

What the Lambda runtime does for one asynchronous invocation, and no more: read the
event (JSON on stdin), call drainer.handler.lambda_handler(event, context) with a
context whose deadline is real, let the function log to stdout as it would to
CloudWatch, and end the invocation at the deadline the way Lambda does (the
process is gone, whatever it was doing). The environment is the function's
(the demo builds it from template.yaml's defaults), plus AWS_ENDPOINT_URL and fake
credentials that only the local emulators accept.

The last stdout line is the outcome, as JSON: {"lambda_result": <the handler's
return value>} or {"lambda_error": {"errorType": ..., "errorMessage": ...}}.
It imports nothing from the emulators (testbed.context is a plain dataclass):
this process is the function.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
from typing import Any

from testbed.context import LambdaContext  # light: no emulator behind it

EXIT_TIMED_OUT = 124


def _emit(outcome: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(outcome, default=str) + "\n")
    sys.stdout.flush()


def _time_out(context: LambdaContext) -> None:
    """Lambda ends a function at its timeout, mid-work; so does this."""
    _emit(
        {
            "lambda_error": {
                "errorType": "Sandbox.Timedout",
                "errorMessage": f"Task timed out after {context.timeout_seconds:.2f} seconds",
            }
        }
    )
    os._exit(EXIT_TIMED_OUT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo.runner", description=__doc__)
    parser.add_argument("--timeout", type=float, required=True, help="the function's timeout")
    parser.add_argument("--function-name", default="eks-node-drainer")
    parser.add_argument("--account", default="123456789012")
    parser.add_argument("--memory", type=int, default=512)
    parser.add_argument(
        "--request-id",
        default="",
        help="the invocation's aws_request_id (Lambda's retry of a failed invocation "
        "keeps it; a new delivery of an event has its own): a new one when not given",
    )
    args = parser.parse_args(argv)

    event = json.load(sys.stdin)
    context = LambdaContext(
        timeout_seconds=args.timeout,
        function_name=args.function_name,
        region=os.environ.get("AWS_REGION", "us-east-1"),
        account=args.account,
        memory_limit_in_mb=args.memory,
    )
    if args.request_id:
        context.aws_request_id = args.request_id
    timer = threading.Timer(args.timeout, _time_out, args=(context,))
    timer.daemon = True
    timer.start()
    print(f"START RequestId: {context.aws_request_id} Version: {context.function_version}")
    sys.stdout.flush()
    from drainer.handler import lambda_handler

    try:
        result = lambda_handler(event, context)
    except Exception as e:
        traceback.print_exc()
        outcome: dict[str, Any] = {
            "lambda_error": {"errorType": type(e).__name__, "errorMessage": str(e)}
        }
        status = 1
    else:
        outcome = {"lambda_result": result}
        status = 0
    timer.cancel()
    duration = (time.monotonic() - context.started) * 1000
    print(f"END RequestId: {context.aws_request_id}")
    print(
        f"REPORT RequestId: {context.aws_request_id}\tDuration: {duration:.2f} ms\t"
        f"Memory Size: {context.memory_limit_in_mb} MB"
    )
    _emit(outcome)
    return status


if __name__ == "__main__":
    sys.exit(main())
