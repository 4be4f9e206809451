"""Every place drainer/k8s/status.py reads the text of an API server's answer, pinned
to the real kube-apiserver's own answer.

status.py judges a failure by its HTTP status, Status reason and details.causes
first; it reads the message only where Kubernetes says nothing else:

- a pod under several budgets: a 500 (a Failure Status the eviction handler returns)
  whose only sign is its message ("more than one PodDisruptionBudget");
- a 403 Forbidden: the authorizer's denial ('User "u" cannot <verb> resource ...'),
  told from admission's (which shares the reason) by its words;
- admission's own words ("ValidatingAdmissionPolicy 'p' with binding 'b' denied
  request", 'admission webhook "w" denied the request'), whatever code the policy or
  webhook chose (a webhook's 404 or 409 is not a pod gone or a conflict, its 401 not
  a token refused, its 429 not throttling, a policy's 422 or 413 not a bad request);
- the names a cause's message alone carries: the budget of a 429 DisruptionBudget
  cause, the namespace of a NamespaceTerminating one.

Each case is provoked on the real control plane (tests/e2e/conftest.py's `real`
backend), its raw answer (status, reason, details, message) translated by
status.translate as the drainer's client translates it; where kubesim produces the
answer itself it is provoked there too and must say the same words (names taken
out). Admission webhooks and CEL policies are not emulated by kubesim: their cases
run on the real server alone (kubesim's scenarios inject the real policy's answer,
conftest.deny_evictions, whose text is compared here).
"""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from drainer import errors
from drainer.k8s.status import translate
from kubesim import KubeSim, certs
from kubesim.faults import Fault
from testbed import World
from testbed import workloads as w
from testbed.cluster import ApiClient, Cluster
from testbed.world import rbac_manifests, wait_until

from .conftest import CLUSTER_NAME, POLICY, POLICY_MESSAGE, SPEED, deny_evictions
from .test_conformance import Scene

Obj = dict[str, Any]
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
EVICTIONS: Obj = {
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "operations": ["CREATE"],
    "resources": ["pods/eviction"],
}
BUDGET_STATUS: Obj = {
    "apiGroups": ["policy"],
    "apiVersions": ["v1"],
    "operations": ["UPDATE"],
    "resources": ["poddisruptionbudgets/status"],
}


@dataclass(frozen=True)
class Raw:
    """An answer as the drainer's client receives it."""

    status: int
    headers: dict[str, str]
    body: Obj

    def translated(self, verb: str, resource: str) -> errors.KubeError:
        return translate(
            self.status,
            json.dumps(self.body).encode(),
            self.headers,
            verb=verb,
            resource=resource,
            what="the request",
        )

    def words(self, *names: str) -> Obj:
        """What kubesim must say the same: status, reason, code, message, details, with
        the per-run names taken out."""
        text = json.dumps(
            {
                "status": self.status,
                "reason": self.body.get("reason"),
                "code": self.body.get("code"),
                "message": self.body.get("message"),
                "details": self.body.get("details"),
            }
        )
        for i, name in enumerate(names):
            text = text.replace(name, f"<name{i}>")
        words: Obj = json.loads(text)
        return words


def _scene(cluster: Cluster) -> Scene:
    suffix = secrets.token_hex(3)
    namespace, node = f"texts-{suffix}", f"texts-node-{suffix}"
    cluster.apply(
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            w.node(node, f"i-{suffix}", "us-east-1a", pods=110),
        ]
    )
    return Scene(cluster, namespace, node)


def _request(api: ApiClient, method: str, path: str, body: Any = None, **query: Any) -> Raw:
    status, headers, answer = api.request(method, path, body=body, query=query or None)
    return Raw(status, headers, answer if isinstance(answer, dict) else {})


def _eviction(s: Scene, name: str, api: ApiClient | None = None, **query: Any) -> Raw:
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": s.namespace},
    }
    return _request(api or s.api, "POST", s.pod_path(name, "eviction"), body, **query)


def _as_drainer(s: Scene) -> ApiClient:
    """The drainer's identity (group eks-node-drainer) with no role bound: k8s-rbac/ is
    applied only by World, and every test removes what it applied."""
    c = s.cluster
    return ApiClient(c.url, c.ca_pem, c.drainer_token)


# -- the cases, each on one backend ----------------------------------------------


def two_budgets(s: Scene) -> Raw:
    s.run_pod("p", labels={"app": "x"})
    s.cluster.apply(
        [
            w.budget("b1", {"app": "x"}, namespace=s.namespace, min_available=0),
            w.budget("b2", {"app": "x"}, namespace=s.namespace, min_available=0),
        ]
    )
    s.settled_budget("b1")
    s.settled_budget("b2")
    return _eviction(s, "p")


def budget_allows_zero(s: Scene) -> Raw:
    s.run_pod("p", labels={"app": "x"})
    s.cluster.apply(w.budget("web-budget", {"app": "x"}, namespace=s.namespace, min_available=1))
    s.settled_budget("web-budget", allowed=0)
    return _eviction(s, "p")


def budget_just_created(s: Scene) -> Raw:
    """An eviction under a budget the disruption controller has not processed yet
    (observedGeneration behind its generation): 429, "still being processed"."""
    s.run_pod("p", labels={"app": "x"})
    with _statuses_held(s):
        s.cluster.apply(w.budget("fresh", {"app": "x"}, namespace=s.namespace, min_available=1))
        return _eviction(s, "p")


@contextmanager
def _statuses_held(s: Scene) -> Iterator[None]:
    """No budget's status written meanwhile: kubesim's controllers paused; on the real
    server (whose controller takes only milliseconds) a policy refuses the disruption
    controller's status updates in the scene's namespace."""
    if s.cluster.backend == "kubesim":
        with s.cluster.kubesim.simulator.paused():
            yield
        return
    s.cluster.apply(w.budget("probe", {"app": "none"}, namespace=s.namespace, min_available=0))
    probe = f"/apis/policy/v1/namespaces/{s.namespace}/poddisruptionbudgets/probe/status"

    def refused() -> bool:
        patch = {"status": {"disruptionsAllowed": 0}}
        status, _, body = s.api.request(
            "PATCH", probe, body=patch, content_type="application/merge-patch+json"
        )
        return status >= 400 and "ValidatingAdmissionPolicy" in str((body or {}).get("message"))

    with _policy(s, "Forbidden", BUDGET_STATUS, refused):
        yield


def terminating_namespace(s: Scene) -> Raw:
    s.run_pod("p", finalizers=["example.com/hold"])  # keeps the namespace terminating
    s.api.call("DELETE", f"/api/v1/namespaces/{s.namespace}")
    wait_until(
        lambda: s.api.get("Namespace", s.namespace).get("status", {}).get("phase") == "Terminating",
        15,
    )
    try:
        return _eviction(s, "p")
    finally:
        s.api.patch("Pod", "p", {"metadata": {"finalizers": None}}, s.namespace)


def rbac_eviction(s: Scene) -> Raw:
    s.run_pod("p")
    return _eviction(s, "p", _as_drainer(s))


def rbac_node_patch(s: Scene) -> Raw:
    patch = {"spec": {"unschedulable": True}}
    api = _as_drainer(s)
    status, headers, answer = api.request(
        "PATCH", f"/api/v1/nodes/{s.node}", body=patch, content_type="application/merge-patch+json"
    )
    return Raw(status, headers, answer if isinstance(answer, dict) else {})


def rbac_list_pods(s: Scene) -> Raw:
    return _request(_as_drainer(s), "GET", "/api/v1/pods")


def rbac_non_resource(s: Scene) -> Raw:
    return _request(_as_drainer(s), "GET", "/metrics")


@dataclass(frozen=True)
class Case:
    provoke: Callable[[Scene], Raw]
    verb: str
    resource: str
    expect: Callable[[errors.KubeError, Scene], None]
    status: int


def _multiple_budgets(error: errors.KubeError, s: Scene) -> None:
    assert type(error) is errors.MultipleBudgets


def _blocked_by_web_budget(error: errors.KubeError, s: Scene) -> None:
    assert type(error) is errors.EvictionBlocked
    assert error.budget == "web-budget"


def _fresh_budget(error: errors.KubeError, s: Scene) -> None:
    assert type(error) is errors.EvictionBlocked
    assert (error.budget, error.retry_after) == ("fresh", 10.0)


def _going_with_namespace(error: errors.KubeError, s: Scene) -> None:
    assert type(error) is errors.NamespaceTerminating
    assert error.namespace == s.namespace
    assert "RBAC" not in str(error)


def _rbac(verb: str, resource: str) -> Callable[[errors.KubeError, Scene], None]:
    def expect(error: errors.KubeError, s: Scene) -> None:
        assert type(error) is errors.KubeForbidden
        assert (error.verb, error.resource) == (verb, resource)
        assert f"RBAC denied '{verb}' on '{resource}'" in str(error)
        assert "k8s-rbac/" in str(error)

    return expect


SHARED = {
    "pod under two budgets: 500, only the message says it": Case(
        two_budgets, "create", "pods/eviction", _multiple_budgets, 500
    ),
    "budget allows none: 429, the budget named only in the cause's message": Case(
        budget_allows_zero, "create", "pods/eviction", _blocked_by_web_budget, 429
    ),
    "budget not yet processed: 429, the budget named only in the cause's message": Case(
        budget_just_created, "create", "pods/eviction", _fresh_budget, 429
    ),
    "namespace terminating: 403, its name only in the cause's message": Case(
        terminating_namespace, "create", "pods/eviction", _going_with_namespace, 403
    ),
    "RBAC denies the eviction: 403 Forbidden in the authorizer's words": Case(
        rbac_eviction, "create", "pods/eviction", _rbac("create", "pods/eviction"), 403
    ),
    "RBAC denies the cordon (cluster scope)": Case(
        rbac_node_patch, "patch", "nodes", _rbac("patch", "nodes"), 403
    ),
    "RBAC denies a read": Case(rbac_list_pods, "list", "pods", _rbac("list", "pods"), 403),
    "RBAC denies a non-resource path": Case(
        rbac_non_resource, "get", "/metrics", _rbac("get", "/metrics"), 403
    ),
}


@pytest.mark.parametrize("backend", ["real"])
@pytest.mark.parametrize("name", list(SHARED))
def test_real_answer__translated__kubesim_says_the_same_words(name: str, cluster: Cluster) -> None:
    case = SHARED[name]
    real_scene = _scene(cluster)
    real = case.provoke(real_scene)
    print(f"{name}: real {real}")

    assert real.status == case.status
    case.expect(real.translated(case.verb, case.resource), real_scene)

    with KubeSim(speed=SPEED, cluster_name=CLUSTER_NAME) as sim:
        emulated_scene = _scene(Cluster.of_kubesim(sim))
        emulated = case.provoke(emulated_scene)
    case.expect(emulated.translated(case.verb, case.resource), emulated_scene)
    assert emulated.words(emulated_scene.namespace, emulated_scene.node) == real.words(
        real_scene.namespace, real_scene.node
    ), f"kubesim's words differ from the real apiserver's: {name}"


@pytest.mark.parametrize("backend", ["real"])
def test_rbac_denial__kubesims_injected_403_has_the_real_words(cluster: Cluster) -> None:
    """kubesim's scenarios inject an RBAC denial as a 403 fault on a request its
    authorizer allows: the drainer must read it as it reads the real authorizer's."""
    real_scene = _scene(cluster)
    real = rbac_eviction(real_scene)
    with KubeSim(speed=SPEED, cluster_name=CLUSTER_NAME) as sim:
        s = _scene(Cluster.of_kubesim(sim))
        s.cluster.apply(rbac_manifests())  # the eviction allowed, then refused by the fault
        s.run_pod("p")
        sim.faults.add(Fault(kind="status", method="POST", path="/pods/p/eviction$", status=403))
        emulated = _eviction(s, "p", _as_drainer(s))

    assert emulated.words(s.namespace, s.node) == real.words(real_scene.namespace, real_scene.node)
    _rbac("create", "pods/eviction")(emulated.translated("create", "pods/eviction"), s)


# -- admission: a ValidatingAdmissionPolicy and a webhook, on the real server --------


def _in_force(s: Scene, refused: Callable[[Raw], bool]) -> None:
    """Wait until a dry-run eviction of "p" meets the new admission rule (the
    apiserver takes a moment to load it)."""
    wait_until(lambda: refused(_eviction(s, "p", dryRun="All")), 20, what="admission in force")


@contextmanager
def _policy(
    s: Scene,
    reason: str | None,
    rule: Obj | None = None,
    in_force: Callable[[], bool] | None = None,
) -> Iterator[str]:
    """A ValidatingAdmissionPolicy refusing every request `rule` matches (every
    eviction) in the scene's namespace, with the validation's `reason` (None: the
    API's default, Invalid), once `in_force()` says it is; its name."""
    name = f"texts-{s.namespace}"
    validation: Obj = {"expression": "false", "message": "pods here stay"}
    if reason is not None:
        validation["reason"] = reason
    only_here = {"matchLabels": {"kubernetes.io/metadata.name": s.namespace}}
    s.api.call(
        "POST",
        f"{ADMISSION}/validatingadmissionpolicies",
        body={
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "namespaceSelector": only_here,
                    "resourceRules": [rule or EVICTIONS],
                },
                "validations": [validation],
            },
        },
    )
    try:
        s.api.call(
            "POST",
            f"{ADMISSION}/validatingadmissionpolicybindings",
            body={
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name},
                "spec": {"policyName": name, "validationActions": ["Deny"]},
            },
        )
        try:
            if in_force is None:
                _in_force(
                    s, lambda raw: "ValidatingAdmissionPolicy" in str(raw.body.get("message"))
                )
            else:
                wait_until(in_force, 20, what="the policy in force")
            yield name
        finally:
            s.api.call("DELETE", f"{ADMISSION}/validatingadmissionpolicybindings/{name}")
    finally:
        s.api.call("DELETE", f"{ADMISSION}/validatingadmissionpolicies/{name}")


@pytest.mark.parametrize("backend", ["real"])
@pytest.mark.parametrize(
    ("reason", "code"),
    [
        pytest.param("Forbidden", 403, id="Forbidden-403"),
        pytest.param(None, 422, id="default-Invalid-422"),
        pytest.param("RequestEntityTooLarge", 413, id="RequestEntityTooLarge-413"),
    ],
)
def test_admission_policy_refusal__admission_whatever_its_code(
    reason: str | None, code: int, cluster: Cluster
) -> None:
    s = _scene(cluster)
    s.run_pod("p")
    with _policy(s, reason) as name:
        real = _eviction(s, "p")
    print(f"policy {reason}: real {real}")

    assert real.status == code
    assert f"ValidatingAdmissionPolicy '{name}' with binding '{name}' denied request" in str(
        real.body.get("message")
    )
    error = real.translated("create", "pods/eviction")
    assert type(error) is errors.AdmissionDenied
    assert "pods here stay" in str(error)
    assert "token" not in str(error) and "RBAC" not in str(error)


@pytest.mark.parametrize("backend", ["real"])
def test_admission_policy_refusal__kubesims_injected_answer_has_the_real_words(
    cluster: Cluster,
) -> None:
    """kubesim has no CEL: its scenarios inject the answer the real policy gives
    (conftest.deny_evictions). The same policy, on both, in the same words."""
    answers: dict[str, tuple[Raw, Scene]] = {}
    with KubeSim(speed=SPEED, cluster_name=CLUSTER_NAME) as sim:
        for backend in (cluster, Cluster.of_kubesim(sim)):
            s = _scene(backend)
            s.run_pod("p")
            lift = deny_evictions(
                cast(World, SimpleNamespace(cluster=backend)), {f"{s.namespace}/p"}
            )
            try:
                answers[backend.backend] = (_eviction(s, "p"), s)
            finally:
                lift()
    (real, real_scene), (emulated, emulated_scene) = answers["real"], answers["kubesim"]
    print(f"real {real}\nkubesim {emulated}")

    def words(raw: Raw, s: Scene) -> Obj:
        said = raw.words(s.namespace)
        return {k: said[k] for k in ("status", "reason", "code", "message")}

    assert words(emulated, emulated_scene) == words(real, real_scene)
    assert POLICY_MESSAGE in str(real.body.get("message"))
    for raw in (real, emulated):
        assert type(raw.translated("create", "pods/eviction")) is errors.AdmissionDenied
    assert POLICY  # the policy both name


WEBHOOK = "deny.texts.example.com"


@dataclass
class Webhook:
    """An admission webhook on 127.0.0.1 (TLS, its own CA) that refuses every request
    with `status` (the AdmissionReview response's status: code, reason, message)."""

    url: str
    ca_pem: bytes
    status: Obj


@contextmanager
def _webhook_server(tmp: Path) -> Iterator[Webhook]:
    tls = certs.generate("texts-webhook-ca")
    _, cert, key = tls.write(tmp)
    hook = Webhook("", tls.ca_pem, {})

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            answer = json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {
                        "uid": review["request"]["uid"],
                        "allowed": False,
                        "status": hook.status,
                    },
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        hook.url = f"https://127.0.0.1:{server.server_address[1]}/validate"
        yield hook
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def _webhook(s: Scene, hook: Webhook) -> Iterator[None]:
    """The webhook, called for every eviction in the scene's namespace."""
    name = f"texts-{s.namespace}"
    s.api.call(
        "POST",
        f"{ADMISSION}/validatingwebhookconfigurations",
        body={
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": WEBHOOK,
                    "clientConfig": {
                        "url": hook.url,
                        "caBundle": base64.b64encode(hook.ca_pem).decode(),
                    },
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods/eviction"],
                            "scope": "Namespaced",
                        }
                    ],
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": s.namespace}
                    },
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 5,
                }
            ],
        },
    )
    try:
        _in_force(s, lambda raw: "admission webhook" in str(raw.body.get("message")))
        yield
    finally:
        s.api.call("DELETE", f"{ADMISSION}/validatingwebhookconfigurations/{name}")


@pytest.mark.parametrize("backend", ["real"])
@pytest.mark.parametrize(
    ("status", "code"),
    [
        pytest.param({"code": 403, "reason": "Forbidden", "message": "pinned"}, 403, id="403"),
        pytest.param({"message": "pinned"}, 400, id="no-code-400"),
        pytest.param({"code": 404, "reason": "NotFound", "message": "pinned"}, 404, id="404"),
        pytest.param({"code": 409, "reason": "Conflict", "message": "pinned"}, 409, id="409"),
        pytest.param({"code": 401, "message": "pinned"}, 401, id="401-not-a-token-refused"),
        pytest.param({"code": 429, "message": "pinned"}, 429, id="429-not-throttling"),
    ],
)
def test_webhook_refusal__admission_whatever_its_code(
    status: Obj, code: int, cluster: Cluster, tmp_path: Path
) -> None:
    s = _scene(cluster)
    s.run_pod("p")
    with _webhook_server(tmp_path) as hook:
        hook.status = status
        with _webhook(s, hook):
            real = _eviction(s, "p")
    print(f"webhook {status}: real {real}")

    assert real.status == code
    assert f'admission webhook "{WEBHOOK}" denied the request: pinned' == real.body.get("message")
    error = real.translated("create", "pods/eviction")
    assert type(error) is errors.AdmissionDenied
    assert "pinned" in str(error)
