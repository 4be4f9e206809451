"""The launch hook's decisions (drainer/lifecycle/launch.py): what a new node still
waits for, and what the Auto Scaling group is told."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from support.clock import FakeClock

from drainer import aws
from drainer.k8s.cordon import PROGRESS_ANNOTATION
from drainer.k8s.kube import Kube
from drainer.lifecycle import events, events_hook, joined, launch, notices
from drainer.lifecycle.job import Tools
from drainer.lifecycle.settings import Settings
from kubesim import KubeSim
from kubesim.controllers import STARTUP
from testbed import workloads
from testbed import workloads as objects

INSTANCE = "i-0f1e2d3c4b5a69788"
NODE = "ip-10-0-1-23.ec2.internal"
IDENTITY = aws.NodeIdentity(INSTANCE, NODE, "us-east-1a")
NOW = 1_790_000_000.0


def _set_ready(sim: KubeSim, kind: str, name: str, ready: bool, namespace: str = "") -> None:
    current = sim.get(kind, name, namespace)
    current["status"] = {
        **(current.get("status") or {}),
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    resource = sim.resource_for(current)
    sim.api.update(resource, current, namespace, name, subresource="status")


def _look(kube: Kube, *, restarted: bool = False, **settings: Any) -> tuple[str, str]:
    """(the node's name, what it still lacks for the end line) after one look."""
    seen = joined.look(kube, IDENTITY, Settings(**settings), restarted=restarted)
    return seen.node, seen.missing


def _taint(sim: KubeSim, *keys: str, cordoned: bool = False) -> None:
    node = objects.node(NODE, instance=INSTANCE)
    node["spec"]["taints"] = [{"key": key, "effect": "NoSchedule"} for key in keys]
    if cordoned:
        node["spec"]["unschedulable"] = True
    sim.apply(node)
    _set_ready(sim, "Node", NODE, True)


def test_look__no_node__waits_for_it_to_register(sim: KubeSim, kube: Kube) -> None:
    seen = joined.look(kube, IDENTITY, Settings(), restarted=False)
    assert (seen.node, seen.waiting_for, seen.missing) == (
        "",
        "its node to register",
        "registration",
    )


def test_look__registered_not_ready__then_its_daemonset_pods__then_ready(
    sim: KubeSim, kube: Kube
) -> None:
    sim.apply(objects.node(NODE, instance=INSTANCE))
    _set_ready(sim, "Node", NODE, False)
    seen = joined.look(kube, IDENTITY, Settings(), restarted=False)
    assert (seen.node, seen.waiting_for, seen.missing) == (
        NODE,
        f"node {NODE} to be Ready",
        "ready",
    )

    _set_ready(sim, "Node", NODE, True)
    agent = workloads.daemonset("cni")
    agent["spec"]["template"]["metadata"]["annotations"] = {STARTUP: "3600"}  # Ready in an hour
    sim.apply(agent)
    cni = _one_pod(sim, "kube-system")
    sim.apply(objects.pod("web-1", node_name=NODE, annotations={STARTUP: "3600"}))
    seen = joined.look(kube, IDENTITY, Settings(), restarted=False)
    assert seen.waiting_for == f"its DaemonSet pods to be Ready (kube-system/{cni})"
    assert seen.missing == "daemonset pods"
    assert _look(kube, launch_wait_daemonsets=False) == (NODE, ""), "not asked to wait for them"

    _set_ready(sim, "Pod", cni, True, "kube-system")
    assert _look(kube) == (NODE, ""), "a pod of no DaemonSet is not waited for"


@pytest.mark.parametrize(
    "key",
    [
        "node.cloudprovider.kubernetes.io/uninitialized",
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/network-unavailable",
        "node.cilium.io/agent-not-ready",
        "ebs.csi.aws.com/agent-not-ready",
        "efs.csi.aws.com/agent-not-ready",
    ],
)
def test_startup_taint__the_fixed_ones_and_the_default_agents(key: str) -> None:
    node = {"spec": {"taints": [{"key": "example.com/someone-elses"}, {"key": key}]}}
    assert joined.startup_taints(node, Settings()) == [key]
    only_others = {"spec": {"taints": [{"key": "example.com/someone-elses"}]}}
    assert joined.startup_taints(only_others, Settings()) == [], "not a startup taint"


@pytest.mark.parametrize(
    "key", ["node.cloudprovider.kubernetes.io/uninitialized", "node.cilium.io/agent-not-ready"]
)
def test_look__ready_with_a_startup_taint__waits_for_it_to_go(
    sim: KubeSim, kube: Kube, key: str
) -> None:
    _taint(sim, key, "example.com/someone-elses")

    seen = joined.look(kube, IDENTITY, Settings(), restarted=False)

    assert (seen.missing, seen.waiting_for) == (
        f"taint {key}",
        f"node {NODE} to lose the taint {key}",
    )
    others = [{"key": "example.com/someone-elses", "effect": "NoSchedule"}]
    kube.patch_node(NODE, {"spec": {"taints": others}})
    assert _look(kube) == (NODE, ""), "a taint not known to be a startup taint is not waited for"


def test_look__startup_taints_are_configurable__the_fixed_ones_are_not(
    sim: KubeSim, kube: Kube
) -> None:
    _taint(sim, "node.cilium.io/agent-not-ready")
    assert _look(kube, launch_startup_taints=frozenset()) == (NODE, "")
    assert _look(kube, launch_startup_taints=frozenset({"calico.example/not-ready"})) == (NODE, "")

    both = ["calico.example/not-ready", "node.cloudprovider.kubernetes.io/uninitialized"]
    kube.patch_node(NODE, {"spec": {"taints": [{"key": k, "effect": "NoSchedule"} for k in both]}})
    mine = frozenset({"calico.example/not-ready"})
    assert _look(kube, launch_startup_taints=frozenset()) == (
        NODE,
        "taint node.cloudprovider.kubernetes.io/uninitialized",
    )
    kube.patch_node(
        NODE, {"spec": {"taints": [{"key": "calico.example/not-ready", "effect": "NoExecute"}]}}
    )
    assert _look(kube, launch_startup_taints=mine) == (NODE, "taint calico.example/not-ready")


def test_look__cordoned__told_by_default__waited_for_when_asked(sim: KubeSim, kube: Kube) -> None:
    # The cordon's own taint (the node lifecycle controller's) is the cordon's.
    _taint(sim, "node.kubernetes.io/unschedulable", cordoned=True)

    seen = joined.look(kube, IDENTITY, Settings(), restarted=False)
    assert (seen.missing, seen.cordoned) == ("", True)
    assert _look(kube, launch_wait_for_uncordon=True) == (NODE, "uncordon")
    assert _look(kube, launch_wait_for_uncordon=True, restarted=True) == (NODE, ""), (
        "back from the warm pool the cordon is the drain's, which the release undoes"
    )


def test_look__several_lacks__each_named(sim: KubeSim, kube: Kube) -> None:
    """Ready, keeping a CNI's startup taint, cordoned at registration with
    LAUNCH_WAIT_FOR_UNCORDON=true, its DaemonSet pod not Ready: each is named, in
    the order they are looked at (only the first was, and the advice followed it)."""
    cilium = "node.cilium.io/agent-not-ready"
    _taint(sim, cilium, cordoned=True)
    agent = workloads.daemonset("cni")
    agent["spec"]["template"]["metadata"]["annotations"] = {STARTUP: "3600"}
    agent["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
    sim.apply(agent)
    cni = _one_pod(sim, "kube-system")

    seen = joined.look(kube, IDENTITY, Settings(launch_wait_for_uncordon=True), restarted=False)

    assert seen.missing == f"taint {cilium}, uncordon, daemonset pods"
    assert seen.waiting_for == (
        f"node {NODE} to lose the taint {cilium} and to be uncordoned "
        f"(LAUNCH_WAIT_FOR_UNCORDON), and its DaemonSet pods to be Ready (kube-system/{cni})"
    )
    advice = joined.advice(seen.missing)
    for words in ("LAUNCH_STARTUP_TAINTS", "waits for the uncordon", "DaemonSet pods"):
        assert words in advice, advice


def test_look__before_the_last__daemonset_pods_listed_only_once_nothing_else_lacks(
    sim: KubeSim, kube: Kube
) -> None:
    """The wait's looks before its last do not list the node's pods while a taint or
    the uncordon still lacks (a pod LIST twice a second for up to 840 s a launching
    node); its last look names them too."""
    cilium = "node.cilium.io/agent-not-ready"
    _taint(sim, cilium, cordoned=True)
    agent = workloads.daemonset("cni")
    agent["spec"]["template"]["metadata"]["annotations"] = {STARTUP: "3600"}
    agent["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
    sim.apply(agent)
    _one_pod(sim, "kube-system")
    settings = Settings(launch_wait_for_uncordon=True)

    before = kube.requests
    seen = joined.look(kube, IDENTITY, settings, restarted=False, every=False)
    looked = kube.requests - before

    assert seen.missing == f"taint {cilium}, uncordon"
    last = joined.look(kube, IDENTITY, settings, restarted=False, every=True)
    assert last.missing == f"taint {cilium}, uncordon, daemonset pods"
    assert kube.requests - before - looked > looked, "the last look listed the pods too"


def test_look__not_ready__its_not_ready_taint_is_not_a_second_lack(
    sim: KubeSim, kube: Kube
) -> None:
    """The node lifecycle controller's not-ready and unreachable taints mark a node
    that is not Ready: named once, as `ready`; a taint of another owner is named too."""
    node = objects.node(NODE, instance=INSTANCE, ready=False, unschedulable=True)
    keys = ["node.kubernetes.io/not-ready", "node.cloudprovider.kubernetes.io/uninitialized"]
    node["spec"]["taints"] = [{"key": key, "effect": "NoSchedule"} for key in keys]
    sim.apply(node)

    assert _look(kube) == (NODE, "ready, taint node.cloudprovider.kubernetes.io/uninitialized")
    assert _look(kube, launch_wait_for_uncordon=True)[1].endswith(", uncordon")


def test_look__back_from_the_warm_pool__waits_for_the_shutdown_taint_to_go(
    sim: KubeSim, kube: Kube
) -> None:
    _taint(sim, launch.SHUTDOWN_TAINT)

    seen = joined.look(kube, IDENTITY, Settings(), restarted=True)
    assert seen.waiting_for == f"node {NODE} to lose the taint {launch.SHUTDOWN_TAINT}"
    assert _look(kube, launch_wait_daemonsets=False) == (NODE, ""), "a new node: not looked at"

    kube.patch_node(NODE, {"spec": {"taints": None}})
    assert _look(kube, restarted=True) == (NODE, "")


def _drained(sim: KubeSim, phase: str, **record: Any) -> None:
    node = objects.node(NODE, instance=INSTANCE)
    node["spec"]["unschedulable"] = True
    annotation = {"phase": phase, "added": ["cordon"], **record}
    node["metadata"].setdefault("annotations", {})[PROGRESS_ANNOTATION] = json.dumps(annotation)
    sim.apply(node)


def test_release__back_from_the_warm_pool__only_what_the_drainer_added_undone(
    sim: KubeSim, kube: Kube
) -> None:
    _drained(sim, "drained", destination="warm-pool")
    joining = launch.Joining("joined", "Ready", NODE)

    released = launch._release(kube, joining, NOW - 3, lambda: NOW)

    assert released.released == ("uncordoned", f"removed annotation {PROGRESS_ANNOTATION}")
    said = f"node {NODE} is back from the warm pool, Ready and schedulable 3 s after the launch"
    assert released.message.startswith(said)
    assert not sim.get("Node", NODE)["spec"].get("unschedulable")


def test_release__no_record__nothing_done_nothing_kept(
    sim: KubeSim, kube: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    sim.apply(objects.node(NODE, instance=INSTANCE))  # it joined on its way into service
    joining = launch.Joining("joined", "Ready", NODE)

    with caplog.at_level(logging.INFO):
        assert launch._release(kube, joining, NOW, lambda: NOW) == joining
    assert "no eks-node-drainer record: nothing to release" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_release__a_drain_under_way__not_released(sim: KubeSim, kube: Kube) -> None:
    _drained(sim, "draining", trigger="scheduled-change", since=NOW - 10, until=NOW + 600)
    joining = launch.Joining("joined", "Ready", NODE)

    released = launch._release(kube, joining, NOW, lambda: NOW)

    assert released.released == ()
    assert "a scheduled-change drain is under way" in released.message
    assert released.not_released == "drain_under_way"
    assert sim.get("Node", NODE)["spec"].get("unschedulable"), "left to that drain"


def _one_pod(sim: KubeSim, namespace: str) -> str:
    """The name of the one pod the DaemonSet controller puts in `namespace`."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pods = sim.list("Pod", namespace)
        if pods:
            return str(pods[0]["metadata"]["name"])
        time.sleep(0.02)
    raise AssertionError("the DaemonSet controller made no pod")


@pytest.mark.parametrize(
    ("result", "on_timeout", "told"),
    [
        ("joined", "abandon", "CONTINUE"),
        ("not_joined", "abandon", "ABANDON"),
        ("not_joined", "continue", "CONTINUE"),
        ("failed", "abandon", "CONTINUE"),  # a broken drainer never stops launches
        ("not_allowed", "abandon", None),  # not our group: its action is left alone
    ],
)
def test_lifecycle_result(result: str, on_timeout: str, told: Any) -> None:
    assert launch._lifecycle_result(launch.Joining(result, ""), on_timeout) == told


def _tools(clock: FakeClock, **settings: Any) -> Tools:
    def no_kube(*_: Any) -> Kube:
        raise AssertionError("_until_ready is handed its client")

    clients = aws.AwsClients(None, None, None, lambda: None)
    return Tools(Settings(**settings), clients, no_kube, clock, clock.sleep)


def test_until_ready__a_taint_that_never_clears__not_joined_at_the_limit_naming_it(
    sim: KubeSim, kube: Kube
) -> None:
    _taint(sim, "ebs.csi.aws.com/agent-not-ready")
    clock = FakeClock(NOW)

    joining = launch._until_ready(kube, IDENTITY, _tools(clock), NOW + 600, NOW)

    assert (joining.result, joining.missing) == (
        "not_joined",
        "taint ebs.csi.aws.com/agent-not-ready",
    )
    assert clock() == NOW + 600, "it looked until the limit, on the injected clock"
    assert "still waiting for node ip-10-0-1-23.ec2.internal to lose the taint" in joining.message
    assert launch._lifecycle_result(joining, "abandon") == "ABANDON"


def test_until_ready__cordoned_at_registration__joined_cordoned_said(
    sim: KubeSim, kube: Kube
) -> None:
    _taint(sim, cordoned=True)
    clock = FakeClock(NOW)

    joining = launch._until_ready(
        kube, IDENTITY, _tools(clock, launch_wait_daemonsets=False), NOW + 600, NOW - 40
    )

    assert (joining.result, joining.cordoned) == ("joined", True)
    assert "is Ready but cordoned, not by eks-node-drainer" in joining.message
    assert "LAUNCH_WAIT_FOR_UNCORDON=false" in joining.message
    assert launch._lifecycle_result(joining, "abandon") == "CONTINUE"

    waited = launch._until_ready(
        kube,
        IDENTITY,
        _tools(clock, launch_wait_daemonsets=False, launch_wait_for_uncordon=True),
        NOW + 600,
        NOW,
    )
    assert (waited.result, waited.missing) == ("not_joined", "uncordon")


def test_launch_notice__names_what_was_missing_and_what_to_do() -> None:
    event = events.parse_event(_launch_event())
    assert isinstance(event, events_hook.LifecycleEvent)
    summary = {
        "result": "not_joined",
        "lifecycle_result": "ABANDON",
        "cluster": "prod",
        "node": NODE,
        "waiting_for": "taint node.cilium.io/agent-not-ready",
        "message": "still waiting for ...",
    }

    subject, text, attributes = notices.launch_notice(
        event, summary, joined.advice(summary["waiting_for"])
    )

    assert subject == f"eks-node-drainer: {NODE} cannot take pods: launch TIMED OUT"
    assert "Still missing: taint node.cilium.io/agent-not-ready." in text
    assert "ABANDON: Auto Scaling terminates the instance and launches another" in text
    assert "take it out of LAUNCH_STARTUP_TAINTS" in text
    assert attributes["result"] == "not_joined"


def _launch_event() -> dict[str, Any]:
    return {
        "version": "0",
        "id": "e1",
        "detail-type": "EC2 Instance-launch Lifecycle Action",
        "source": "aws.autoscaling",
        "account": "123456789012",
        "time": "2026-11-28T06:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {
            "LifecycleActionToken": "token",
            "AutoScalingGroupName": "eks-workers",
            "LifecycleHookName": "eks-node-drainer-launch",
            "EC2InstanceId": INSTANCE,
            "LifecycleTransition": "autoscaling:EC2_INSTANCE_LAUNCHING",
        },
    }


def _no_kube(*_: object) -> Kube:
    raise AssertionError("no cluster is read for a group that is not the function's")


def test_into_the_warm_pool__a_group_not_the_functions__its_action_left_alone(
    moto_aws: None,
) -> None:
    """A warmed instance's launch is answered at once, but only for a group the
    function covers: another group's hook of the same name (another stack, another
    tool warming its instances) is not ours to answer, nor a join to count."""
    import boto3

    from awssim import AwsSim
    from awssim.world import create_node_group

    clients = aws.make_clients(boto3.Session(region_name="us-east-1"))
    group = create_node_group(
        clients.ec2, clients.autoscaling, asg_name="someone-elses", size=1, hook_name="x",
        cluster_name="other",
    )  # fmt: skip
    clients.autoscaling.put_lifecycle_hook(
        AutoScalingGroupName="someone-elses",
        LifecycleHookName="eks-node-drainer-launch",
        LifecycleTransition="autoscaling:EC2_INSTANCE_LAUNCHING",
        HeartbeatTimeout=600,
        DefaultResult="ABANDON",
    )
    sim = AwsSim(region="us-east-1")
    token = sim.begin_launch("someone-elses", group.instance_ids[0], "eks-node-drainer-launch")
    raw = sim.event_for(token)
    raw["detail"].update({"Origin": "EC2", "Destination": "WarmPool"})
    event = events.parse_event(raw)
    assert isinstance(event, events_hook.LifecycleEvent) and event.into_warm_pool
    settings = Settings(launch_hook=True, allowed_asgs=frozenset({"prod-nodes"}))

    summary = launch.handle(event, Tools(settings, clients, _no_kube), None)

    assert summary["result"] == "not_allowed", summary
    assert "someone-elses is not in ALLOWED_ASGS" in summary["message"]
    assert sim.calls("complete") == [], "another group's launch answered CONTINUE"


def test_release__a_record_of_a_drain_after_this_launch_began__not_undone(
    sim: KubeSim, kube: Kube
) -> None:
    """A launch event from the warm pool that comes late (a duplicate, Lambda's retry):
    since it began, the instance went back into service and was drained into the pool
    again. That record is a later trip's: releasing it put pods on a node being
    stopped."""
    node = objects.node(NODE, instance=INSTANCE)
    node["spec"]["unschedulable"] = True
    record = {"phase": "drained", "destination": "warm-pool", "since": int(NOW + 60),
              "at": int(NOW + 100), "added": ["cordon"]}  # fmt: skip
    node["metadata"].setdefault("annotations", {})[PROGRESS_ANNOTATION] = json.dumps(record)
    sim.apply(node)

    joining = launch._release(kube, launch.Joining("joined", "Ready", NODE), NOW, lambda: NOW + 130)

    assert sim.get("Node", NODE)["spec"].get("unschedulable"), "a later trip's cordon undone"
    assert "drain of ours begun or ended since this launch began" in joining.message
    assert joining.not_released == "drained_since"


def test_until_ready__back_from_the_warm_pool_cordoned_without_a_record__told_cordoned(
    sim: KubeSim, kube: Kube
) -> None:
    """Back from the warm pool, Ready, cordoned by someone else and no record of ours
    (it went into the pool without our drain): nothing releases it, so the launch says
    it joined cordoned (JoinedCordoned, the notice), as a new node's does."""
    _taint(sim, cordoned=True)
    clock = FakeClock(NOW)
    tools = _tools(clock, launch_wait_daemonsets=False)

    joining = launch._until_ready(kube, IDENTITY, tools, NOW + 600, NOW - 40, restarted=True)
    joining = launch._release(kube, joining, NOW - 40, clock)

    assert sim.get("Node", NODE)["spec"].get("unschedulable")
    assert joining.cordoned, f"a node left cordoned, told as simply joined: {joining.message!r}"


def test_until_ready__a_look_that_ends_past_the_limit__its_lacks_still_name_the_daemonset_pods(
    sim: KubeSim, kube: Kube, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of a76e0b5: "the last look still names every lack" holds only when the
    last look begins at or past `limit`. A look begun just before it (every=False, so
    no pod list while a taint lacks) that takes the API server's time and ends past it
    is the one the timeout reports: its `missing`, the end line's `waiting_for`, the
    NotJoined Event and the notice's advice leave out the DaemonSet pods that were not
    Ready either. With a 0.5 s poll, a look of 0.1 s straddles the limit about one
    timeout in six."""
    cilium = "node.cilium.io/agent-not-ready"
    _taint(sim, cilium)
    agent = workloads.daemonset("cni")
    agent["spec"]["template"]["metadata"]["annotations"] = {STARTUP: "3600"}
    agent["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
    sim.apply(agent)
    _one_pod(sim, "kube-system")
    clock = FakeClock(NOW)
    real_find = joined.find_node_object

    def slow_find(*args: Any, **kwargs: Any) -> Any:
        found = real_find(*args, **kwargs)
        clock.advance(0.4)  # the node's GET: a slow API server, a retried call
        return found

    monkeypatch.setattr(joined, "find_node_object", slow_find)

    # looks at NOW (ends +0.4), sleeps 0.5, looks at +0.9 < limit (ends +1.3 >= limit)
    joining = launch._until_ready(kube, IDENTITY, _tools(clock), NOW + 1.0, NOW)

    assert joining.result == "not_joined"
    assert joining.missing == f"taint {cilium}, daemonset pods", (
        "the timeout's report leaves out the DaemonSet pods that were not Ready"
    )
