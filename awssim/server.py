"""awssim as a local server: moto's server app with awssim's admin API beside it.

`python -m awssim serve [--port N]` serves on 127.0.0.1 (port 0: any free port),
prints its URL as the first line on stdout and serves until SIGINT or SIGTERM.
Point boto3 at it with AWS_ENDPOINT_URL=<url>; drive it with `AwsSimClient`.

The admin API lives under /awssim/ and speaks JSON. Every route takes optional
`account_id` and `region` query parameters (default 123456789012, us-east-1):

    GET  /awssim/health
    POST /awssim/begin-termination  {"asg_name", "instance_id", "hook_name",
                                     "age" (optional, seconds)}              -> {"token"}
    POST /awssim/global-timeout     {"asg_name", "hook_name", "seconds"}     -> {}
    POST /awssim/scale-in           {"asg_name", "count"}                    -> {"events"}
    POST /awssim/event-for          {"token"}                                -> {"event"}
    GET  /awssim/calls/<kind>                                                -> {"calls"}
    GET  /awssim/actions                                                     -> {"actions"}
    POST /awssim/faults             {"kind", "code", "count", "message"}     -> {}
    POST /awssim/expire             {"instance_id"}                          -> {}
    POST /awssim/point-cluster      {"name", "endpoint", "ca_data_b64"}      -> {}
    GET  /awssim/invocations                                                 -> {"invocations"}
    POST /awssim/invocations/pop                                             -> {"invocation"}
    POST /awssim/activities/launch  {"asg_name", "instance_id", "start", "end"} -> {}
    GET  /awssim/activities/calls                                            -> {"calls"}

A request the simulator refuses (unknown group, bad fault code) answers 400 with
{"error": "..."}.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.wrappers import Request, Response

from awssim.sim import DEFAULT_REGION, AwsSim, install

ADMIN_PREFIX = "/awssim/"
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class AdminApp:
    """Routes /awssim/... to the admin API and everything else to moto."""

    def __init__(self, moto_app: WsgiApp) -> None:
        self._moto_app = moto_app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if str(environ.get("PATH_INFO", "")).startswith(ADMIN_PREFIX):
            response = self._admin(Request(environ))
            return response(environ, start_response)
        return self._moto_app(environ, start_response)

    def _admin(self, request: Request) -> Response:
        sim = AwsSim(
            account_id=request.args.get("account_id", DEFAULT_ACCOUNT_ID),
            region=request.args.get("region", DEFAULT_REGION),
        )
        route = request.path[len(ADMIN_PREFIX) :].strip("/")
        body: dict[str, Any] = (request.get_json(silent=True) or {}) if request.data else {}
        try:
            result = _route(sim, request.method, route, body)
        except (ValueError, KeyError, TypeError) as error:
            return _json({"error": f"{type(error).__name__}: {error}"}, 400)
        if result is None:
            return _json({"error": f"no admin route {request.method} {request.path}"}, 404)
        return _json(result, 200)


def _route(sim: AwsSim, method: str, route: str, body: dict[str, Any]) -> dict[str, Any] | None:
    if method == "GET":
        if route == "health":
            return {"ok": True}
        if route.startswith("calls/"):
            return {"calls": sim.calls(route.removeprefix("calls/"))}
        if route == "actions":
            return {"actions": sim.actions()}
        if route == "invocations":
            return {"invocations": sim.pending_invocations()}
        if route == "activities/calls":
            return {"calls": sim.activity_calls()}
        return None
    if method != "POST":
        return None
    if route == "begin-termination":
        token = sim.begin_termination(
            body["asg_name"], body["instance_id"], body["hook_name"], float(body.get("age", 0))
        )
        return {"token": token}
    if route == "begin-launch":
        return {"token": sim.begin_launch(body["asg_name"], body["instance_id"], body["hook_name"])}
    if route == "global-timeout":
        sim.set_global_timeout(body["asg_name"], body["hook_name"], int(body["seconds"]))
        return {}
    if route == "scale-in":
        return {"events": sim.scale_in(body["asg_name"], int(body.get("count", 1)))}
    if route == "warm-pool/scale-out":
        instance_id, events = sim.scale_out_from_warm_pool(body["asg_name"])
        return {"instance_id": instance_id, "events": events}
    if route == "warm-pool/launch":
        instance_id, events = sim.launch_into_warm_pool(body["asg_name"])
        return {"instance_id": instance_id, "events": events}
    if route == "event-for":
        return {"event": sim.event_for(body["token"])}
    if route == "faults":
        sim.fail_next(
            body["kind"], body["code"], int(body.get("count", 1)), body.get("message", "")
        )
        return {}
    if route == "expire":
        sim.expire_action(body["instance_id"])
        return {}
    if route == "point-cluster":
        sim.point_cluster_at(body["name"], body["endpoint"], body["ca_data_b64"])
        return {}
    if route == "activities/launch":
        end = body.get("end")
        sim.add_launch_activity(
            body["asg_name"],
            body["instance_id"],
            float(body["start"]),
            None if end is None else float(end),
        )
        return {}
    if route == "invocations/pop":
        return {"invocation": sim.pop_invocation()}
    return None


def _json(payload: object, status: int) -> Response:
    return Response(json.dumps(payload), status=status, mimetype="application/json")


class AwsSimServer:
    """moto plus awssim on a local port, served from a background thread."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        install()
        app = AdminApp(DomainDispatcherApplication(create_backend_app))
        self._server: BaseWSGIServer = make_server(
            host, port, app, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        if isinstance(host, bytes):
            host = host.decode()
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{port}"

    def start(self) -> AwsSimServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="awssim-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> AwsSimServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(host: str = "127.0.0.1", port: int = 0) -> None:
    """Serve until SIGINT or SIGTERM; the first stdout line is the URL."""
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    server = AwsSimServer(host, port).start()
    print(server.url, flush=True)
    stop.wait()
    server.stop()
