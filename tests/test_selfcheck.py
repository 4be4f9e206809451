"""The self-check asks for exactly what k8s-rbac/ grants, and its event parses."""

from __future__ import annotations

import pytest

from drainer.k8s import selfcheck
from drainer.lifecycle.events import SelfCheckEvent, parse_event
from drainer.lifecycle.events_fields import Skip
from testbed.world import rbac_manifests
from tools.preflight import grants


def test_needed_plus_force_plus_events__exactly_what_k8s_rbac_grants() -> None:
    (role,) = [d for d in rbac_manifests() if d["kind"] == "ClusterRole"]
    assert {*selfcheck.NEEDED, selfcheck.FORCE, *selfcheck.EVENTS} == grants(role["rules"])


def test_result__events_not_allowed__passes_saying_drains_record_no_events() -> None:
    check = selfcheck.SelfCheck(
        "prod",
        cordon="a dry-run cordon of node n1 was accepted",
        no_events=["create events.k8s.io/events"],
    )

    assert check.passed
    assert check.message() == (
        "can drain in cluster prod: may drain; a dry-run cordon of node n1 was accepted; "
        "not allowed to create events.k8s.io/events: drains record no Kubernetes Events "
        "(kubectl apply -f k8s-rbac/)"
    )


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
