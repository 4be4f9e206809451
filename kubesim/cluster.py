"""KubeSim: the whole emulator in one object, usable in-process or from the CLI."""

from __future__ import annotations

import base64
import builtins
import copy
import json
import logging
import secrets
import ssl
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from kubesim import certs
from kubesim.api import Api
from kubesim.auth import Attributes, Authenticator, Authorizer, EksIdentity, User
from kubesim.controllers import Simulator
from kubesim.errors import ApiError
from kubesim.faults import Fault, Faults, RequestRecord
from kubesim.resources import RESOURCES, Resource, for_kind
from kubesim.server import Server
from kubesim.store import Obj, Store

log = logging.getLogger(__name__)

DRAINER_GROUP = "eks-node-drainer"
VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-kubesim",
    "gitCommit": "kubesim",
    "gitTreeState": "clean",
    "buildDate": "2026-11-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


class KubeSim:
    """A Kubernetes API server emulator over HTTPS.

    >>> with KubeSim(speed=10) as sim:
    ...     sim.apply(open("manifests.yaml").read())
    ...     sim.kubeconfig  # a file with the `admin` and `drainer` contexts
    """

    def __init__(
        self,
        *,
        port: int = 0,
        speed: float = 1.0,
        cluster_name: str = "kubesim",
        eks_identities: Iterable[EksIdentity] = (),
        max_token_age: float = 900.0,
        kubeconfig: Path | str | None = None,
        history: int = 100_000,
    ) -> None:
        self.cluster_name = cluster_name
        self.store = Store(history=history)
        self.api = Api(self.store)
        self.simulator = Simulator(self.api, speed=speed)
        self.faults = Faults()
        self.admin_token = "kubesim-admin-" + secrets.token_hex(16)
        self.drainer_token = "kubesim-drainer-" + secrets.token_hex(16)
        self.authenticator = Authenticator(
            tokens={
                self.admin_token: User("kubesim-admin", ("system:masters", "system:authenticated")),
                self.drainer_token: User("drainer", (DRAINER_GROUP, "system:authenticated")),
            },
            cluster_id=cluster_name,
            identities=list(eks_identities),
            max_token_age=max_token_age,
        )
        self.authorizer = Authorizer(self.store)
        self.tls = certs.generate()
        self._tmp = tempfile.TemporaryDirectory(prefix="kubesim-")
        self._cert_dir = Path(self._tmp.name)
        self.kubeconfig = Path(kubeconfig) if kubeconfig else self._cert_dir / "kubeconfig"
        self._port = port
        # Seconds between watch bookmarks (the real server: about a minute).
        self.bookmark_interval = 1.0
        # Seconds a list waits for a resourceVersion from the future before its 504 (the
        # real watch cache: 3).
        self.too_large_rv_wait = 3.0
        self._server: Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> KubeSim:
        _, cert, key = self.tls.write(self._cert_dir)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert, key)
        context.set_alpn_protocols(["http/1.1"])
        self._server = Server(("127.0.0.1", self._port), self, context)
        self.simulator.start()
        # A short poll interval so stop() (and each test's teardown) is quick.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="kubesim-http",
            daemon=True,
        )
        self._thread.start()
        self.write_kubeconfig(self.kubeconfig)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stopping.set()
            with self.store.lock:
                self.store.changed.notify_all()
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self.simulator.stop()
        self._tmp.cleanup()

    def __enter__(self) -> KubeSim:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "KubeSim is not started"
        return int(self._server.server_address[1])

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"https://{self.address}"

    @property
    def ca_pem(self) -> bytes:
        return self.tls.ca_pem

    @property
    def ca_file(self) -> Path:
        return self._cert_dir / "ca.crt"

    @property
    def ca_data(self) -> str:
        """The CA as EKS DescribeCluster returns it: base64 of the PEM."""
        return base64.b64encode(self.tls.ca_pem).decode()

    @property
    def speed(self) -> float:
        return self.simulator.speed

    @speed.setter
    def speed(self, value: float) -> None:
        self.simulator.speed = value

    def write_kubeconfig(self, path: Path) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": self.cluster_name,
                    "cluster": {"server": self.url, "certificate-authority-data": self.ca_data},
                }
            ],
            "users": [
                {"name": "admin", "user": {"token": self.admin_token}},
                {"name": "drainer", "user": {"token": self.drainer_token}},
            ],
            "contexts": [
                {"name": "admin", "context": {"cluster": self.cluster_name, "user": "admin"}},
                {"name": "drainer", "context": {"cluster": self.cluster_name, "user": "drainer"}},
            ],
            "current-context": "admin",
            "preferences": {},
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(yaml.safe_dump(config, sort_keys=False))

    # -- in-process helpers ---------------------------------------------------

    def settle(self, timeout: float = 5.0) -> None:
        self.simulator.settle(timeout)

    def apply(self, objects: str | Obj | Iterable[Obj]) -> list[Obj]:
        """Create objects (dicts or YAML text with several documents) as the admin."""
        if isinstance(objects, str):
            documents = [d for d in yaml.safe_load_all(objects) if d]
        elif isinstance(objects, dict):
            documents = [objects]
        else:
            documents = list(objects)
        created = []
        for document in documents:
            if document.get("kind") == "List":
                created.extend(self.apply(document.get("items") or []))
                continue
            resource = self.resource_for(document)
            namespace = (document.get("metadata") or {}).get("namespace", "")
            created.append(self.api.create(resource, document, namespace))
        return created

    @staticmethod
    def resource_for(document: Obj) -> Resource:
        resource = for_kind(str(document.get("apiVersion")), str(document.get("kind")))
        if resource is None:
            raise ValueError(
                f"kubesim does not serve {document.get('apiVersion')} {document.get('kind')}"
            )
        return resource

    def get(self, kind: str, name: str, namespace: str = "") -> Obj:
        resource = next(r for r in RESOURCES if r.kind == kind)
        return self.api.get(resource, namespace, name)

    def list(self, kind: str, namespace: str = "") -> list[Obj]:
        resource = next(r for r in RESOURCES if r.kind == kind)
        return self.api.select(resource, namespace, lambda _: True)[0]

    def requests(self, user: str | None = None) -> builtins.list[RequestRecord]:
        return self.faults.requests(user)

    # -- served documents -----------------------------------------------------

    def version_info(self) -> dict[str, str]:
        return dict(VERSION)

    def openapi(self, path: str) -> dict[str, Any] | None:
        from kubesim import openapi

        return openapi.document(path)

    def review(self, resource: Resource, body: Any, user: User) -> Obj:
        if not isinstance(body, dict):
            raise ApiError(400, "the object provided is unrecognized", reason="BadRequest")
        review = copy.deepcopy(body)
        spec = review.get("spec") or {}
        review.setdefault("metadata", {})
        review["apiVersion"] = resource.api_version
        review["kind"] = resource.kind
        if resource.kind == "SelfSubjectAccessReview":
            attrs = spec.get("resourceAttributes")
            if attrs:
                attributes = Attributes(
                    user,
                    attrs.get("verb", ""),
                    attrs.get("group", ""),
                    attrs.get("resource", ""),
                    attrs.get("subresource", ""),
                    attrs.get("namespace", ""),
                    attrs.get("name", ""),
                )
            else:
                non = spec.get("nonResourceAttributes") or {}
                attributes = Attributes(user, non.get("verb", ""), path=non.get("path", ""))
            allowed = self.authorizer.allowed(attributes)
            review["status"] = {"allowed": allowed}
            if allowed and not user.is_admin:
                review["status"]["reason"] = f'RBAC: allowed for user "{user.name}"'
            return review
        rules = self.authorizer.rules_for(user, spec.get("namespace", ""))
        review["status"] = {
            "resourceRules": [
                {k: r[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if k in r}
                for r in rules
                if r.get("resources")
            ]
            + [
                {
                    "verbs": ["create"],
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                }
            ],
            "nonResourceRules": [
                {"verbs": r["verbs"], "nonResourceURLs": r["nonResourceURLs"]}
                for r in rules
                if r.get("nonResourceURLs")
            ]
            + [
                {
                    "verbs": ["get"],
                    "nonResourceURLs": [
                        "/api",
                        "/api/*",
                        "/apis",
                        "/apis/*",
                        "/version",
                        "/healthz",
                        "/openapi/*",
                    ],
                }
            ],
            "incomplete": False,
        }
        return review

    # -- admin API ------------------------------------------------------------

    def admin(self, method: str, path: str, body: dict[str, Any]) -> Any:
        """The test hooks, served at /kubesim/<path> to the admin token."""
        if path == "faults" and method == "POST":
            try:
                self.faults.add(Fault.from_json(body))
            except (TypeError, ValueError) as e:
                raise ApiError(400, f"bad fault: {e}", reason="BadRequest") from e
            return {"faults": self.faults.describe()}
        if path == "faults" and method == "DELETE":
            self.faults.clear()
            return {"faults": []}
        if path == "faults":
            return {"faults": self.faults.describe()}
        if path == "counters":
            return {"counts": self.faults.counts(body.get("user"))}
        if path == "requests":
            return {
                "requests": [r.__dict__ for r in self.faults.requests(body.get("user"))],
                "now": time.time(),
            }
        if path == "reset" and method == "POST":
            self.faults.reset()
            return {"ok": True}
        if path == "compact" and method == "POST":
            self.store.compact()
            return {"resourceVersion": str(self.store.resource_version)}
        if path == "speed" and method == "POST":
            self.speed = float(body["speed"])
            return {"speed": self.speed}
        if path == "token-age" and method == "POST":
            self.authenticator.max_token_age = float(body["seconds"])
            return {"seconds": self.authenticator.max_token_age}
        if path == "auth-failures":
            return {"failures": list(self.authenticator.failures)}
        if path == "apply" and method == "POST":
            try:
                created = self.apply(body.get("objects") or [])
            except ValueError as e:
                raise ApiError(400, str(e), reason="BadRequest") from e
            return {"created": len(created)}
        if path == "identities" and method == "POST":
            self.authenticator.identities.append(
                EksIdentity(
                    body["access_key_id"],
                    body["secret_access_key"],
                    body.get("arn", ""),
                    body["username"],
                    tuple(body.get("groups") or ()),
                )
            )
            return {"identities": len(self.authenticator.identities)}
        raise ApiError(404, f"no admin endpoint {method} /kubesim/{path}", reason="NotFound")


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True)
