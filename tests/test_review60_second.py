"""Review 60, second pass: the scheduled change's drain handed on from invocation to
invocation (ec2_events._hand_on), and the CLI's kubectl-style booleans and its
`_left_cordoned`. Each test fails on the code as reviewed, for the reason its
docstring says."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from test_review60_ec2 import TOPIC, _db_pods, _guarded, _invoke, published, world

from drainer import aws
from drainer.cli import arguments
from drainer.cli import main as cli_main
from drainer.errors import AwsError
from drainer.k8s.cordon import PROGRESS_ANNOTATION
from drainer.lifecycle.ec2_handover import HANDED_OVER, SoFar
from kubesim import KubeSim
from kubesim.faults import Fault
from testbed import World
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import pods_on, rbac_manifests, wait_until

__all__ = ["published", "world"]  # the fixtures, imported for the tests below


def _payload(queued: dict[str, Any]) -> dict[str, Any]:
    payload = queued["payload"]
    read: dict[str, Any] = json.loads(payload) if isinstance(payload, str) else payload
    return read


def test_hand_on_with_timeout_policy_force__intermediate_invocation_force_deletes_held_pod(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drain is cut to this invocation's time and handed on (the window is 10
    minutes away, the Lambda has 10 s): the next invocation drains on and the last
    one applies the policy at EC2's moment. But approach_for's cut branch keeps
    `force_on_timeout=base.force_on_timeout and by_ec2` (by_ec2 is fixed_by_ec2, True
    here), written when the cut end was the drain's last: with TIMEOUT_POLICY=force the
    first invocation force-deletes the budget-held pod, its budget broken, at its own
    end, ~10 minutes before EC2 acts, and then hands on anyway."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)

    event = world.scheduled_change([instance], starts_in=600)
    summary = _invoke(world, monkeypatch, event, lambda_seconds=10.0, TIMEOUT_POLICY="force")

    assert summary["result"] == "handed_over", summary
    assert not summary.get("forced"), ("forced before handing on", summary)
    assert _db_pods(world, node), ("budget-held pod force-deleted mid-chain", summary)


def test_hand_on_lambda_throttled_for_now__chain_ends_silently_timed_out(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """_hand_on catches every AwsError, the throttle Lambda answers for now too, and
    ends the drain timed_out: nothing hands it on, and the budget-held pod is left
    to die with the instance, the very case the hand-on exists for. The terminate
    hook's hand-over (ending.hand_over) raises a transient error so that Lambda runs
    the event again; this one should too."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)

    def throttled(*args: Any, **kwargs: Any) -> None:
        answer = {"Error": {"Code": "TooManyRequestsException", "Message": "Rate exceeded"},
                  "ResponseMetadata": {"HTTPStatusCode": 429}}  # fmt: skip
        cause = ClientError(answer, "Invoke")
        raise AwsError("lambda:InvokeFunction: Rate exceeded") from cause

    monkeypatch.setattr(aws, "invoke_self_async", throttled)
    event = world.scheduled_change([instance], starts_in=600)

    with pytest.raises(AwsError):
        summary = _invoke(world, monkeypatch, event, lambda_seconds=10.0)
        pytest.fail(f"the chain ended for a throttle, nothing retried: {summary}")


def test_hand_on_with_notify_on_start__each_invocation_sends_a_new_start_notice(
    world: World, monkeypatch: pytest.MonkeyPatch, published: list[tuple[str, str]]
) -> None:
    """Each invocation of the chain gets the same raw event, and handle() sends the
    start notice whenever NOTIFY_ON_START is set: one drain, a 'draining' notice per
    invocation (a window an hour away on a 900 s Lambda: 4-5 of them). The terminate
    hook's hand-overs send none once a step before told it (scale_in.handle:
    tests/test_chain_start_notice.py)."""
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    _guarded(world, node)
    env = {"NOTIFY_ON_START": "true", "NOTIFICATION_TOPIC_ARN": TOPIC}

    event = world.scheduled_change([instance], starts_in=600)
    first = _invoke(world, monkeypatch, event, lambda_seconds=10.0, **env)
    assert first["result"] == "handed_over", first
    queued = world.aws.pop_invocation()
    assert queued is not None
    second = _invoke(world, monkeypatch, _payload(queued), lambda_seconds=10.0, **env)
    assert second["result"] == "handed_over", second

    starts = [s for s, _ in published if "draining" in s.lower()]
    assert len(starts) == 1, ("one drain, a start notice per invocation", published)


def test_booleans__verbose_false_after_short_v__stays_verbose() -> None:
    """pflag: `-v` and `--verbose` are one flag, the last value wins, so
    `-v --verbose=false` is not verbose. with_values drops only earlier words spelled
    `--verbose`, so `-v` stays and verbose is True."""
    args = arguments.parse(["drain", "node-a", "-v", "--verbose=false"], "eks-node-drainer")
    assert args.verbose is False


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    """One node, cordoned by someone else before the run, with a bare pod."""
    with KubeSim(speed=20) as running:
        running.apply(rbac_manifests())
        node = w.node("ip-10-0-0-1.ec2.internal")
        node.setdefault("spec", {})["unschedulable"] = True
        running.apply([node, w.pod("lonely-0", node_name="ip-10-0-0-1.ec2.internal")])
        cluster = Cluster.of_kubesim(running)
        wait_until(lambda: len(pods_on(cluster, "ip-10-0-0-1.ec2.internal")) == 1, timeout=20)
        yield running


def test_left_cordoned__someone_elses_cordon_claimed_with_an_undo_that_undoes_nothing(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A single-node drain of a node an operator had cordoned before the run; the API
    fails before the drain's cordon patch goes out. `_left_cordoned` reads the node as
    found before the drain (`found.spec.unschedulable`: meant for `drain -l`'s first
    step) and says 'it stays cordoned; to undo: ... release', -o json cordoned=true:
    this run cordoned nothing, wrote no record, and `release` answers 'nothing to
    undo'."""
    name = "ip-10-0-0-1.ec2.internal"
    drain = cli_main._drain

    def failing(kube: Any, found: Any, *args: Any, **kwargs: Any) -> int:
        sim.faults.add(
            Fault(kind="status", method="GET", path=f"/api/v1/nodes/{name}$", status=500,
                  reason="InternalError", message="etcdserver: leader changed", count=None)
        )  # fmt: skip
        return drain(kube, found, *args, **kwargs)

    monkeypatch.setattr(cli_main, "_drain", failing)
    out = io.StringIO()
    flags = ["--kubeconfig", str(sim.kubeconfig), "--context", "drainer"]
    code = cli_main.main(["drain", *flags, name, "--force", "--timeout", "30s"], stdout=out)
    text = out.getvalue()

    assert code != 0, text
    annotations = sim.get("Node", name)["metadata"].get("annotations") or {}
    assert PROGRESS_ANNOTATION not in annotations, "the run wrote its record after all"
    assert "to undo" not in text, ("someone else's cordon claimed, with an undo", text)


@pytest.mark.parametrize(
    "mark",
    [
        True,
        "yes",
        {"handovers": -1, "evicted": 0, "forced": 0, "started_at": 1.0},
        {"handovers": 1, "evicted": "3", "forced": 0, "started_at": 1.0},
        {"handovers": 1, "evicted": 3, "forced": 0, "started_at": True},
        {"handovers": 1, "evicted": 3, "forced": 0, "started_at": 4e9},
        {"handovers": 1, "evicted": 3},
    ],
)
def test_a_hand_on_mark_that_does_not_read__counts_as_none(mark: object) -> None:
    """The mark is an input like any other: forged or cut short, it is no drain so far
    (the invocation then notifies its start and counts its own run)."""
    assert SoFar.of({"detail": {}, HANDED_OVER: mark}) is None


def test_a_hand_on_mark__read_as_the_drain_so_far() -> None:
    mark = {"handovers": 2, "evicted": 7, "forced": 1, "started_at": 1_790_000_000.5}
    assert SoFar.of({HANDED_OVER: mark}) == SoFar(2, 7, 1, 1_790_000_000.5)
