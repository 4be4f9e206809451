"""How long each pod takes to stop, for the forecast: its owner's stops as the
drainer's own drains observed them (drainer/k8s/observed.py's ConfigMap, read as the
identity plan runs as), never more than its grace period; else the grace period
itself, an upper bound. Which is which is said in the plan's output."""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field

from drainer.engine import pods
from drainer.engine.pods import Pod
from drainer.errors import KubeError, KubeForbidden, KubeNotFound
from drainer.k8s import observed
from drainer.k8s.kube import Kube
from drainer.plan.forecast import Going
from drainer.plan.timing import Owner, owner

TEMPLATE_HASH = re.compile(r"[a-z0-9]{1,16}")
"""The suffix a Deployment's controller adds to its ReplicaSets' names."""


@dataclass(frozen=True)
class Stop:
    """One owner's pods on a node and the stop time the forecast gives them."""

    owner: Owner | None
    pods: int
    seconds: float
    samples: int
    """The drains' stops it comes from (0: the grace period, a bound)."""

    @property
    def observed(self) -> bool:
        return self.samples > 0

    def doc(self) -> dict[str, object]:
        return {
            "owner": None if self.owner is None else observed.owner_key(self.owner),
            "pods": self.pods,
            "seconds": round(self.seconds, 1),
            "observed": self.observed,
            "samples": self.samples,
        }

    def then(self) -> str:
        """The stop after a budget's last wave, in PACED BY's words."""
        if self.observed:
            return f"~{self.seconds:.1f} s to stop ({self._seen()})"
        return f"a {self.seconds:g} s grace period"

    def last(self, pod: str) -> str:
        """PACED BY when the last pod's stop is the drain's length."""
        if self.observed:
            return f"the stop of {pod} (~{self.seconds:.1f} s, {self._seen()})"
        return f"the grace period of {pod} ({self.seconds:g} s, an upper bound)"

    def _seen(self) -> str:
        return f"observed: the median of {self.samples} stop(s) in earlier drains"


@dataclass(frozen=True)
class Stops:
    """The stops the drains kept, per owner; `note`: why there are none to use ("" read)."""

    known: observed.Observations = field(default_factory=dict)
    note: str = ""

    @functools.cached_property
    def _by_deployment(self) -> dict[Owner, list[observed.Summary]]:
        """The entries kept under a ReplicaSet's name (before the drains kept a
        Deployment's pods under the Deployment's), by the Deployment that name tells
        ("web-5d8f" -> "web"): a rollout's older ReplicaSets count for it too."""
        found: dict[Owner, list[observed.Summary]] = {}
        for (namespace, kind, name), summary in self.known.items():
            deployment, _, suffix = name.rpartition("-")
            if kind == "ReplicaSet" and deployment and TEMPLATE_HASH.fullmatch(suffix):
                found.setdefault((namespace, "Deployment", deployment), []).append(summary)
        return found

    @functools.cached_property
    def _summaries(self) -> dict[Owner, observed.Summary | None]:
        """Each owner's summary once worked out: a node's pods share a few owners."""
        return {}

    def summary(self, key: Owner | None) -> observed.Summary | None:
        """The owner's stops: a Deployment's with those kept under its ReplicaSets'
        names, oldest first, the last SAMPLES."""
        if key is None:
            return None
        if key not in self._summaries:
            self._summaries[key] = self._summary(key)
        return self._summaries[key]

    def _summary(self, key: Owner) -> observed.Summary | None:
        kept = [*self._by_deployment.get(key, []), *filter(None, [self.known.get(key)])]
        if not kept:
            return None
        kept.sort(key=lambda one: one.at)
        seconds = tuple(s for one in kept for s in one.seconds)[-observed.SAMPLES :]
        return observed.Summary(seconds, kept[-1].at)

    def of(self, pod: Pod) -> Stop:
        """The pod's stop: its owner's observed median, capped by its grace period;
        its grace period when none was observed."""
        grace = pods.grace_period(pod)
        key = owner(pod)
        summary = self.summary(key)
        if summary is None:
            return Stop(key, 1, float(grace), 0)
        return Stop(key, 1, min(float(grace), summary.median), len(summary.seconds))

    def timed(self, going: Going) -> Going:
        """The pod as the forecast should stop it: with its observed stop (in tenths of
        a second, never more than its grace period); its grace period otherwise."""
        if not self.known:
            return going  # no drain kept a stop: every pod stops in its grace period
        stop = self.of(going.pod)
        if not stop.observed or going.stopping is not None:
            return going
        return dataclasses.replace(going, stop=stop.seconds)

    def on_node(self, going: list[Going]) -> list[Stop]:
        """The stops of the pods a node's drain evicts, one per owner (and bound)."""
        grouped: dict[tuple[Owner | None, float, int], int] = {}
        for one in going:
            if one.stopping is None:
                stop = self.of(one.pod)
                at = (stop.owner, stop.seconds, stop.samples)
                grouped[at] = grouped.get(at, 0) + 1
        return [
            Stop(key, count, seconds, samples)
            for (key, seconds, samples), count in sorted(
                grouped.items(), key=lambda item: (item[0][0] or ("", "", ""), item[0][1])
            )
        ]


def read(kube: Kube) -> Stops:
    """The drains' stops, as this identity may read them; none, with the reason, when
    the ConfigMap is missing, unreadable or not to be trusted."""
    bounds = "each pod's grace period is its stop time (a bound)"
    try:
        found, warning = observed.parse(observed.get(kube))
    except KubeNotFound:
        return Stops(
            note=f"no stop time observed: {observed.WHERE} does not exist "
            f"(kubectl apply -f k8s-rbac/ creates it; the drains fill it); {bounds}"
        )
    except KubeForbidden as e:
        return Stops(note=f"the stop times the drains observed are not readable ({e}); {bounds}")
    except KubeError as e:
        return Stops(note=f"the stop times the drains observed could not be read ({e}); {bounds}")
    return Stops(found, warning)
