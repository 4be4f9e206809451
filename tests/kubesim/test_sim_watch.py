"""Watch: event types, resume from a resourceVersion, 410 Gone, selectors moving objects
in and out, bookmarks, through the official Python client's watch."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from kubesim import KubeSim
from kubesim.testing import Admin, eventually, request
from testbed.workloads import node, pod


def _stream(list_function: Any, *args: Any, **kwargs: Any) -> Any:
    """The official client's watch (its module has no type hints)."""
    return watch.Watch().stream(list_function, *args, **kwargs)  # type: ignore[no-untyped-call]


def _collect(
    stream_factory: Callable[[], Any], until: Callable[[list[tuple[str, str]]], bool]
) -> list[tuple[str, str]]:
    """Run a watch in a thread; (type, name) pairs until `until` holds (or 5 s)."""
    events: list[tuple[str, str]] = []
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            for event in stream_factory():
                obj = event["object"]
                name = obj.metadata.name if hasattr(obj, "metadata") else obj["metadata"]["name"]
                events.append((event["type"], name))
                if until(events):
                    break
        except BaseException as e:  # re-raised in the test thread
            failure.append(e)
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    done.wait(5)
    if failure:
        raise failure[0]
    return events


def _squash(events: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [e for i, e in enumerate(events) if i == 0 or events[i - 1] != e]


def test_watch__create_update_delete__added_modified_deleted(sim: KubeSim, core: Any) -> None:
    rv = core.list_namespaced_pod("default").metadata.resource_version
    sim.apply(pod("a"))
    core.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"x": "1"}}})
    core.delete_namespaced_pod("a", "default")  # unbound: gone at once

    events = _collect(
        lambda: _stream(
            core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=5
        ),
        lambda seen: seen[-1][0] == "DELETED",
    )

    # The scheduler may also mark the pod Unschedulable (no node): another MODIFIED.
    assert _squash(events) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_watch__without_resource_version__starts_with_added_for_existing(
    sim: KubeSim, core: Any
) -> None:
    sim.apply([pod("a"), pod("b")])

    events = _collect(
        lambda: _stream(core.list_namespaced_pod, "default", timeout_seconds=5),
        lambda seen: len(seen) == 2,
    )

    assert sorted(events) == [("ADDED", "a"), ("ADDED", "b")]


def test_watch__resume_from_resource_version__only_later_changes(sim: KubeSim, core: Any) -> None:
    sim.apply(pod("before"))
    sim.settle()
    rv = core.list_namespaced_pod("default").metadata.resource_version
    sim.apply(pod("after"))

    events = _collect(
        lambda: _stream(
            core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=5
        ),
        lambda seen: len(seen) >= 1,
    )

    assert events == [("ADDED", "after")]


def test_watch__resource_version_compacted__410_gone(sim: KubeSim, core: Any, admin: Admin) -> None:
    rv = core.list_namespaced_pod("default").metadata.resource_version
    sim.apply(pod("a"))
    admin.compact()

    with pytest.raises(ApiException) as raised:
        _collect(
            lambda: _stream(
                core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=5
            ),
            lambda seen: True,
        )

    assert raised.value.status == 410


def test_watch__compacted_raw_stream__error_event_with_expired_status(
    sim: KubeSim, admin: Admin
) -> None:
    sim.apply(pod("a"))
    old = sim.store.resource_version - 1
    admin.compact()

    response = request(
        sim, "GET", f"/api/v1/namespaces/default/pods?watch=true&resourceVersion={old}"
    )

    assert response.status == 200
    [line] = response.body.decode().splitlines()
    event = json.loads(line)
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"


def test_watch__label_selector__objects_moving_in_and_out(sim: KubeSim, core: Any) -> None:
    sim.apply([pod("a", labels={"app": "web"}), pod("b", labels={"app": "db"})])
    sim.settle()
    rv = core.list_namespaced_pod("default").metadata.resource_version
    core.patch_namespaced_pod("b", "default", {"metadata": {"labels": {"app": "web"}}})
    core.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"app": "other"}}})
    core.patch_namespaced_pod("b", "default", {"metadata": {"labels": {"extra": "1"}}})

    events = _collect(
        lambda: _stream(
            core.list_namespaced_pod,
            "default",
            label_selector="app=web",
            resource_version=rv,
            timeout_seconds=5,
        ),
        lambda seen: len(seen) == 3,
    )

    assert events == [("ADDED", "b"), ("DELETED", "a"), ("MODIFIED", "b")]


def test_watch__object_leaves_selector__deleted_event_carries_previous_content(
    sim: KubeSim,
) -> None:
    sim.apply(pod("a", labels={"app": "web"}))
    sim.settle()
    rv = sim.store.resource_version
    request(
        sim,
        "PATCH",
        "/api/v1/namespaces/default/pods/a",
        {"metadata": {"labels": {"app": "db"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )

    response = request(
        sim,
        "GET",
        f"/api/v1/namespaces/default/pods?watch=1&labelSelector=app%3Dweb"
        f"&resourceVersion={rv}&timeoutSeconds=1",
    )

    [event] = [json.loads(line) for line in response.body.decode().splitlines()]
    assert event["type"] == "DELETED"
    assert event["object"]["metadata"]["labels"] == {"app": "web"}
    assert int(event["object"]["metadata"]["resourceVersion"]) > rv


def test_watch__field_selector_node_name__pod_bound_later_is_added(sim: KubeSim, core: Any) -> None:
    rv = core.list_pod_for_all_namespaces().metadata.resource_version
    sim.apply(pod("a"))  # unscheduled: no node matches yet
    sim.apply(node("n1"))  # the scheduler binds a to n1

    events = _collect(
        lambda: _stream(
            core.list_pod_for_all_namespaces,
            field_selector="spec.nodeName=n1",
            resource_version=rv,
            timeout_seconds=5,
        ),
        lambda seen: len(seen) >= 1,
    )

    assert events[0] == ("ADDED", "a")


def test_watch__named_object__only_its_events(sim: KubeSim, core: Any) -> None:
    rv = core.list_namespaced_pod("default").metadata.resource_version
    sim.apply([pod("a"), pod("b")])
    core.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"x": "1"}}})

    events = _collect(
        lambda: _stream(
            core.list_namespaced_pod,
            "default",
            field_selector="metadata.name=a",
            resource_version=rv,
            timeout_seconds=5,
        ),
        lambda seen: ("MODIFIED", "a") in seen,
    )

    assert _squash(events) == [("ADDED", "a"), ("MODIFIED", "a")]


def test_watch__other_namespace__not_seen(sim: KubeSim, core: Any) -> None:
    rv = core.list_namespaced_pod("default").metadata.resource_version
    sim.apply([pod("elsewhere", namespace="kube-system"), pod("here")])

    events = _collect(
        lambda: _stream(
            core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=5
        ),
        lambda seen: len(seen) >= 1,
    )

    assert events == [("ADDED", "here")]


def test_watch__bookmarks_requested__bookmark_carries_resource_version(sim: KubeSim) -> None:
    sim.bookmark_interval = 0.2
    sim.apply(pod("a"))
    rv = sim.store.resource_version

    response = request(
        sim,
        "GET",
        f"/api/v1/namespaces/default/pods?watch=1&allowWatchBookmarks=true"
        f"&resourceVersion={rv}&timeoutSeconds=1",
    )

    events = [json.loads(line) for line in response.body.decode().splitlines()]
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks
    assert int(bookmarks[0]["object"]["metadata"]["resourceVersion"]) >= rv
    assert bookmarks[0]["object"]["kind"] == "Pod"


def test_watch__timeout_seconds__stream_ends(sim: KubeSim) -> None:
    response = request(
        sim, "GET", "/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=1", timeout=5
    )

    assert response.status == 200
    assert response.body == b""


def test_watch__future_resource_version__waits_for_it(sim: KubeSim, core: Any) -> None:
    rv = int(core.list_namespaced_pod("default").metadata.resource_version)
    sim.apply(pod("a"))
    sim.apply(pod("b"))

    events = _collect(
        lambda: _stream(
            core.list_namespaced_pod, "default", resource_version=str(rv + 1), timeout_seconds=5
        ),
        lambda seen: len(seen) >= 1,
    )

    assert events[0] == ("ADDED", "b")


def test_watch__modified_pod_objects__deserialize_in_python_client(sim: KubeSim, core: Any) -> None:
    sim.apply(node("n1"))
    rv = core.list_namespaced_pod("default").metadata.resource_version
    sim.apply(pod("a"))

    events = _collect(
        lambda: _stream(
            core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=5
        ),
        lambda seen: len(seen) >= 3,
    )

    assert events[0] == ("ADDED", "a")
    eventually(lambda: sim.get("Pod", "a", "default")["status"]["phase"] == "Running")


@pytest.mark.parametrize(
    ("query", "causes"),
    [
        (
            "resourceVersionMatch=NotOlderThan&resourceVersion=1",
            [
                "Forbidden: resourceVersionMatch is forbidden for watch unless "
                "sendInitialEvents is provided"
            ],
        ),
        (
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            [
                "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList "
                "feature gate is enabled"
            ],
        ),
    ],
    ids=["match-without-initial-events", "initial-events-feature-off"],
)
def test_watch__invalid_list_options__422(sim: KubeSim, query: str, causes: list[str]) -> None:
    response = request(sim, "GET", f"/api/v1/namespaces/default/pods?watch=true&{query}")

    assert response.status == 422
    assert [c["message"] for c in response.json()["details"]["causes"]] == causes
