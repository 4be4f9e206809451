"""Review 62 review: defects in 748a723 (a scheduled change's event delivered again
ends `redelivered`) and 9a5ddee (ScheduledChangeLeadSeconds a String)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from test_review60_ec2 import _db_pods, _guarded, _invoke, _record, published, world

from drainer import aws, handler
from drainer.backoff import Backoff
from drainer.errors import AwsError, KubeServerError
from drainer.k8s.kube import Kube
from drainer.lifecycle import runner
from testbed import LambdaContext, World

__all__ = ["published", "world"]


def test_the_api_server_failing_once_after_the_cordon__the_drain_is_not_taken_for_a_redelivery(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """runner._with_retries starts the whole drain again in the same invocation when
    the API server fails (a 503 listing the node's pods right after the cordon). The
    cordon already wrote the record naming this event, phase draining, since a second
    ago; the retry's _drain_once reads it and redelivered() takes the invocation's own
    drain for a drain under way: it ends `redelivered`, with no notice and no hand-over.
    The operator sees the node cordoned, its pods never evicted, no chain running, and
    the log saying 'left to that drain' - a drain that does not exist. The pods die
    with the instance at the window."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    update = world.scheduled_change([instance], starts_in=600)
    real = Kube.list_pods_on_node
    failures = [KubeServerError("503 Service Unavailable", 503)]

    def flaky(self: Kube, name: str, label_selector: str = "") -> tuple[list, str]:
        cordoned = (self.get_node(name) or {}).get("spec", {}).get("unschedulable")
        if failures and cordoned:
            raise failures.pop()
        return real(self, name, label_selector)

    monkeypatch.setattr(Kube, "list_pods_on_node", flaky)
    monkeypatch.setattr(runner, "API_RETRY", Backoff(first=0.2, cap=0.4))

    first = _invoke(world, monkeypatch, update, lambda_seconds=10.0)

    assert not failures, "the failure happened"
    assert first["result"] != "redelivered", first
    assert first["result"] == "handed_over", first
    assert world.aws.pending_invocations(), "the chain goes on"


def _throttled() -> AwsError:
    cause = ClientError(
        {
            "Error": {"Code": "TooManyRequestsException", "Message": "Rate exceeded"},
            "ResponseMetadata": {"HTTPStatusCode": 429},
        },
        "Invoke",
    )
    error = AwsError("Invoke (asynchronous hand-over): Rate exceeded")
    error.__cause__ = cause
    return error


def _invoke_in(
    world: World, monkeypatch: pytest.MonkeyPatch, event: dict[str, Any], context: LambdaContext
) -> dict[str, Any]:
    """The handler run with `context`: a Lambda retry of an asynchronous invocation
    keeps its aws_request_id."""
    for key, value in world.env().items():
        monkeypatch.setenv(key, value)
    handler.reset()
    return handler.lambda_handler(json.loads(json.dumps(event)), context)


def test_lambdas_retry_of_an_invocation_whose_hand_over_was_throttled__drains_on(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """ending.invoke_next raises a hand-over Lambda refuses for now (throttled), "for
    Lambda to run this event again" (AsyncInvokeConfig MaximumRetryAttempts: 2, about
    a minute later). The failed invocation has already written its end record: this
    event's id, timed_out, a second ago. Lambda's retry carries the same event,
    unmarked (the mark is only in the hand-over that failed), so redelivered() takes
    it for EventBridge's duplicate and ends it `redelivered`, unnotified: no chain is
    left running, the node stays cordoned with the budget-held pod on it, and the pod
    dies with the instance at the window. Before 748a723 the retry drained and handed
    over."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    update = world.scheduled_change([instance], starts_in=600)

    with monkeypatch.context() as throttled:

        def refused(*args: object, **kwargs: object) -> None:
            raise _throttled()

        throttled.setattr(aws, "invoke_self_async", refused)
        with pytest.raises(AwsError):
            _invoke_in(world, monkeypatch, update, LambdaContext(10.0, aws_request_id="req-1"))
    assert _record(world, node)["delivery"]["event"] == update["id"], _record(world, node)
    assert not world.aws.pending_invocations()

    # Lambda's retry: the same event, unmarked, in the same request
    retried = _invoke_in(world, monkeypatch, update, LambdaContext(10.0, aws_request_id="req-1"))

    assert retried["result"] == "handed_over", retried
    assert world.aws.pending_invocations(), "the chain goes on"
    assert _db_pods(world, node), "the held pod is still there for the chain to evict"
