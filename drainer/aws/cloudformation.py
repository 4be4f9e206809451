"""CloudFormation's custom resources: the answer to a request, sent to its
ResponseURL (a presigned S3 URL) with an HTTP PUT, as CloudFormation documents it:
a JSON body, no Content-Type. CloudFormation waits up to an hour for it; an answer
that never arrives leaves the stack waiting, so a failed PUT is tried again."""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from drainer.aws.errors import AWS_FAILURES, error_code, translate
from drainer.aws.session import Client
from drainer.errors import AwsError

log = logging.getLogger(__name__)

RESPONSE_LIMIT = 4096
"""The largest answer CloudFormation accepts, in bytes."""
_ATTEMPTS = 4


def answer_custom_resource(url: str, body: Mapping[str, Any], *, timeout: float = 10.0) -> None:
    """PUT `body` to the request's ResponseURL; its Reason is cut so the body fits."""
    document = dict(body)
    data = json.dumps(document).encode()
    if len(data) > RESPONSE_LIMIT:
        document.pop("Data", None)
        reason = str(document.get("Reason", ""))
        document["Reason"] = reason[: max(0, len(reason) - (len(data) - RESPONSE_LIMIT) - 40)]
        data = json.dumps(document).encode()
    if not url.startswith(("https://", "http://")):
        raise AwsError(f"the custom resource's ResponseURL is not an HTTP(S) URL: {url[:80]!r}")
    last = ""
    for attempt in range(_ATTEMPTS):
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
            url, data=data, method="PUT", headers={"Content-Type": ""}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                if 200 <= response.status < 300:
                    return
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as e:
            last = f"HTTP {e.code}: {e.read()[:200]!r}"
        except (urllib.error.URLError, OSError) as e:
            last = str(e)
        log.warning("answering CloudFormation failed (attempt %d): %s", attempt + 1, last)
        time.sleep(min(8.0, 0.5 * 2**attempt))
    raise AwsError(f"could not answer CloudFormation at its ResponseURL: {last}")


def stack_status(cloudformation: Client, stack_id: str) -> str | None:
    """The stack's StackStatus as CloudFormation says it now (CREATE_IN_PROGRESS,
    ROLLBACK_IN_PROGRESS, DELETE_COMPLETE, ...); None when it knows no such stack. A
    stack ARN names one stack for good: a deleted one is still described."""
    what = f"DescribeStacks {stack_id}"
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_id).get("Stacks", [])
    except AWS_FAILURES as e:
        if error_code(e) == "ValidationError" and "does not exist" in str(e):
            return None
        raise translate(e, "cloudformation:DescribeStacks", what) from e
    return str(stacks[0].get("StackStatus", "")) if stacks else None
