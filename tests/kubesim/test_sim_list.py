"""List: paging with limit/continue, label and field selectors, resourceVersion."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from kubesim import KubeSim
from kubesim.testing import Admin, node, pod, request


def _names(result: Any) -> list[str]:
    return [item.metadata.name for item in result.items]


def test_list__limit__pages_with_continue_and_remaining_count(sim: KubeSim, core: Any) -> None:
    sim.apply([pod(f"p{i}") for i in range(5)])

    first = core.list_namespaced_pod("default", limit=2)
    second = core.list_namespaced_pod("default", limit=2, _continue=first.metadata._continue)
    third = core.list_namespaced_pod("default", limit=2, _continue=second.metadata._continue)

    assert _names(first) == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    assert _names(second) == ["p2", "p3"]
    assert second.metadata.remaining_item_count == 1
    assert _names(third) == ["p4"]
    assert third.metadata._continue is None
    assert third.metadata.remaining_item_count is None


def test_list__limit_exactly_all__no_continue(sim: KubeSim, core: Any) -> None:
    sim.apply([pod("a"), pod("b")])

    result = core.list_namespaced_pod("default", limit=2)

    assert _names(result) == ["a", "b"]
    assert result.metadata._continue is None


def test_list__continue__consistent_snapshot_of_first_page(sim: KubeSim, core: Any) -> None:
    sim.apply([pod("a"), pod("c"), pod("e")])
    first = core.list_namespaced_pod("default", limit=1)
    sim.apply(pod("d"))  # created after the first page: not in this list
    core.delete_namespaced_pod("e", "default")  # deleted after: still in this list

    rest = core.list_namespaced_pod("default", limit=10, _continue=first.metadata._continue)

    assert _names(first) + _names(rest) == ["a", "c", "e"]
    assert rest.metadata.resource_version == first.metadata.resource_version


def test_list__continue_after_compaction__410_expired(
    sim: KubeSim, core: Any, admin: Admin
) -> None:
    sim.apply([pod("a"), pod("b")])
    first = core.list_namespaced_pod("default", limit=1)
    sim.apply(pod("c"))
    admin.compact()

    with pytest.raises(ApiException) as raised:
        core.list_namespaced_pod("default", limit=1, _continue=first.metadata._continue)

    assert raised.value.status == 410
    assert json.loads(raised.value.body or "")["reason"] == "Expired"


def test_list__garbage_continue_token__400(core: Any) -> None:
    with pytest.raises(ApiException) as raised:
        core.list_namespaced_pod("default", _continue="not-a-token")

    assert raised.value.status == 400


def test_list__selector_with_limit__no_remaining_count(sim: KubeSim, core: Any) -> None:
    # The real server counts the remaining items only for lists without selectors.
    sim.apply([pod(f"p{i}", labels={"app": "web"}) for i in range(3)])

    result = core.list_namespaced_pod("default", limit=1, label_selector="app=web")

    assert _names(result) == ["p0"]
    assert result.metadata._continue
    assert result.metadata.remaining_item_count is None


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["web-a", "web-b"]),
        ("app==web", ["web-a", "web-b"]),
        ("app!=web", ["db", "plain"]),
        ("app in (web,db)", ["db", "web-a", "web-b"]),
        ("app notin (web)", ["db", "plain"]),
        ("tier", ["web-a"]),
        ("!tier", ["db", "plain", "web-b"]),
        ("app=web,tier=front", ["web-a"]),
        ("app in (web), !tier", ["web-b"]),
        ("", ["db", "plain", "web-a", "web-b"]),
    ],
)
def test_list__label_selector(sim: KubeSim, core: Any, selector: str, expected: list[str]) -> None:
    sim.apply(
        [
            pod("web-a", labels={"app": "web", "tier": "front"}),
            pod("web-b", labels={"app": "web"}),
            pod("db", labels={"app": "db"}),
            pod("plain"),
        ]
    )

    assert _names(core.list_namespaced_pod("default", label_selector=selector)) == expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("spec.nodeName=n1", ["on-n1"]),
        ("spec.nodeName==n1", ["on-n1"]),
        ("spec.nodeName!=n1", ["on-n2"]),
        ("metadata.name=on-n2", ["on-n2"]),
        ("metadata.namespace=default", ["on-n1", "on-n2"]),
        ("spec.nodeName=n1,metadata.name=on-n2", []),
        ("status.phase=Running", ["on-n1", "on-n2"]),
    ],
)
def test_list__field_selector(sim: KubeSim, core: Any, selector: str, expected: list[str]) -> None:
    sim.apply([node("n1"), node("n2"), pod("on-n1", node_name="n1"), pod("on-n2", node_name="n2")])
    from kubesim.testing import eventually

    eventually(lambda: all(p["status"]["phase"] == "Running" for p in sim.list("Pod")))

    assert _names(core.list_namespaced_pod("default", field_selector=selector)) == expected


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("fieldSelector=spec.foo%3Dbar", "field label not supported: spec.foo"),
        ("fieldSelector=spec.host%3Dn1%2Cspec.x%3D1", "field label not supported: spec.x"),
        ("fieldSelector=spec.nodeName", "invalid selector"),
        ("labelSelector=app%20in%20web", "unable to parse requirement"),
        ("labelSelector=-bad-%3Dx", "invalid label key"),
        ("labelSelector=app%3D%25%25", "invalid label value"),
        ("limit=abc", "limit"),
    ],
)
def test_list__bad_selector__400_status(sim: KubeSim, query: str, message: str) -> None:
    response = request(sim, "GET", f"/api/v1/namespaces/default/pods?{query}")

    assert response.status == 400
    status = response.json()
    assert status["kind"] == "Status"
    assert status["reason"] == "BadRequest"
    assert message in status["message"]


def test_list__field_selector_on_kind_without_own_labels__400_known_fields(
    sim: KubeSim,
) -> None:
    response = request(sim, "GET", "/apis/apps/v1/deployments?fieldSelector=spec.replicas%3D1")

    assert response.status == 400
    assert response.json()["message"] == (
        '"spec.replicas" is not a known field selector: only "metadata.name", "metadata.namespace"'
    )


def test_list__all_namespaces__items_from_each(sim: KubeSim, core: Any) -> None:
    sim.apply([pod("a"), pod("b", namespace="kube-system")])

    result = core.list_pod_for_all_namespaces()

    assert [(p.metadata.namespace, p.metadata.name) for p in result.items] == [
        ("default", "a"),
        ("kube-system", "b"),
    ]


def test_list__resource_version__grows_with_writes(sim: KubeSim, core: Any) -> None:
    before = int(core.list_namespaced_pod("default").metadata.resource_version)
    sim.apply(pod("a"))

    after = int(core.list_namespaced_pod("default").metadata.resource_version)

    assert after > before


def test_list__cluster_scoped_nodes__field_selector_unschedulable(sim: KubeSim, core: Any) -> None:
    sim.apply([node("n1"), node("n2", unschedulable=True)])

    result = core.list_node(field_selector="spec.unschedulable=true")

    assert _names(result) == ["n2"]


def test_get__object_fields__schema_valid_in_python_client(sim: KubeSim, core: Any) -> None:
    sim.apply([node("n1"), pod("a", node_name="n1")])

    got = core.read_namespaced_pod("a", "default")
    nodes = core.list_node()

    assert got.metadata.uid
    assert got.spec.node_name == "n1"
    assert nodes.items[0].status.node_info.kubelet_version == "v1.32.0"
