"""The HTTPS front end: routing, authentication, authorization, faults, watch streams,
discovery, tables and the admin API.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import posixpath
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from kubesim import errors, eventsv1, patch, protobuf, schema, tables
from kubesim.api import R
from kubesim.auth import Attributes, AuthenticationError, User, forbidden_message
from kubesim.errors import ApiError
from kubesim.faults import Fault, RequestRecord
from kubesim.resources import GROUP_VERSIONS, RESOURCES, VIRTUAL, Resource, lookup
from kubesim.selectors import (
    SelectorError,
    labels_match,
    make_filter,
    parse_field_selector,
    parse_label_selector,
)
from kubesim.store import Obj

if TYPE_CHECKING:
    from kubesim.cluster import KubeSim

log = logging.getLogger(__name__)

_NOT_FOUND = ApiError(
    404, "the server could not find the requested resource", reason="NotFound", details={}
)


class _Drop(Exception):
    """Close the connection without answering (an injected fault)."""


class Route:
    def __init__(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        subresource: str,
    ) -> None:
        self.resource = resource
        self.namespace = namespace
        self.name = name
        self.subresource = subresource


def parse_resource_path(parts: list[str]) -> Route | None:
    """Split /api/v1/... or /apis/g/v/... path parts into a Route; None when not a resource."""
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3 and not group:
        # /api/v1/namespaces/{ns}/{plural}... unless it is the namespace's own subresource
        if rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
    elif rest[0] == "namespaces" and len(rest) >= 3 and group:
        namespace, rest = rest[1], rest[2:]
    resource = lookup(group, version, rest[0])
    if resource is None:
        return None
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if len(rest) > 3:
        return None
    if namespace and not resource.namespaced:
        return None
    if subresource and subresource not in resource.subresources:
        return None
    return Route(resource, namespace, name, subresource)


def _verb(method: str, route: Route, watch: bool) -> str:
    if method == "GET":
        if watch:
            return "watch"
        return "get" if route.name else "list"
    return {
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if route.name else "deletecollection",
    }.get(method, method.lower())


def _dry_run(query: dict[str, str], verb: str) -> bool:
    value = query.get("dryRun")
    if value is None or value == "":
        return False
    if value != "All":
        options = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions"}
        raise errors.invalid(
            options.get(verb, "DeleteOptions"),
            "",
            [("dryRun[0]", f'Unsupported value: "{value}": supported values: "All"')],
            "meta.k8s.io",
        )
    return True


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def _non_resource(method: str, user: User, path: str) -> Attributes:
    return Attributes(user, method.lower() if method != "GET" else "get", path=path)


def _denied(attributes: Attributes) -> ApiError:
    """The authorizer's 403, in the real one's words and details."""
    details: dict[str, Any] = {}
    if attributes.is_resource:
        details["kind"] = attributes.resource
        if attributes.name:
            details["name"] = attributes.name
        if attributes.group:
            details["group"] = attributes.group
    return ApiError(403, forbidden_message(attributes), reason="Forbidden", details=details)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], sim: KubeSim, tls: ssl.SSLContext) -> None:
        self.sim = sim
        self.tls = tls
        self.stopping = threading.Event()
        super().__init__(address, Handler)

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = super().get_request()
        return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def finish_request(self, request: Any, client_address: Any) -> None:
        """The TLS handshake, in the connection's thread; a client that fails it (it
        refused our certificate, or a process that opened connections ahead exited)
        is the client's business, as for Go's server: logged, and the connection
        closed, with no handler."""
        try:
            request.do_handshake()
        except (ssl.SSLError, OSError) as e:
            log.debug("TLS handshake with %s failed: %s", client_address, e)
            return  # shutdown_request closes it
        super().finish_request(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server
    timeout = 120
    # TCP_NODELAY, as Go's net/http sets it: a response goes out in two writes
    # (headers, then body), and with Nagle on the body waits for the client's
    # delayed ACK of the headers: 40 ms added to every request on a kept-alive
    # connection (a sequential drain of 737 pods: 34 s instead of 3).
    disable_nagle_algorithm = True
    # Per request, set by _dispatch.
    _audit_id = ""
    _status = 0
    _filed = True
    _record_fields: tuple[float, str, str, str, str, str] = (0.0, "", "", "", "", "")
    _warnings: list[str]
    _break_after: Fault | None = None

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """A request that is not HTTP at all: answered as Go's net/http does."""
        body = f"{code} {self.responses.get(code, ('Error',))[0]}".encode()
        self.close_connection = True
        self.request_version = "HTTP/1.1"  # else an unparsable line gets no headers (0.9)
        self.send_response_only(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Connection", "close")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.client_address[0], *args)

    def handle(self) -> None:
        with contextlib.suppress(ConnectionError, ssl.SSLError, TimeoutError):
            super().handle()

    # -- plumbing -------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(length) if length else b""

    def _json_body(self, raw: bytes) -> Any:
        content_type = (
            (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        )
        if content_type == protobuf.CONTENT_TYPE:
            try:
                return protobuf.decode(raw)[1]
            except protobuf.ProtobufError as e:
                raise errors.bad_request(f"the object provided is unrecognized: {e}") from e
            except KeyError:
                pass  # a kind kubesim cannot read as protobuf: 415 below, as for a CRD
        if content_type not in ("application/json", "", "*/*") and not content_type.endswith(
            "+json"
        ):
            if content_type in ("application/yaml", "application/apply-patch+yaml"):
                import yaml

                try:
                    return yaml.safe_load(raw)
                except yaml.YAMLError as e:
                    raise errors.bad_request(f"error decoding YAML: {e}") from e
            raise ApiError(
                415,
                f"the body of the request was in an unknown format - accepted media types include: "
                f'application/json, application/yaml (got "{content_type}")',
            )
        if not raw.strip():
            raise errors.bad_request("the request body is empty")
        try:
            return json.loads(raw)
        except ValueError as e:
            raise errors.bad_request(f"the object provided is unrecognized: {e}") from e

    def _send_json(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self._status = code
        # File the record before the answer leaves: a client that has its answer
        # finds its request in the records.
        self._file_record()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Audit-Id", self._audit_id)
        for warning in self._warnings:
            escaped = warning.replace("\\", "\\\\").replace('"', '\\"')
            self.send_header("Warning", f'299 - "{escaped}"')
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self._status = code

    def _send_error(self, error: ApiError) -> None:
        self._send_json(error.code, error.status(), error.headers)

    # -- dispatch -------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        self._status = 0
        self._warnings = []
        self._audit_id = f"{id(self):x}-{time.monotonic_ns():x}"
        started = time.time()
        split = urllib.parse.urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
        sim = self.server.sim
        user_name, verb, resource_name = "", "", ""
        self._filed = False
        self._record_fields = (started, method, path, verb, resource_name, user_name)
        try:
            # Read whatever body came, a GET's too: left unread, it would be taken for
            # the next request on a kept-alive connection.
            raw = self._read_body()
            if path.startswith("/kubesim/"):
                verb, resource_name = "admin", path
                self._record_fields = (started, method, path, verb, resource_name, user_name)
                self._admin(method, path, raw, query)
                return
            try:
                user = sim.authenticator.authenticate(self.headers.get("Authorization"))
            except AuthenticationError as e:
                log.info("refused a token: %s", e)
                raise ApiError(401, "Unauthorized", reason="Unauthorized") from e
            user_name = user.name
            self._record_fields = (started, method, path, verb, resource_name, user_name)
            parts = [p for p in path.split("/") if p]
            route = parse_resource_path(parts)
            watch = _truthy(query.get("watch"))
            if route is None:
                verb, resource_name = "get", path
                self._record_fields = (started, method, path, verb, resource_name, user_name)
                self._apply_faults(
                    method, path, user_name, False, _non_resource(method, user, path)
                )
                self._non_resource(method, path, user)
                return
            if route.name == "" and parts[-1] != route.resource.plural:
                raise _NOT_FOUND
            if route.name and parts[-2:] == [route.resource.plural, "watch"]:
                raise _NOT_FOUND
            verb = _verb(method, route, watch)
            resource_name = route.resource.plural + (
                f"/{route.subresource}" if route.subresource else ""
            )
            self._record_fields = (started, method, path, verb, resource_name, user_name)
            attributes = Attributes(
                user,
                verb,
                route.resource.group,
                route.resource.plural,
                route.subresource,
                route.namespace,
                route.name,
            )
            if not sim.authorizer.allowed(attributes):
                raise _denied(attributes)
            self._apply_faults(method, path, user_name, watch, attributes)
            self._resource(method, route, verb, query=query, raw=raw, user=user)
        except _Drop:
            self._status = -1
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.request.shutdown(2)
        except ApiError as e:
            self._send_error(e)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
        except Exception as e:  # never a traceback to the client: a 500 Status like the real server
            log.exception("kubesim internal error on %s %s", method, self.path)
            self._send_error(ApiError(500, f"Internal error occurred: {e}", reason="InternalError"))
        finally:
            self._file_record()

    def _file_record(self) -> None:
        """Record this request once (the admin API, the tests' own channel, is not API
        traffic to count)."""
        if self._filed:
            return
        self._filed = True
        started, method, path, verb, resource_name, user_name = self._record_fields
        if verb != "admin":
            self.server.sim.faults.record(
                RequestRecord(
                    started, time.time(), method, path, verb, resource_name, user_name, self._status
                )
            )

    def _apply_faults(
        self, method: str, path: str, user: str, watch: bool, attributes: Attributes
    ) -> None:
        self._break_after = None
        for fault in self.server.sim.faults.take(method, path, user, watch):
            if fault.kind == "latency":
                time.sleep(fault.latency)
            elif fault.kind == "drop":
                raise _Drop()
            elif fault.kind == "break_watch":
                self._break_after = fault
            elif fault.kind == "status":
                headers = {}
                details: dict[str, Any] = {}
                if fault.retry_after is not None:
                    headers["Retry-After"] = str(
                        int(fault.retry_after) if fault.retry_after >= 1 else 1
                    )
                    details["retryAfterSeconds"] = int(max(1, fault.retry_after))
                if fault.status == 403 and not fault.message:
                    # A 403 fault is the authorizer's refusal, in the real one's words
                    # and details (an admission refusal is another fault: give a message).
                    raise _denied(attributes)
                default = f"injected fault: HTTP {fault.status}"
                raise ApiError(
                    fault.status,
                    fault.message or default,
                    reason=fault.reason or None,
                    details=details or None,
                    headers=headers,
                )

    # -- non-resource paths ---------------------------------------------------

    def _non_resource(self, method: str, path: str, user: User) -> None:
        sim = self.server.sim
        attributes = _non_resource(method, user, path)
        if not sim.authorizer.allowed(attributes):
            raise _denied(attributes)
        if method != "GET":
            raise ApiError(
                405,
                "the server does not allow this method on the requested resource",
                reason="MethodNotAllowed",
            )
        if path == "/version":
            self._send_json(200, sim.version_info())
        elif path == "/api":
            host = self.headers.get("Host") or sim.address
            self._send_json(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": host}
                    ],
                },
            )
        elif path == "/apis":
            self._send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": _groups()})
        elif path.startswith("/apis/") and path.count("/") == 2:
            group = next((g for g in _groups() if g["name"] == path.split("/")[2]), None)
            if group is None:
                raise _NOT_FOUND
            self._send_json(200, {"kind": "APIGroup", "apiVersion": "v1", **group})
        elif path in ("/healthz", "/livez", "/readyz"):
            body = b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self._status = 200
        elif path == "/api/v1" or (path.startswith("/apis/") and path.count("/") == 3):
            group_version = "v1" if path == "/api/v1" else path[len("/apis/") :]
            resources = GROUP_VERSIONS.get(group_version)
            if resources is None:
                raise _NOT_FOUND
            self._send_json(200, _resource_list(group_version, resources))
        elif path.startswith("/openapi/"):
            document = sim.openapi(path)
            if document is None:
                raise _NOT_FOUND
            self._send_json(200, document)
        else:
            raise _NOT_FOUND

    # -- resources ------------------------------------------------------------

    def _resource(
        self,
        method: str,
        route: Route,
        verb: str,
        *,
        query: dict[str, str],
        raw: bytes,
        user: User,
    ) -> None:
        sim = self.server.sim
        api = sim.api
        resource = route.resource
        dry_run = _dry_run(query, verb)
        if resource.key in VIRTUAL:
            if method != "POST":
                raise ApiError(
                    405,
                    "the server does not allow this method on the requested resource",
                    reason="MethodNotAllowed",
                )
            self._send_json(201, sim.review(resource, self._json_body(raw), user))
            return
        if (verb in ("update", "patch") and not route.name) or (
            verb not in resource.verbs and not route.subresource
        ):
            raise ApiError(
                405,
                "the server does not allow this method on the requested resource",
                reason="MethodNotAllowed",
            )
        if resource.group == "events.k8s.io":
            self._new_events(route, verb, raw, query, dry_run)
            return
        if route.subresource == "eviction":
            if method != "POST":
                raise ApiError(
                    405,
                    "the server does not allow this method on the requested resource",
                    reason="MethodNotAllowed",
                )
            body = self._json_body(raw)
            answer = api.evict(route.namespace, route.name, body, dry_run=dry_run)
            # A Status returned as the result is written with its own code (the real
            # server: a pod under two budgets gets HTTP 500, body Failure, no reason).
            self._send_json(int(answer.get("code") or 201), answer)
            return
        if route.subresource == "scale":
            self._scale(method, route, raw, dry_run=dry_run)
            return
        if verb == "watch":
            self._watch(route, query)
            return
        if verb == "list":
            self._list(route, query)
            return
        if verb == "get":
            obj = api.get(resource, route.namespace, route.name)
            self._send_object(200, obj, query)
            return
        if verb == "create":
            if route.name:
                raise ApiError(
                    405,
                    "the server does not allow this method on the requested resource",
                    reason="MethodNotAllowed",
                )
            body = self._json_body(raw)
            self._check_body_kind(resource, body)
            body = self._decode(resource, body, query)
            self._send_json(201, api.create(resource, body, route.namespace, dry_run=dry_run))
            return
        if verb == "update":
            body = self._json_body(raw)
            self._check_body_kind(resource, body)
            body = self._decode(resource, body, query)
            self._send_json(
                200,
                api.update(
                    resource,
                    body,
                    route.namespace,
                    route.name,
                    subresource=route.subresource,
                    dry_run=dry_run,
                ),
            )
            return
        if verb == "patch":
            self._patch(route, raw, dry_run, query)
            return
        if verb == "delete":
            options = self._json_body(raw) if raw.strip() else {}
            if not isinstance(options, dict):
                raise errors.bad_request("DeleteOptions must be an object")
            if "gracePeriodSeconds" in query:
                try:
                    options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
                except ValueError as e:
                    raise errors.bad_request("gracePeriodSeconds must be an integer") from e
            if "propagationPolicy" in query:
                options["propagationPolicy"] = query["propagationPolicy"]
            self._send_json(
                200, api.delete(resource, route.namespace, route.name, options, dry_run=dry_run)
            )
            return
        if verb == "deletecollection":
            accept = self._filter(resource, query)
            items, _ = api.select(resource, route.namespace, accept)
            for item in items:
                try:
                    api.delete(
                        resource,
                        item["metadata"].get("namespace", ""),
                        item["metadata"]["name"],
                        dry_run=dry_run,
                    )
                except ApiError as e:
                    if e.code != 404:
                        raise
            self._send_json(
                200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
            )
            return
        raise ApiError(
            405,
            "the server does not allow this method on the requested resource",
            reason="MethodNotAllowed",
        )

    def _new_events(
        self, route: Route, verb: str, raw: bytes, query: dict[str, str], dry_run: bool
    ) -> None:
        """events.k8s.io/v1, kept as the core v1 Events they are (kubesim/eventsv1.py):
        create, get, list and patch, the verbs an event recorder uses."""
        api = self.server.sim.api
        core = R["events"]
        if verb == "create":
            body = self._json_body(raw)
            if not isinstance(body, dict):
                raise errors.bad_request("the object provided is unrecognized")
            problems = eventsv1.invalid(body)
            if problems:
                name = str((body.get("metadata") or {}).get("name", ""))
                raise errors.invalid("Event", name, problems, group="events.k8s.io")
            stored = api.create(
                core, self._decode(core, eventsv1.to_core(body), query), route.namespace,
                dry_run=dry_run,
            )  # fmt: skip
            self._send_json(201, eventsv1.from_core(stored))
        elif verb == "get":
            self._send_json(200, eventsv1.from_core(api.get(core, route.namespace, route.name)))
        elif verb == "list":
            items, version = api.select(core, route.namespace, lambda _: True)
            self._send_json(
                200,
                {
                    "apiVersion": "events.k8s.io/v1",
                    "kind": "EventList",
                    "metadata": {"resourceVersion": str(version)},
                    "items": [eventsv1.from_core(i) for i in items],
                },
            )
        elif verb == "patch":
            document = self._patch_document(raw)
            with api.store.lock:
                current = eventsv1.from_core(api.get(core, route.namespace, route.name))
                patched = eventsv1.to_core(self._apply_patch(current, document))
                if not (
                    isinstance(document, dict)
                    and (document.get("metadata") or {}).get("resourceVersion")
                ):
                    # As _patch: a patch's resourceVersion is a precondition (409).
                    patched["metadata"]["resourceVersion"] = ""
                updated = api.update(
                    core, self._decode(core, patched, query), route.namespace, route.name,
                    dry_run=dry_run,
                )  # fmt: skip
            self._send_json(200, eventsv1.from_core(updated))
        else:
            raise ApiError(
                405,
                "the server does not allow this method on the requested resource",
                reason="MethodNotAllowed",
            )

    @staticmethod
    def _check_body_kind(resource: Resource, body: Any) -> None:
        if not isinstance(body, dict):
            raise errors.bad_request("the object provided is unrecognized")
        kind, api_version = body.get("kind"), body.get("apiVersion")
        if kind is not None and kind != resource.kind:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({resource.api_version}) or kind {kind!r} is not {resource.kind!r}"
            )
        if api_version is not None and api_version != resource.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({resource.api_version})"
            )

    def _decode(self, resource: Resource, body: Any, query: dict[str, str]) -> Any:
        """Prune unknown fields (or refuse them), refuse wrong types; warnings to send."""
        decoded, warnings = schema.decode(
            resource, body, schema.field_validation(query.get("fieldValidation"))
        )
        self._warnings.extend(warnings)
        return decoded

    def _patch_document(self, raw: bytes) -> Any:
        try:
            document = json.loads(raw) if raw.strip() else None
        except ValueError as e:
            raise errors.bad_request(f"error decoding patch: {e}") from e
        if document is None:
            raise errors.bad_request("the request body is empty")
        return document

    def _apply_patch(self, current: Obj, document: Any) -> Obj:
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        try:
            if content_type == "application/merge-patch+json":
                patched = patch.merge_patch(current, document)
            elif content_type == "application/strategic-merge-patch+json":
                patched = patch.strategic_merge_patch(current, document)
            elif content_type == "application/json-patch+json":
                patched = patch.json_patch(current, document)
            else:
                raise ApiError(
                    415,
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: application/json-patch+json, application/merge-patch+json, "
                    f'application/strategic-merge-patch+json (got "{content_type}")',
                )
        except patch.PatchError as e:
            raise ApiError(422, str(e), reason="Invalid") from e
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise errors.bad_request("the patch produced an object without metadata")
        return patched

    def _scale(self, method: str, route: Route, raw: bytes, *, dry_run: bool) -> None:
        """The autoscaling/v1 Scale subresource (`kubectl scale`)."""
        api = self.server.sim.api
        resource, namespace, name = route.resource, route.namespace, route.name
        if method == "GET":
            self._send_json(200, api.get_scale(resource, namespace, name))
            return
        with api.store.lock:
            if method == "PUT":
                scale = self._json_body(raw)
                if not isinstance(scale, dict) or scale.get("kind", "Scale") != "Scale":
                    raise errors.bad_request("the object provided is not a Scale")
            elif method == "PATCH":
                document = self._patch_document(raw)
                scale = self._apply_patch(api.get_scale(resource, namespace, name), document)
                if not (
                    isinstance(document, dict)
                    and (document.get("metadata") or {}).get("resourceVersion")
                ):
                    scale["metadata"]["resourceVersion"] = ""
            else:
                raise ApiError(
                    405,
                    "the server does not allow this method on the requested resource",
                    reason="MethodNotAllowed",
                )
            self._send_json(200, api.set_scale(resource, namespace, name, scale, dry_run=dry_run))

    def _patch(self, route: Route, raw: bytes, dry_run: bool, query: dict[str, str]) -> None:
        api = self.server.sim.api
        document = self._patch_document(raw)
        with api.store.lock:
            current = api.get(route.resource, route.namespace, route.name)
            patched = self._apply_patch(current, document)
            patch_rv = (
                document.get("metadata", {}).get("resourceVersion")
                if isinstance(document, dict)
                else None
            )
            if not patch_rv:
                patched["metadata"]["resourceVersion"] = ""
            patched = self._decode(route.resource, patched, query)
            updated = api.update(
                route.resource,
                patched,
                route.namespace,
                route.name,
                subresource=route.subresource,
                dry_run=dry_run,
            )
        self._send_json(200, updated)

    def _filter(self, resource: Resource, query: dict[str, str]) -> Callable[[Obj], bool]:
        try:
            return make_filter(
                query.get("labelSelector", ""), query.get("fieldSelector", ""), resource
            )
        except SelectorError as e:
            raise errors.bad_request(str(e)) from e

    def _send_object(self, code: int, obj: Obj, query: dict[str, str]) -> None:
        if "as=Table" in (self.headers.get("Accept") or ""):
            self._send_json(
                code,
                tables.table([obj], obj["metadata"].get("resourceVersion", ""), query, obj["kind"]),
            )
        else:
            self._send_json(code, obj)

    def _list(self, route: Route, query: dict[str, str]) -> None:
        """A list as the v1.33 apiserver serves it (storage/cacher delegator.go):

        - resourceVersion unset: a consistent read of the latest state;
        - "0", or N without a limit, or N with resourceVersionMatch=NotOlderThan: from
          the watch cache, the latest state, once it has caught up with N (504 "Too large
          resource version" if it does not within the wait); with "0" the limit is
          ignored;
        - N with resourceVersionMatch=Exact, or with a limit: the state at exactly N,
          from etcd (410 once compacted);
        - continue: the snapshot of the first page (410 with an inconsistent-continue
          token once compacted).
        """
        sim = self.server.sim
        api = sim.api
        resource = route.resource
        accept = self._filter(resource, query)
        try:
            limit = int(query.get("limit") or 0)
        except ValueError as e:
            raise errors.bad_request("limit must be an integer") from e
        version = query.get("resourceVersion", "")
        match = query.get("resourceVersionMatch", "")
        token = query.get("continue", "")
        _validate_list_options(version, match, token, query)
        prefix = _key_prefix(route.namespace)
        start = ""
        if token:
            start, token_rv = _decode_continue(token, prefix)
            if version not in ("", "0"):
                raise errors.bad_request(
                    "specifying resource version is not allowed when using continue"
                )
            # A token of the first page reads that page's snapshot; rv -1, the latest.
            exact = token_rv if token_rv > 0 else None
        else:
            requested = _parse_resource_version(version)
            exact = (
                requested
                if match == "Exact" or (not match and limit > 0 and requested > 0)
                else None
            )
            if exact is None and requested:
                self._wait_for_version(requested)
            if version == "0" and match != "Exact":
                limit = 0  # the watch cache ignores the limit of a resourceVersion=0 list
        with api.store.lock:
            current_rv = api.store.resource_version
            if exact is None:
                objects = list(api.store.iter(resource, route.namespace))
                list_rv = current_rv
            elif exact > current_rv:
                raise ApiError(
                    500, "etcdserver: mvcc: required revision is a future revision", reason=""
                )
            else:
                try:
                    objects = api.store.snapshot(resource, route.namespace, exact)
                except ApiError as e:
                    if token:
                        raise ApiError(
                            410,
                            _INCONSISTENT_CONTINUE,
                            reason="Expired",
                            list_meta={"continue": _encode_continue(-1, start, prefix)},
                        ) from e
                    raise ApiError(410, _LIST_TOO_OLD, reason="Expired") from e
                list_rv = exact
            keyed = sorted(((_object_key(resource, o), o) for o in objects), key=lambda t: t[0])
            items: list[Obj] = []
            more = False
            remaining = 0
            for key, obj in keyed:
                if not key.startswith(prefix) or (start and key < start):
                    continue
                if limit and len(items) >= limit:
                    # As etcd counts keys: anything after the page, matching or not.
                    more = True
                    remaining += 1
                    continue
                if accept(obj):
                    items.append(json.loads(json.dumps(obj)))
        rv = str(list_rv)
        selecting = bool(query.get("labelSelector", "").strip()) or bool(
            query.get("fieldSelector", "").strip()
        )
        metadata: dict[str, Any] = {"resourceVersion": rv}
        if more:
            last = _object_key(resource, items[-1])
            metadata["continue"] = _encode_continue(list_rv, last + "\x00", prefix)
            # The real server counts what remains only when nothing is filtered out.
            if not selecting:
                metadata["remainingItemCount"] = remaining
        if "as=Table" in (self.headers.get("Accept") or ""):
            table = tables.table(items, rv, query, resource.kind)
            table["metadata"].update({k: v for k, v in metadata.items() if k != "resourceVersion"})
            self._send_json(200, table)
            return
        self._send_json(
            200,
            {
                "kind": resource.list_kind,
                "apiVersion": resource.api_version,
                "metadata": metadata,
                "items": items,
            },
        )

    def _wait_for_version(self, wanted: int) -> None:
        """The watch cache waits (3 s) to catch up with a resourceVersion from the future,
        then answers 504 with a ResourceVersionTooLarge cause."""
        sim = self.server.sim
        store = sim.api.store
        deadline = time.monotonic() + sim.too_large_rv_wait
        with store.lock:
            while store.resource_version < wanted:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ApiError(
                        504,
                        f"Timeout: Too large resource version: {wanted}, current: "
                        f"{store.resource_version}",
                        reason="Timeout",
                        details={
                            "causes": [
                                {
                                    "reason": "ResourceVersionTooLarge",
                                    "message": "Too large resource version",
                                }
                            ],
                            "retryAfterSeconds": 1,
                        },
                        headers={"Retry-After": "1"},
                    )
                store.wait(min(left, 0.1))

    # -- watch ----------------------------------------------------------------

    def _watch(self, route: Route, query: dict[str, str]) -> None:
        sim = self.server.sim
        store = sim.api.store
        resource = route.resource
        try:
            labels = parse_label_selector(query.get("labelSelector", ""))
            fields = parse_field_selector(query.get("fieldSelector", ""), resource)
        except SelectorError as e:
            raise errors.bad_request(str(e)) from e
        if route.name:
            fields.append(*parse_field_selector(f"metadata.name={route.name}", resource))
        accept = make_filter(query.get("labelSelector", ""), "", resource)
        from kubesim.selectors import fields_match

        def matches(obj: Obj | None) -> bool:
            if obj is None:
                return False
            if route.namespace and obj["metadata"].get("namespace") != route.namespace:
                return False
            return (
                accept(obj)
                and fields_match(fields, obj)
                and labels_match(labels, obj["metadata"].get("labels"))
            )

        try:
            timeout = float(query.get("timeoutSeconds") or 1800)
        except ValueError as e:
            raise errors.bad_request("timeoutSeconds must be a number") from e
        bookmarks = _truthy(query.get("allowWatchBookmarks"))
        deadline = time.monotonic() + timeout
        _validate_watch_options(
            query.get("resourceVersionMatch", ""), query.get("continue", ""), query
        )
        requested_rv = query.get("resourceVersion", "")
        start_rv = 0
        if requested_rv not in ("", "0"):
            if not requested_rv.isdigit():
                # The cacher returns the versioner's plain error: a 500 without a reason.
                raise ApiError(
                    500,
                    f'resourceVersion: Invalid value: "{requested_rv}": strconv.ParseUint: '
                    f'parsing "{requested_rv}": invalid syntax',
                    reason="",
                )
            start_rv = int(requested_rv)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Audit-Id", self._audit_id)
        self.end_headers()
        self._status = 200
        sent = 0
        break_fault = self._break_after

        as_table = "as=Table" in (self.headers.get("Accept") or "")

        def emit(kind: str, obj: Obj) -> bool:
            nonlocal sent
            if as_table and kind != "BOOKMARK":
                # `kubectl get -w`: each event's object is a one-row Table.
                obj = tables.table(
                    [obj], obj["metadata"].get("resourceVersion", ""), query, resource.kind
                )
            data = json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
            sent += 1
            return break_fault is None or sent < break_fault.after_events

        def expired(message: str) -> None:
            status = ApiError(410, message, reason="Expired").status()
            data = (
                json.dumps({"type": "ERROR", "object": status}, separators=(",", ":")).encode()
                + b"\n"
            )
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        try:
            with store.lock:
                if requested_rv in ("", "0"):
                    last_rv = store.resource_version
                    initial = [
                        json.loads(json.dumps(o))
                        for o in store.iter(resource, route.namespace)
                        if matches(o)
                    ]
                else:
                    last_rv = start_rv
                    initial = []
            keep_going = True
            for obj in initial:
                keep_going = emit("ADDED", obj)
                if not keep_going:
                    break
            last_bookmark = time.monotonic()
            while keep_going and not self.server.stopping.is_set():
                now = time.monotonic()
                if now >= deadline:
                    break
                with store.lock:
                    try:
                        changes = store.changes_since(last_rv)
                    except ApiError as e:
                        expired(e.message)
                        break
                    if not changes:
                        store.wait(min(deadline - now, 0.5))
                        changes = (
                            store.changes_since(last_rv) if store.resource_version > last_rv else []
                        )
                    events = []
                    for change in changes:
                        last_rv = change.rv
                        if change.resource is not resource:
                            continue
                        new_match = change.type != "DELETED" and matches(change.obj)
                        old_match = matches(change.old)
                        if change.type == "DELETED" and old_match:
                            events.append(("DELETED", change.obj))
                        elif new_match and not old_match:
                            events.append(("ADDED", change.obj))
                        elif new_match and old_match:
                            events.append(("MODIFIED", change.obj))
                        elif old_match and not new_match and change.old is not None:
                            # As the real watch cache: the previous content, at the
                            # version of the change that moved it out.
                            previous = json.loads(json.dumps(change.old))
                            previous["metadata"]["resourceVersion"] = str(change.rv)
                            events.append(("DELETED", previous))
                    events = [(kind, json.loads(json.dumps(obj))) for kind, obj in events]
                for kind, obj in events:
                    keep_going = emit(kind, obj)
                    if not keep_going:
                        break
                if (
                    bookmarks
                    and time.monotonic() - last_bookmark > sim.bookmark_interval
                    and keep_going
                ):
                    emit(
                        "BOOKMARK",
                        {
                            "kind": resource.kind,
                            "apiVersion": resource.api_version,
                            "metadata": {"resourceVersion": str(last_rv)},
                        },
                    )
                    last_bookmark = time.monotonic()
            if break_fault is not None and not keep_going and break_fault.expire:
                expired("injected fault: watch history compacted")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True
        if break_fault is not None and not keep_going:
            self.close_connection = True

    # -- admin ----------------------------------------------------------------

    def _admin(self, method: str, path: str, raw: bytes, query: dict[str, str]) -> None:
        sim = self.server.sim
        if self.headers.get("Authorization") != f"Bearer {sim.admin_token}":
            raise ApiError(401, "Unauthorized", reason="Unauthorized")
        try:
            body = json.loads(raw) if raw.strip() else dict(query)
        except ValueError as e:
            raise errors.bad_request(f"admin request body is not JSON: {e}") from e
        result = sim.admin(method, path[len("/kubesim/") :], body)
        self._send_json(200, result)


_LIST_TOO_OLD = "The resourceVersion for the provided list is too old."
_INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You "
    "can start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)


def _validate_list_options(version: str, match: str, token: str, query: dict[str, str]) -> None:
    """metainternalversion validation.ValidateListOptions: 422 on ListOptions."""
    causes: list[tuple[str, str]] = []
    if match:
        if not version:
            causes.append(
                (
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is "
                    "provided",
                )
            )
        if token:
            causes.append(
                (
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                )
            )
        if match not in ("Exact", "NotOlderThan"):
            causes.append(
                (
                    "resourceVersionMatch",
                    f'Unsupported value: "{match}": supported values: "Exact", "NotOlderThan", ""',
                )
            )
        if match == "Exact" and version == "0":
            causes.append(
                (
                    "resourceVersionMatch",
                    'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            )
    if "sendInitialEvents" in query:
        causes.append(("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list"))
    if causes:
        raise errors.invalid("ListOptions", "", causes, "meta.k8s.io")


def _validate_watch_options(version_match: str, token: str, query: dict[str, str]) -> None:
    """The watch half of ValidateListOptions, with the WatchList feature off (v1.33)."""
    causes: list[tuple[str, str]] = []
    if "sendInitialEvents" in query:
        if version_match != "NotOlderThan":
            causes.append(
                (
                    "resourceVersionMatch",
                    "Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                    "NotOlderThan",
                )
            )
        causes.append(
            (
                "sendInitialEvents",
                "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList "
                "feature gate is enabled",
            )
        )
    if version_match:
        if "sendInitialEvents" not in query:
            causes.append(
                (
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden for watch unless "
                    "sendInitialEvents is provided",
                )
            )
        if version_match != "NotOlderThan":
            causes.append(
                (
                    "resourceVersionMatch",
                    f'Unsupported value: "{version_match}": supported values: "NotOlderThan"',
                )
            )
        if token:
            causes.append(
                (
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                )
            )
    if causes:
        raise errors.invalid("ListOptions", "", causes, "meta.k8s.io")


def _parse_resource_version(text: str) -> int:
    if text in ("", "0"):
        return 0
    if not text.isdigit():
        raise errors.bad_request(
            f'invalid resource version: resourceVersion: Invalid value: "{text}": '
            f'strconv.ParseUint: parsing "{text}": invalid syntax'
        )
    return int(text)


def _key_prefix(namespace: str) -> str:
    """The part of the etcd key a list ranges over, below the resource's own prefix."""
    return f"{namespace}/" if namespace else ""


def _object_key(resource: Resource, obj: Obj) -> str:
    """The object's etcd key below the resource prefix: lists come in this order."""
    metadata = obj["metadata"]
    if resource.namespaced:
        return f"{metadata.get('namespace', '')}/{metadata['name']}"
    return str(metadata["name"])


def _encode_continue(rv: int, start: str, prefix: str) -> str:
    """storage.EncodeContinue: the start key relative to the list's prefix."""
    token = {"v": "meta.k8s.io/v1", "rv": rv, "start": start[len(prefix) :]}
    data = json.dumps(token, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _decode_continue(text: str, prefix: str) -> tuple[str, int]:
    """storage.DecodeContinue: (full start key, resourceVersion); 400 when invalid."""

    def invalid(why: str) -> ApiError:
        return errors.bad_request(f"invalid continue token: {why}")

    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, binascii.Error) as e:
        raise invalid(f"continue key is not valid: {e}") from e
    try:
        token = json.loads(data)
    except ValueError as e:
        raise invalid(f"continue key is not valid: {e}") from e
    if not isinstance(token, dict):
        raise invalid("continue key is not valid: not an object")
    if token.get("v") != "meta.k8s.io/v1":
        raise invalid(
            "continue key is not valid: server does not recognize this encoded version "
            f"{token.get('v', '')}"
        )
    rv = token.get("rv")
    if not isinstance(rv, int) or rv == 0:
        raise invalid(
            "continue key is not valid: incorrect encoded start resourceVersion "
            "(version meta.k8s.io/v1)"
        )
    start = token.get("start")
    if not isinstance(start, str) or not start:
        raise invalid("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")
    key = start if start.startswith("/") else "/" + start
    if posixpath.normpath(key) != key or key.startswith("//"):
        raise invalid(f"continue key is not valid: {start}")
    return prefix + key[1:], rv


def _groups() -> list[dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for resource in RESOURCES:
        if not resource.group:
            continue
        entry = {"groupVersion": resource.group_version, "version": resource.version}
        group = groups.setdefault(
            resource.group, {"name": resource.group, "versions": [], "preferredVersion": entry}
        )
        if entry not in group["versions"]:
            group["versions"].append(entry)
    return list(groups.values())


def _resource_list(group_version: str, resources: list[Resource]) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    for resource in resources:
        entry: dict[str, Any] = {
            "name": resource.plural,
            "singularName": resource.singular,
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": list(resource.verbs),
        }
        if resource.short_names:
            entry["shortNames"] = list(resource.short_names)
        if resource.categories:
            entry["categories"] = list(resource.categories)
        entries.append(entry)
        for sub, (kind, group, version, verbs) in resource.subresources.items():
            sub_entry: dict[str, Any] = {
                "name": f"{resource.plural}/{sub}",
                "singularName": "",
                "namespaced": resource.namespaced,
                "kind": kind,
                "verbs": list(verbs),
            }
            if group != resource.group or version != resource.version:
                sub_entry["group"] = group
                sub_entry["version"] = version
            entries.append(sub_entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }
