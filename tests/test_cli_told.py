"""The CLI's drain told in Kubernetes Events (drainer/cli/told.py), against kubesim,
which validates Events as the API server does."""

from __future__ import annotations

from typing import Any

from drainer.cli.told import CliStory
from drainer.engine.report import DrainEvent, DrainReport, Kind
from drainer.k8s.kube import Kube
from drainer.outcome import Outcome
from kubesim import KubeSim


def _ours(sim: KubeSim) -> list[dict[str, Any]]:
    found = [e for e in sim.list("Event", "") if e.get("reportingComponent") == "eks-node-drainer"]
    return sorted(found, key=lambda e: e["eventTime"])


def test_eks_user_arn_on_a_long_host__events_accepted__naming_both(
    sim: KubeSim, kube: Kube
) -> None:
    # What `aws eks update-kubeconfig` names its user, on a host with a long name:
    # together past the 128 characters the API takes as reportingInstance.
    kube.user = "arn:aws:eks:eu-west-1:123456789012:cluster/" + "production-" * 4
    host = "bastion-" + "x" * 55 + ".eu-west-1.compute.internal"
    shown: list[DrainEvent] = []
    story = CliStory(kube, "n1", "", then=shown.append, host=host)

    story(DrainEvent(Kind.STARTED, details={"ordinary": 2, "critical": 0}))
    story.end(DrainReport("n1", Outcome.DRAINED, evicted=2))
    story.close()

    assert [e.kind for e in shown] == [Kind.STARTED], "the terminal's progress sees it too"
    assert story.poster.failed == 0
    started, drained = _ours(sim)
    assert (started["reason"], drained["reason"]) == ("DrainStarted", "Drained")
    said = f"(begun by cli, kubeconfig user {kube.user} on host {host}): 2 pods"
    assert said in started["message"]
    assert started["reportingInstance"] == f"{kube.user}@{host}"[:128]
    assert drained["message"] == "every pod is gone: 2 evicted", "no Auto Scaling group to tell"


def test_no_kubeconfig_user__said_so(sim: KubeSim, kube: Kube) -> None:
    kube.user = ""
    story = CliStory(kube, "n1", "", then=lambda event: None, host="laptop-7")

    story(DrainEvent(Kind.STARTED))
    story.close()

    (started,) = _ours(sim)
    assert "(begun by cli, no kubeconfig user on host laptop-7)" in started["message"]
    assert started["reportingInstance"] == "-@laptop-7"
