"""LAUNCH_WAIT_DAEMONSETS waited only for the DaemonSet pods already on the node. A
DaemonSet whose pods do not tolerate a startup taint gets its pod only once the taint
is gone, a moment after: a look in that moment saw no DaemonSet pod to wait for and
answered CONTINUE for a node its agents had not reached. Now a DaemonSet that owes
the node a pod (its nodeSelector, required node affinity and tolerations admit the
node) and has none there yet is waited for too."""

from __future__ import annotations

import logging

import pytest
from test_launch import IDENTITY, INSTANCE, NODE, _set_ready

from drainer.k8s.kube import Kube
from drainer.lifecycle import daemons, joined
from drainer.lifecycle.settings import Settings
from kubesim import KubeSim
from kubesim.controllers import STARTUP
from testbed import workloads as objects
from testbed.world import rbac_manifests


def _ready_node(sim: KubeSim, **labels: str) -> None:
    node = objects.node(NODE, instance=INSTANCE, labels=labels or None)
    sim.apply(node)
    _set_ready(sim, "Node", NODE, True)


def _agent(name: str, **spec: object) -> dict[str, object]:
    agent = objects.daemonset(name)
    agent["spec"]["template"]["metadata"]["annotations"] = {STARTUP: "3600"}  # Ready in an hour
    agent["spec"]["template"]["spec"].update(spec)
    return agent


def test_a_daemonset_that_owes_the_node_a_pod_it_has_not_made_yet__waited_for(
    sim: KubeSim, kube: Kube
) -> None:
    _ready_node(sim)
    with sim.simulator.paused():  # the DaemonSet controller has not reached the node yet
        sim.apply(_agent("log-agent"))
        seen = joined.look(kube, IDENTITY, Settings(), restarted=False)

    assert seen.missing == "daemonset pods"
    assert seen.waiting_for == "its DaemonSet pods to be Ready (kube-system/log-agent: no pod yet)"
    off = joined.look(kube, IDENTITY, Settings(launch_wait_daemonsets=False), restarted=False)
    assert off.missing == "", "not asked to wait for them"


def test_daemonsets_that_do_not_owe_the_node_a_pod__not_waited_for(
    sim: KubeSim, kube: Kube
) -> None:
    """Another node group's (nodeSelector, required affinity), and one that does not
    tolerate a taint the node keeps (a dedicated group's): none of them ever makes a
    pod here."""
    node = objects.node(NODE, instance=INSTANCE, labels={"role": "web"})
    node["spec"]["taints"] = [{"key": "team", "value": "web", "effect": "NoSchedule"}]
    sim.apply(node)
    _set_ready(sim, "Node", NODE, True)
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "role", "operator": "In", "values": ["gpu"]}]}
                ]
            }
        }
    }
    web = [{"key": "team", "operator": "Equal", "value": "web", "effect": "NoSchedule"}]
    with sim.simulator.paused():
        sim.apply(_agent("gpu-agent", nodeSelector={"role": "gpu"}, tolerations=web))
        sim.apply(_agent("gpu-affinity", affinity=affinity, tolerations=web))
        sim.apply(_agent("untolerating"))
        seen = joined.look(kube, IDENTITY, Settings(), restarted=False)
        assert seen.missing == ""

        sim.apply(_agent("web-agent", nodeSelector={"role": "web"}, tolerations=web))
        seen = joined.look(kube, IDENTITY, Settings(), restarted=False)
    assert seen.waiting_for == "its DaemonSet pods to be Ready (kube-system/web-agent: no pod yet)"


def test_the_daemonsets_cannot_be_listed__only_the_pods_on_the_node__said_once(
    sim: KubeSim, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """k8s-rbac/ not applied again since the rule that lists DaemonSets came: the
    launch goes on as before (the DaemonSet pods on the node), and says why."""
    _ready_node(sim)
    manifests = rbac_manifests()
    for document in manifests:
        if document["kind"] == "ClusterRole":
            document["rules"] = [r for r in document["rules"] if "daemonsets" not in r["resources"]]
    sim.apply(manifests)
    drainer = Kube.from_kubeconfig(str(sim.kubeconfig), "drainer")
    monkeypatch.setattr(daemons._SAID, "unlisted", False)  # said once a container
    monkeypatch.setattr(daemons._SAID, "refused_at", float("-inf"))
    with sim.simulator.paused():
        sim.apply(_agent("log-agent"))
        with caplog.at_level(logging.WARNING):
            first = joined.look(drainer, IDENTITY, Settings(), restarted=False)
            asked = drainer.requests
            again = joined.look(drainer, IDENTITY, Settings(), restarted=False)
            asked = drainer.requests - asked
    drainer.close()

    assert first.missing == again.missing == ""
    assert asked == 2, "the next look lists the node and its pods, not the DaemonSets again"
    (said,) = [r.getMessage() for r in caplog.records if "DaemonSets" in r.getMessage()]
    assert "kubectl apply -f k8s-rbac/" in said
