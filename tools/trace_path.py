"""The path an event takes through the drainer, as the code runs it (issue 39, item 8).

A scale-in (the ASG's terminate hook) or a spot interruption warning goes through
the real handler on kubesim and moto, with a profile hook on the main thread that
notes each drainer function entered, in order: a function is one hop the first time
it is entered; the engine's drain (Drain.run and all it calls) is one hop, and so is
a call into a client's layer (drainer.k8s, drainer.aws, logging: what it calls
within is not the path); lambdas and comprehensions are not hops. The threads the
drain starts (heartbeat, watches, evictions) are not the path. From the list: the
hops, the files, and how often the path comes back to a file it had left.

    .venv/bin/python -m tools.trace_path [scale-in|spot] [--list]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = str(ROOT / "drainer") + os.sep
ONE_HOP = ("drainer/engine/drain.py", "Drain.run")
"""The engine's drain loop: one hop, whatever it calls."""
CLIENTS = ("drainer/k8s/", "drainer/aws/", "drainer/logs.py", "drainer/backoff.py")
"""The clients' layers: a call into one from outside is one hop; what it calls within
them is its own business (the transport, the retries, the token), not the path."""


@dataclass
class Path_:
    hops: list[tuple[str, str]] = field(default_factory=list)
    """(file relative to the repository, function's qualified name), first entries."""

    @property
    def files(self) -> list[str]:
        return list(dict.fromkeys(f for f, _ in self.hops))

    @property
    def returns(self) -> int:
        """How often the path enters a file again after leaving it."""
        seen: set[str] = set()
        count, last = 0, ""
        for file, _ in self.hops:
            if file != last and file in seen:
                count += 1
            seen.add(file)
            last = file
        return count

    def summary(self) -> str:
        return (
            f"{len(self.hops)} hops in {len(self.files)} files, "
            f"coming back to a file it had left {self.returns} times"
        )


class _Tracer:
    def __init__(self) -> None:
        self.path = Path_()
        self._seen: set[tuple[str, str]] = set()
        self._inside: FrameType | None = None

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "return" and frame is self._inside:
            self._inside = None
            return
        if event != "call" or self._inside is not None:
            return
        code = frame.f_code
        if not code.co_filename.startswith(PACKAGE) or code.co_name.startswith("<"):
            return
        hop = (os.path.relpath(code.co_filename, ROOT), code.co_qualname)
        if hop == ONE_HOP or hop[0].startswith(CLIENTS):
            self._inside = frame
        if hop not in self._seen:
            self._seen.add(hop)
            self.path.hops.append(hop)


@contextmanager
def _environment() -> Iterator[None]:
    """os.environ as it was, afterwards: the trace runs inside a test process too."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def _world() -> Iterator[Any]:
    """kubesim, moto with awssim, a group of two nodes and three replicas under a
    budget on the first: the e2e tests' world."""
    fake = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    os.environ.update(fake, AWS_DEFAULT_REGION="us-east-1", AWS_REGION="us-east-1")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)
    from moto import mock_aws

    import awssim
    from kubesim import KubeSim
    from testbed import World
    from testbed import workloads as w
    from testbed.cluster import Cluster
    from testbed.world import place_on

    awssim.install()
    with mock_aws(), KubeSim(speed=50.0) as sim:
        world = World(Cluster.of_kubesim(sim), size=2)
        node = world.nodes[world.instance_ids[0]]
        place_on(world, node, [w.deployment("web", 3, startup=0.2, shutdown=0.2),
                               w.budget("web", {"app": "web"}, max_unavailable=1)])  # fmt: skip
        yield world


def trace(kind: str = "scale-in") -> Path_:
    """The path of one event of `kind` (scale-in or spot) through the real handler."""
    from drainer import handler
    from testbed.context import LambdaContext

    with _environment(), _world() as world:
        instance = world.instance_ids[0]
        event = world.terminate(instance) if kind == "scale-in" else world.spot_warning(instance)
        os.environ.update(world.env())
        handler.reset()
        tracer = _Tracer()
        sys.setprofile(tracer)
        try:
            summary = handler.lambda_handler(event, LambdaContext(900.0))
        finally:
            sys.setprofile(None)
            handler.reset()
    if summary.get("result") != "drained":
        raise RuntimeError(f"the traced {kind} did not drain: {summary}")
    return tracer.path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", nargs="?", choices=("scale-in", "spot"), default="scale-in")
    parser.add_argument("--list", action="store_true", help="print every hop")
    args = parser.parse_args(argv)
    path = trace(args.kind)
    if args.list:
        for number, (file, function) in enumerate(path.hops, 1):
            print(f"{number:3} {file} {function}")
    print(f"{args.kind}: {path.summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
