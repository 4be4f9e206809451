"""The stop times the drains observe, kept for `plan` (drainer/k8s/observed.py), on
both backends as the drainer identity with k8s-rbac/: a drain of a node whose pods
stop in ~2 s under a 60 s grace period keeps their workload's stops, and the plan of
the next node with pods of that workload forecasts ~2 s, marked observed, not 60 s
(which stays the bound, UP TO), even after a rollout (a Deployment's stops are kept
under the Deployment, not its ReplicaSet). And the RBAC both ways: that one ConfigMap may be
read and updated, no other ConfigMap, and not created."""

from __future__ import annotations

import io
import json
from datetime import datetime
from typing import Any

import pytest

from drainer.cli.main import main
from drainer.errors import KubeForbidden
from drainer.k8s import observed
from drainer.k8s.kube import Kube
from kubesim import KubeSim
from kubesim.faults import Fault
from testbed import World
from testbed import workloads as w
from testbed.world import is_pod_ready, place_on, pods_on, rbac_manifests, wait_until

from .conftest import Invoke, LogCapture


def _at(record: dict[str, Any]) -> float:
    """When the drainer's log line was written (its timestamp), epoch seconds."""
    return datetime.strptime(str(record["timestamp"]), "%Y-%m-%d %H:%M:%S,%f%z").timestamp()


CONFIGMAP = f"/namespaces/{observed.NAMESPACE}/configmaps/{observed.NAME}$"
WITHOUT_OBSERVED = [d for d in rbac_manifests() if d["metadata"]["name"] != observed.NAME]
"""k8s-rbac/ without observed.yaml: no ConfigMap, no Role."""

GRACE = 60
SHUTDOWN = 40.0
"""Emulated seconds from the eviction to the pod's exit: 2 s at the tests' speed of 20
(the grace period, 60 s as the plan reads it, would end at 3 s)."""
OBSERVED_MAX = 10.0
"""The most a ~2 s stop may read as observed: the drain sees a pod gone at its next
poll, later on a loaded machine (3.7 s in one CI run); a stop read as the grace period
would be 60."""


def _cli(world: World, *words: str) -> tuple[int, str]:
    out = io.StringIO()
    where = ["--kubeconfig", str(world.cluster.kubeconfig), "--context", "drainer"]
    code = main([*words, *where], stdout=out)
    return code, out.getvalue()


def _plan(world: World, node: str) -> dict[str, Any]:
    code, out = _cli(world, "plan", node, "--ignore-daemonsets", "-o", "json")
    assert code == 0, out
    document: dict[str, Any] = json.loads(out)
    return document


@pytest.mark.parametrize("world", [{"size": 2}], indirect=True)
def test_drain_keeps_stop_times__plan_of_the_next_node_uses_them(world: World) -> None:
    first, second = (world.nodes[i] for i in world.instance_ids)
    web = w.deployment("web", 2, shutdown=SHUTDOWN, grace=GRACE)
    place_on(world, first, [web], timeout=30)
    [before] = _plan(world, first)["nodes"]
    assert before["eta_seconds"] == GRACE  # nothing observed yet: the grace period
    assert [(s["observed"], s["seconds"]) for s in before["stops"]] == [(False, GRACE)]

    code, out = _cli(world, "drain", first, "--ignore-daemonsets", "--timeout", "120s")
    assert code == 0, out
    wait_until(lambda: len(pods_on(world.cluster, second)) == 2, 30)
    _roll_out(world, second)  # a new ReplicaSet: what was observed is the Deployment's
    assert _cli(world, "release", "--node", first)[0] == 0  # room for the plan's replacements

    [after] = _plan(world, second)["nodes"]

    [stop] = after["stops"]
    print(f"observed stop {stop['seconds']} s, ETA {after['eta_seconds']} s")
    assert stop["owner"] == "default/Deployment/web"
    assert (stop["pods"], stop["observed"], stop["samples"]) == (2, True, 2)
    # ~2 s as the drain saw it (its polling and a loaded machine add some), far from
    # the 60 s grace period the plan read before
    assert 1.5 <= stop["seconds"] <= OBSERVED_MAX, stop
    assert after["eta_seconds"] <= OBSERVED_MAX + 1, after  # the observed stop, not 60 s
    assert after["eta_max_seconds"] == GRACE  # the bound stays the grace period
    assert "observed" in after["paced_by"], after["paced_by"]
    code, table = _cli(world, "plan", second, "--ignore-daemonsets")
    assert code == 0 and "stops observed in earlier drains" in table, table


def _roll_out(world: World, node: str) -> None:
    """Deployment web rolled out: its two pods, now of a new ReplicaSet, Ready on `node`
    (the only node that takes pods), the old ones gone."""
    before = {p["metadata"]["labels"]["pod-template-hash"] for p in pods_on(world.cluster, node)}
    template = {"spec": {"template": {"metadata": {"annotations": {"rollout": "2"}}}}}
    world.cluster.patch("Deployment", "web", template)

    def rolled_out() -> bool:
        there = pods_on(world.cluster, node)
        hashes = {p["metadata"]["labels"]["pod-template-hash"] for p in there}
        return len(there) == 2 and not hashes & before and all(map(is_pod_ready, there))

    wait_until(rolled_out, 60, what="web rolled out")


def test_lambda_drain_keeps_stop_times(world: World, invoke: Invoke) -> None:
    """The function's drain keeps them too (drainer/lifecycle/runner.py), as its
    identity: the owner's two stops, each ~2 s."""
    node = world.nodes[world.instance_ids[0]]
    place_on(world, node, [w.deployment("web", 2, shutdown=SHUTDOWN, grace=GRACE)], timeout=30)

    summary = invoke(world.terminate(world.instance_ids[0]))

    assert summary["result"] == "drained", summary
    found, warning = observed.parse(world.cluster.get("ConfigMap", observed.NAME, "kube-system"))
    [(owner, kept)] = found.items()
    assert owner == ("default", "Deployment", "web"), owner
    assert len(kept.seconds) == 2 and all(1.5 <= s <= OBSERVED_MAX for s in kept.seconds), kept
    assert warning == ""


@pytest.mark.parametrize("world", [{"rbac": WITHOUT_OBSERVED}], indirect=True)
def test_without_observed_yaml__the_drain_goes_on__one_warning(
    world: World, invoke: Invoke, drainer_logs: LogCapture
) -> None:
    node = world.nodes[world.instance_ids[0]]
    place_on(world, node, [w.deployment("web", 2, shutdown=SHUTDOWN, grace=GRACE)], timeout=30)

    summary = invoke(world.terminate(world.instance_ids[0]))

    assert (summary["result"], summary["evicted"]) == ("drained", 2), summary
    said = [m for m in drainer_logs.messages() if "stop times not kept" in m]
    assert len(said) == 1, said
    assert "not allowed" in said[0] or "kubectl apply -f k8s-rbac/" in said[0], said


def test_rbac__the_drainer_reads_and_updates_its_configmap__no_other(world: World) -> None:
    world.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "someone-else", "namespace": observed.NAMESPACE},
            "data": {"a": "b"},
        }
    )
    kube = Kube.from_kubeconfig(str(world.cluster.kubeconfig), "drainer")
    try:
        assert observed.keep(kube, [(("default", "ReplicaSet", "web-1"), 2.0)])
        found, _ = observed.parse(observed.get(kube))
        assert found[("default", "ReplicaSet", "web-1")].seconds == (2.0,)

        other = f"/api/v1/namespaces/{observed.NAMESPACE}/configmaps/someone-else"
        for method, verb, body in (
            ("GET", "get", None),
            ("PUT", "update", {"metadata": {"name": "someone-else"}, "data": {}}),
        ):
            with pytest.raises(KubeForbidden):
                kube.request(method, other, body=body, verb=verb, resource="configmaps")
        create = {"metadata": {"name": "eks-node-drainer-other"}, "data": {}}
        with pytest.raises(KubeForbidden):
            kube.request(
                "POST",
                f"/api/v1/namespaces/{observed.NAMESPACE}/configmaps",
                body=create,
                verb="create",
                resource="configmaps",
            )
    finally:
        kube.close()
    assert world.cluster.get("ConfigMap", "someone-else", observed.NAMESPACE)["data"] == {"a": "b"}


@pytest.mark.kubesim_only("makes the stop times' ConfigMap slow or failing, and times its requests")
@pytest.mark.parametrize(
    "fault",
    [
        Fault(kind="latency", method="GET", path=CONFIGMAP, latency=30.0),
        Fault(kind="status", path=CONFIGMAP, status=503),
    ],
    ids=["slow", "failing"],
)
def test_configmap_slow_or_failing__the_drain_s_answer_is_not_held_back(
    world: World,
    sim: KubeSim,
    invoke: Invoke,
    drainer_logs: LogCapture,
    monkeypatch: pytest.MonkeyPatch,
    fault: Fault,
) -> None:
    """The stop times are kept after the engine's run, before the lifecycle answer:
    an API server slow or failing there costs the answer at most the keep's cap
    (KEEP_SECONDS, 1 s here), not the client's request timeout (10 s) or retries
    (~8 s of backoff). The drain is drained all the same, one warning said."""
    monkeypatch.setattr(observed, "KEEP_SECONDS", 1.0, raising=False)
    node = world.nodes[world.instance_ids[0]]
    place_on(world, node, [w.deployment("web", 2, shutdown=SHUTDOWN, grace=GRACE)], timeout=30)
    sim.faults.add(fault)

    summary = invoke(world.terminate(world.instance_ids[0]))

    assert (summary["result"], summary["evicted"]) == ("drained", 2), summary
    records = drainer_logs.records()
    last_gone = max(_at(r) for r in records if r.get("event") == "pod_gone")
    [answered] = [_at(r) for r in records if r.get("event") == "drain_finished"]
    print(f"from the last pod gone to the drain's answer: {answered - last_gone:.2f} s")
    assert answered - last_gone < 1.0 + 1.5  # the keep's cap, the answer and its line
    assert [c["LifecycleActionResult"] for c in world.completions()] == ["CONTINUE"]
    said = [m for m in drainer_logs.messages() if "stop times not kept" in m]
    assert len(said) == 1, said
