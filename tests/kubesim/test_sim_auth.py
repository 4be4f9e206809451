"""Authentication (static and EKS tokens) and RBAC authorization, as the real server
and the AWS IAM authenticator answer."""

from __future__ import annotations

import base64
import functools
import json
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from drainer.aws.eks import TokenSource
from kubesim import DRAINER_GROUP, KubeSim
from kubesim.testing import Admin, request

EVICTION_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "eks-node-drainer"},
    "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
    ],
}
EVICTION_BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": "eks-node-drainer"},
    "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "eks-node-drainer",
    },
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": DRAINER_GROUP}],
}


ClientFactory = Callable[..., Any]
# The IAM credentials the test KubeSim maps to the drainer (see conftest's EksIdentity).
ACCESS_KEY = "AKIAKUBESIMDRAINER01"
SECRET_KEY = "kubesim/secret/for+tests"
CLUSTER = "kubesim-test"


@functools.cache
def _token_source(cluster: str, access_key: str, secret_key: str) -> TokenSource:
    session = boto3.Session(
        aws_access_key_id=access_key, aws_secret_access_key=secret_key, region_name="us-east-1"
    )
    return TokenSource(session, cluster, "us-east-1")


def _eks_token(
    cluster: str = CLUSTER, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY
) -> str:
    """A fresh token exactly as `aws eks get-token` makes it (botocore's presigner);
    the STS clients are cached, since building one is slow."""
    source = _token_source(cluster, access_key, secret_key)
    source.invalidate()
    return source.token()


def _retoken(token: str, change: Callable[[dict[str, str]], None]) -> str:
    encoded = token.removeprefix("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    parts = urllib.parse.urlsplit(url)
    params = dict(urllib.parse.parse_qsl(parts.query))
    change(params)
    url = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(params)))
    return "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def _status_of(sim: KubeSim, token: str, path: str = "/api/v1/namespaces/default/pods") -> int:
    return request(sim, "GET", path, token=token).status


# -- static tokens ---------------------------------------------------------------


def test_fixture__matches_the_test_identity(sim: KubeSim) -> None:
    [identity] = sim.authenticator.identities
    assert (identity.access_key_id, identity.secret_access_key) == (ACCESS_KEY, SECRET_KEY)
    assert sim.cluster_name == CLUSTER


def test_static_token__admin__allowed_everything(sim: KubeSim) -> None:
    assert _status_of(sim, sim.admin_token) == 200


@pytest.mark.parametrize("token", ["not-a-known-token", "", "k8s-aws-v1.garbage!!"])
def test_unknown_token__401_unauthorized_status(sim: KubeSim, token: str) -> None:
    response = request(sim, "GET", "/api/v1/namespaces/default/pods", token=token)

    assert response.status == 401
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def test_kubeconfig__drainer_context__user_in_drainer_group(
    sim: KubeSim, clients: ClientFactory
) -> None:
    review = k8s.AuthorizationV1Api(clients("drainer")).create_self_subject_access_review(
        k8s.V1SelfSubjectAccessReview(
            spec=k8s.V1SelfSubjectAccessReviewSpec(
                resource_attributes=k8s.V1ResourceAttributes(verb="list", resource="nodes")
            )
        )
    )

    assert review.status is not None
    assert review.status.allowed is False
    assert sim.authenticator.tokens[sim.drainer_token].groups[0] == DRAINER_GROUP


# -- EKS tokens --------------------------------------------------------------------


def test_eks_token__valid__accepted_as_mapped_user(sim: KubeSim) -> None:
    response = request(sim, "GET", "/api/v1/namespaces/default/pods", token=_eks_token())

    assert response.status == 403  # authenticated; no RBAC binding yet
    assert 'User "eks-drainer" cannot list resource "pods"' in response.json()["message"]


def test_eks_token__valid_and_group_bound__allowed(sim: KubeSim, clients: ClientFactory) -> None:
    sim.apply([EVICTION_ROLE, EVICTION_BINDING])

    pods = k8s.CoreV1Api(clients(token=_eks_token())).list_namespaced_pod("default")

    assert pods.items == []


def _tamper_signature(params: dict[str, str]) -> None:
    signature = params["X-Amz-Signature"]
    params["X-Amz-Signature"] = signature[:-1] + ("0" if signature[-1] != "0" else "1")


def _drop_cluster_header(params: dict[str, str]) -> None:
    params["X-Amz-SignedHeaders"] = "host"


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: _eks_token(cluster="another-cluster"), "SignatureDoesNotMatch"),
        (lambda: _retoken(_eks_token(), _tamper_signature), "SignatureDoesNotMatch"),
        (lambda: _eks_token(access_key="AKIAUNKNOWN000000000"), "no access entry"),
        (lambda: _eks_token(secret_key="wrong-secret"), "SignatureDoesNotMatch"),
        (lambda: _retoken(_eks_token(), _drop_cluster_header), "x-k8s-aws-id"),
        (
            lambda: _retoken(_eks_token(), lambda p: p.update(Action="ListUsers")),
            "GetCallerIdentity",
        ),
        (
            lambda: (
                "k8s-aws-v1."
                + base64.urlsafe_b64encode(b"https://evil.example.com/?Action=GetCallerIdentity")
                .decode()
                .rstrip("=")
            ),
            "not an STS endpoint",
        ),
    ],
    ids=[
        "wrong-cluster-id",
        "tampered-signature",
        "unknown-access-key",
        "wrong-secret",
        "cluster-header-unsigned",
        "other-action",
        "other-host",
    ],
)
def test_eks_token__refused__401(
    sim: KubeSim, admin: Admin, make: Callable[[], str], reason: str
) -> None:
    token = make()

    assert _status_of(sim, token) == 401
    failures = admin.call("GET", "auth-failures")["failures"]
    assert reason in failures[-1]


def test_eks_token__older_than_max_age__401(sim: KubeSim, admin: Admin) -> None:
    token = _eks_token()
    sim.authenticator.clock = lambda: time.time() + 901  # default limit: 15 minutes

    assert _status_of(sim, token) == 401
    assert "expired" in admin.call("GET", "auth-failures")["failures"][-1]


@pytest.mark.parametrize(("age", "expected"), [(30, 403), (120, 401)])
def test_eks_token__configurable_max_age(
    sim: KubeSim, admin: Admin, age: float, expected: int
) -> None:
    admin.call("POST", "token-age", {"seconds": 60})
    token = _eks_token()
    sim.authenticator.clock = lambda: time.time() + age

    assert _status_of(sim, token) == expected


def test_eks_identity__added_over_admin_api__accepted(sim: KubeSim, admin: Admin) -> None:
    admin.call(
        "POST",
        "identities",
        {
            "access_key_id": "AKIAOTHERUSER0000000",
            "secret_access_key": "other-secret",
            "username": "ops",
            "groups": ["system:masters"],
        },
    )

    token = _eks_token(access_key="AKIAOTHERUSER0000000", secret_key="other-secret")

    assert _status_of(sim, token) == 200


# -- RBAC --------------------------------------------------------------------------


def test_rbac__no_binding__403_with_real_message(sim: KubeSim, clients: ClientFactory) -> None:
    sim.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "x"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }
    )
    drainer = k8s.CoreV1Api(clients("drainer"))

    with pytest.raises(ApiException) as raised:
        drainer.create_namespaced_pod_eviction(
            "x", "default", k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="x"))
        )

    assert raised.value.status == 403
    status = json.loads(raised.value.body or "")
    assert status["message"] == (
        'pods "x" is forbidden: User "drainer" cannot create resource "pods/eviction" '
        'in API group "" in the namespace "default"'
    )
    assert status["reason"] == "Forbidden"
    assert status["details"] == {"name": "x", "kind": "pods"}


@pytest.mark.parametrize(
    ("method", "path", "message"),
    [
        (
            "GET",
            "/api/v1/nodes",
            'nodes is forbidden: User "drainer" cannot list resource "nodes" in API group "" '
            "at the cluster scope",
        ),
        (
            "GET",
            "/apis/apps/v1/namespaces/kube-system/daemonsets/agent",
            'daemonsets.apps "agent" is forbidden: User "drainer" cannot get resource '
            '"daemonsets" in API group "apps" in the namespace "kube-system"',
        ),
        (
            "GET",
            "/api/v1/pods?watch=1",
            'pods is forbidden: User "drainer" cannot watch resource "pods" in API group "" '
            "at the cluster scope",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/default/pods/x",
            'pods "x" is forbidden: User "drainer" cannot delete resource "pods" in API group '
            '"" in the namespace "default"',
        ),
    ],
)
def test_rbac__verbs_and_scopes__403_messages(
    sim: KubeSim, method: str, path: str, message: str
) -> None:
    response = request(sim, method, path, token=sim.drainer_token)

    assert response.status == 403
    assert response.json()["message"] == message


def test_rbac__cluster_role_binding_for_group__allows_listed_verbs_only(
    sim: KubeSim, clients: ClientFactory
) -> None:
    sim.apply([EVICTION_ROLE, EVICTION_BINDING])
    drainer = k8s.CoreV1Api(clients("drainer"))

    assert drainer.list_pod_for_all_namespaces().items == []
    with pytest.raises(ApiException) as raised:
        drainer.delete_namespaced_pod("x", "default")
    assert raised.value.status == 403


def test_rbac__role_binding__only_in_its_namespace(sim: KubeSim) -> None:
    sim.apply(
        [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "reader", "namespace": "kube-system"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "reader", "namespace": "kube-system"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "reader",
                },
                "subjects": [{"kind": "User", "name": "drainer"}],
            },
        ]
    )

    assert _status_of(sim, sim.drainer_token, "/api/v1/namespaces/kube-system/pods") == 200
    assert _status_of(sim, sim.drainer_token, "/api/v1/namespaces/default/pods") == 403


def test_rbac__resource_names__restrict_to_named_object(sim: KubeSim) -> None:
    role = json.loads(json.dumps(EVICTION_ROLE))
    role["rules"] = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"], "resourceNames": ["n1"]}
    ]
    sim.apply([role, EVICTION_BINDING])

    assert _status_of(sim, sim.drainer_token, "/api/v1/nodes/n1") == 404  # allowed, absent
    assert _status_of(sim, sim.drainer_token, "/api/v1/nodes/n2") == 403


def test_rbac__discovery__allowed_for_any_authenticated_user(sim: KubeSim) -> None:
    for path in ("/api", "/apis", "/api/v1", "/apis/policy/v1", "/version"):
        assert _status_of(sim, sim.drainer_token, path) == 200, path


def test_rbac__binding_removed__access_revoked(sim: KubeSim, core: Any) -> None:
    sim.apply([EVICTION_ROLE, EVICTION_BINDING])
    assert _status_of(sim, sim.drainer_token) == 200

    k8s.RbacAuthorizationV1Api(core.api_client).delete_cluster_role_binding("eks-node-drainer")

    assert _status_of(sim, sim.drainer_token) == 403


def test_self_subject_rules_review__lists_bound_rules(sim: KubeSim, clients: ClientFactory) -> None:
    sim.apply([EVICTION_ROLE, EVICTION_BINDING])

    review = k8s.AuthorizationV1Api(clients("drainer")).create_self_subject_rules_review(
        k8s.V1SelfSubjectRulesReview(spec=k8s.V1SelfSubjectRulesReviewSpec(namespace="default"))
    )

    assert review.status is not None
    resources = {r for rule in review.status.resource_rules for r in rule.resources or []}
    assert {"pods", "pods/eviction", "nodes"} <= resources
    assert review.status.incomplete is False
