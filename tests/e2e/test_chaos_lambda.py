"""Seeded chaos, the AWS and Lambda side (issue 16): the drain of a random workload
while Auto Scaling and EC2 throttle, events arrive twice or at once, an invocation
is killed mid-drain and its event redelivered, and drains hand over.

Every invocation is a process, as Lambda runs it: `python -m demo.runner` (the
real handler, a Lambda context with a real deadline, the function's environment)
talking to awssim served from this test's process (the same moto state the test
reads) and to the cluster. So "killed" is a SIGKILL at a random point of the drain
(after the k-th line of its log), not an exception: heartbeats, evictions and the
node record stop wherever they were. Lambda then delivers the event again, in the
failed invocation's request (its retries keep the request id; a delivery of an event
again, concurrent or duplicate, has its own, and is left to the drain under way).

Faults, each drawn or not per seed (the fault kinds `make chaos` reports):
- aws:throttle-ec2, aws:throttle-autoscaling: DescribeInstances answers
  RequestLimitExceeded, DescribeLifecycleHooks Throttling, for a burst shorter than
  botocore's retries; aws:throttle-heartbeat, aws:throttle-complete: the lifecycle
  calls themselves throttled;
- aws:throttle-exhausted: CompleteLifecycleAction throttled past botocore's
  retries: the invocation fails (the outcome table's "AWS call that still fails")
  and Lambda retries the event;
- lambda:killed: one invocation killed mid-drain, its event redelivered;
- lambda:concurrent: the event delivered twice at the same moment;
- lambda:duplicate: an event delivered again once everything ended;
- lambda:handover: a short function timeout, so the drain hands over to the
  invocations it queues (run here as Lambda would run them); lambda:timed-out
  counts the invocations Lambda ended at that timeout (throttling backoff can
  outlast the 5 s HANDOVER_MARGIN_SECONDS), whose events it delivers again.

Invariants, from the test's own observers (the budget watch, awssim's ledger, the
node as the API serves it), not from the drainer's word: no budget below its
minimum; exactly one CompleteLifecycleAction accepted, CONTINUE (TIMEOUT_POLICY
continue), before the hook's timeout and within the drain's deadline plus a margin
of the first delivery; every invocation's lifecycle result the outcome table's;
nothing evictable left on a drained node; no traceback in any invocation's log;
the node's record names the end the completing invocation reported.

`make chaos SEED=n` replays seed n (both chaos files); CHAOS_SEEDS=N runs 0..N-1.
Without either, make test runs seeds 0..5 on kubesim and 0..1 on the real control
plane.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from drainer.k8s.cordon import PROGRESS_ANNOTATION
from testbed import World
from testbed import workloads as w
from testbed.world import place_on, pods_on

from .conftest import BudgetWatcher
from .test_chaos import DEADLINE, MARGIN, RESULTS, _workload, chaos_cases

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SEEDS = {"kubesim": 6, "real": 2}
SHORT_TIMEOUT = 7.0  # the function's timeout when a seed draws hand-overs
HANDOVER_MARGIN = 5  # HANDOVER_MARGIN_SECONDS' minimum: 2 s of work per invocation
MAX_INVOCATIONS = 25
BOTOCORE_ATTEMPTS = 5  # drainer.aws.session.CLIENT_CONFIG: 4 retries after the first try
# What each end of a drain sends to the ASG (docs/reference.md "What the Auto Scaling
# group is told", TIMEOUT_POLICY=continue).
OUTCOME_TABLE = {
    "drained": "CONTINUE",
    "no_node": "CONTINUE",
    "timed_out": "CONTINUE",
    "handed_over": "none",
    "redelivered": "none",  # a duplicate left to the drain under way, or just done
}


@dataclass(frozen=True)
class Faults:
    """What one seed does to AWS and to the Lambda runtime."""

    throttles: tuple[tuple[str, str, str, int], ...] = ()
    """(service, action, code, count) answered before moto does."""
    lifecycle: tuple[tuple[str, int], ...] = ()
    """(call kind, count) of throttled heartbeat / complete calls (awssim's ledger)."""
    exhausted: bool = False
    kill: tuple[int, int] | None = None
    """(invocation number, log line) to kill it at."""
    concurrent: bool = False
    duplicate: bool = False
    handover: bool = False

    def kinds(self) -> Counter[str]:
        kinds: Counter[str] = Counter()
        for service, _, _, count in self.throttles:
            kinds[f"aws:throttle-{service}"] += count
        for kind, count in self.lifecycle:
            kinds[f"aws:throttle-{kind}"] += count
        for name, drawn in (
            ("aws:throttle-exhausted", self.exhausted),
            ("lambda:concurrent", self.concurrent),
            ("lambda:duplicate", self.duplicate),
            ("lambda:handover", self.handover),
        ):
            if drawn:
                kinds[name] += 1
        return kinds


def draw_faults(rng: random.Random) -> Faults:
    throttles = []
    if rng.random() < 0.5:
        throttles.append(("ec2", "DescribeInstances", "RequestLimitExceeded", rng.randint(1, 3)))
    if rng.random() < 0.5:
        throttles.append(("autoscaling", "DescribeLifecycleHooks", "Throttling", rng.randint(1, 3)))
    lifecycle = [
        (kind, rng.randint(1, 3)) for kind in ("heartbeat", "complete") if rng.random() < 0.3
    ]
    handover = rng.random() < 0.4
    kill = None
    if rng.random() < 0.5:
        kill = (rng.randint(0, 1) if handover else 0, rng.randint(1, 30))
    return Faults(
        throttles=tuple(throttles),
        lifecycle=tuple(lifecycle),
        exhausted=rng.random() < 0.1,
        kill=kill,
        concurrent=rng.random() < 0.3,
        duplicate=rng.random() < 0.3,
        handover=handover,
    )


@dataclass
class Invocation:
    """One run of the function, as Lambda would report it."""

    number: int
    payload: dict[str, Any]
    request_id: str
    """Lambda's retry of a failed invocation keeps its request; a delivery has its own."""
    started: float = 0.0
    ended: float = 0.0
    log: list[str] = field(default_factory=list)
    stderr: str = ""
    killed: bool = False
    summary: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        """Lambda would retry it: killed, timed out or raised."""
        return self.killed or self.error is not None


class Runtime:
    """Lambda, as far as the drain sees it: invocations as processes, the
    asynchronous ones the drain queues (hand-overs) run in order, and a failed
    invocation's event delivered again."""

    def __init__(self, env: dict[str, str], timeout: float, faults: Faults) -> None:
        self.env = env
        self.timeout = timeout
        self.faults = faults
        self.invocations: list[Invocation] = []
        self._lock = threading.Lock()

    def run(self, payload: dict[str, Any], request_id: str = "") -> Invocation:
        with self._lock:
            invocation = Invocation(len(self.invocations), payload, request_id or str(uuid4()))
            self.invocations.append(invocation)
        kill_at = None
        if self.faults.kill is not None and self.faults.kill[0] == invocation.number:
            kill_at = self.faults.kill[1]
        with tempfile.TemporaryFile("w+") as errors:
            invocation.started = time.time()
            process = subprocess.Popen(
                [
                    *(sys.executable, "-m", "demo.runner", "--timeout", str(self.timeout)),
                    *("--request-id", invocation.request_id),
                ],
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            )
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps(payload))
            process.stdin.close()
            for line in process.stdout:
                invocation.log.append(line)
                lines = sum(1 for x in invocation.log if x.startswith("{"))
                if kill_at is not None and lines >= kill_at:
                    process.send_signal(signal.SIGKILL)
                    invocation.killed = True
                    break
            process.wait(self.timeout + 30)
            process.stdout.close()
            invocation.ended = time.time()
            errors.seek(0)
            invocation.stderr = errors.read()
        for line in reversed(invocation.log):
            if line.startswith('{"lambda_'):
                outcome = json.loads(line)
                invocation.summary = outcome.get("lambda_result")
                invocation.error = outcome.get("lambda_error")
                break
        return invocation


def _deliveries(world: World, runtime: Runtime, event: dict[str, Any]) -> None:
    """Deliver the event (twice at once when concurrent), then whatever the drain
    queued, each failed invocation's event once more (in its request, as Lambda
    retries it), and a duplicate at the end (a delivery of its own)."""
    first = [event, event] if runtime.faults.concurrent else [event]
    threads = [threading.Thread(target=runtime.run, args=(e,)) for e in first]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    redeliver = deque((i.payload, i.request_id) for i in runtime.invocations if i.failed)
    while len(runtime.invocations) < MAX_INVOCATIONS:
        queued = world.aws.pop_invocation()
        if redeliver:
            payload, request = redeliver.popleft()
            if queued is not None:
                redeliver.append((queued["payload"], ""))
        elif queued is not None:
            payload, request = queued["payload"], ""
        else:
            break
        ran = runtime.run(payload, request)
        if ran.failed:
            redeliver.append((payload, ran.request_id))
    if runtime.faults.duplicate:
        runtime.run(event)


@pytest.mark.parametrize(("backend", "seed"), chaos_cases(DEFAULT_SEEDS))
def test_seeded_lambda_chaos__invariants_hold(
    backend: str, seed: int, world: World, aws_server: str, budgets: BudgetWatcher
) -> None:
    rng = random.Random(seed)
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    objects = _workload(rng)
    faults = draw_faults(rng)
    if faults.handover:  # pods slow to stop, so the drain outlives an invocation
        objects.append(w.deployment("slow", rng.randint(1, 2), shutdown=rng.uniform(60, 120)))
    place_on(world, node, objects)
    budgets.start()
    for service, action, code, count in faults.throttles:
        world.aws.fail_action(service, action, code, count)
    for kind, count in faults.lifecycle:
        world.aws.fail_next(kind, "Throttling", count)
    if faults.exhausted:
        world.aws.fail_next("complete", "Throttling", BOTOCORE_ATTEMPTS)
    overrides: dict[str, Any] = {"DRAIN_TIMEOUT_SECONDS": DEADLINE}
    if faults.handover:
        overrides["HANDOVER_MARGIN_SECONDS"] = HANDOVER_MARGIN
    env = {**os.environ, **world.env(**overrides), "AWS_ENDPOINT_URL": aws_server}
    runtime = Runtime(env, SHORT_TIMEOUT if faults.handover else 900.0, faults)

    event = world.terminate(instance)
    started = time.time()
    _deliveries(world, runtime, event)

    invocations = runtime.invocations
    killed = [i for i in invocations if i.killed]
    handovers = sum(1 for i in invocations if (i.summary or {}).get("result") == "handed_over")
    completing = [i for i in invocations if (i.summary or {}).get("completed") is True]
    final = completing[-1].summary if completing else None
    timed_out = sum(
        1 for i in invocations if (i.error or {}).get("errorType") == "Sandbox.Timedout"
    )
    _record(seed, faults, world, killed, handovers, timed_out, final, time.time() - started)

    replay = f"replay: make chaos SEED={seed} BACKEND={world.cluster.backend}"
    story = "\n".join(_describe(i) for i in invocations)
    assert budgets.violations() == {}, replay
    completions = world.completions()
    assert [c["LifecycleActionResult"] for c in completions] == ["CONTINUE"], (story, replay)
    assert world.aws.calls("timeout") == [], ("the hook timed out", story, replay)
    assert completions[0]["time"] - started < DEADLINE + MARGIN, (story, replay)
    assert len(runtime.invocations) < MAX_INVOCATIONS, (story, replay)
    for invocation in invocations:
        assert not any("Traceback" in line for line in invocation.log), (story, replay)
        if invocation.killed:
            continue
        if invocation.error is not None:
            assert _expected_failure(invocation, faults), (story, replay)
            continue
        summary = invocation.summary or {}
        assert OUTCOME_TABLE.get(summary.get("result", "")) == summary.get("lifecycle_result"), (
            story,
            replay,
        )
    # The one accepted completion is an invocation's that said so, or one killed
    # between its CompleteLifecycleAction and its end line.
    assert len(completing) == 1 or (not completing and killed), (story, replay)
    found = world.cluster.client.get("Node", node)
    record = json.loads((found["metadata"].get("annotations") or {})[PROGRESS_ANNOTATION])
    ended = final["result"] if final else record["phase"]
    assert record["phase"] == ended in ("drained", "timed_out"), (record, story, replay)
    assert found["spec"].get("unschedulable") is True, (found["spec"], replay)
    if ended == "drained":
        left = [
            p["metadata"]["name"]
            for p in pods_on(world.cluster, node)
            if not p["metadata"].get("deletionTimestamp")
            and not any(
                o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences") or []
            )
        ]
        assert left == [], (left, story, replay)


def _expected_failure(invocation: Invocation, faults: Faults) -> bool:
    """An invocation failure Lambda retries and the seed explains: an AWS call
    throttled past botocore's retries (the handler raises AwsError by design), or,
    with the shortest HANDOVER_MARGIN_SECONDS, those retries' backoff running past
    the function's timeout (up to 1 + 2 + 4 + 8 s of backoff against a 5 s margin:
    Lambda ends the invocation and retries its event)."""
    kind = (invocation.error or {}).get("errorType")
    if kind == "AwsError":
        return faults.exhausted
    throttled = bool(faults.throttles or faults.lifecycle or faults.exhausted)
    return kind == "Sandbox.Timedout" and faults.handover and throttled


def _describe(invocation: Invocation) -> str:
    summary = invocation.summary or {}
    end = (
        "killed"
        if invocation.killed
        else f"error {invocation.error}"
        if invocation.error
        else f"{summary.get('result')} lifecycle={summary.get('lifecycle_result')} "
        f"completed={summary.get('completed')} evicted={summary.get('evicted')}"
    )
    marker = invocation.payload.get("drainer")
    return (
        f"  invocation {invocation.number} ({len(invocation.log)} lines, "
        f"{invocation.ended - invocation.started:.1f} s, hand-over marker {marker}): {end}"
    )


def _record(
    seed: int,
    faults: Faults,
    world: World,
    killed: list[Invocation],
    handovers: int,
    timed_out: int,
    final: dict[str, Any] | None,
    seconds: float,
) -> None:
    """One line per seed for `make chaos`'s report, in test_chaos.py's format; the
    throttles counted as the calls awssim actually refused."""
    if RESULTS is None:
        return
    kinds = faults.kinds()
    for kind in ("aws:throttle-ec2", "aws:throttle-autoscaling"):
        kinds.pop(kind, None)
    kinds.update(f"aws:throttle-{f['service']}" for f in world.aws.injected_faults())
    for kind in ("heartbeat", "complete"):
        kinds.pop(f"aws:throttle-{kind}", None)
        refused = sum(1 for c in world.aws.calls(kind) if c.get("injected"))
        if refused:
            kinds[f"aws:throttle-{kind}"] = refused
    if faults.exhausted:
        kinds["aws:throttle-complete"] -= BOTOCORE_ATTEMPTS
        kinds = +kinds
    if killed:
        kinds["lambda:killed"] = len(killed)
    if timed_out:
        kinds["lambda:timed-out"] = timed_out
    if handovers:
        kinds["lambda:handover"] = handovers
    else:
        kinds.pop("lambda:handover", None)
    line = {
        "seed": seed,
        "scenario": "lambda",
        "faults": dict(kinds),
        # No invocation said it completed: the completing one was killed after its
        # CompleteLifecycleAction and before its end line (the test checks which).
        "result": final["result"] if final else "killed after completing",
        "seconds": round(seconds, 3),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as out:
        out.write(json.dumps(line) + "\n")
