"""k8s-rbac/ grants exactly what the drainer uses: a drain passes with it, and
fails with an error naming the missing permission when any one rule is removed."""

from __future__ import annotations

from typing import Any

import pytest

from testbed import World
from testbed import workloads as w
from testbed.world import place_on, rbac_manifests

from .conftest import Invoke
from .test_faults import nearly_timed_out


def _role_rules() -> list[dict[str, Any]]:
    """The rules a drain cannot do without: every one but the Events' (a drain without
    it goes on, test_kube_events.py) and the DaemonSets' (the launch hook's only, which
    goes on without it: test_review60_launch.py)."""
    role = next(d for d in rbac_manifests() if d["kind"] == "ClusterRole")
    return [r for r in role["rules"] if r["apiGroups"] not in (["events.k8s.io"], ["apps"])]


def _without_rule(index: int) -> list[dict[str, Any]]:
    manifests = rbac_manifests()
    for document in manifests:
        if document["kind"] == "ClusterRole":
            document["rules"] = [r for r in document["rules"] if r != RULES[index]]
    return manifests


def _scenario(world: World, node: str) -> None:
    """Pods that exercise every rule: a budget that refuses once, a volume."""
    place_on(
        world,
        node,
        [
            w.deployment("web", 2, startup=40.0),  # replacements Ready after 2 s
            w.budget("web", {"app": "web"}, max_unavailable=1),
            w.statefulset("db", 1, detach=160),  # detached 8 s after: the drain waits for it
        ],
    )


RULES = _role_rules()


def test_exactly_k8s_rbac__full_drain_passes(world: World, invoke: Invoke) -> None:
    node = world.nodes[world.instance_ids[0]]
    _scenario(world, node)

    summary = invoke(
        world.terminate(world.instance_ids[0]), TIMEOUT_POLICY="force", DRAIN_TIMEOUT_SECONDS=60
    )

    assert summary["result"] == "drained"
    # The budget watch (list and watch poddisruptionbudgets) paces the second pod:
    # it waits for the first one's replacement instead of being refused.
    assert summary["evicted"] == 3
    assert summary["pdb_refusals"] == 0
    assert summary["volumes_detached"] == 1


@pytest.mark.parametrize(
    "world",
    [{"rbac": _without_rule(i)} for i in range(len(RULES))],
    ids=[f"without-{'+'.join(r['resources'])}-{'+'.join(r['verbs'])}" for r in RULES],
    indirect=True,
)
def test_any_rule_removed__drain_fails_naming_the_permission(
    world: World, invoke: Invoke, request: pytest.FixtureRequest
) -> None:
    index = int(request.node.callspec.indices["world"])
    rule = RULES[index]
    instance = world.instance_ids[0]
    node = world.nodes[instance]
    env: dict[str, Any] = {}
    if rule["resources"] == ["pods"] and rule["verbs"] == ["delete"]:
        # Only the force policy deletes: a budget that never allows, and a short timeout.
        place_on(
            world,
            node,
            [
                w.pod("guarded", labels={"app": "guarded"}),
                w.budget("guard", {"app": "guarded"}, max_unavailable=0),
            ],
        )
        env = {
            "TIMEOUT_POLICY": "force",
            "DRAIN_TIMEOUT_SECONDS": 60,
            "FORCE_GRACE_PERIOD_SECONDS": 0,
        }
    else:
        _scenario(world, node)

    if env:
        # 60 s is the shortest DRAIN_TIMEOUT_SECONDS allows: a lifecycle action that
        # began 59 s ago has one second left before the force policy applies.
        summary = invoke(nearly_timed_out(world.terminate(instance), 1.0), **env)
    else:
        summary = invoke(world.terminate(instance))

    assert summary["result"] == "failed", summary
    message = summary["message"]
    verbs = rule["verbs"]
    resources = rule["resources"]
    assert any(f"RBAC denied '{v}' on '{r}'" in message for v in verbs for r in resources), message
    assert summary["lifecycle_result"] == "ABANDON"
    if resources in (["persistentvolumeclaims"], ["volumeattachments"]):
        # Only the wait for the volumes needs these: it fails the drain after the pods
        # went, not before the first eviction (the instance goes either way).
        assert summary["evicted"] == 3, summary
