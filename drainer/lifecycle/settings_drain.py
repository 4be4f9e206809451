"""The variables of how a drain goes and how it ends: its timeout and what happens
then, which pods are evicted and how, the waits after them (volumes, target
groups), the deadline's margins, the Kubernetes requests and dry runs.

Each is the metadata of one `Settings` field (drainer/lifecycle/settings.py); the
engine's options are made from them in one place (`Settings.drain_options`).
"""

from __future__ import annotations

from enum import StrEnum

from drainer.engine.options import CONCURRENCY_RANGE, GRACE_PERIOD_RANGE, STUCK_POD_RANGE
from drainer.lifecycle.settings_variable import env


class TimeoutPolicy(StrEnum):
    """What happens to pods still on the node when DRAIN_TIMEOUT_SECONDS runs out."""

    CONTINUE = "continue"
    """Complete the lifecycle action with CONTINUE; the remaining pods die with the node."""
    FORCE = "force"
    """Delete each pod still held (by its budget, a policy, an opt-out) when only its
    grace period (at most FORCE_GRACE_PERIOD_SECONDS) is left before the deadline,
    so that it ends before the deadline; then complete with CONTINUE."""
    ABANDON = "abandon"
    """Stop heartbeating and leave the action to the hook's own timeout and
    DefaultResult; the node stays cordoned so an operator can look."""


DRAIN_TIMEOUT_SECONDS = env(
    "DRAIN_TIMEOUT_SECONDS",
    "int",
    "3600",
    "Overall time a drain may take before TIMEOUT_POLICY applies, counted "
    "from the lifecycle event's time (when the instance began to wait), so "
    "Lambda hand-overs, retries and duplicate events all share it. At most "
    "48 hours, the longest a lifecycle hook can hold an instance.",
    minimum=60,
    maximum=172800,
)

TIMEOUT_POLICY = env(
    "TIMEOUT_POLICY",
    "choice",
    "continue",
    "At the drain timeout: continue = complete the action with CONTINUE, "
    "leaving the remaining pods; force = delete each pod still held, bypassing "
    "PodDisruptionBudgets, when only its grace period (at most "
    "FORCE_GRACE_PERIOD_SECONDS) is left before the deadline, so every pod gets "
    "SIGTERM and its grace before the node goes, then CONTINUE; "
    "abandon = stop heartbeating and leave the action to the hook's timeout "
    "and DefaultResult (the node stays cordoned for an operator). A drain an EC2 "
    "event began deletes held pods only where EC2 takes the instance at the deadline: "
    "a rebalance recommendation's, or a scheduled change's whose window is further "
    "than DRAIN_TIMEOUT_SECONDS, deletes none, whatever this says.",
    choices=("continue", "force", "abandon"),
    enum=TimeoutPolicy,
)

FAILURE_RESULT = env(
    "FAILURE_RESULT",
    "choice",
    "ABANDON",
    "Lifecycle action result sent after an unrecoverable error (an RBAC "
    "denial, an unknown cluster).",
    choices=("CONTINUE", "ABANDON"),
)

EVICTION_CONCURRENCY = env(
    "EVICTION_CONCURRENCY",
    "int",
    "32",
    "Evictions in flight at once within a priority tier; bounded so a large "
    "node does not flood the API server.",
    minimum=CONCURRENCY_RANGE[0],
    maximum=CONCURRENCY_RANGE[1],
)

EVICT_UNREPLICATED_PODS = env(
    "EVICT_UNREPLICATED_PODS",
    "bool",
    "true",
    "Evict pods no controller will recreate (kubectl's --force). The node is "
    "going away, so they die either way; a warning is logged for each.",
)

EVICT_EMPTYDIR_PODS = env(
    "EVICT_EMPTYDIR_PODS",
    "bool",
    "true",
    "Evict pods with emptyDir volumes (kubectl's --delete-emptydir-data); "
    "their data dies with the node either way.",
)

EVICT_DAEMONSET_PODS = env(
    "EVICT_DAEMONSET_PODS",
    "bool",
    "false",
    "Evict DaemonSet pods too. Off by default, like kubectl drain "
    "--ignore-daemonsets: the DaemonSet controller would recreate them on the "
    "cordoned node, and node agents (CNI, log shippers) should run to the end.",
)

HONOR_DO_NOT_DISRUPT = env(
    "HONOR_DO_NOT_DISRUPT",
    "bool",
    "true",
    "Hold the pods annotated karpenter.sh/do-not-disrupt (or "
    'eks-node-drainer/do-not-disrupt) "true" until the deadline instead of '
    "evicting them; TIMEOUT_POLICY then applies to them as to budget-held pods.",
)

GRACE_PERIOD_SECONDS = env(
    "GRACE_PERIOD_SECONDS",
    "int",
    "-1",
    "Grace period given to evicted pods. -1 uses each pod's own "
    "terminationGracePeriodSeconds; 0 deletes immediately.",
    minimum=-1,
    maximum=GRACE_PERIOD_RANGE[1],
)

FORCE_GRACE_PERIOD_SECONDS = env(
    "FORCE_GRACE_PERIOD_SECONDS",
    "int",
    "30",
    "The longest grace period TIMEOUT_POLICY=force gives (and spot interruption "
    "drains): a held pod is deleted that long before the deadline (its own "
    "grace if shorter, the time left if less), so budgets hold until then. "
    "0 deletes at the deadline itself.",
    minimum=0,
    maximum=3600,
)

STUCK_POD_SECONDS = env(
    "STUCK_POD_SECONDS",
    "int",
    "60",
    "How long past its deletion deadline a terminating pod may stay before it "
    "stops blocking the drain (a kubelet that never reports back).",
    minimum=STUCK_POD_RANGE[0],
    maximum=STUCK_POD_RANGE[1],
)

VOLUME_DETACH_TIMEOUT_SECONDS = env(
    "VOLUME_DETACH_TIMEOUT_SECONDS",
    "int",
    "120",
    "How long to wait, at a drain's end, for the VolumeAttachments on the node to go "
    "(all but those of the pods that stay on it: skipped, tolerating the cordon, "
    "stuck, or left out by a pod selector; so those of pods an earlier invocation "
    "evicted too), so EBS volumes detach cleanly before the instance dies. Within the "
    "drain's deadline: an invocation whose hand-over comes first hands the drain over "
    "with a volume still attached, and the next one waits on, for what is left of "
    "`VOLUME_DETACH_TIMEOUT_SECONDS` (in all, across hand-overs). 0: do not wait.",
    minimum=0,
    maximum=3600,
)

TARGET_GROUP_WAIT_SECONDS = env(
    "TARGET_GROUP_WAIT_SECONDS",
    "int",
    "300",
    "After the pods are gone, how long to wait (in all, across hand-overs) for the "
    "instance to leave the "
    "load balancer target groups it is a target of (the cluster's, found by the "
    "AWS Load Balancer Controller's elbv2.k8s.aws/cluster tag, and "
    "TARGET_GROUP_ARNS): deregistered where still registered, and done draining "
    "connections; in those of type ip, the same for the IPs of the pods the drain "
    "took off. 0: do not look at target groups.",
    minimum=0,
    maximum=3600,
)

TARGET_GROUP_ARNS = env(
    "TARGET_GROUP_ARNS",
    "names",
    "",
    "Comma-separated ARNs of more target groups to take the instance out of "
    "(NodePort services behind load balancers you manage yourself). Empty: only "
    "the cluster's own, those the AWS Load Balancer Controller tagged "
    "elbv2.k8s.aws/cluster.",
)

CRITICAL_RESERVE_SECONDS = env(
    "CRITICAL_RESERVE_SECONDS",
    "int",
    "120",
    "How long before the drain's deadline the critical tier (DNS and other "
    "system-cluster-critical or system-node-critical pods) starts even if "
    "ordinary pods are still held by their budgets or stuck, so critical pods "
    "are evicted gracefully rather than die with the node.",
    minimum=0,
    maximum=86400,
)

HANDOVER_MARGIN_SECONDS = env(
    "HANDOVER_MARGIN_SECONDS",
    "int",
    "60",
    "Time before the Lambda invocation's own deadline at which an unfinished "
    "drain hands over to a new invocation.",
    minimum=5,
    maximum=600,
)

GLOBAL_TIMEOUT_MARGIN_SECONDS = env(
    "GLOBAL_TIMEOUT_MARGIN_SECONDS",
    "int",
    "60",
    "The drain's deadline is at most the lifecycle hook's global timeout (from "
    "the moment the instance began to wait) minus this margin, so the timeout "
    "policy (force-deleting, completing the action) runs before Auto Scaling "
    "applies the hook's DefaultResult on its own. Leave room for "
    "FORCE_GRACE_PERIOD_SECONDS when TIMEOUT_POLICY=force.",
    minimum=0,
    maximum=3600,
)

KUBE_REQUEST_TIMEOUT_SECONDS = env(
    "KUBE_REQUEST_TIMEOUT_SECONDS",
    "float",
    "10",
    "Timeout of one Kubernetes API request (watches excepted).",
    minimum=1,
    maximum=120,
)

DRY_RUN = env(
    "DRY_RUN",
    "bool",
    "false",
    "Log what would be cordoned and evicted without changing anything; the "
    "lifecycle action is still completed.",
)
