"""The function as Lambda runs it: the zip of `make package`, under the runtime
interface client (awslambdaric) and the runtime's Python, behind the Lambda Runtime
Interface Emulator (aws-lambda-rie, built from its Go module), configured from
template.yaml (testbed/lambdarie). AWS is awssim served from this test's process;
Kubernetes the real control plane.

A few scenarios, not the suite twice: what only the real runtime can get wrong (the
handler string, the zip's layout, the context's attributes and deadline, the kill
at the timeout) shows in any of them.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import pytest

from testbed import World
from testbed import workloads as w
from testbed.lambdarie import Invocation, LambdaRie
from testbed.world import place_on, pods_on

# On the real control plane only: the same scenarios run in-process on both backends
# (test_drain, test_spot, test_chaos_lambda); here what is judged is the Lambda runtime.
REAL = pytest.mark.parametrize("backend", ["real"])
HANDOVER_TIMEOUT = 8  # seconds: the emulator reads whole seconds
HANDOVER_MARGIN = 5  # HANDOVER_MARGIN_SECONDS' minimum


def _function(
    world: World, aws_server: str, timeout: float | None = None, **settings: Any
) -> AbstractContextManager[LambdaRie]:
    """The packaged function under the runtime, with the world's settings."""
    env = world.process_env(aws_server, **settings)
    return LambdaRie.start(env, timeout=timeout, cluster_name=world.cluster_name)


def _story(invocations: list[Invocation]) -> str:
    return "\n\n".join("\n".join(i.lines) for i in invocations)


@REAL
def test_scale_in__drained_through_the_runtime__lifecycle_action_completed(
    world: World, aws_server: str
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(
        world,
        node,
        [w.deployment("web", 3), w.budget("web", {"app": "web"}, max_unavailable=1)],
    )
    event = world.terminate(instance)  # as EventBridge delivers it

    with _function(world, aws_server) as function:
        first = function.invoke(event)

    assert first.status == 200, first.lines
    assert first.result["result"] == "drained", first.lines
    assert first.result["evicted"] == 3
    assert [c["LifecycleActionResult"] for c in world.completions()] == ["CONTINUE"]
    assert pods_on(world.cluster, node) == []
    # The emulator's report of a cold start, and the function's own end line.
    assert first.init_ms is not None and first.init_ms > 0, first.lines
    assert float(first.report["Duration"].split()[0]) > 0
    ends = [r for r in first.records() if r.get("event") == "drain_finished"]
    assert len(ends) == 1 and ends[0]["result"] == "drained", first.lines


@REAL
def test_drain_longer_than_the_timeout__handed_over_before_the_kill__next_finishes(
    world: World, aws_server: str
) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    # 2 pods taking 10 s to stop (200 s at the control plane's speed 20): longer
    # than the 8 s the function may run.
    place_on(world, node, [w.deployment("slow", 2, shutdown=200, grace=300)])
    event = world.terminate(instance)

    invocations: list[Invocation] = []
    with _function(
        world, aws_server, HANDOVER_TIMEOUT, HANDOVER_MARGIN_SECONDS=HANDOVER_MARGIN
    ) as f:
        payload: dict[str, Any] | None = event
        while payload is not None and len(invocations) < 10:
            invocations.append(f.invoke(payload))
            queued = world.aws.pop_invocation()  # Lambda runs the hand-over's event
            payload = queued["payload"] if queued is not None else None

    story = _story(invocations)
    assert not any(i.timed_out for i in invocations), story
    results = [i.result["result"] for i in invocations]
    assert results[0] == "handed_over", story
    assert results[-1] == "drained", story
    assert all(r == "handed_over" for r in results[:-1]), story
    # Each invocation ended within the function's timeout, the kill never came.
    for invocation in invocations:
        assert float(invocation.report["Duration"].split()[0]) < HANDOVER_TIMEOUT * 1000, story
    assert [c["LifecycleActionResult"] for c in world.completions()] == ["CONTINUE"], story
    assert pods_on(world.cluster, node) == []


@REAL
def test_malformed_events__answered__the_runtime_goes_on(world: World, aws_server: str) -> None:
    instance = world.instance_ids[0]
    with _function(world, aws_server) as function:
        not_json = function.invoke(None, raw=b'{"source": "aws.autoscaling",')
        wrong_shape = function.invoke(
            {
                "source": "aws.autoscaling",
                "detail-type": "EC2 Instance-terminate Lifecycle Action",
                "detail": {"EC2InstanceId": 42, "LifecycleTransition": ["x"]},
            }
        )
        not_a_dict = function.invoke(["a", "list"])
        then = function.invoke(world.terminate(instance))

    # Bytes that are not JSON never reach the handler: the runtime answers them.
    assert (not_json.error or {}).get("errorType") == "Runtime.UnmarshalError", not_json.lines
    for invocation in (wrong_shape, not_a_dict):
        assert invocation.result["result"] == "skipped", invocation.lines
        assert not any("Traceback" in line for line in invocation.lines), invocation.lines
    # The same process then drains: no init between, nothing left broken.
    assert then.init_ms is None, then.lines
    assert then.result["result"] == "drained", then.lines


@REAL
def test_spot_warning__drained_through_the_runtime(world: World, aws_server: str) -> None:
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    place_on(world, node, [w.deployment("web", 2)])

    with _function(world, aws_server) as function:
        warned = function.invoke(world.spot_warning(instance))

    assert warned.result["result"] == "drained", warned.lines
    assert warned.result["trigger"] == "spot-interruption"
    assert warned.result["evicted"] == 2
    assert world.completions() == []
    assert pods_on(world.cluster, node) == []


def test_a_wrong_handler_string__the_runtime_says_so() -> None:
    """What a typo in template.yaml's Handler: does on Lambda, shown here: every
    invocation answers the runtime's own error, naming the handler."""
    with LambdaRie.start({}, handler="drainer.handler.lambda_handle") as function:
        answer = function.invoke({})
    assert (answer.error or {}).get("errorType") == "Runtime.HandlerNotFound", answer.lines
    assert "lambda_handle" in answer.error["errorMessage"]  # type: ignore[index]
