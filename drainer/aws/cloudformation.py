"""CloudFormation's custom resources: the answer to a request, sent to its
ResponseURL (a presigned S3 URL) with an HTTP PUT, as CloudFormation documents it:
a JSON body, no Content-Type. CloudFormation waits up to an hour for it; an answer
that never arrives leaves the stack waiting, so a PUT that fails on the way (5xx,
throttled, the connection refused or cut, a timeout) is tried again, paced by the
one retry policy (drainer/backoff.py), a bounded number of times. A 4xx other
than 408 and 429 (the URL's signature expired or refused) is not tried again.

The PUT is the one HTTP request drainer/aws makes outside botocore (urllib.request,
allowed here alone by the import contracts in pyproject.toml)."""

from __future__ import annotations

import json
import logging
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from drainer.aws.errors import AWS_FAILURES, error_code, translate
from drainer.aws.session import Client
from drainer.backoff import Backoff
from drainer.errors import AwsError

log = logging.getLogger(__name__)

RESPONSE_LIMIT = 4096
"""The largest answer CloudFormation accepts, in bytes."""
ANSWER_RETRY = Backoff(first=1.0, cap=8.0)
"""The pause between two PUTs of the answer (jittered; at least a Retry-After)."""
ANSWER_ATTEMPTS = 5
"""PUTs at most: with a 10 s timeout each, the answer gives up within about 80 s."""
_LONGEST_RETRY_AFTER = 30.0
_AGAIN = frozenset({408, 429})


class _Refused(Exception):
    """One PUT that did not take: what happened, and whether another may."""

    def __init__(self, what: str, *, again: bool, retry_after: float | None = None) -> None:
        super().__init__(what)
        self.again = again
        self.retry_after = retry_after


def answer_custom_resource(
    url: str,
    body: Mapping[str, Any],
    *,
    timeout: float = 10.0,
    attempts: int = ANSWER_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> None:
    """PUT `body` to the request's ResponseURL; its Reason is cut so the body fits.
    Raises AwsError naming the last failure once `attempts` PUTs failed, or at once
    on an answer no retry changes."""
    if not url.startswith(("https://", "http://")):
        raise AwsError(f"the custom resource's ResponseURL is not an HTTP(S) URL: {url[:80]!r}")
    data = _fitted(body)
    rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
    for attempt in range(attempts):
        try:
            _put(url, data, timeout)
        except _Refused as refused:
            if not refused.again or attempt + 1 >= attempts:
                tries = f"{attempt + 1} tr{'y' if attempt == 0 else 'ies'}"
                raise AwsError(
                    f"could not answer CloudFormation at its ResponseURL ({tries}): {refused}. "
                    "The stack waits for the answer until its custom resource times out."
                ) from None
            pause = ANSWER_RETRY.delay(attempt, rng, refused.retry_after)
            log.warning(
                "answering CloudFormation failed (try %d of %d): %s; again in %.1f s",
                attempt + 1,
                attempts,
                refused,
                pause,
            )
            sleep(pause)
        else:
            return


def _fitted(body: Mapping[str, Any]) -> bytes:
    document = dict(body)
    data = json.dumps(document).encode()
    if len(data) > RESPONSE_LIMIT:
        document.pop("Data", None)
        reason = str(document.get("Reason", ""))
        document["Reason"] = reason[: max(0, len(reason) - (len(data) - RESPONSE_LIMIT) - 40)]
        data = json.dumps(document).encode()
    return data


def _put(url: str, data: bytes, timeout: float) -> None:
    """One PUT; _Refused when it did not take."""
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked by the caller
        url, data=data, method="PUT", headers={"Content-Type": ""}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            status = int(response.status)
    except urllib.error.HTTPError as e:
        raise _Refused(
            f"HTTP {e.code}: {e.read()[:200]!r}",
            again=e.code >= 500 or e.code in _AGAIN,
            retry_after=_retry_after(e.headers.get("Retry-After")),
        ) from e
    except Exception as e:
        # On the wire: URLError and OSError (refused, reset, timed out), and http.client's
        # own (BadStatusLine, IncompleteRead), which are not OSError.
        raise _Refused(f"{type(e).__name__}: {e}", again=True) from e
    if not 200 <= status < 300:
        raise _Refused(f"HTTP {status}", again=True)


def _retry_after(value: str | None) -> float | None:
    try:
        seconds = float(value or "")
    except ValueError:
        return None
    return min(seconds, _LONGEST_RETRY_AFTER) if seconds > 0 else None


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
