"""A TokenReview webhook that verifies EKS tokens (`k8s-aws-v1.`) for kube-apiserver.

On EKS, aws-iam-authenticator answers kube-apiserver's TokenReviews; here the
same check as kubesim's (kubesim.auth.Authenticator: the presigned STS request's
SigV4 signature recomputed with the mapped credentials, cluster id, age) answers
them, so the drainer reaches the real apiserver as its real RBAC identity.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubesim.auth import AuthenticationError, Authenticator

log = logging.getLogger(__name__)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            review = json.loads(self.rfile.read(length) or b"{}")
            token = str((review.get("spec") or {}).get("token") or "")
        except ValueError:
            self.send_error(400, "not a TokenReview")
            return
        status: dict[str, Any] = {"authenticated": False}
        try:
            user = self.server.authenticator.authenticate(f"Bearer {token}")
        except AuthenticationError as e:
            status["error"] = str(e)
        else:
            status = {
                "authenticated": True,
                "user": {"username": user.name, "uid": user.name, "groups": list(user.groups)},
            }
        self.server.reviews += 1
        body = json.dumps(
            {
                "apiVersion": review.get("apiVersion") or "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "status": status,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("token webhook: " + format, *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, authenticator: Authenticator, context: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.authenticator = authenticator
        self.reviews = 0
        self.socket = context.wrap_socket(self.socket, server_side=True)


class TokenWebhook:
    """Serves TokenReviews on https://127.0.0.1:<port>/ until stopped."""

    def __init__(self, authenticator: Authenticator, cert_file: str, key_file: str) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        self._server = _Server(authenticator, context)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="token-webhook",
            daemon=True,
        )

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._server.server_address[1]}/"

    @property
    def reviews(self) -> int:
        return self._server.reviews

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
