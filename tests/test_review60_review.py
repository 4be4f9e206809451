"""Review of 64add72 (an evicted pod's IP held elsewhere; DaemonSets owed to a new
node). Each test fails on that commit for the reason its docstring gives."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from realapi import StaticToken
from support.clock import FakeClock
from test_launch import IDENTITY, INSTANCE, NODE, _set_ready
from test_review60_targets import leave, web_group
from test_targets import _elb_clock, _states_by_id, elbv2

from drainer.errors import AwsError
from drainer.k8s import selfcheck
from drainer.k8s.kube import Kube
from drainer.lifecycle import joined, targets
from drainer.lifecycle.runner import _IpHolder
from drainer.lifecycle.settings import Settings
from kubesim import KubeSim
from testbed import workloads as objects
from testbed.world import rbac_manifests

__all__ = ["elbv2"]  # the fixture, imported for the tests below

ROOT = Path(__file__).resolve().parents[1]


# --- the launch: DaemonSets owed to the node -----------------------------------------------


def _ready_node(sim: KubeSim) -> None:
    sim.apply(objects.node(NODE, instance=INSTANCE))
    _set_ready(sim, "Node", NODE, True)


def _agent(name: str, **spec: object) -> dict[str, Any]:
    agent = objects.daemonset(name)
    agent["spec"]["template"]["spec"].update(spec)
    return agent


def test_a_daemonset_whose_template_names_another_node__owes_this_one_nothing(
    sim: KubeSim, kube: Kube
) -> None:
    """pkg/controller/daemon NodeShouldRunDaemonPod returns (false, false) first thing
    when ds.Spec.Template.Spec.NodeName is set and is not the node's name. nodefit.fits
    never reads spec.nodeName, so such a DaemonSet is "owed" by every new node: each
    launch waits to LAUNCH_TIMEOUT_SECONDS and, by default, is ABANDONed (the instance
    terminated and replaced, forever)."""
    _ready_node(sim)
    with sim.simulator.paused():
        sim.apply(_agent("pinned", nodeName="ip-10-0-9-9.ec2.internal"))
        seen = joined.look(kube, IDENTITY, Settings(), restarted=False)

    assert seen.missing == "", seen.waiting_for


def test_a_daemonset_with_an_empty_node_selector_term__owes_no_node_a_pod(
    sim: KubeSim, kube: Kube
) -> None:
    """component-helpers nodeaffinity: "nil or empty term selects no objects" (a term
    with neither matchExpressions nor matchFields matches no node). nodefit.terms_admit
    reads all([]) and all([]) as a match, so a DaemonSet that the controller never
    places anywhere holds every launch to its timeout."""
    _ready_node(sim)
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}
        }
    }
    with sim.simulator.paused():
        sim.apply(_agent("nowhere", affinity=affinity))
        seen = joined.look(kube, IDENTITY, Settings(), restarted=False)

    assert seen.missing == "", seen.waiting_for


def test_the_self_check_knows_the_daemonsets_permission(sim: KubeSim) -> None:
    """k8s-rbac/ grants list apps/daemonsets now, but drainer/k8s/selfcheck.py asks for
    it nowhere (not in NEEDED, nor as an optional permission like EVENTS): a role not
    applied again since passes `make deploy`'s check with "every permission granted",
    and tests/test_selfcheck.py's NEEDED+FORCE+EVENTS == the role's grants now fails."""
    manifests = rbac_manifests()
    for document in manifests:
        if document["kind"] == "ClusterRole":
            document["rules"] = [r for r in document["rules"] if "daemonsets" not in r["resources"]]
    sim.apply(manifests)
    sim.apply(objects.node(NODE, instance=INSTANCE))
    drainer = Kube.from_kubeconfig(str(sim.kubeconfig), "drainer")
    try:
        check = selfcheck.check(drainer, "prod", force=False)
    finally:
        drainer.close()

    assert check.passed
    assert "daemonsets" in check.message(), check.message()


def test_operations_role_table_lists_the_daemonsets_rule() -> None:
    """docs/operations.md, "What the role grants, and why", goes through
    k8s-rbac/clusterrole.yaml rule by rule and ends "Nothing else": the apps/daemonsets
    list rule the commit added has no row."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("### What the role grants, and why", 1)[1].split("Nothing else", 1)[0]
    rows = re.findall(r"^\| `([a-z/]+)`", section, flags=re.MULTILINE)

    assert "daemonsets" in rows, rows


# --- the drain: an evicted pod's IP held elsewhere --------------------------------------------


def test_an_ip_given_out_again_during_the_wait__not_waited_out(elbv2: Any) -> None:
    """The question is asked once, before the deregistration. An IP the VPC gives to a
    pod elsewhere while the drain waits for its target to drain (the deregistration
    delay, 300 s by default, is when it is likeliest) is registered again by the
    controller for the new pod, and _still_pending waits for it until the wait's limit:
    the very 'waited out its time for a target that never left' the commit fixes for
    an IP reused before the deregistration."""
    arn = web_group(elbv2)
    clock = FakeClock(1000.0)
    held: dict[str, str] = {}

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if not held:  # after the deregistration: the VPC gives 10.0.1.11 to web-9
            held["10.0.1.11"] = "default/web-9"
            elbv2.register_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.1.11"}])

    with _elb_clock(clock):
        found = leave(elbv2, clock, lambda ip: held.get(ip, ""), wait=120, sleep=sleep)

    assert found.pending == [], "web-9's target is not the drain's to wait for"
    assert found.seconds < 60, found.seconds


def test_an_ip_held_by_a_pod_that_is_no_target__still_taken_out(elbv2: Any, sim: KubeSim) -> None:
    """_IpHolder names any pod elsewhere whose status.podIP is the IP, whatever it is.
    A freed pod IP often comes back as a new instance's primary IP (an instance refresh
    launches while it drains), and every hostNetwork pod there (kube-proxy, aws-node)
    has the node's IP: kube-proxy is named as the holder and the evicted pod's target
    10.0.1.11:80 stays registered, so ELB keeps sending web's requests to a port
    nothing of web's listens on. The controller registers only a Service's endpoints
    on their target port; a holder that is no such endpoint does not make the target
    its own."""
    arn = web_group(elbv2)
    proxy = objects.pod(
        "kube-proxy-n2",
        namespace="kube-system",
        node_name="ip-10-0-1-11.ec2.internal",
        spec_fields={"hostNetwork": True},
    )
    with sim.simulator.paused():
        sim.apply(proxy)
        current = sim.get("Pod", "kube-proxy-n2", "kube-system")
        current["status"] = {"phase": "Running", "podIP": "10.0.1.11", "hostIP": "10.0.1.11"}
        sim.api.update(
            sim.resource_for(current), current, "kube-system", "kube-proxy-n2", subresource="status"
        )
        tools = SimpleNamespace(
            kube_factory=lambda cluster, name, settings: Kube.for_cluster(
                sim.url, sim.ca_pem, _admin_token(sim)
            ),
            settings=Settings(),
        )
        job = SimpleNamespace(cluster=SimpleNamespace(name="prod"))
        holder = _IpHolder(tools, job, NODE)  # type: ignore[arg-type]
        clock = FakeClock(1000.0)
        try:
            with _elb_clock(clock):
                found = leave(elbv2, clock, holder)
        finally:
            holder.close()

    assert found.reused == {}, found.reused
    assert _states_by_id(elbv2, arn) == {}, "both evicted pods' targets taken out"


def _admin_token(sim: KubeSim) -> StaticToken:
    return StaticToken(sim.admin_token)


def test_a_retried_take_out__the_summary_names_only_what_was_left(
    elbv2: Any, monkeypatch: Any
) -> None:
    """_until_answered runs _take_out again after ELB fails for now; each try asks the
    holder afresh (a new _Held) but adds to the one `reused` dict. An IP held by a pod
    elsewhere at the first try and by none at the second (that pod went) is
    deregistered, yet TargetWait.reused and describe() still say it was left
    registered, held by the pod that is gone."""
    arn = web_group(elbv2)
    clock = FakeClock(1000.0)
    real = targets._deregister_all
    calls: list[int] = []

    def flaky(elbv2: Any, holding: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise AwsError("Throttling: Rate exceeded")  # for now: retried
        return real(elbv2, holding)

    monkeypatch.setattr(targets, "_deregister_all", flaky)
    answers = iter(["default/web-9"])

    def holder(ip: str) -> str:
        return next(answers, "") if ip == "10.0.1.11" else ""

    with _elb_clock(clock):
        found = leave(elbv2, clock, holder)

    assert "10.0.1.11" not in _states_by_id(elbv2, arn), "taken out at the second try"
    assert found.reused == {}, found.describe()
