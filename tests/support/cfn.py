"""CloudFormation's side of a custom resource: its requests, as CloudFormation sends
them to the function (the documented fields; every property value a string), and a
local server standing in for the presigned S3 ResponseURL that records the answers."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STACK_ID = (
    "arn:aws:cloudformation:us-east-1:123456789012:stack/eks-node-drainer/"
    "5b3f4c60-0000-11ef-0000-0a1b2c3d4e5f"
)
OTHER_STACK_ID = (
    "arn:aws:cloudformation:us-east-1:123456789012:stack/eks-node-drainer-b/"
    "0c1d2e3f-0000-11ef-0000-0a1b2c3d4e5f"
)
"""Another stack of the same cluster, in the same account."""
SERVICE_TOKEN = "arn:aws:lambda:us-east-1:123456789012:function:eks-node-drainer"


def request(
    kind: str,
    response_url: str,
    properties: Mapping[str, str],
    *,
    old: Mapping[str, str] | None = None,
    physical_id: str | None = None,
    stack_id: str = STACK_ID,
) -> dict[str, Any]:
    """A Create, Update or Delete request of Custom::LifecycleHooks (from the stack
    `stack_id`)."""
    event: dict[str, Any] = {
        "RequestType": kind,
        "ServiceToken": SERVICE_TOKEN,
        "ResponseURL": response_url,
        "StackId": stack_id,
        "RequestId": str(uuid.uuid4()),
        "LogicalResourceId": "LifecycleHooks",
        "ResourceType": "Custom::LifecycleHooks",
        "ResourceProperties": {"ServiceToken": SERVICE_TOKEN, **properties},
    }
    if physical_id is not None:
        event["PhysicalResourceId"] = physical_id
    if old is not None:
        event["OldResourceProperties"] = {"ServiceToken": SERVICE_TOKEN, **old}
    return event


@dataclass
class Answer:
    body: dict[str, Any]
    content_type: str | None
    path: str


@dataclass
class ResponseServer:
    """Records each PUT to its URL (a fresh path per request, like a presigned URL)."""

    url: str
    answers: list[Answer] = field(default_factory=list)

    def next_url(self) -> str:
        return (
            f"{self.url}/cloudformation-custom-resource-response/{uuid.uuid4()}?X-Amz-Signature=x"
        )


@contextmanager
def response_server() -> Iterator[ResponseServer]:
    answers: list[Answer] = []

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            answers.append(
                Answer(
                    json.loads(self.rfile.read(length)),
                    self.headers.get("Content-Type"),
                    self.path,
                )
            )
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield ResponseServer(f"http://{host!s}:{port}", answers)
    finally:
        server.shutdown()
        server.server_close()
