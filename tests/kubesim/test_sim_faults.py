"""Fault injection and request accounting over the /kubesim/ admin API."""

from __future__ import annotations

import http.client
import json
import time
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubesim import KubeSim
from kubesim.testing import Admin, request
from testbed.workloads import pod

PODS = "/api/v1/namespaces/default/pods"


def test_fault_status__retry_after__status_body_and_header(sim: KubeSim, admin: Admin) -> None:
    admin.fault(kind="status", status=503, retry_after=2, path="/pods$", count=1)

    response = request(sim, "GET", PODS)

    assert response.status == 503
    assert response.headers["retry-after"] == "2"
    status = response.json()
    assert status["kind"] == "Status"
    assert status["code"] == 503
    assert status["reason"] == "ServiceUnavailable"
    assert status["details"]["retryAfterSeconds"] == 2


def test_fault_status__count__only_that_many_requests(sim: KubeSim, admin: Admin) -> None:
    admin.fault(kind="status", status=500, path="/pods$", count=2)

    statuses = [request(sim, "GET", PODS).status for _ in range(3)]

    assert statuses == [500, 500, 200]
    assert admin.call("GET", "faults")["faults"][0]["hits"] == 2


def test_fault_status__time_window__ends_by_itself(sim: KubeSim, admin: Admin) -> None:
    admin.fault(kind="status", status=429, path="/pods$", seconds=0.3)

    during = request(sim, "GET", PODS).status
    time.sleep(0.35)
    after = request(sim, "GET", PODS).status

    assert (during, after) == (429, 200)


@pytest.mark.parametrize(
    ("fault", "method", "expected"),
    [
        ({"method": "POST"}, "GET", 200),
        ({"method": "POST"}, "POST", 418),
        ({"path": "/eviction$"}, "GET", 200),
        ({"user": "drainer"}, "GET", 200),
    ],
    ids=["other-method", "same-method", "other-path", "other-user"],
)
def test_fault_status__matching_rules(
    sim: KubeSim, admin: Admin, fault: dict[str, Any], method: str, expected: int
) -> None:
    admin.fault(kind="status", status=418, **fault)

    response = request(sim, method, PODS, pod("a") if method == "POST" else None)

    assert response.status == expected


def test_fault_status__seen_by_python_client_as_api_exception(admin: Admin, core: Any) -> None:
    admin.fault(kind="status", status=429, retry_after=1, path="/eviction$", count=1)

    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod_eviction(
            "x", "default", k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="x"))
        )

    assert raised.value.status == 429
    assert raised.value.headers is not None
    assert raised.value.headers["Retry-After"] == "1"


def test_fault_latency__request_delayed_then_served(sim: KubeSim, admin: Admin) -> None:
    admin.fault(kind="latency", latency=0.3, path="/pods$", count=1)

    started = time.monotonic()
    response = request(sim, "GET", PODS)
    elapsed = time.monotonic() - started

    assert response.status == 200
    assert elapsed >= 0.3


def test_fault_drop__connection_closed_without_answer(sim: KubeSim, admin: Admin) -> None:
    admin.fault(kind="drop", path="/pods$", count=1)

    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        request(sim, "GET", PODS)
    assert request(sim, "GET", PODS).status == 200


def test_fault_drop__python_client_sees_protocol_error(admin: Admin, core: Any) -> None:
    admin.fault(kind="drop", path="/pods$", count=10)  # more than urllib3's retries

    with pytest.raises(urllib3.exceptions.HTTPError):
        core.list_namespaced_pod("default")


def _watch_lines(sim: KubeSim, query: str = "") -> list[dict[str, Any]]:
    response = request(sim, "GET", f"{PODS}?watch=1&timeoutSeconds=1{query}", timeout=5)
    return [json.loads(line) for line in response.body.decode().splitlines()]


def test_fault_break_watch__stream_ends_after_n_events(sim: KubeSim, admin: Admin) -> None:
    sim.apply([pod("a"), pod("b"), pod("c")])
    admin.fault(kind="break_watch", after_events=2, count=1)

    started = time.monotonic()
    events = _watch_lines(sim)

    assert [e["type"] for e in events] == ["ADDED", "ADDED"]
    assert time.monotonic() - started < 0.8  # ended early, not at timeoutSeconds
    assert len(_watch_lines(sim)) == 3  # the next watch is whole


def test_fault_break_watch__expire__ends_with_410_error_event(sim: KubeSim, admin: Admin) -> None:
    sim.apply([pod("a"), pod("b")])
    admin.fault(kind="break_watch", after_events=1, expire=True, count=1)

    events = _watch_lines(sim)

    assert [e["type"] for e in events] == ["ADDED", "ERROR"]
    assert events[1]["object"]["code"] == 410


def test_fault_break_watch__does_not_touch_plain_lists(sim: KubeSim, admin: Admin) -> None:
    admin.fault(kind="break_watch", after_events=0)

    assert request(sim, "GET", PODS).status == 200
    assert admin.call("GET", "faults")["faults"][0]["hits"] == 0


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "explode"},
        {"kind": "status", "bogus": 1},
        {"kind": "status", "path": "(unclosed"},
        {"kind": "status", "status": "503"},
        {"kind": "status", "status": 42},
        {"kind": "latency", "latency": "slow"},
        {"kind": "drop", "count": 1.5},
        {"kind": "drop", "seconds": "5"},
    ],
    ids=[
        "unknown-kind",
        "unknown-field",
        "bad-regex",
        "status-as-string",
        "status-not-http",
        "latency-as-string",
        "count-not-integer",
        "seconds-as-string",
    ],
)
def test_fault__bad_rule__400(sim: KubeSim, body: dict[str, Any]) -> None:
    response = request(sim, "POST", "/kubesim/faults", body)

    assert response.status == 400
    assert response.json()["kind"] == "Status"


def test_faults__cleared__requests_served_again(sim: KubeSim, admin: Admin) -> None:
    admin.fault(kind="status", status=500)
    assert request(sim, "GET", PODS).status == 500

    admin.clear_faults()

    assert request(sim, "GET", PODS).status == 200


def test_counters__by_verb_and_resource_and_user(sim: KubeSim, admin: Admin, core: Any) -> None:
    admin.reset()
    core.list_namespaced_pod("default")
    core.list_namespaced_pod("default")
    request(sim, "GET", "/api/v1/nodes", token=sim.drainer_token)

    everyone = admin.counters()
    drainer = admin.counters("drainer")

    assert everyone["list pods"] == 2
    assert everyone["list nodes"] == 1
    assert drainer == {"list nodes": 1}


def test_requests__records_with_status_and_times(sim: KubeSim, admin: Admin) -> None:
    admin.reset()
    admin.fault(kind="status", status=503, path="/nodes$", count=1)
    request(sim, "GET", "/api/v1/nodes")

    records = admin.requests("kubesim-admin")

    [record] = [r for r in records if r["resource"] == "nodes"]
    assert record["method"] == "GET"
    assert record["verb"] == "list"
    assert record["status"] == 503
    assert record["done"] >= record["at"]


def test_reset__faults_counters_and_records_cleared(sim: KubeSim, admin: Admin) -> None:
    admin.fault(kind="status", status=500, path="/nodes$")
    request(sim, "GET", "/api/v1/nodes")

    admin.reset()

    assert admin.call("GET", "faults")["faults"] == []
    assert request(sim, "GET", "/api/v1/nodes").status == 200
    assert admin.counters() == {"list nodes": 1}


def test_admin__non_admin_token__401(sim: KubeSim) -> None:
    response = request(sim, "GET", "/kubesim/faults", token=sim.drainer_token)

    assert response.status == 401


def test_admin__unknown_endpoint__404_status(sim: KubeSim) -> None:
    response = request(sim, "POST", "/kubesim/nothing")

    assert response.status == 404
    assert response.json()["kind"] == "Status"


def test_admin__apply_and_speed(sim: KubeSim, admin: Admin) -> None:
    created = admin.call("POST", "apply", {"objects": [pod("a")]})
    speed = admin.call("POST", "speed", {"speed": 5})

    assert created == {"created": 1}
    assert speed == {"speed": 5.0}
    assert sim.speed == 5.0
    assert sim.get("Pod", "a", "default")
