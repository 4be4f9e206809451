"""`python -m kubesim serve --kubeconfig PATH [--port N] [--speed X]`."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from kubesim.cluster import KubeSim


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubesim", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the emulated API until SIGINT/SIGTERM")
    serve.add_argument(
        "--kubeconfig", required=True, type=Path, help="where to write the kubeconfig"
    )
    serve.add_argument(
        "--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)"
    )
    serve.add_argument(
        "--speed", type=float, default=1.0, help="divide simulated durations by this"
    )
    serve.add_argument(
        "--cluster-name", default="kubesim", help="the EKS cluster id tokens must carry"
    )
    serve.add_argument(
        "--apply", type=Path, action="append", default=[], help="YAML to create at start"
    )
    serve.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    sim = KubeSim(
        port=args.port, speed=args.speed, cluster_name=args.cluster_name, kubeconfig=args.kubeconfig
    )
    sim.start()
    try:
        for manifest in args.apply:
            sim.apply(manifest.read_text())
        print(sim.url, flush=True)
        print(f"admin token: {sim.admin_token}", file=sys.stderr, flush=True)
        stop.wait()
    finally:
        sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
