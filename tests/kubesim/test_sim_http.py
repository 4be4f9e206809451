"""The HTTP surface: discovery, content types, and bad requests answered with a Status
(never a traceback or a hang)."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from typing import Any

import pytest

from kubesim import KubeSim
from kubesim.testing import request
from testbed.workloads import node, pod


def _assert_status(response: Any, code: int) -> dict[str, Any]:
    assert response.status == code, response.body
    assert response.headers["content-type"] == "application/json"
    status: dict[str, Any] = response.json()
    assert status["kind"] == "Status"
    assert status["apiVersion"] == "v1"
    assert status["status"] == "Failure"
    assert status["code"] == code
    assert "Traceback" not in status["message"]
    return status


# -- discovery ---------------------------------------------------------------------


def test_discovery__core_v1__lists_pods_eviction_as_policy_v1(sim: KubeSim) -> None:
    resources = request(sim, "GET", "/api/v1").json()["resources"]

    [eviction] = [r for r in resources if r["name"] == "pods/eviction"]
    assert (eviction["group"], eviction["version"], eviction["kind"]) == (
        "policy",
        "v1",
        "Eviction",
    )
    assert eviction["verbs"] == ["create"]


@pytest.mark.parametrize(
    ("group_version", "plural"),
    [
        ("apps/v1", "deployments"),
        ("apps/v1", "statefulsets"),
        ("apps/v1", "daemonsets"),
        ("apps/v1", "replicasets"),
        ("policy/v1", "poddisruptionbudgets"),
        ("storage.k8s.io/v1", "volumeattachments"),
        ("rbac.authorization.k8s.io/v1", "clusterroles"),
        ("rbac.authorization.k8s.io/v1", "rolebindings"),
    ],
)
def test_discovery__group_versions__serve_resources(
    sim: KubeSim, group_version: str, plural: str
) -> None:
    resources = request(sim, "GET", f"/apis/{group_version}").json()["resources"]

    assert plural in [r["name"] for r in resources]


def test_discovery__api_groups_and_version(sim: KubeSim) -> None:
    groups = {g["name"] for g in request(sim, "GET", "/apis").json()["groups"]}
    version = request(sim, "GET", "/version").json()

    assert {"apps", "policy", "storage.k8s.io", "rbac.authorization.k8s.io"} <= groups
    assert (version["major"], version["minor"]) == ("1", "32")


def test_discovery__python_client_version_api(admin_client: Any) -> None:
    from kubernetes import client as k8s

    assert k8s.VersionApi(admin_client).get_code().git_version.startswith("v1.32")


def test_healthz__plain_ok(sim: KubeSim) -> None:
    response = request(sim, "GET", "/healthz")

    assert (response.status, response.body) == (200, b"ok")


# -- bodies and content types ------------------------------------------------------


def test_get_with_a_body__kept_alive_connection__next_request_answered(sim: KubeSim) -> None:
    """A body on a GET is read and ignored, not taken for the next request."""
    context = ssl.create_default_context(cadata=sim.ca_pem.decode())
    connection = http.client.HTTPSConnection("127.0.0.1", sim.port, context=context, timeout=5)
    auth = {"Authorization": f"Bearer {sim.admin_token}", "Content-Type": "application/json"}
    try:
        connection.request("GET", "/api/v1/nodes", body=b'{"ignored": true}', headers=auth)
        first = connection.getresponse()
        first.read()
        connection.request("GET", "/api/v1/namespaces", headers=auth)
        second = connection.getresponse()
        assert (first.status, second.status) == (200, 200), second.read()
    finally:
        connection.close()


def test_post__missing_content_type__read_as_json(sim: KubeSim) -> None:
    response = request(sim, "POST", "/api/v1/namespaces/default/pods", pod("a"))

    assert response.status == 201
    assert sim.get("Pod", "a", "default")


def test_post__yaml_body__accepted(sim: KubeSim) -> None:
    body = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n"

    response = request(
        sim, "POST", "/api/v1/nodes", body, headers={"Content-Type": "application/yaml"}
    )

    assert response.status == 201


@pytest.mark.parametrize(
    ("call", "body", "headers", "expected"),
    [
        ("POST /api/v1/namespaces/default/pods", b"{not json", {}, (400, "BadRequest")),
        ("POST /api/v1/namespaces/default/pods", b"", {}, (400, "BadRequest")),
        ("POST /api/v1/namespaces/default/pods", b"[1, 2]", {}, (400, "BadRequest")),
        (
            "POST /api/v1/namespaces/default/pods",
            b'{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x"}}',
            {},
            (400, "BadRequest"),
        ),
        (
            "POST /api/v1/namespaces/default/pods",
            b'{"apiVersion": "apps/v1", "kind": "Pod", "metadata": {"name": "x"}}',
            {},
            (400, "BadRequest"),
        ),
        (
            "POST /api/v1/namespaces/default/pods",
            b"{}",
            {"Content-Type": "text/plain"},
            (415, "UnsupportedMediaType"),
        ),
        (
            "PATCH /api/v1/nodes/n1",
            b'{"spec": {}}',
            {"Content-Type": "application/json"},
            (415, "UnsupportedMediaType"),
        ),
        (
            "PATCH /api/v1/nodes/n1",
            b"{bad",
            {"Content-Type": "application/merge-patch+json"},
            (400, "BadRequest"),
        ),
        ("GET /api/v1/nothings", None, {}, (404, "NotFound")),
        ("GET /apis/apps/v2/deployments", None, {}, (404, "NotFound")),
        ("GET /no/such/path", None, {}, (404, "NotFound")),
        ("GET /api/v1/namespaces/default/pods/a/logs", None, {}, (404, "NotFound")),
        ("PUT /api/v1/namespaces/default/pods", b"{}", {}, (405, "MethodNotAllowed")),
        ("POST /api/v1/nodes/n1", b"{}", {}, (405, "MethodNotAllowed")),
        ("GET /api/v1/namespaces/default/pods/a/eviction", None, {}, (405, "MethodNotAllowed")),
        (
            "GET /api/v1/namespaces/default/pods?timeoutSeconds=x&watch=1",
            None,
            {},
            (400, "BadRequest"),
        ),
        (
            # The cacher hands back the versioner's plain error: a 500 with no reason.
            "GET /api/v1/namespaces/default/pods?watch=1&resourceVersion=abc",
            None,
            {},
            (500, None),
        ),
        (
            "GET /api/v1/namespaces/default/pods?resourceVersion=abc",
            None,
            {},
            (400, "BadRequest"),
        ),
        (
            "DELETE /api/v1/namespaces/default/pods/a?gracePeriodSeconds=soon",
            None,
            {},
            (400, "BadRequest"),
        ),
        ("DELETE /api/v1/namespaces/default/pods/a", b'"str"', {}, (400, "BadRequest")),
        (
            "POST /api/v1/namespaces/default/pods?fieldValidation=Loud",
            b"{}",
            {},
            (400, "BadRequest"),
        ),
    ],
    ids=[
        "malformed-json",
        "empty-body",
        "not-an-object",
        "wrong-kind",
        "wrong-api-version",
        "unsupported-media-type",
        "patch-with-plain-json",
        "malformed-patch",
        "unknown-resource",
        "unknown-version",
        "unknown-path",
        "unknown-subresource",
        "put-on-collection",
        "post-on-object",
        "get-eviction",
        "bad-timeout",
        "bad-watch-rv",
        "bad-list-rv",
        "bad-grace-period",
        "delete-options-not-object",
        "bad-field-validation",
    ],
)
def test_bad_request__status_error(
    sim: KubeSim,
    call: str,
    body: bytes | None,
    headers: dict[str, str],
    expected: tuple[int, str | None],
) -> None:
    sim.apply([node("n1"), pod("a")])
    method, path = call.split(" ", 1)
    code, reason = expected

    status = _assert_status(request(sim, method, path, body, headers=headers), code)

    assert status.get("reason") == reason


def test_bad_request__pod_in_url_namespace_mismatch__400(sim: KubeSim) -> None:
    body = pod("a", namespace="kube-system")

    status = _assert_status(request(sim, "POST", "/api/v1/namespaces/default/pods", body), 400)

    assert "does not match the namespace" in status["message"]


def test_bad_request__name_mismatch_on_update__400(sim: KubeSim) -> None:
    sim.apply(node("n1"))

    status = _assert_status(request(sim, "PUT", "/api/v1/nodes/n1", node("n2")), 400)

    assert "does not match the name" in status["message"]


def test_bad_request__garbage_bytes__no_hang(sim: KubeSim) -> None:
    context = ssl.create_default_context(cadata=sim.ca_pem.decode())
    with (
        socket.create_connection(("127.0.0.1", sim.port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(b"\x00\x01garbage that is not http\r\n\r\n")
        answer = b""
        while chunk := tls.recv(4096):
            answer += chunk

    # As Go's net/http answers a request line it cannot parse.
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert answer.endswith(b"\r\n\r\n400 Bad Request")


def test_bad_request__internal_error__500_status_not_traceback(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*_: Any, **__: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(sim.api, "get", explode)
    sim.apply(node("n1"))

    status = _assert_status(request(sim, "GET", "/api/v1/nodes/n1"), 500)

    assert status["reason"] == "InternalError"
    assert status["message"] == "Internal error occurred: boom"


# -- server-side tables ------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "columns"),
    [
        ("/api/v1/namespaces/default/pods", ["Name", "Ready", "Status", "Restarts", "Age"]),
        ("/api/v1/nodes", ["Name", "Status", "Roles", "Age", "Version"]),
        (
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
            ["Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"],
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            ["Name", "Ready", "Up-to-date", "Available", "Age"],
        ),
        ("/api/v1/namespaces", ["Name", "Status", "Age"]),
    ],
)
def test_table__kubectl_get_columns(sim: KubeSim, path: str, columns: list[str]) -> None:
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

    table = request(sim, "GET", path, headers={"Accept": accept}).json()

    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]][: len(columns)] == columns


def test_table__watch_as_table__each_event_a_one_row_table(sim: KubeSim) -> None:
    sim.apply(pod("a"))
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

    response = request(
        sim,
        "GET",
        "/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=1",
        headers={"Accept": accept},
    )

    event = json.loads(response.body.decode().splitlines()[0])
    assert event["type"] == "ADDED"
    assert event["object"]["kind"] == "Table"
    assert event["object"]["rows"][0]["cells"][0] == "a"
