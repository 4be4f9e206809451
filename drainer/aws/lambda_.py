"""Lambda: the drain's hand-over to a fresh invocation of the same function."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from drainer.aws.errors import AWS_FAILURES, translate
from drainer.aws.session import Client
from drainer.errors import AwsError


def invoke_self_async(lambda_client: Client, function_arn: str, payload: Mapping[str, Any]) -> None:
    """Queue an asynchronous invocation of `function_arn` (the drain's hand-over)."""
    what = f"Invoke {function_arn} (asynchronous hand-over)"
    try:
        response = lambda_client.invoke(
            FunctionName=function_arn,
            InvocationType="Event",
            Payload=json.dumps(payload).encode(),
        )
    except AWS_FAILURES as e:
        raise translate(e, "lambda:InvokeFunction", what) from e
    status = int(response.get("StatusCode", 0))
    if status != 202:
        raise AwsError(f"{what}: Lambda answered {status}, expected 202 (queued)")
