"""What the benchmark runs in a process of its own, so its wall time and peak
memory are its own (as kubectl's are):

    python -m bench.child drain --kubeconfig PATH --context drainer --node NAME --timeout S
    python -m bench.child find-node --kubeconfig PATH --context drainer
                          --dns NAME --instance-id ID

`drain` runs the product's engine with the Lambda's options (the same
`Settings.drain_options` the workflow uses, and its connection pool size), from
the Lambda's environment variables (unset: the defaults), so
`EVICTION_CONCURRENCY=64 make bench` tries another setting;
`find-node` runs the product's node lookup. Each prints one JSON line: the drain
report's summary or the node found, and the seconds the call itself took.

--records (the real backend, which keeps no request records for us): the JSON line
also holds every request the client made, [sent, answered, method, verb, resource,
status], times on this host's clock, taken around the client's one request method
(a watch counts as answered when its stream opened).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drainer.engine.report import DrainReport
    from drainer.k8s.kube import Kube
    from drainer.lifecycle.settings import Settings

AS_DEPLOYED = "BENCH_AS_DEPLOYED"
"""Set by the CPU scenarios (bench/scenarios.py `cpu_pods`): log and record Events."""


def _kube_class(record: bool) -> type[Kube]:
    """Kube itself, or Kube that notes each request it makes (sent, answered)."""
    from drainer.errors import KubeError
    from drainer.k8s.client import Call
    from drainer.k8s.kube import Kube

    if not record:
        return Kube

    class RecordingKube(Kube):
        records: list[list[object]]

        def _once(self, call: Call, bearer: str | None) -> Any:
            if not hasattr(self, "records"):
                self.records = []
            sent = time.time()
            status = 200
            try:
                return super()._once(call, bearer)
            except KubeError as e:
                status = e.status
                raise
            finally:
                self.records.append(
                    [sent, time.time(), call.method, call.verb, call.resource, status]
                )

    return RecordingKube


class Meter:
    """The drain's own CPU and context switches: getrusage of the process when the
    drain begins (its imports and set-up done) and when its last Event is sent."""

    def __init__(self) -> None:
        self._before: Any = None
        self.work: dict[str, float] = {}

    def start(self) -> None:
        self._before = resource.getrusage(resource.RUSAGE_SELF)

    def stop(self) -> None:
        from bench.floor import work_usage

        if self._before is not None:
            self.work = work_usage(self._before, resource.getrusage(resource.RUSAGE_SELF))


EVENTS_SENT_SECONDS = 30.0
"""How long the drain's end waits for its Events to be sent (the function waits
FLUSH_SECONDS and lets its thread send the rest): their CPU is the drain's."""


def _drain(args: argparse.Namespace) -> dict[str, object]:
    """The engine's drain; with BENCH_AS_DEPLOYED set, as the function runs it.
    `work`: the drain's own CPU (Meter)."""
    from drainer.lifecycle.settings import Settings

    settings = Settings.from_env(os.environ)
    kube = _kube_class(args.records).from_kubeconfig(
        args.kubeconfig, args.context, pool_size=settings.eviction_concurrency + 4
    )
    started = time.perf_counter()
    drain: Callable[..., DrainReport]
    drain = _as_deployed if os.environ.get(AS_DEPLOYED) else _engine_only
    meter = Meter()
    report = drain(kube, args.node, settings, time.time() + args.timeout, meter)
    return {
        "seconds": time.perf_counter() - started,
        "work": meter.work,
        "report": report.summary(),
        # every request of the process: the drain's (the report's api_requests) and,
        # as deployed, the node's lookup, the forecast's reads and the Events, which
        # its records hold too
        "requests": kube.requests,
        **_records(kube),
    }


def _engine_only(
    kube: Kube, node: str, settings: Settings, deadline: float, meter: Meter
) -> DrainReport:
    from drainer.engine.drain import Drain
    from drainer.k8s.cordon import ProgressRecord

    meter.start()
    try:
        options = settings.drain_options()
        record = ProgressRecord(options.trigger, options.destination)
        return Drain(kube, node, options, record=record).run(deadline)
    finally:
        meter.stop()
        kube.close()


def _as_deployed(
    kube: Kube, node: str, settings: Settings, deadline: float, meter: Meter
) -> DrainReport:
    """As the function drains: its forecast and the live ETA on its lines, its JSON
    log lines at its log level (on stderr here; CloudWatch there) and the node's and
    pods' Events, so that the CPU it takes is the deployed drain's (issue 39, item 10)."""
    from drainer import logs
    from drainer.engine.drain import Drain
    from drainer.engine.pace import forecast_within
    from drainer.k8s.cordon import ProgressRecord
    from drainer.k8s.events import EventPoster
    from drainer.lifecycle.runner import FORECAST_SECONDS
    from drainer.lifecycle.told import DrainStory
    from drainer.plan.eta import forecast_node

    logs.configure(settings.log_level, stream=sys.stderr)
    meter.start()
    poster = EventPoster(kube)
    try:
        found = kube.get_node(node) or {}
        uid = str(found.get("metadata", {}).get("uid") or "")
        story = DrainStory(poster, node, uid, "bench")
        options = settings.drain_options()
        record = ProgressRecord(options.trigger, options.destination)

        def pace_from(listed_pods: list[Any], budgets: list[Any]) -> Any:
            # as the function does (lifecycle/runner.py): from what the drain listed
            now = time.time()
            eta = forecast_within(
                forecast_node, kube, node, options, timeout=deadline - now, now=now,
                within=FORECAST_SECONDS, listed=(listed_pods, budgets),
            )  # fmt: skip
            if isinstance(eta, str):
                raise RuntimeError(f"no ETA for the drain: {eta}")
            return eta.fields

        drain = Drain(
            kube, node, options, record=record, on_event=story, node_uid=uid, pace_from=pace_from
        )
        report = drain.run(deadline)
        story.ended(report, lambda outcome: None)
        return report
    finally:
        poster.close(EVENTS_SENT_SECONDS, then=kube.close)
        meter.stop()


def _records(kube: Kube) -> dict[str, object]:
    records = getattr(kube, "records", None)
    return {} if records is None else {"records": records}


def _find_node(args: argparse.Namespace) -> dict[str, object]:
    from drainer.k8s.nodes import find_node

    kube = _kube_class(args.records).from_kubeconfig(args.kubeconfig, args.context)
    short = args.dns.split(".", 1)[0]
    hostnames = (args.dns, short) if short != args.dns else (args.dns,)
    started = time.perf_counter()
    try:
        node = find_node(kube, args.dns, hostnames, "/" + args.instance_id)
    finally:
        kube.close()
    return {
        "seconds": time.perf_counter() - started,
        "node": node,
        "requests": kube.requests,
        **_records(kube),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.child")
    commands = parser.add_subparsers(dest="command", required=True)
    drain = commands.add_parser("drain")
    drain.add_argument("--node", required=True)
    drain.add_argument("--timeout", type=float, default=600.0)
    lookup = commands.add_parser("find-node")
    lookup.add_argument("--dns", required=True)
    lookup.add_argument("--instance-id", required=True)
    for command in (drain, lookup):
        command.add_argument("--kubeconfig", required=True)
        command.add_argument("--context", default="drainer")
        command.add_argument("--records", action="store_true", help="list every request")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    result = _drain(args) if args.command == "drain" else _find_node(args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
