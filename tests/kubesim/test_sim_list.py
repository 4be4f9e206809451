"""List: paging with limit/continue, label and field selectors, resourceVersion."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from kubesim import KubeSim
from kubesim.testing import Admin, request
from testbed.workloads import node, pod


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


# -- resourceVersion, resourceVersionMatch, limit and continue (v1.33 semantics) ---


def _list(sim: KubeSim, query: str, namespace: str = "default") -> Any:
    return request(sim, "GET", f"/api/v1/namespaces/{namespace}/pods?{query}")


def _item_names(response: Any) -> list[str]:
    return [item["metadata"]["name"] for item in response.json()["items"]]


@pytest.mark.parametrize(
    ("query", "field", "cause"),
    [
        (
            "resourceVersionMatch=NotOlderThan",
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "resourceVersionMatch=Exact&resourceVersion=0",
            "resourceVersionMatch",
            'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
        ),
        (
            "resourceVersionMatch=Newest&resourceVersion=5",
            "resourceVersionMatch",
            'Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""',
        ),
        (
            "sendInitialEvents=true",
            "sendInitialEvents",
            "Forbidden: sendInitialEvents is forbidden for list",
        ),
    ],
    ids=["match-without-version", "exact-zero", "unknown-match", "send-initial-events"],
)
def test_list__invalid_list_options__422_on_list_options(
    sim: KubeSim, query: str, field: str, cause: str
) -> None:
    response = _list(sim, query)

    assert response.status == 422
    status = response.json()
    assert status["reason"] == "Invalid"
    assert status["message"] == f'ListOptions.meta.k8s.io "" is invalid: {field}: {cause}'
    assert status["details"]["group"] == "meta.k8s.io"
    assert status["details"]["kind"] == "ListOptions"
    [only] = status["details"]["causes"]
    assert only["field"] == field
    assert only["message"] == cause
    assert only["reason"] in ("FieldValueForbidden", "FieldValueNotSupported")


def test_list__match_with_continue__422_both_causes_listed(sim: KubeSim, core: Any) -> None:
    sim.apply([pod("a"), pod("b")])
    token = core.list_namespaced_pod("default", limit=1).metadata._continue

    response = _list(sim, f"resourceVersionMatch=NotOlderThan&continue={token}")

    assert response.status == 422
    assert [c["message"] for c in response.json()["details"]["causes"]] == [
        "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        "Forbidden: resourceVersionMatch is forbidden when continue is provided",
    ]
    assert response.json()["message"].endswith(
        "is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden "
        "unless resourceVersion is provided, resourceVersionMatch: Forbidden: "
        "resourceVersionMatch is forbidden when continue is provided]"
    )


def test_list__resource_version_zero__limit_ignored(sim: KubeSim) -> None:
    sim.apply([pod(f"p{i}") for i in range(3)])

    response = _list(sim, "resourceVersion=0&limit=1")

    assert response.status == 200
    assert _item_names(response) == ["p0", "p1", "p2"]
    assert "continue" not in response.json()["metadata"]


def _history(sim: KubeSim) -> int:
    """a and b exist at the returned version; then c is created and a deleted."""
    sim.apply([pod("a"), pod("b")])
    version = sim.store.resource_version
    sim.apply(pod("c"))
    sim.api.delete(sim.resource_for(pod("a")), "default", "a", {"gracePeriodSeconds": 0})
    return version


@pytest.mark.parametrize(
    ("query", "names", "at_version"),
    [
        ("resourceVersionMatch=Exact&resourceVersion={rv}", ["a", "b"], True),
        ("resourceVersion={rv}&limit=10", ["a", "b"], True),  # legacy: exact with a limit
        ("resourceVersionMatch=NotOlderThan&resourceVersion={rv}", ["b", "c"], False),
        ("resourceVersion={rv}", ["b", "c"], False),  # legacy: not older than, no limit
        ("resourceVersion=0", ["b", "c"], False),
        ("", ["b", "c"], False),
    ],
    ids=["exact", "legacy-limit", "not-older-than", "legacy-no-limit", "zero", "unset"],
)
def test_list__resource_version_semantics(
    sim: KubeSim, query: str, names: list[str], at_version: bool
) -> None:
    version = _history(sim)
    before = sim.store.resource_version

    response = _list(sim, query.format(rv=version))

    after = sim.store.resource_version  # kubesim's controllers may write meanwhile
    assert response.status == 200, response.body
    assert _item_names(response) == names
    listed = int(response.json()["metadata"]["resourceVersion"])
    assert listed == version if at_version else before <= listed <= after


def test_list__exact_version_compacted__410_list_too_old(sim: KubeSim, admin: Admin) -> None:
    version = _history(sim)
    admin.compact()

    response = _list(sim, f"resourceVersionMatch=Exact&resourceVersion={version}")

    assert response.status == 410
    assert response.json()["reason"] == "Expired"
    assert response.json()["message"] == "The resourceVersion for the provided list is too old."


def test_list__exact_version_from_the_future__500_from_etcd(sim: KubeSim) -> None:
    future = sim.store.resource_version + 100

    response = _list(sim, f"resourceVersionMatch=Exact&resourceVersion={future}")

    assert response.status == 500
    assert "reason" not in response.json()
    assert response.json()["message"] == (
        "etcdserver: mvcc: required revision is a future revision"
    )


def test_list__not_older_than_future_version__504_too_large(sim: KubeSim) -> None:
    sim.too_large_rv_wait = 0.05
    current = sim.store.resource_version

    response = _list(sim, f"resourceVersionMatch=NotOlderThan&resourceVersion={current + 100}")

    assert response.status == 504
    assert response.headers["retry-after"] == "1"
    status = response.json()
    assert status["reason"] == "Timeout"
    assert status["message"] == (
        f"Timeout: Too large resource version: {current + 100}, current: {current}"
    )
    assert status["details"] == {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }


def test_list__continue_compacted__410_with_token_to_finish_from_latest(
    sim: KubeSim, core: Any, admin: Admin
) -> None:
    sim.apply([pod("a"), pod("b"), pod("c")])
    first = core.list_namespaced_pod("default", limit=1)
    sim.apply(pod("d"))
    admin.compact()

    response = _list(sim, f"limit=10&continue={first.metadata._continue}")

    assert response.status == 410
    status = response.json()
    assert status["message"].startswith(
        "The provided continue parameter is too old to display a consistent list result. You "
        "can start a new list without the continue parameter, or use the continue token in "
        "this response to retrieve the remainder of the results."
    )
    rest = core.list_namespaced_pod("default", limit=10, _continue=status["metadata"]["continue"])
    assert _names(rest) == ["b", "c", "d"]
    assert int(rest.metadata.resource_version) == sim.store.resource_version


@pytest.mark.parametrize(("version", "status"), [("0", 200), ("1", 400)])
def test_list__continue_with_resource_version__only_zero_allowed(
    sim: KubeSim, core: Any, version: str, status: int
) -> None:
    sim.apply([pod("a"), pod("b")])
    token = core.list_namespaced_pod("default", limit=1).metadata._continue

    response = _list(sim, f"limit=1&continue={token}&resourceVersion={version}")

    assert response.status == status, response.body
    if status == 400:
        assert response.json()["message"] == (
            "specifying resource version is not allowed when using continue"
        )


def test_list__continue_token__real_encoding(sim: KubeSim, core: Any) -> None:
    import base64

    sim.apply([pod("a"), pod("b")])
    first = core.list_namespaced_pod("default", limit=1)

    token = first.metadata._continue
    decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))

    assert "=" not in token
    assert decoded == {
        "v": "meta.k8s.io/v1",
        "rv": int(first.metadata.resource_version),
        "start": "a\u0000",
    }


def test_list__limit_with_selector__continue_while_any_object_follows(sim: KubeSim) -> None:
    # Like etcd, the page ends with a token when keys follow, matching or not.
    sim.apply([pod("a", labels={"app": "web"}), pod("b")])

    response = _list(sim, "limit=1&labelSelector=app%3Dweb")

    assert _item_names(response) == ["a"]
    assert response.json()["metadata"]["continue"]


def test_list__all_namespaces__ordered_by_storage_key(sim: KubeSim) -> None:
    # "shop-eu/x" sorts before "shop/x" as etcd keys.
    for name in ("shop", "shop-eu"):
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    sim.apply([pod("x", namespace="shop"), pod("x", namespace="shop-eu")])

    response = request(sim, "GET", "/api/v1/pods")

    assert [i["metadata"]["namespace"] for i in response.json()["items"]] == ["shop-eu", "shop"]
