"""The function's cold start and a full node's drain, as Lambda runs it: the zip
under awslambdaric and the runtime's Python behind aws-lambda-rie (testbed/lambdarie),
a scale-in of the bench's 110-pod node (scenario 1: 10 deployments, no budget),
AWS in awssim.

    python -m bench.runtime [--backend real|kubesim] [--runs 3]

Each run is a fresh execution environment, so every first invocation is a cold
start. Prints, per run, the emulator's REPORT line and: init (the emulator's
INIT REPORT: the runtime starting and importing the handler), the invocation (its
INVOKE RTDONE: the drain), the billed duration, and the runtime process's peak
resident memory (VmHWM; the emulator's "Max Memory Used" only repeats the memory
size); then the medians.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

PODS, EACH = 110, 11
CLUSTER_NAME = "bench"


def _cluster(backend: str, stack: ExitStack) -> Any:
    """A fresh cluster of `backend`, stopped when `stack` closes."""
    from testbed.cluster import Cluster

    if backend == "kubesim":
        from kubesim import KubeSim

        sim = stack.enter_context(KubeSim(speed=20.0, cluster_name=CLUSTER_NAME))
        return Cluster.of_kubesim(sim)
    from testbed.controlplane import ControlPlane

    plane = stack.enter_context(ControlPlane(cluster_name=CLUSTER_NAME, speed=20.0))
    return Cluster.of_control_plane(plane)


def one_run(backend: str) -> dict[str, Any]:
    from moto import mock_aws

    import awssim
    from awssim.server import AwsSimServer
    from testbed import World
    from testbed import workloads as w
    from testbed.lambdarie import LambdaRie
    from testbed.world import place_on, pods_on

    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_REGION="us-east-1",
        AWS_CONFIG_FILE="/dev/null",
        AWS_SHARED_CREDENTIALS_FILE="/dev/null",
    )
    awssim.install()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    with ExitStack() as stack:
        stack.enter_context(mock_aws())
        cluster = _cluster(backend, stack)
        world = World(cluster, size=2, node_capacity=PODS + 10)
        instance = world.instance_ids[0]
        node = world.nodes[instance]
        place_on(
            world,
            node,
            [w.deployment(f"web-{i:02d}", EACH) for i in range(PODS // EACH)],
            timeout=120.0,
        )
        event = world.terminate(instance)
        aws = stack.enter_context(AwsSimServer())
        env = world.process_env(aws.url)
        with LambdaRie.start(env, cluster_name=world.cluster_name) as function:
            invocation = function.invoke(event)
        result = invocation.result
        if result["result"] != "drained":
            print("\n".join(invocation.lines[-15:]), file=sys.stderr)
            if cluster.authenticator is not None:
                print(cluster.authenticator.failures[-3:], file=sys.stderr)
        left = len(pods_on(cluster, node))
        report = next(line for line in invocation.lines if line.startswith("REPORT"))
        return {
            "report": report,
            "init_ms": invocation.init_ms,
            "invocation_ms": invocation.runtime_ms,
            "billed_ms": float(invocation.report["Billed Duration"].split()[0]),
            "peak_rss_mb": invocation.peak_rss_mb,
            "result": result["result"],
            "evicted": result["evicted"],
            "left": left,
        }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.runtime", description=__doc__)
    parser.add_argument("--backend", choices=("real", "kubesim"), default="real")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    runs = []
    for index in range(args.runs):
        run = one_run(args.backend)
        runs.append(run)
        print(f"run {index + 1}: {run['report']}")
        print(
            f"  init {run['init_ms']:.0f} ms, invocation {run['invocation_ms']:.0f} ms, "
            f"peak RSS {run['peak_rss_mb']:.1f} MB, {run['result']}: {run['evicted']} "
            f"evicted, {run['left']} left",
            flush=True,
        )
    print(f"median of {len(runs)} ({args.backend}, {PODS} pods):")
    for key in ("init_ms", "invocation_ms", "billed_ms", "peak_rss_mb"):
        print(f"  {key}: {statistics.median(r[key] for r in runs):.1f}")
    return 0 if all(r["result"] == "drained" and r["left"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
