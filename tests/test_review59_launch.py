"""Review 59 of 096d607 (a warm-pool return whose node could not be read): the
notice's advice when the cluster could not be read at the launch's end."""

from __future__ import annotations

from drainer.lifecycle.launch_summary import Joining, advice

NODE = "ip-10-0-1-2.ec2.internal"
INSTANCE = "i-0123456789abcdef0"


def test_warm_return_last_look_failed__notice_blames_the_api_not_a_slow_node() -> None:
    """096d607 widened launch.handle's `unreleased` to not_released == "failed". A
    return from the warm pool whose earlier looks found the node but whose LAST look
    failed (a 5xx / timeout at the limit: launch._at_limit gives `failed` WITH a node)
    now gets launch_release.unready_advice appended to joined.advice("") == "": the
    notice says the node "was not [usable] in time" and to wait until it is "free of
    the taints named above". The node may well be Ready; what failed is the function's
    path to the API server (the `unread_advice` of the node-less case says so). The
    operator is sent to debug the node's kubelet/CNI instead of the function's VPC,
    security group or the control plane. (The advice also starts with a stray space.)"""
    joining = Joining(
        "failed",
        "the cluster could not be read: 503 ServiceUnavailable: the last look at the node "
        f"of instance {INSTANCE}, 600 s after the launch began, failed; the last that "
        "succeeded, 40 s before, found it waiting for taint "
        "node.cloudprovider.kubernetes.io/shutdown",
        node=NODE,
    )

    said = advice(joining, from_warm_pool=True, unreleased=True, instance_id=INSTANCE)

    assert f"release --node {NODE}" in said, said
    assert "not in time" not in said, f"an unreachable API server told as a slow node: {said}"
    assert said == said.strip(), repr(said)
