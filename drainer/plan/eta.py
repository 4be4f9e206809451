"""One node's drain forecast from a live client, at the drain's start: the plan's
own model (drainer/plan/model.py) over what a drain may read, so that the drain's
live lines carry an ETA (drainer/engine/pace.py) and its end line the forecast
against the actual.

It reads less than `plan`: the node's pods, the budgets, the pods of the namespaces
of the node's pods (their workloads' times to Ready: never every pod of the
cluster, and only once a budget holds a pod of the node) and the stops earlier
drains observed. No capacity check: the drain does
not wait on the plan's word, it only wants the time.
"""

from __future__ import annotations

from drainer.engine.options import DrainOptions
from drainer.engine.pace import Listed, NodeForecast
from drainer.engine.pods import Pod
from drainer.k8s.kube import Kube
from drainer.plan import model
from drainer.plan.observed import read as read_stops
from drainer.plan.timing import Startups, startups


def forecast_node(
    kube: Kube,
    node: str,
    options: DrainOptions,
    *,
    timeout: float,
    now: float,
    listed: Listed | None = None,
) -> NodeForecast:
    """The drain of `node` with `options`, `timeout` seconds left, as the plan has it
    at `now` (the wall clock, for pods already terminating); from the node's pods and
    the budgets the drain `listed` as it began, or read now. Raises KubeError when a
    read fails."""
    if listed is not None:
        on_node, budgets = listed
    else:
        on_node, budgets = (
            kube.list_pods_on_node(node, options.pod_selector)[0],
            kube.list_budgets()[0],
        )
    times = Startups(lambda: startups(_neighbours(kube, node, on_node, options)))
    cluster = model.Cluster(budgets, times, None, read_stops(kube))
    eta, paced_by, run = model.likely_drain(on_node, cluster, options, timeout=timeout, now=now)
    # A pod that never goes (a budget that allows none) is forecast to the timeout,
    # as the node's eta is: never 'nothing left' while it is still there.
    never = dict.fromkeys(run.left, float(timeout))
    return NodeForecast(
        eta,
        paced_by,
        evicted=dict(run.evicted),
        gone={**never, **run.gone},
        budgets={**run.through, **run.paced_by},
    )


def _neighbours(kube: Kube, node: str, on_node: list[Pod], options: DrainOptions) -> list[Pod]:
    """Every pod of the namespaces of the node's pods, for their workloads' times to
    Ready: read only when a budget holds a pod of the node (timing.Startups), never
    for a node whose pods no budget holds (a namespace may hold thousands)."""
    namespaces = sorted({str(p["metadata"].get("namespace", "")) for p in on_node})
    if options.pod_selector:  # the node's pods it leaves out are neighbours too
        return [pod for ns in namespaces for pod in kube.list_pods_in(ns)[0]]
    # the node's pods read once: on a large node, half of what the forecast reads
    off = [pod for ns in namespaces for pod in kube.list_pods_in(ns, off_node=node)[0]]
    return on_node + off
