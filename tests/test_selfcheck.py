"""The self-check asks for exactly what k8s-rbac/ grants, and its event parses."""

from __future__ import annotations

import pytest

from drainer.k8s import selfcheck
from drainer.lifecycle.events import SelfCheckEvent, Skip, parse_event
from testbed.world import rbac_manifests
from tools.preflight import grants


def test_needed_plus_force__exactly_what_k8s_rbac_grants() -> None:
    (role,) = [d for d in rbac_manifests() if d["kind"] == "ClusterRole"]
    assert {*selfcheck.NEEDED, selfcheck.FORCE} == grants(role["rules"])


@pytest.mark.parametrize(
    ("event", "parsed"),
    [
        ({"self_check": {}}, SelfCheckEvent("")),
        ({"self_check": {"cluster_name": "prod"}}, SelfCheckEvent("prod")),
    ],
)
def test_self_check_event__parsed(event: dict[str, object], parsed: SelfCheckEvent) -> None:
    assert parse_event(event) == parsed


@pytest.mark.parametrize("event", [{"self_check": "yes"}, {"self_check": {"cluster_name": 3}}])
def test_malformed_self_check__skipped_with_reason(event: dict[str, object]) -> None:
    skipped = parse_event(event)
    assert isinstance(skipped, Skip)
    assert "malformed self-check" in skipped.reason


def test_result__failed_check_names_what_is_missing_and_the_fix() -> None:
    result = selfcheck.SelfCheck("prod", missing=["create pods/eviction"]).result()
    assert result["result"] == "check_failed"
    assert result["message"] == (
        "cannot drain in cluster prod: not allowed to create pods/eviction. "
        "Apply the RBAC: kubectl apply -f k8s-rbac/"
    )
