"""How long pods took to stop in the drainer's own drains, kept per owner in one
ConfigMap that only the drainer writes: kube-system/eks-node-drainer-observed.

k8s-rbac/observed.yaml creates it empty and lets the drainer's group get and update
that one name, nothing else (a Role limited by resourceNames: create cannot be, so
the drainer never creates it). Each drain adds what it saw at its end (`keep`: the
Lambda's runner, the CLI's drain), and `plan` reads it (drainer/plan/observed.py)
to forecast a pod's stop with its owner's observed time instead of its grace period.
An owner is the pod's workload (drainer/engine/pods.py: a Deployment's pods under the
Deployment, so what was seen outlives its rollouts; entries kept under a ReplicaSet's
name before are still read), each stop in tenths of a second.

The summary is bounded (the last SAMPLES stops per owner, the MAX_OWNERS owners
seen last) and doubted when read: a value that does not parse, or is not a stop a
drain could have seen, is dropped with a warning, never trusted. Keeping it never
fails a drain nor holds its answer back: one attempt per call (no retry of the
client's), a 409 tried once more, KEEP_SECONDS in all; a write refused, lost or late
is one warning line.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import math
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from drainer.errors import KubeConflict, KubeError, KubeNotFound
from drainer.k8s.kube import Kube

log = logging.getLogger(__name__)

NAMESPACE = "kube-system"
NAME = "eks-node-drainer-observed"
KEY = "stops.json"
"""The one data key: {"owners": {"NAMESPACE/KIND/NAME": {"seconds": [...], "at": ISO}}}."""
WHERE = f"ConfigMap {NAMESPACE}/{NAME}"

SAMPLES = 10
"""Stops kept per owner, the latest."""
MAX_OWNERS = 500
"""Owners kept, those seen last: about 100 KiB at most, a tenth of a ConfigMap's limit."""
MAX_SECONDS = 48 * 3600.0
"""The longest stop a drain can see (a lifecycle hook holds an instance 48 h at most):
a longer one is not a drain's, and is dropped when read."""
MAX_BYTES = 512 * 1024
"""A larger value than MAX_OWNERS owners can fill is not the drainer's: ignored."""
CONFLICT_ATTEMPTS = 2
"""Writes tried when another drain's update wins the race (409): re-read, merge, once more."""
KEEP_SECONDS = 4.0
"""The longest `keep` holds the drain's answer (the lifecycle action, the CLI's exit):
past it the write is given up, a warning said."""
DECIMALS = 1
"""A stop is kept in tenths of a second (0.4 s, not 0 or 1 s)."""

Owner = tuple[str, str, str]
"""namespace, kind, name of the pod's workload (drainer/engine/pods.py's)."""


@dataclass(frozen=True)
class Summary:
    """One owner's observed stops: the latest, oldest first, and when the last was kept."""

    seconds: tuple[float, ...]
    at: str

    @property
    def median(self) -> float:
        ordered = sorted(self.seconds)
        middle = len(ordered) // 2
        return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


Observations = dict[Owner, Summary]


def owner_key(owner: Owner) -> str:
    return "/".join(owner)


def _owner(key: object) -> Owner | None:
    parts = key.split("/") if isinstance(key, str) else []
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 and all(parts[1:]) else None


def _summary(value: object) -> Summary | None:
    """An owner's entry, its stops each a number a drain could have seen (others dropped)."""
    if not isinstance(value, dict) or not isinstance(value.get("seconds"), list):
        return None
    seconds = tuple(
        float(x)
        for x in value["seconds"][-SAMPLES:]
        if isinstance(x, int | float) and not isinstance(x, bool) and 0 <= x <= MAX_SECONDS
    )
    at = value.get("at")
    return Summary(seconds, at if isinstance(at, str) else "") if seconds else None


def parse(config_map: dict[str, Any]) -> tuple[Observations, str]:
    """The observations in the ConfigMap, and a warning ("" none) when some or all of it
    could not be trusted (then read as if those entries were not there)."""
    raw = (config_map.get("data") or {}).get(KEY)
    if raw is None or raw == "":
        return {}, ""
    if not isinstance(raw, str) or len(raw) > MAX_BYTES:
        return {}, f"{WHERE}: {KEY} is over {MAX_BYTES} bytes, not the drainer's: ignored"
    try:
        document = json.loads(raw)
    except ValueError as e:
        return {}, f"{WHERE}: {KEY} is not JSON ({e}): read as empty"
    owners = document.get("owners") if isinstance(document, dict) else None
    if not isinstance(owners, dict):
        return {}, f"{WHERE}: {KEY} has no 'owners' object: read as empty"
    found: Observations = {}
    dropped = 0
    for key, value in owners.items():
        owner, summary = _owner(key), _summary(value)
        if owner is None or summary is None:
            dropped += 1
            continue
        found[owner] = summary
    if dropped:
        return found, f"{WHERE}: {dropped} entry(ies) not a drain's stops: ignored"
    return found, ""


def merge(known: Observations, seen: Iterable[tuple[Owner, float]], at: str) -> Observations:
    """`known` with the stops a drain just saw added: the last SAMPLES per owner, and
    the MAX_OWNERS owners seen last (a stop out of range is not kept)."""
    added: dict[Owner, list[float]] = {}
    for owner, seconds in seen:
        if math.isfinite(seconds) and 0 <= seconds <= MAX_SECONDS:
            added.setdefault(owner, []).append(round(seconds, DECIMALS))
    merged = {owner: summary for owner, summary in known.items() if owner not in added}
    for owner, stops in added.items():
        before = known[owner].seconds if owner in known else ()
        merged[owner] = Summary(tuple([*before, *stops][-SAMPLES:]), at)
    latest = sorted(merged, key=lambda owner: merged[owner].at, reverse=True)[:MAX_OWNERS]
    return {owner: merged[owner] for owner in latest}


def encode(observations: Observations) -> str:
    owners = {
        owner_key(owner): {"seconds": list(summary.seconds), "at": summary.at}
        for owner, summary in sorted(observations.items())
    }
    return json.dumps({"owners": owners}, separators=(",", ":"))


def get(kube: Kube, timeout: float | None = None) -> dict[str, Any]:
    """The ConfigMap (KubeNotFound when k8s-rbac/observed.yaml was not applied);
    `timeout`: the whole request's, in seconds (None: the client's)."""
    found: dict[str, Any] = kube.request(
        "GET",
        f"/api/v1/namespaces/{NAMESPACE}/configmaps/{NAME}",
        verb="get",
        resource="configmaps",
        what=f"get configmap {NAMESPACE}/{NAME}",
        timeout=timeout,
    )
    return found


def _put(kube: Kube, current: dict[str, Any], value: str, timeout: float | None = None) -> None:
    """Replace the data key, on the version read (409 when another write came first)."""
    metadata = current.get("metadata") or {}
    kept = {k: metadata[k] for k in ("labels", "annotations") if metadata.get(k)}
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "resourceVersion": metadata.get("resourceVersion", ""),
            **kept,
        },
        "data": {**(current.get("data") or {}), KEY: value},
    }
    kube.request(
        "PUT",
        f"/api/v1/namespaces/{NAMESPACE}/configmaps/{NAME}",
        body=body,
        verb="update",
        resource="configmaps",
        what=f"update configmap {NAMESPACE}/{NAME}",
        timeout=timeout,
    )


def keep(
    kube: Kube,
    seen: list[tuple[Owner, float]],
    now: float | None = None,
    *,
    within: float | None = None,
) -> bool:
    """Add the stops a drain saw to the ConfigMap: read, merge, write on the version
    read, once more on a conflict, all within `within` seconds (None: KEEP_SECONDS;
    in a thread, left behind when the API server is slower: the caller then closes
    the client). Never raises: a failure is one warning line. True when written (or
    nothing to write)."""
    if not seen:
        return True
    within = KEEP_SECONDS if within is None else within
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))
    outcome: list[str] = []
    deadline = time.monotonic() + within

    def write() -> None:
        outcome.append(_write(_one_attempt(kube), seen, at, deadline))

    thread = threading.Thread(target=write, name="keep-observed", daemon=True)
    thread.start()
    thread.join(within)
    why = outcome[0] if outcome else f"no answer from the API server within {within:g} s"
    if not why:
        return True
    log.warning("stop times not kept for the plan: %s", why, extra={"stops_not_kept": len(seen)})
    return False


def _one_attempt(kube: Kube) -> Kube:
    """The client with no retry of its own (the same connections and credentials): a
    call that fails ends the keep, where the client's retries and backoff would hold
    the drain's answer back for most of a minute."""
    bounded = copy.copy(kube)
    bounded.retry = dataclasses.replace(kube.retry, attempts=1)
    return bounded


def _write(kube: Kube, seen: list[tuple[Owner, float]], at: str, deadline: float) -> str:
    """Read, merge and write before `deadline` (monotonic); "" when written, else why not."""
    try:
        for _ in range(CONFLICT_ATTEMPTS):
            current = get(kube, timeout=_left(deadline))
            known, warning = parse(current)  # what cannot be trusted is not kept either
            if warning:
                log.warning("%s", warning)
            try:
                _put(kube, current, encode(merge(known, seen, at)), timeout=_left(deadline))
            except KubeConflict:
                continue
            return ""
    except KubeNotFound:
        return f"{WHERE} does not exist (kubectl apply -f k8s-rbac/ creates it)"
    except KubeError as e:
        return str(e)
    except Exception as e:  # a fault of ours must not fail the drain either: said
        log.debug("keeping the stop times failed", exc_info=True)
        return f"{type(e).__name__}: {e}"
    return f"{CONFLICT_ATTEMPTS} writes lost to others' updates"


def _left(deadline: float) -> float:
    """The time left for one request, in tenths of a second (as the warning tells it):
    at least one (the request then times out)."""
    return max(0.1, round(deadline - time.monotonic(), 1))
