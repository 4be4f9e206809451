"""`drain -l/--selector`: nodes chosen by label, as in kubectl: every selected node
cordoned before any is drained, then drained one at a time, each reported, one
exit status for all."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from test_drain import admin

from drainer.cli.main import main
from kubesim import KubeSim
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import pods_on, rbac_manifests, wait_until

POOL = ["ip-10-0-0-1.ec2.internal", "ip-10-0-0-2.ec2.internal"]
OTHER = "ip-10-0-0-9.ec2.internal"


def _node(name: str, pool: str) -> dict[str, object]:
    return w.node(name, labels={"pool": pool})


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    """Two nodes in pool old, one bare pod on each; a node in pool new."""
    with KubeSim(speed=20) as running:
        running.apply(rbac_manifests())
        running.apply([*(_node(n, "old") for n in POOL), _node(OTHER, "new")])
        running.apply([w.pod(f"lonely-{i}", node_name=n) for i, n in enumerate(POOL)])
        cluster = Cluster.of_kubesim(running)
        wait_until(lambda: all(len(pods_on(cluster, n)) == 1 for n in POOL), timeout=20)
        yield running


def _run(sim: KubeSim, *args: str) -> tuple[int, str]:
    return _cli(sim, "drain", *args)


def _cli(sim: KubeSim, command: str, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    flags = ["--kubeconfig", str(sim.kubeconfig), "--context", "drainer"]
    return main([command, *flags, *args], stdout=out), out.getvalue()


def _unschedulable(sim: KubeSim, node: str) -> bool:
    return bool(sim.get("Node", node)["spec"].get("unschedulable"))


def test_selector__every_node_cordoned_before_any_is_drained__each_reported(sim: KubeSim) -> None:
    before = len(sim.requests())

    code, output = _run(sim, "-l", "pool=old", "--force", "--timeout", "60s")

    assert code == 0, output
    writes = [(r.method, r.resource) for r in sim.requests()[before:] if r.method != "GET"]
    first_eviction = writes.index(("POST", "pods/eviction"))
    assert writes[:first_eviction].count(("PATCH", "nodes")) >= 2, writes
    for node in POOL:
        assert f"node {node} drained" in output
        assert _unschedulable(sim, node)
    assert not _unschedulable(sim, OTHER)
    assert "2 nodes selected by pool=old: 2 drained" in output


def test_selector__a_node_not_drained__the_others_still_are__exit_1(sim: KubeSim) -> None:
    sim.apply([w.budget("hold", {"app": "held"}, max_unavailable=0),
               w.pod("held", node_name=POOL[1], labels={"app": "held"})])  # fmt: skip
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), POOL[1])) == 2, timeout=20)

    code, output = _run(sim, "--selector=pool=old", "--force", "--timeout", "2s")

    assert code == 1, output
    assert f"node {POOL[0]} drained" in output
    assert f"node {POOL[1]} NOT drained" in output
    assert f"2 nodes selected by pool=old: 1 drained; not drained: {POOL[1]}" in output


def test_selector__matching_no_node__exit_1_nothing_changed(sim: KubeSim) -> None:
    code, _ = _run(sim, "-l", "pool=gone")

    assert code == 1
    assert not any(_unschedulable(sim, n) for n in [*POOL, OTHER])


def test_selector__a_pod_kubectl_would_refuse_on_any_node__nothing_changed(sim: KubeSim) -> None:
    code, output = _run(sim, "-l", "pool=old")  # bare pods, without --force

    assert code == 1, output
    assert not any(_unschedulable(sim, n) for n in POOL)


def test_selector_and_a_node__usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["drain", POOL[0], "-l", "pool=old"])

    assert exited.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def test_selector_json__one_document__each_node_as_its_own_drain__worst_result(
    sim: KubeSim,
) -> None:
    sim.apply([w.budget("hold", {"app": "held"}, max_unavailable=0),
               w.pod("held", node_name=POOL[1], labels={"app": "held"})])  # fmt: skip
    wait_until(lambda: len(pods_on(Cluster.of_kubesim(sim), POOL[1])) == 2, timeout=20)

    code, output = _run(sim, "-l", "pool=old", "--force", "--timeout", "2s", "-o", "json")

    document = json.loads(output)  # stdout is the one document, nothing else
    assert code == 1 == document["exit_code"]
    assert document["selector"] == "pool=old"
    assert [(d["node"], d["result"], d["exit_code"]) for d in document["nodes"]] == [
        (POOL[0], "drained", 0),
        (POOL[1], "timed_out", 1),
    ]
    assert document["result"] == "timed_out"  # the worst node's


def test_selector_json__refused_on_a_node__one_document_naming_its_pods(sim: KubeSim) -> None:
    code, output = _run(sim, "-l", "pool=old", "-o", "json")  # bare pods, without --force

    document = json.loads(output)
    assert code == 1 == document["exit_code"]
    assert document["result"] == "refused"
    assert sorted(d["node"] for d in document["nodes"]) == sorted(POOL)
    assert all(d["refusals"] for d in document["nodes"])
    assert not any(_unschedulable(sim, n) for n in POOL)


def _node_answers(sim: KubeSim, node: str, status: int, reason: str, *methods: str) -> None:
    from kubesim.faults import Fault

    message = f'nodes "{node}" not found' if status == 404 else "etcdserver: request timed out"
    for method in methods:
        sim.faults.add(
            Fault(kind="status", method=method, path=f"/api/v1/nodes/{node}$", status=status,
                  reason=reason, message=message, count=None)
        )  # fmt: skip


def test_selector__a_node_gone_before_its_cordon__the_others_drained_as_before(
    sim: KubeSim,
) -> None:
    """The cluster autoscaler deleted the second node after the list: its cordon is a
    404. The run stopped there (exit 3), the first node cordoned and undrained, with
    nothing saying so; the node gone is now its drain's to say."""
    _node_answers(sim, POOL[1], 404, "NotFound", "PATCH", "GET")  # gone, to this run

    code, output = _run(sim, "-l", "pool=old", "--force", "--timeout", "60s")

    assert code == 0, output
    assert f"node {POOL[0]} drained" in output
    assert f"node {POOL[1]} is gone: nothing to drain" in output


@pytest.mark.parametrize(
    ("status", "reason"),
    [(500, "InternalError"), (409, "Conflict")],  # a 409 on the node itself (admission's)
)
def test_selector__a_cordon_failing__the_nodes_already_cordoned_named_with_their_undo(
    sim: KubeSim, status: int, reason: str
) -> None:
    _node_answers(sim, POOL[1], status, reason, "PATCH")

    code, output = _run(sim, "-l", "pool=old", "--force", "--timeout", "60s")

    assert code == 3, output
    assert _unschedulable(sim, POOL[0]) and not _unschedulable(sim, POOL[1])
    assert f"node {POOL[0]} not drained, left cordoned; to undo: " in output
    assert f"node {POOL[1]} not drained, left cordoned" not in output, "it never was"


def test_selector_json__a_cordon_failing__the_document_names_the_nodes_left_cordoned(
    sim: KubeSim,
) -> None:
    from support.cli_schema import problems

    _node_answers(sim, POOL[1], 500, "InternalError", "PATCH")

    code, output = _run(sim, "-l", "pool=old", "--force", "-o", "json")

    document = json.loads(output)  # stdout is the one document, nothing else
    assert code == 3 == document["exit_code"]
    assert document["result"] == "error" and document["selector"] == "pool=old"
    assert document["left_cordoned"] == [POOL[0]]
    assert problems(document) == []


# -- a signal outside a node's own drain, after nodes were cordoned --------------------


def _sigterm_on_second_call(monkeypatch: pytest.MonkeyPatch, target: object, name: str) -> None:
    import os
    import signal

    real = getattr(target, name)
    calls: list[int] = []

    def wrapped(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # the CLI's handler raises here
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, wrapped)


@pytest.mark.parametrize("during", ["the second cordon", "the second drain's forecast"])
def test_selector__a_signal_between_drains_or_cordons__names_the_nodes_left_cordoned(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], during: str
) -> None:
    import drainer.cli.pace
    from drainer.k8s.kube import Kube

    if during == "the second cordon":  # POOL[0] cordoned, POOL[1] not yet
        _sigterm_on_second_call(monkeypatch, Kube, "patch_node")
        left = POOL[0]
    else:  # POOL[0] drained; POOL[1] cordoned, its drain not begun
        _sigterm_on_second_call(monkeypatch, drainer.cli.pace, "eta_for")
        left = POOL[1]

    code, output = _run(sim, "-l", "pool=old", "--force", "--timeout", "60s")

    err = capsys.readouterr().err
    assert code == 143, output + err
    assert _unschedulable(sim, left)  # cordoned by this run, not drained, and left so
    assert "interrupted before anything changed" not in err, err
    assert f"release --node {left}" in output + err, output + err


def test_selector_json__a_signal_between_drains__one_document_naming_the_nodes_left(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.cli_schema import problems

    import drainer.cli.pace

    _sigterm_on_second_call(monkeypatch, drainer.cli.pace, "eta_for")

    code, output = _run(sim, "-l", "pool=old", "--force", "--timeout", "60s", "-o", "json")

    document = json.loads(output)
    assert code == 143 == document["exit_code"] and document["result"] == "interrupted"
    assert document["left_cordoned"] == [POOL[1]]
    assert [d["result"] for d in document["nodes"]] == ["drained", "interrupted"]
    assert problems(document) == []


# -- the node as it is at its cordon, not as listed ----------------------------------------


def test_selector__node_cordoned_by_an_operator_after_the_list__release_keeps_that_cordon(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`drain -l` lists the nodes, checks every one's pods, then cordons each. An
    operator cordons the second node meanwhile (after the list, before its cordon):
    the cordon's patch, built from the node as listed, recorded that cordon as the
    run's, and `release` then uncordoned the operator's node."""
    from drainer.k8s.cordon import PROGRESS_ANNOTATION
    from drainer.k8s.kube import Kube

    real = Kube.list_pods_on_node

    def checked(self: Kube, node: str, label_selector: str = "") -> Any:
        if node == POOL[1] and not _unschedulable(sim, node):
            admin(sim).patch("Node", node, {"spec": {"unschedulable": True}}, namespace="")
            sim.settle()
        return real(self, node, label_selector)

    monkeypatch.setattr(Kube, "list_pods_on_node", checked)

    code, output = _run(sim, "-l", "pool=old", "--force", "--timeout", "60s")
    assert code == 0, output
    monkeypatch.setattr(Kube, "list_pods_on_node", real)

    record = json.loads(sim.get("Node", POOL[1])["metadata"]["annotations"][PROGRESS_ANNOTATION])
    code, output = _cli(sim, "release", "--node", POOL[1])
    assert code == 0, output
    assert _unschedulable(sim, POOL[1]), (record, output)


def test_selector__the_node_changed_between_its_read_and_its_cordon__read_again_and_cordoned(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cordon's patch is written on the version read just before it: a change in
    between (an operator's cordon) answers 409, and the node is read again, its
    patch built anew."""
    from drainer.k8s.cordon import added_by_drainer
    from drainer.k8s.kube import Kube

    real = Kube.get_node
    changed: list[str] = []

    def read(self: Kube, name: str) -> Any:
        node = real(self, name)
        if name == POOL[1] and not changed:  # the operator's cordon, just after the read
            changed.append(name)
            admin(sim).patch("Node", name, {"spec": {"unschedulable": True}}, namespace="")
            sim.settle()
        return node

    monkeypatch.setattr(Kube, "get_node", read)

    code, output = _run(sim, "-l", "pool=old", "--force", "--timeout", "60s")

    assert code == 0, output
    assert changed == [POOL[1]]
    assert "cordon" not in added_by_drainer(sim.get("Node", POOL[1])), "the operator's"
    assert "cordon" in added_by_drainer(sim.get("Node", POOL[0]))


def test_selector__a_node_changing_at_every_cordon__named_run_stops_exit_3(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that changes between every read and its cordon (409 each time) is
    tried a few times, then named: the run stops as on any failed cordon."""
    from drainer.cli.selected import CORDON_TRIES
    from drainer.k8s.kube import Kube

    real = Kube.get_node
    reads: list[str] = []

    def read(self: Kube, name: str) -> Any:
        node = real(self, name)
        if name == POOL[1] and node is not None:
            reads.append(name)
            labels = {"touched": str(len(reads))}
            admin(sim).patch("Node", name, {"metadata": {"labels": labels}}, namespace="")
        return node

    monkeypatch.setattr(Kube, "get_node", read)

    code, output = _run(sim, "-l", "pool=old", "--force", "--timeout", "60s")

    assert code == 3, output
    assert len(reads) >= CORDON_TRIES
    assert _unschedulable(sim, POOL[0]) and not _unschedulable(sim, POOL[1])
    assert f"node {POOL[0]} not drained, left cordoned; to undo: " in output
    assert f"node {POOL[1]} not drained, left cordoned" not in output, "it never was"


def test_selector__signal_as_a_cordon_is_answered__that_node_named_left_cordoned(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C/SIGTERM lands while the second node's cordon is on the wire: the API
    server has applied it, the handler raises as the answer is read (or as the
    `cordoned node` line is printed). The run named only the nodes in its list, so
    the second node stayed cordoned and out of the load balancers with no undo said."""
    import os
    import signal

    from drainer.k8s.kube import Kube

    real = Kube.patch_node
    calls: list[str] = []

    def patched(self: Kube, name: str, patch: Any, **kwargs: Any) -> Any:
        answer = real(self, name, patch, **kwargs)
        calls.append(name)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # the CLI's handler raises here
        return answer

    monkeypatch.setattr(Kube, "patch_node", patched)

    code, output = _run(sim, "-l", "pool=old", "--force", "--timeout", "60s")

    err = capsys.readouterr().err
    assert code == 143, output + err
    assert _unschedulable(sim, POOL[1])
    assert f"release --node {POOL[1]}" in output + err, output + err
