"""The stop times the drains keep for the plan (drainer/k8s/observed.py): a bounded
summary per owner, doubted when read (corrupted or forged values are not trusted),
written as the drainer identity on kubesim with k8s-rbac/ (merged with what is
there, retried on a conflict, a failure one warning line and never an exception),
and read by the plan (drainer/plan/observed.py), never more than a grace period."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from drainer.engine import pods
from drainer.errors import KubeConflict
from drainer.k8s import observed
from drainer.k8s.kube import Kube
from drainer.plan import observed as plan_observed
from drainer.plan.forecast import Going
from kubesim import KubeSim
from kubesim.faults import Fault
from testbed import workloads as w
from testbed.cluster import Cluster
from testbed.world import rbac_manifests

WEB = ("default", "ReplicaSet", "web-5d8f")
API = ("default", "ReplicaSet", "api-77c1")


def _config_map(value: Any) -> dict[str, Any]:
    return {"metadata": {"name": observed.NAME}, "data": {observed.KEY: value}}


def _kept(owners: dict[str, Any]) -> dict[str, Any]:
    return _config_map(json.dumps({"owners": owners}))


# -- the summary ---------------------------------------------------------------


def test_merge__keeps_the_last_samples_per_owner_and_adds_new_owners() -> None:
    known = {WEB: observed.Summary(tuple(float(i) for i in range(observed.SAMPLES)), "t1")}

    merged = observed.merge(known, [(WEB, 99.0), (API, 2.5), (API, 3.5)], "t2")

    assert merged[WEB].seconds == (*[float(i) for i in range(1, observed.SAMPLES)], 99.0)
    assert merged[WEB].at == "t2"
    assert merged[API] == observed.Summary((2.5, 3.5), "t2")
    assert merged[API].median == 3.0


def test_merge__bounded_owners__those_seen_last_kept() -> None:
    known = {
        ("ns", "ReplicaSet", f"old-{i}"): observed.Summary((1.0,), f"2026-01-{i % 28 + 1:02d}")
        for i in range(observed.MAX_OWNERS)
    }

    merged = observed.merge(known, [(WEB, 2.0)], "2026-11-28T00:00:00Z")

    assert len(merged) == observed.MAX_OWNERS
    assert WEB in merged
    assert len(observed.encode(merged)) < observed.MAX_BYTES


def test_merge__a_stop_no_drain_could_see_is_not_kept() -> None:
    merged = observed.merge({}, [(WEB, -1.0), (WEB, float("nan")), (WEB, 1e12), (API, 2.0)], "t")

    assert merged == {API: observed.Summary((2.0,), "t")}


def test_merge__stops_kept_in_tenths_of_a_second() -> None:
    merged = observed.merge({}, [(WEB, 0.44), (WEB, 0.06), (WEB, 2.37)], "t")

    assert merged[WEB].seconds == (0.4, 0.1, 2.4)
    assert '"seconds":[0.4,0.1,2.4]' in observed.encode(merged)  # readable as it is


def test_parse__round_trip() -> None:
    kept = {WEB: observed.Summary((1.5, 2.0), "2026-11-28T10:00:00Z")}

    assert observed.parse(_config_map(observed.encode(kept))) == (kept, "")
    assert observed.parse({"metadata": {}}) == ({}, "")  # as k8s-rbac/ creates it


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("{not json", "is not JSON"),
        ('["a list"]', "no 'owners' object"),
        ("x" * (observed.MAX_BYTES + 1), "not the drainer's: ignored"),
    ],
)
def test_parse__corrupted__read_as_empty_with_a_warning(value: str, said: str) -> None:
    found, warning = observed.parse(_config_map(value))

    assert found == {}
    assert said in warning and observed.WHERE in warning


def test_parse__forged_values_ignored__the_rest_kept() -> None:
    found, warning = observed.parse(
        _kept(
            {
                "default/ReplicaSet/web-5d8f": {"seconds": [2.0, 1e300, -3, True, "9"], "at": "t"},
                "default/ReplicaSet/huge": {"seconds": [1e9]},
                "default/ReplicaSet/long": {"seconds": [1.0] * 100_000},
                "no-slashes": {"seconds": [1.0]},
                "default/ReplicaSet/api-77c1": "not an object",
            }
        )
    )

    assert found[WEB] == observed.Summary((2.0,), "t")
    assert found[("default", "ReplicaSet", "long")].seconds == (1.0,) * observed.SAMPLES
    assert set(found) == {WEB, ("default", "ReplicaSet", "long")}
    assert warning.endswith("3 entry(ies) not a drain's stops: ignored")


# -- the plan's reading --------------------------------------------------------


def _pod(grace: int, owner: str = "web-5d8f") -> dict[str, Any]:
    reference = {"kind": "ReplicaSet", "name": owner, "uid": owner, "controller": True}
    return w.pod("web-5d8f-abcde", node_name="n1", grace=grace, owner=reference)


def test_plan_stop__observed_median__never_more_than_the_grace_period() -> None:
    stops = plan_observed.Stops({WEB: observed.Summary((1.0, 2.0, 9.0), "t")})

    assert stops.of(_pod(30)).seconds == 2.0 and stops.of(_pod(30)).observed
    assert stops.of(_pod(1)).seconds == 1.0  # the grace period caps it
    unseen = stops.of(_pod(30, owner="other"))
    assert (unseen.seconds, unseen.observed) == (30.0, False)
    timed = stops.timed(Going(_pod(30), []))
    assert timed.stop == 2.0
    assert timed.pod["spec"]["terminationGracePeriodSeconds"] == 30  # the bound, untouched


def _deployment_pod(template_hash: str, grace: int = 30) -> dict[str, Any]:
    reference = {"kind": "ReplicaSet", "name": f"web-{template_hash}", "controller": True}
    pod = w.pod(f"web-{template_hash}-abcde", node_name="n1", grace=grace, owner=reference)
    pod["metadata"]["labels"]["pod-template-hash"] = template_hash
    return pod


def test_plan_stop__a_deployment_s_pods__kept_and_read_under_the_deployment() -> None:
    """A rollout makes a new ReplicaSet: the stops are the Deployment's, so its new
    pods are forecast with them (before, under the old ReplicaSet's name, lost)."""
    kept = observed.merge({}, [(observed_owner(_deployment_pod("5d8f9c")), 2.0)], "t")
    assert list(kept) == [("default", "Deployment", "web")]

    stop = plan_observed.Stops(kept).of(_deployment_pod("7b4c2d"))

    assert (stop.owner, stop.seconds, stop.samples) == (("default", "Deployment", "web"), 2.0, 1)


def test_plan_stop__an_old_configmap__its_replicasets_entries_read_for_the_deployment() -> None:
    """A ConfigMap the drains kept before (whole and hundredths of seconds, under each
    ReplicaSet's name) is still read: every ReplicaSet of the Deployment counts for
    its pods, whichever ReplicaSet they are in now, oldest first, with what is kept
    under the Deployment's name since."""
    found, warning = observed.parse(
        _kept(
            {
                "default/ReplicaSet/web-5d8f9c": {"seconds": [2, 3], "at": "2026-11-01T00:00:00Z"},
                "default/ReplicaSet/web-11aa22": {"seconds": [2.37], "at": "2026-11-02T00:00:00Z"},
                "default/Deployment/web": {"seconds": [4.5], "at": "2026-11-03T00:00:00Z"},
                "default/ReplicaSet/webshop-5d8f9c": {
                    "seconds": [40],
                    "at": "2026-11-04T00:00:00Z",
                },
                "default/ReplicaSet/batch": {"seconds": [50], "at": "2026-11-04T00:00:00Z"},
            }
        )
    )
    assert warning == ""
    stops = plan_observed.Stops(found)

    stop = stops.of(_deployment_pod("7b4c2d"))

    assert stops.summary(stop.owner) == observed.Summary(
        (2.0, 3.0, 2.37, 4.5), "2026-11-03T00:00:00Z"
    )
    assert (stop.seconds, stop.samples, stop.observed) == (2.685, 4, True)
    assert stop.doc()["owner"] == "default/Deployment/web"


def observed_owner(pod: dict[str, Any]) -> observed.Owner:
    owner = pods.workload(pod)
    assert owner is not None
    return owner


# -- on kubesim, as the drainer identity ---------------------------------------


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(speed=20) as running:
        running.apply(rbac_manifests())
        yield running


@pytest.fixture
def kube(sim: KubeSim) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(str(sim.kubeconfig), "drainer")
    yield client
    client.close()


def test_keep__merges_with_what_is_there__plan_reads_it(kube: Kube) -> None:
    assert observed.keep(kube, [(WEB, 2.0)], now=0.0)
    assert observed.keep(kube, [(WEB, 4.0), (API, 1.0)], now=60.0)

    stops = plan_observed.read(kube)

    assert stops.note == ""
    assert stops.known[WEB] == observed.Summary((2.0, 4.0), "1970-01-01T00:01:00Z")
    assert stops.known[API].seconds == (1.0,)


def test_keep__a_conflict__read_again_and_merged(
    kube: Kube, monkeypatch: pytest.MonkeyPatch
) -> None:
    observed.keep(kube, [(API, 1.0)])
    put = observed._put
    raced = []

    def another_drain_first(
        client: Kube, current: dict[str, Any], value: str, timeout: float | None = None
    ) -> None:
        if not raced:  # another drain writes between our read and our write
            raced.append(True)
            put(client, observed.get(client), observed.encode({WEB: observed.Summary((5.0,), "t")}))
            put(client, current, value)  # on the version read: refused
            raise AssertionError("not reached")
        put(client, current, value, timeout)

    monkeypatch.setattr(observed, "_put", another_drain_first)

    assert observed.keep(kube, [(API, 3.0)])

    found, _ = observed.parse(observed.get(kube))
    assert found[WEB].seconds == (5.0,)  # theirs kept
    assert found[API].seconds == (3.0,)  # ours on theirs (our first write was theirs' base)


def test_keep__conflicts_every_time__tried_twice__one_warning_no_exception(
    kube: Kube, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tried = []

    def lost(*_: Any, **__: Any) -> None:
        tried.append(True)
        raise KubeConflict("update configmap: conflict")

    monkeypatch.setattr(observed, "_put", lost)

    with caplog.at_level(logging.WARNING, logger="drainer.k8s.observed"):
        assert not observed.keep(kube, [(WEB, 2.0)])

    assert len(tried) == 2  # a 409 is tried once more, not until the drain's answer is late
    [line] = caplog.records
    assert "stop times not kept for the plan" in line.getMessage()
    assert "2 writes lost to others' updates" in line.getMessage()


CONFIGMAP = f"/namespaces/{observed.NAMESPACE}/configmaps/{observed.NAME}$"


@pytest.mark.parametrize(
    ("status", "said"),
    [(503, "503"), (500, "500"), (403, "forbidden"), (429, "429")],
)
def test_keep__the_api_server_failing__one_attempt__no_time_lost(
    sim: KubeSim, kube: Kube, caplog: pytest.LogCaptureFixture, status: int, said: str
) -> None:
    """The keep comes after the engine's run, before the drain's answer: a failing API
    server must not hold the answer back by the client's retries (6 attempts, ~8 s of
    backoff before)."""
    sim.faults.add(Fault(kind="status", path=CONFIGMAP, status=status, retry_after=2.0))
    started = time.monotonic()

    with caplog.at_level(logging.WARNING, logger="drainer.k8s.observed"):
        assert not observed.keep(kube, [(WEB, 2.0)])

    took = time.monotonic() - started
    assert took < 1.5, took
    assert sim.faults.counts("drainer").get("get configmaps") == 1
    [line] = caplog.records
    assert "stop times not kept for the plan" in line.getMessage()
    assert said in line.getMessage().lower(), line.getMessage()


def test_keep__the_api_server_slow__given_up_at_the_cap(
    sim: KubeSim, kube: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    """An API server that does not answer: the keep gives up at its cap (here half a
    second; KEEP_SECONDS in a drain), never the client's 10 s request timeout."""
    sim.faults.add(Fault(kind="latency", method="GET", path=CONFIGMAP, latency=30.0))
    started = time.monotonic()

    with caplog.at_level(logging.WARNING, logger="drainer.k8s.observed"):
        assert not observed.keep(kube, [(WEB, 2.0)], within=0.5)

    took = time.monotonic() - started
    assert 0.5 <= took < 1.5, took
    [line] = caplog.records
    assert "stop times not kept for the plan" in line.getMessage()
    assert "0.5 s" in line.getMessage(), line.getMessage()  # the keep's cap or its request's
    assert observed.KEEP_SECONDS <= 5


def test_keep__a_fault_of_its_own__one_warning_never_raised(
    kube: Kube, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_: Any) -> observed.Observations:
        raise ValueError("a bug")

    monkeypatch.setattr(observed, "merge", broken)

    with caplog.at_level(logging.WARNING, logger="drainer.k8s.observed"):
        assert not observed.keep(kube, [(WEB, 2.0)])

    [line] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "stop times not kept for the plan: ValueError: a bug" in line.getMessage()


def test_keep__configmap_missing__one_warning_and_the_plan_says_bounds(
    sim: KubeSim, kube: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    Cluster.of_kubesim(sim).delete("ConfigMap", observed.NAME, observed.NAMESPACE)

    with caplog.at_level(logging.WARNING, logger="drainer.k8s.observed"):
        assert not observed.keep(kube, [(WEB, 2.0)])

    [line] = caplog.records
    assert "kubectl apply -f k8s-rbac/ creates it" in line.getMessage()
    note = plan_observed.read(kube).note
    assert "does not exist" in note and "grace period is its stop time (a bound)" in note


def test_keep__corrupted_configmap__warned_and_replaced_by_a_sound_one(
    sim: KubeSim, kube: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    Cluster.of_kubesim(sim).patch(
        "ConfigMap", observed.NAME, {"data": {observed.KEY: "{broken"}}, observed.NAMESPACE
    )
    assert "is not JSON" in plan_observed.read(kube).note

    with caplog.at_level(logging.WARNING, logger="drainer.k8s.observed"):
        assert observed.keep(kube, [(WEB, 2.0)], now=0.0)

    assert any("is not JSON" in r.getMessage() for r in caplog.records)
    assert plan_observed.read(kube).known == {WEB: observed.Summary((2.0,), "1970-01-01T00:00:00Z")}


def test_plan__a_pod_observed_to_stop_in_0_4_s__eta_0_4_s_not_a_whole_second() -> None:
    """The forecast stops an observed pod in its tenths: three StatefulSet pods one at
    a time (each replacement made once the pod it replaces is gone) stopping in 0.4 s
    take 3 x 0.4 s, not 3 x 1 s."""
    from drainer.engine.filters import FilterOptions, Overrides
    from drainer.engine.options import DrainOptions
    from drainer.plan import model

    reference = {"kind": "StatefulSet", "name": "db", "controller": True}
    pod = w.pod("db-0", node_name="n1", grace=30, owner=reference)
    stops = plan_observed.Stops({("default", "StatefulSet", "db"): observed.Summary((0.4,), "t")})
    cluster = model.Cluster([], {}, None, stops)
    everything = Overrides(ignore_daemonsets=True, delete_emptydir_data=True, force=True)
    options = DrainOptions(filters=FilterOptions())

    plan = model.plan_node("n1", [pod], cluster, options, everything, timeout=600, now=0)

    assert plan.doc()["eta_seconds"] == 0.4, plan.doc()
    assert plan.doc()["eta_max_seconds"] == 30
