"""Where a replacement may land given the pods around it (the capacity check's
inter-pod part, drainer/plan/capacity.py): required pod anti-affinity (the pod's own
terms, and the terms of the pods already there against it), required pod affinity,
and topology spread constraints with whenUnsatisfiable: DoNotSchedule, each over
the topology domains its topologyKey draws (kubernetes.io/hostname: one node;
topology.kubernetes.io/zone: a zone).

The pods counted are those on every node still up (the nodes drained take theirs
away: `leaving`) and the replacements the plan has placed (`took`); pods already
terminating are not counted. A term's namespaces: its `namespaces`, or the pod's own
when it names none; a `namespaceSelector` of `{}` is every namespace, and a
non-empty one adds nothing (the plan does not read the namespaces' labels).

Topology spread as kube-scheduler's PodTopologySpread filter has it: the domains
are those of every node there (cordoned ones and the ones being drained too: the
scheduler counts them until they are deleted, kubernetes/kubernetes#106127) that
has every constraint's topologyKey and matches the pod's nodeSelector and required
node affinity (nodeAffinityPolicy Honor, the default) and, with nodeTaintsPolicy
Honor, whose taints it tolerates (a cordoned node's among them); a node may take the
pod when its domain's matching pods, plus one if the pod matches its own selector,
exceed the fewest in any domain (0 when there are fewer domains than minDomains) by
at most maxSkew."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from drainer.engine import pods
from drainer.engine.pods import Pod
from drainer.engine.watchers import selects

Term = dict[str, Any]
Labels = dict[str, str]
HOSTNAME = "kubernetes.io/hostname"


class Place(Protocol):
    """A node the pod may land on (capacity.Room)."""

    name: str
    labels: Labels

    def selected(self, pod: Pod) -> bool:
        """nodeSelector and required node affinity admit the pod."""

    def tolerated(self, pod: Pod) -> bool:
        """The node's NoSchedule/NoExecute taints are tolerated."""


@dataclass(frozen=True)
class Resident:
    """A pod on a node, as the inter-pod rules see it."""

    name: str
    namespace: str
    labels: Labels
    anti: tuple[Term, ...]

    @classmethod
    def of(cls, pod: Pod) -> Resident:
        meta = pod["metadata"]
        return cls(
            pods.name(pod),
            str(meta.get("namespace") or "default"),
            dict(meta.get("labels") or {}),
            tuple(_required(pod, "podAntiAffinity")),
        )


def _required(pod: Pod, kind: str) -> list[Term]:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    return list(affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def _namespace(pod: Pod) -> str:
    return str(pod["metadata"].get("namespace") or "default")


def term_selects(term: Term, owner_namespace: str, namespace: str, labels: Labels) -> bool:
    """Whether the term of a pod in `owner_namespace` selects a pod (its namespace, its
    labels)."""
    listed = set(term.get("namespaces") or [])
    chooser = term.get("namespaceSelector")
    everywhere = (
        chooser is not None
        and not chooser.get("matchLabels")
        and not chooser.get("matchExpressions")
    )
    if not everywhere:
        allowed = listed or ({owner_namespace} if chooser is None else set())
        if namespace not in allowed:
            return False
    return selects(term.get("labelSelector"), labels)


def _selector_text(selector: Mapping[str, Any] | None) -> str:
    if not selector:
        return "nothing"
    words = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for e in selector.get("matchExpressions") or []:
        values = ",".join(str(v) for v in e.get("values") or [])
        words.append(f"{e.get('key')} {e.get('operator')} ({values})" if values else
                     f"{e.get('key')} {e.get('operator')}")  # fmt: skip
    return ", ".join(words) or "every pod"


@dataclass
class Rules:
    """The inter-pod rules for one pod, computed once against the pods around it;
    `refuses` a node in O(terms)."""

    owner: str
    forbidden: list[tuple[str, dict[str, str], str]] = field(default_factory=list)
    """Anti-affinity: (topologyKey, {domain: a pod there}, whose term: "its"/"theirs")."""
    wanted: list[tuple[str, set[str], str]] = field(default_factory=list)
    """Affinity: (topologyKey, the domains with a matching pod, the selector's text)."""
    spread: list[Spread] = field(default_factory=list)

    def refuses(self, place: Place) -> str:
        """Why the pod cannot land on `place` ("": it can)."""
        for key, where, whose in self.forbidden:
            value = place.labels.get(key)
            if value is not None and value in where:
                return f"pod anti-affinity ({whose} term: {where[value]} in {key}={value})"
        for key, domains, text in self.wanted:
            if place.labels.get(key) not in domains:
                return f"pod affinity (no pod matching {text} in its {key})"
        for one in self.spread:
            why = one.refuses(place)
            if why:
                return why
        return ""

    def fixes(self, why: Iterable[str]) -> list[str]:
        """What would let the pod land, for the rules that refused it somewhere."""
        said = " ".join(why)
        found = []
        if "pod anti-affinity" in said:
            for key in sorted({key for key, where, _ in self.forbidden if where}):
                found.append(self._anti_fix(key))
        if "pod affinity" in said:
            for key, domains, text in self.wanted:
                if domains:
                    where = f"{key} {', '.join(sorted(domains))}"
                    found.append(f"add a node in {where} (where pods matching {text} run)")
                else:
                    found.append(
                        f"run a pod matching {text} on a node that stays (none does), or make "
                        f"{self.owner}'s pod affinity preferred"
                    )
        found += [one.fix() for one in self.spread if one.refused]
        return found

    def _anti_fix(self, key: str) -> str:
        """A domain free of what the anti-affinity terms on `key` exclude, or whose term
        to relax: the pod's own, or those of the pods already there."""
        taken = sorted({d for k, where, _ in self.forbidden if k == key for d in where})
        theirs = sorted(
            {pod for k, where, whose in self.forbidden if k == key and whose == "their"
             for pod in where.values()}
        )  # fmt: skip
        mine = any(k == key and where and whose == "its" for k, where, whose in self.forbidden)
        relax = [f"make {self.owner}'s anti-affinity preferred"] if mine else []
        relax += [f"make the anti-affinity of {', '.join(theirs)} preferred"] if theirs else []
        return (
            f"add a node whose {key} is none of {', '.join(taken)} (required pod "
            f"anti-affinity keeps {self.owner} out of those), or {' and '.join(relax)}"
        )


@dataclass
class Spread:
    """One DoNotSchedule constraint, counted."""

    owner: str
    key: str
    max_skew: int
    counts: dict[str, int]
    own: int
    """1 when the pod matches its own selector (its replacement adds to the count)."""
    min_domains: int = 1
    closed: set[str] = field(default_factory=set)
    """The domains whose nodes are all cordoned or being drained."""
    skews: list[int] = field(default_factory=list)
    """The skews of the nodes it refused (the pod's replacement landing there)."""
    unlabelled: bool = False
    """It refused a node without the topologyKey."""

    @property
    def refused(self) -> bool:
        return bool(self.skews) or self.unlabelled

    @property
    def least(self) -> int:
        """The fewest matching pods in a domain (0 with fewer domains than minDomains)."""
        if len(self.counts) < self.min_domains:
            return 0
        return min(self.counts.values(), default=0)

    def refuses(self, place: Place) -> str:
        value = place.labels.get(self.key)
        if value is None:
            self.unlabelled = True
            return f"topology spread (no {self.key} label)"
        skew = self.counts.get(value, 0) + self.own - self.least
        if skew <= self.max_skew:
            return ""
        self.skews.append(skew)
        return (
            f"topology spread on {self.key} ({value} would be {skew} over the fewest, "
            f"maxSkew {self.max_skew})"
        )

    def fix(self) -> str:
        """A node where the skew holds, or the maxSkew that would let it land."""
        if not self.skews:
            return f"add a node with a {self.key} label, where {self.owner} may count its spread"
        raise_to = f"raise maxSkew of {self.owner}'s constraint on {self.key} to {min(self.skews)}"
        if len(self.counts) < self.min_domains:
            return (
                f"add a node in a new {self.key} ({len(self.counts)} of the constraint's "
                f"minDomains {self.min_domains} have a schedulable node), or {raise_to}"
            )
        fewest = sorted(d for d, n in self.counts.items() if n == self.least)
        open_ = [d for d in fewest if d not in self.closed]
        where = f"{self.key} {', '.join(open_)}" if open_ else f"a new {self.key}"
        add = f"add a node in {where} (the fewest matching pods: {self.least})"
        if open_:
            return f"{add}, or {raise_to}"
        return (
            f"the fewest matching pods ({self.least}) are in {self.key} "
            f"{', '.join(fewest)}, whose nodes are cordoned or drained: kube-scheduler counts "
            f"them until they are deleted. Set nodeTaintsPolicy: Honor on {self.owner}'s "
            f"constraint on {self.key}, or {raise_to}, or {add}"
        )


class Topology:
    """The pods on each node still up, for the rules between pods."""

    def __init__(
        self,
        nodes: Mapping[str, Mapping[str, Any]],
        on: Mapping[str, list[Pod]],
        places: Mapping[str, Place],
        closed: Iterable[str],
    ):
        """`places`: every node, as the spread's domains see it; `closed`: those
        cordoned or being drained (there, but taking nothing)."""
        self.labels: dict[str, Labels] = {
            name: dict((node.get("metadata") or {}).get("labels") or {})
            for name, node in nodes.items()
        }
        self.on: dict[str, list[Resident]] = {
            name: [Resident.of(p) for p in there if not pods.is_terminating(p)]
            for name, there in on.items()
        }
        self.places = dict(places)
        self.closed = set(closed)

    def leaving(self, names: Iterable[str]) -> None:
        """These nodes are drained: their pods no longer count, and they take none."""
        for name in names:
            self.on.pop(name, None)
            self.closed.add(name)

    def reopened(self, names: Iterable[str]) -> None:
        """New instances under these names: empty and schedulable."""
        for name in names:
            self.on.pop(name, None)
            self.closed.discard(name)

    def took(self, node: str, pod: Pod) -> None:
        """A replacement placed on `node`: it counts from now on."""
        self.on.setdefault(node, []).append(Resident.of(pod))

    def rules(self, pod: Pod, owner: str) -> Rules:
        """The rules for the pod's replacement among the pods around it."""
        found = Rules(owner)
        namespace, labels = _namespace(pod), dict(pod["metadata"].get("labels") or {})
        for term in _required(pod, "podAntiAffinity"):
            key = str(term.get("topologyKey") or HOSTNAME)
            where = self._domains(key, _selected_by(term, namespace))
            found.forbidden.append((key, where, "its"))
        for node, residents in self.on.items():
            for resident in residents:
                for term in resident.anti:
                    key = str(term.get("topologyKey") or HOSTNAME)
                    value = self.labels.get(node, {}).get(key)
                    if value is not None and term_selects(
                        term, resident.namespace, namespace, labels
                    ):
                        found.forbidden.append((key, {value: resident.name}, "their"))
        for term in _required(pod, "podAffinity"):
            key = str(term.get("topologyKey") or HOSTNAME)
            where = self._domains(key, _selected_by(term, namespace))
            if where or not term_selects(term, namespace, namespace, labels):
                text = _selector_text(term.get("labelSelector"))
                found.wanted.append((key, set(where), text))
        found.spread = [self._spread(pod, c, owner) for c in _hard_constraints(pod)]
        return found

    def _domains(self, key: str, matches: Callable[[Resident], bool]) -> dict[str, str]:
        """Per domain of `key`: a pod there that `matches`."""
        where: dict[str, str] = {}
        for node, residents in self.on.items():
            value = self.labels.get(node, {}).get(key)
            if value is None or value in where:
                continue
            hit = next((r for r in residents if matches(r)), None)
            if hit is not None:
                where[value] = hit.name
        return where

    def _spread(self, pod: Pod, constraint: Term, owner: str) -> Spread:
        key = str(constraint.get("topologyKey") or "")
        domains = self._spread_domains(pod, constraint)
        selector = _with_label_keys(constraint, pod)
        namespace = _namespace(pod)
        counts = dict.fromkeys(domains, 0)
        for node, residents in self.on.items():
            value = self.labels.get(node, {}).get(key)
            if value in counts:
                counts[value] += sum(
                    1 for r in residents if r.namespace == namespace and selects(selector, r.labels)
                )
        own = 1 if selects(selector, dict(pod["metadata"].get("labels") or {})) else 0
        skew, least = int(constraint.get("maxSkew") or 1), int(constraint.get("minDomains") or 1)
        closed = {d for d, names in domains.items() if names <= self.closed}
        return Spread(owner, key, skew, counts, own, least, closed)

    def _spread_domains(self, pod: Pod, constraint: Term) -> dict[str, set[str]]:
        """The constraint's domains: per value of its key, the nodes that count."""
        key = str(constraint.get("topologyKey") or "")
        keys = [str(c.get("topologyKey") or "") for c in _hard_constraints(pod)]
        honour_affinity = constraint.get("nodeAffinityPolicy", "Honor") == "Honor"
        honour_taints = constraint.get("nodeTaintsPolicy", "Ignore") == "Honor"
        domains: dict[str, set[str]] = {}
        for name, place in self.places.items():
            if not all(k in place.labels for k in keys):
                continue
            if honour_affinity and not place.selected(pod):
                continue
            if honour_taints and not (
                place.tolerated(pod) and (name not in self.closed or pods.tolerates_cordon(pod))
            ):
                continue
            domains.setdefault(place.labels[key], set()).add(name)
        return domains


def _selected_by(term: Term, namespace: str) -> Callable[[Resident], bool]:
    """Whether the term of a pod in `namespace` selects a resident."""
    return lambda r: term_selects(term, namespace, r.namespace, r.labels)


def _hard_constraints(pod: Pod) -> list[Term]:
    return [
        c
        for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []
        if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
    ]


def _with_label_keys(constraint: Term, pod: Pod) -> dict[str, Any] | None:
    """The constraint's selector, narrowed by matchLabelKeys to the pod's own values."""
    selector = constraint.get("labelSelector")
    keys = constraint.get("matchLabelKeys") or []
    if selector is None or not keys:
        return selector
    labels = pod["metadata"].get("labels") or {}
    extra = [{"key": k, "operator": "In", "values": [labels[k]]} for k in keys if k in labels]
    return {**selector, "matchExpressions": [*(selector.get("matchExpressions") or []), *extra]}
