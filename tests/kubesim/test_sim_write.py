"""Writes: create, update, the three patch types, delete (grace period, preconditions,
finalizers, propagation), namespaces, dryRun and field validation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubesim import KubeSim
from kubesim.api import is_pod_ready
from kubesim.testing import eventually, request
from testbed.workloads import node, pod, workload

NODE_PATH = "/api/v1/nodes/n1"


def _patch(sim: KubeSim, path: str, body: Any, content_type: str) -> Any:
    response = request(sim, "PATCH", path, body, headers={"Content-Type": content_type})
    assert response.status == 200, response.body
    return response.json()


# -- patch -----------------------------------------------------------------------


def test_patch__strategic_merge_cordon__sets_unschedulable(sim: KubeSim, core: Any) -> None:
    sim.apply(node("n1"))

    patched = core.patch_node("n1", {"spec": {"unschedulable": True}})

    assert patched.spec.unschedulable is True
    assert patched.spec.provider_id  # the rest of spec kept


def test_patch__strategic_merge_containers__merged_by_name(sim: KubeSim) -> None:
    sim.apply(workload("Deployment", "web"))
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    body = {
        "spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "envoy:1"}]}}}
    }

    patched = _patch(sim, path, body, "application/strategic-merge-patch+json")

    names = [c["name"] for c in patched["spec"]["template"]["spec"]["containers"]]
    assert names == ["main", "sidecar"]
    assert patched["metadata"]["generation"] == 2


def test_patch__merge_patch_containers__list_replaced(sim: KubeSim) -> None:
    sim.apply(workload("Deployment", "web"))
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    body = {
        "spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "envoy:1"}]}}}
    }

    patched = _patch(sim, path, body, "application/merge-patch+json")

    assert [c["name"] for c in patched["spec"]["template"]["spec"]["containers"]] == ["sidecar"]


def test_patch__merge_patch_null__removes_key(sim: KubeSim) -> None:
    sim.apply(pod("a", labels={"app": "web", "drop": "me"}))

    patched = _patch(
        sim,
        "/api/v1/namespaces/default/pods/a",
        {"metadata": {"labels": {"drop": None}}},
        "application/merge-patch+json",
    )

    assert patched["metadata"]["labels"] == {"app": "web"}


def test_patch__strategic_finalizers__union_then_delete_from_primitive_list(
    sim: KubeSim,
) -> None:
    sim.apply(pod("a", finalizers=["example.com/one"]))
    path = "/api/v1/namespaces/default/pods/a"

    added = _patch(
        sim,
        path,
        {"metadata": {"finalizers": ["example.com/two"]}},
        "application/strategic-merge-patch+json",
    )
    removed = _patch(
        sim,
        path,
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/one"]}},
        "application/strategic-merge-patch+json",
    )

    assert added["metadata"]["finalizers"] == ["example.com/one", "example.com/two"]
    assert removed["metadata"]["finalizers"] == ["example.com/two"]


@pytest.mark.parametrize(
    ("operations", "labels"),
    [
        ([{"op": "add", "path": "/metadata/labels/new", "value": "1"}], {"app": "web", "new": "1"}),
        ([{"op": "remove", "path": "/metadata/labels/app"}], {}),
        ([{"op": "replace", "path": "/metadata/labels/app", "value": "db"}], {"app": "db"}),
        (
            [
                {"op": "test", "path": "/metadata/labels/app", "value": "web"},
                {"op": "add", "path": "/metadata/labels/ok", "value": "yes"},
            ],
            {"app": "web", "ok": "yes"},
        ),
        (
            [{"op": "add", "path": "/metadata/labels/node.kubernetes.io~1exclude", "value": ""}],
            {"app": "web", "node.kubernetes.io/exclude": ""},
        ),
    ],
    ids=["add", "remove", "replace", "test-then-add", "escaped-slash"],
)
def test_patch__json_patch(sim: KubeSim, operations: list[Any], labels: dict[str, str]) -> None:
    sim.apply(pod("a", labels={"app": "web"}))

    patched = _patch(
        sim, "/api/v1/namespaces/default/pods/a", operations, "application/json-patch+json"
    )

    assert patched["metadata"]["labels"] == labels


@pytest.mark.parametrize(
    "operations",
    [
        [{"op": "test", "path": "/metadata/labels/app", "value": "db"}],
        [{"op": "remove", "path": "/metadata/labels/missing"}],
        [{"op": "jump", "path": "/metadata"}],
    ],
    ids=["test-fails", "remove-missing", "unknown-op"],
)
def test_patch__json_patch_not_applicable__422_status(sim: KubeSim, operations: Any) -> None:
    sim.apply(pod("a", labels={"app": "web"}))

    response = request(
        sim,
        "PATCH",
        "/api/v1/namespaces/default/pods/a",
        operations,
        headers={"Content-Type": "application/json-patch+json"},
    )

    assert response.status == 422
    assert response.json()["kind"] == "Status"


def test_patch__stale_resource_version__409(sim: KubeSim, core: Any) -> None:
    sim.apply(pod("a"))
    old_rv = core.read_namespaced_pod("a", "default").metadata.resource_version
    core.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"x": "1"}}})

    with pytest.raises(ApiException) as raised:
        core.patch_namespaced_pod(
            "a", "default", {"metadata": {"labels": {"x": "2"}, "resourceVersion": old_rv}}
        )

    assert raised.value.status == 409


def test_patch__missing_object__404(core: Any) -> None:
    with pytest.raises(ApiException) as raised:
        core.patch_node("ghost", {"spec": {"unschedulable": True}})

    assert raised.value.status == 404
    assert json.loads(raised.value.body or "")["message"] == 'nodes "ghost" not found'


def test_patch__pod_status_subresource__only_status_changes(sim: KubeSim, core: Any) -> None:
    sim.apply(pod("a", labels={"app": "web"}))

    core.patch_namespaced_pod_status(
        "a", "default", {"metadata": {"labels": {"ignored": "1"}}, "status": {"phase": "Failed"}}
    )

    got = sim.get("Pod", "a", "default")
    assert got["status"]["phase"] == "Failed"
    assert got["metadata"]["labels"] == {"app": "web"}


# -- update ----------------------------------------------------------------------


def _replace_deployment(apps: Any, change: Any) -> Any:
    """Read, change, replace; on a 409 (the controllers updated the status meanwhile)
    read again, as a real client does."""
    for _ in range(10):
        current = apps.read_namespaced_deployment("web", "default")
        change(current)
        try:
            return apps.replace_namespaced_deployment("web", "default", current)
        except ApiException as e:
            assert e.status == 409
    raise AssertionError("the update kept conflicting")


def test_update__metadata_only__generation_unchanged(sim: KubeSim, apps: Any) -> None:
    sim.apply(workload("Deployment", "web"))

    updated = _replace_deployment(apps, lambda d: setattr(d.metadata, "labels", {"team": "a"}))

    assert updated.metadata.generation == 1
    assert updated.metadata.labels == {"team": "a"}


def test_update__spec_change__generation_increments(sim: KubeSim, apps: Any) -> None:
    sim.apply(workload("Deployment", "web"))

    updated = _replace_deployment(apps, lambda d: setattr(d.spec, "replicas", 3))

    assert updated.metadata.generation == 2


def test_update__pod__has_no_generation(sim: KubeSim, core: Any) -> None:
    sim.apply(pod("a"))

    patched = core.patch_namespaced_pod("a", "default", {"spec": {"activeDeadlineSeconds": 5}})

    assert patched.metadata.generation is None


def test_update__defaults_omitted_by_client__generation_unchanged(sim: KubeSim) -> None:
    sim.apply(workload("Deployment", "web"))
    body = workload("Deployment", "web")  # without the defaulted fields
    body["metadata"]["labels"] = {"team": "a"}

    response = request(sim, "PUT", "/apis/apps/v1/namespaces/default/deployments/web", body)

    assert response.status == 200, response.body
    assert response.json()["metadata"]["generation"] == 1


def test_update__dry_run_with_stale_version__409(sim: KubeSim, core: Any) -> None:
    sim.apply(node("n1"))
    stale = core.read_node("n1")
    core.patch_node("n1", {"metadata": {"labels": {"x": "1"}}})

    with pytest.raises(ApiException) as raised:
        core.replace_node("n1", stale, dry_run="All")

    assert raised.value.status == 409


def test_update__stale_resource_version__409_conflict(sim: KubeSim, core: Any) -> None:
    sim.apply(node("n1"))
    stale = core.read_node("n1")
    core.patch_node("n1", {"metadata": {"labels": {"x": "1"}}})
    stale.spec.unschedulable = True

    with pytest.raises(ApiException) as raised:
        core.replace_node("n1", stale)

    assert raised.value.status == 409
    assert "the object has been modified" in json.loads(raised.value.body or "")["message"]


def test_update__status_ignored_on_main_resource(sim: KubeSim, core: Any) -> None:
    sim.apply(node("n1"))
    current = core.read_node("n1")
    current.status.node_info.kubelet_version = "v9.9.9"

    updated = core.replace_node("n1", current)

    assert updated.status.node_info.kubelet_version == "v1.32.0"


def test_update__noop__keeps_resource_version(sim: KubeSim, core: Any) -> None:
    sim.apply(node("n1"))
    current = core.read_node("n1")

    updated = core.replace_node("n1", current)

    assert updated.metadata.resource_version == current.metadata.resource_version


# -- create ----------------------------------------------------------------------


def test_create__generate_name__suffix_added(core: Any) -> None:
    created = core.create_namespaced_pod(
        "default",
        k8s.V1Pod(
            metadata=k8s.V1ObjectMeta(generate_name="job-"),
            spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="c", image="busybox")]),
        ),
    )

    assert created.metadata.name.startswith("job-")
    assert len(created.metadata.name) == len("job-") + 5


def test_create__existing_name__409_already_exists(sim: KubeSim, core: Any) -> None:
    sim.apply(node("n1"))

    with pytest.raises(ApiException) as raised:
        core.create_node(k8s.V1Node(metadata=k8s.V1ObjectMeta(name="n1")))

    assert raised.value.status == 409
    status = json.loads(raised.value.body or "")
    assert status["reason"] == "AlreadyExists"
    assert status["message"] == 'nodes "n1" already exists'


def test_create__in_missing_namespace__404(core: Any) -> None:
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod("nowhere", pod("a", namespace="nowhere"))

    assert raised.value.status == 404
    assert json.loads(raised.value.body or "")["message"] == 'namespaces "nowhere" not found'


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"metadata": {"name": "a"}, "spec": {"containers": []}}, "spec.containers"),
        (
            {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c"}]}},
            "spec.containers[0].image",
        ),
        (
            {
                "metadata": {"name": "Bad_Name"},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
            "metadata.name",
        ),
        ({"metadata": {}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, "metadata.name"),
    ],
    ids=["no-containers", "no-image", "bad-name", "no-name"],
)
def test_create__invalid_pod__422_names_field(sim: KubeSim, body: Any, field: str) -> None:
    response = request(sim, "POST", "/api/v1/namespaces/default/pods", body)

    assert response.status == 422, response.body
    status = response.json()
    assert status["reason"] == "Invalid"
    assert field in [cause["field"] for cause in status["details"]["causes"]]


def test_create__strict_field_validation__unknown_nested_field_400(sim: KubeSim) -> None:
    body = workload("Deployment", "web")
    body["spec"]["replicsa"] = 2
    body["spec"]["template"]["spec"]["containers"][0]["imagee"] = "x"

    response = request(
        sim, "POST", "/apis/apps/v1/namespaces/default/deployments?fieldValidation=Strict", body
    )

    assert response.status == 400, response.body
    message = response.json()["message"]
    assert 'unknown field "spec.replicsa"' in message
    assert 'unknown field "spec.template.spec.containers[0].imagee"' in message


def test_create__default_field_validation__unknown_field_dropped_with_warning(
    sim: KubeSim,
) -> None:
    body = workload("Deployment", "web")
    body["spec"]["replicsa"] = 2

    response = request(sim, "POST", "/apis/apps/v1/namespaces/default/deployments", body)

    assert response.status == 201, response.body
    assert "replicsa" not in response.json()["spec"]
    assert 'unknown field \\"spec.replicsa\\"' in response.headers.get("warning", "")


def test_create__wrong_type_for_field__400(sim: KubeSim) -> None:
    body = workload("Deployment", "web")
    body["spec"]["replicas"] = "three"

    response = request(sim, "POST", "/apis/apps/v1/namespaces/default/deployments", body)

    assert response.status == 400, response.body
    assert "replicas" in response.json()["message"]


# -- delete ----------------------------------------------------------------------


def _running_pod(sim: KubeSim, name: str, **kwargs: Any) -> dict[str, Any]:
    sim.apply(node("n1"))
    sim.apply(pod(name, node_name="n1", **kwargs))
    return eventually(lambda: [p for p in sim.list("Pod") if is_pod_ready(p)])[0]


def test_delete__running_pod__terminates_for_its_shutdown_time(sim: KubeSim, core: Any) -> None:
    _running_pod(sim, "a", annotations={"kubesim.io/shutdown-seconds": "4"})  # 0.2 s

    returned = core.delete_namespaced_pod("a", "default")

    assert returned.metadata.deletion_timestamp is not None
    assert returned.metadata.deletion_grace_period_seconds == 30
    assert sim.get("Pod", "a", "default")["metadata"]["deletionTimestamp"]
    eventually(lambda: not sim.list("Pod"), what="pod gone after its shutdown time")


def test_delete__shutdown_longer_than_grace__killed_at_grace(sim: KubeSim, core: Any) -> None:
    _running_pod(sim, "a", annotations={"kubesim.io/shutdown-seconds": "600"}, grace=2)

    core.delete_namespaced_pod("a", "default")

    eventually(lambda: not sim.list("Pod"), timeout=2, what="killed after 2 s / speed")


def test_delete__grace_period_zero__gone_at_once(sim: KubeSim, core: Any) -> None:
    _running_pod(sim, "a", annotations={"kubesim.io/shutdown-seconds": "600"})

    core.delete_namespaced_pod("a", "default", grace_period_seconds=0)

    assert not sim.list("Pod")


def test_delete__shorter_grace_on_terminating_pod__shortens_it(sim: KubeSim, core: Any) -> None:
    _running_pod(sim, "a", annotations={"kubesim.io/shutdown-seconds": "600"}, grace=600)
    core.delete_namespaced_pod("a", "default")

    core.delete_namespaced_pod("a", "default", grace_period_seconds=1)

    eventually(lambda: not sim.list("Pod"), timeout=2)


def test_delete__uid_precondition_mismatch__409(sim: KubeSim, core: Any) -> None:
    sim.apply(pod("a"))

    with pytest.raises(ApiException) as raised:
        core.delete_namespaced_pod(
            "a",
            "default",
            body=k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid="other-uid")),
        )

    assert raised.value.status == 409
    assert sim.get("Pod", "a", "default")


def test_delete__missing__404_status(core: Any) -> None:
    with pytest.raises(ApiException) as raised:
        core.delete_namespaced_pod("ghost", "default")

    assert raised.value.status == 404


def test_delete__finalizer__pod_kept_until_finalizer_removed(sim: KubeSim, core: Any) -> None:
    _running_pod(sim, "a", finalizers=["example.com/hold"])

    core.delete_namespaced_pod("a", "default")
    sim.settle()
    held = eventually(
        lambda: (
            sim.get("Pod", "a", "default")["metadata"]
            .get("annotations", {})
            .get("kubesim.io/stopped")
        ),
        what="containers stopped",
    )
    assert held == "true"
    assert sim.get("Pod", "a", "default")["metadata"]["finalizers"] == ["example.com/hold"]

    core.patch_namespaced_pod("a", "default", {"metadata": {"finalizers": None}})

    eventually(lambda: not sim.list("Pod"))


def test_delete__finalizer_on_unscheduled_pod__removed_when_finalizer_goes(
    sim: KubeSim, core: Any
) -> None:
    sim.apply(pod("a", finalizers=["example.com/hold"]))
    core.delete_namespaced_pod("a", "default")
    assert sim.get("Pod", "a", "default")["metadata"]["deletionTimestamp"]

    core.patch_namespaced_pod("a", "default", [{"op": "remove", "path": "/metadata/finalizers"}])

    eventually(lambda: not sim.list("Pod"))


def test_delete__deployment_background__replicasets_and_pods_collected(
    sim: KubeSim, apps: Any
) -> None:
    sim.apply([node("n1"), workload("Deployment", "web", replicas=2)])
    eventually(lambda: len(sim.list("Pod")) == 2)

    apps.delete_namespaced_deployment("web", "default")

    eventually(lambda: not sim.list("ReplicaSet") and not sim.list("Pod"))


def test_delete__deployment_orphan__replicaset_kept_without_owner(sim: KubeSim, apps: Any) -> None:
    sim.apply([node("n1"), workload("Deployment", "web", replicas=1)])
    eventually(lambda: len(sim.list("Pod")) == 1)

    apps.delete_namespaced_deployment("web", "default", propagation_policy="Orphan")

    sim.settle()
    [replicaset] = sim.list("ReplicaSet")
    assert not replicaset["metadata"].get("ownerReferences")
    assert len(sim.list("Pod")) == 1


def test_delete__deployment_foreground__gone_after_dependents(sim: KubeSim, apps: Any) -> None:
    sim.apply([node("n1"), workload("Deployment", "web", replicas=1)])
    eventually(lambda: len(sim.list("Pod")) == 1)

    apps.delete_namespaced_deployment("web", "default", propagation_policy="Foreground")

    eventually(lambda: not sim.list("Deployment") and not sim.list("Pod"))


def test_delete__namespace__contents_then_namespace_removed(sim: KubeSim, core: Any) -> None:
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name="team")))
    slow = {"kubesim.io/shutdown-seconds": "10"}  # 0.5 s
    sim.apply([node("n1"), workload("Deployment", "web", namespace="team", annotations=slow)])
    eventually(lambda: [p for p in sim.list("Pod", "team") if is_pod_ready(p)])

    core.delete_namespace("team")

    terminating = core.read_namespace("team")
    assert terminating.status.phase == "Terminating"
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod("team", pod("late", namespace="team"))
    assert raised.value.status == 403
    eventually(lambda: "team" not in [n["metadata"]["name"] for n in sim.list("Namespace")])
    assert not sim.list("Pod", "team")


def test_delete__default_namespace__403(core: Any) -> None:
    with pytest.raises(ApiException) as raised:
        core.delete_namespace("default")

    assert raised.value.status == 403


def test_delete__collection_with_label_selector__only_matching(sim: KubeSim, core: Any) -> None:
    sim.apply([pod("a", labels={"app": "web"}), pod("b", labels={"app": "db"})])

    core.delete_collection_namespaced_pod("default", label_selector="app=web")

    assert [p["metadata"]["name"] for p in sim.list("Pod")] == ["b"]


# -- dryRun ------------------------------------------------------------------------


def test_dry_run__create__nothing_stored(sim: KubeSim, core: Any) -> None:
    created = core.create_namespaced_pod("default", pod("a"), dry_run="All")

    assert created.metadata.name == "a"
    assert not sim.list("Pod")


def test_dry_run__patch__nothing_changed(sim: KubeSim, core: Any) -> None:
    sim.apply(node("n1"))

    patched = core.patch_node("n1", {"spec": {"unschedulable": True}}, dry_run="All")

    assert patched.spec.unschedulable is True
    assert not sim.get("Node", "n1").get("spec", {}).get("unschedulable")


def test_dry_run__delete__object_kept(sim: KubeSim, core: Any) -> None:
    sim.apply(pod("a"))

    core.delete_namespaced_pod("a", "default", dry_run="All")

    assert sim.get("Pod", "a", "default")


def test_dry_run__unknown_value__422(sim: KubeSim) -> None:
    response = request(sim, "POST", "/api/v1/namespaces/default/pods?dryRun=Some", pod("a"))

    assert response.status == 422
    assert 'Unsupported value: "Some"' in response.json()["message"]


def test_create__in_terminating_namespace__403_namespace_terminating_cause(
    sim: KubeSim, core: Any
) -> None:
    sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    sim.apply(pod("held", namespace="shop", finalizers=["example.com/hold"]))
    core.delete_namespace("shop")

    response = request(
        sim,
        "POST",
        "/apis/apps/v1/namespaces/shop/deployments",
        workload("Deployment", "web", namespace="shop"),
    )

    assert response.status == 403
    status = response.json()
    assert status["message"] == (
        'deployments.apps "web" is forbidden: unable to create new content in namespace shop '
        "because it is being terminated"
    )
    assert status["details"] == {
        "name": "web",
        "group": "apps",
        "kind": "deployments",
        "causes": [
            {
                "reason": "NamespaceTerminating",
                "message": "namespace shop is being terminated",
                "field": "metadata.namespace",
            }
        ],
    }
