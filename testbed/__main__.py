"""`python -m testbed controlplane --kubeconfig FILE`: a real Kubernetes control plane
(kube-apiserver, controller-manager, scheduler, etcd, kwok) in the foreground,
until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "controlplane", help="run a real control plane on 127.0.0.1 until Ctrl-C"
    )
    serve.add_argument(
        "--kubeconfig", required=True, type=Path, help="where to write the kubeconfig"
    )
    serve.add_argument(
        "--cluster-name", default="kubesim", help="the EKS cluster id tokens must carry"
    )
    serve.add_argument(
        "--speed", type=float, default=1.0, help="divide the pods' start/stop annotations by this"
    )
    serve.add_argument(
        "--apply", type=Path, action="append", default=[], help="YAML to create once it is up"
    )
    args = parser.parse_args(argv)
    if args.speed <= 0 or args.speed != args.speed or args.speed == float("inf"):
        parser.error("--speed must be a positive, finite number")

    from testbed.cluster import ApiClient
    from testbed.controlplane import ControlPlane, ControlPlaneBuildError, ControlPlaneError

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    print("starting the control plane (the first run builds it from Go modules)...", flush=True)
    plane = ControlPlane(
        cluster_name=args.cluster_name, speed=args.speed, kubeconfig=args.kubeconfig
    )
    try:
        plane.start()
    except (ControlPlaneBuildError, ControlPlaneError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        client = ApiClient(plane.url, plane.ca_pem, plane.admin_token)
        for manifest in args.apply:
            client.apply(manifest.read_text())
        version = plane.version_info().get("gitVersion", "?")
        print(
            f"Kubernetes {version} at {plane.url}, ready in {plane.started_in:.1f} s\n"
            f"kubeconfig: {args.kubeconfig} (contexts: admin, drainer)\n"
            f"  kubectl --kubeconfig {args.kubeconfig} --context admin get nodes\n"
            "A Node you create becomes Ready (kwok) and runs the pods scheduled to it.\n"
            "Ctrl-C stops every component and removes its files.",
            flush=True,
        )
        while not stop.wait(1.0):
            plane.check()
    except ControlPlaneError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
