"""The drainer's settings: one frozen dataclass, read from the environment once.

`Settings.from_env(os.environ)` is the only place that reads environment variables.
Every field carries its environment variable, default, range and reason in its
`metadata`; `VARIABLES` is derived from those fields, so the table of
docs/reference.md and the CloudFormation parameter defaults can be generated from
the same source
(`python -m drainer.lifecycle.settings` prints it as JSON).

A value that cannot be used stops the cold start with a `SettingsError` naming the
variable, the value and what is allowed: a drain run with a misread timeout is worse
than no drain at all.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, cast

from drainer.engine.filters import FilterOptions
from drainer.engine.options import (
    CONCURRENCY_RANGE,
    GRACE_PERIOD_RANGE,
    STUCK_POD_RANGE,
    DrainOptions,
)
from drainer.errors import SettingsError

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
LifecycleResult = Literal["CONTINUE", "ABANDON"]
Kind = Literal["str", "names", "int", "float", "bool", "choice"]

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})
_HIDDEN = "***"


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


@dataclass(frozen=True)
class Variable:
    """One environment variable: how it is read, its default and why it exists."""

    name: str
    """The environment variable."""
    field: str
    """The `Settings` attribute it fills."""
    kind: Kind
    """How the text is parsed."""
    default: str
    """The default, as it would be written in the environment (and in CloudFormation)."""
    description: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    """Allowed values of a "choice" variable, compared case-insensitively."""
    pattern: str = ""
    """A regular expression a non-empty "str" value must match in full."""
    pattern_description: str = ""
    """The pattern in words, for error messages and the README."""
    secret: bool = False
    """Hidden by `Settings.describe()`; no variable is secret today."""

    def allowed(self) -> str:
        """What the variable accepts, in words, for error messages and the README."""
        if self.kind == "int":
            return f"an integer from {self.minimum:g} to {self.maximum:g}"
        if self.kind == "float":
            return f"a number from {self.minimum:g} to {self.maximum:g}"
        if self.kind == "bool":
            return "true/false, 1/0, yes/no or on/off"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "names":
            return "a comma-separated list, or empty"
        if self.pattern_description:
            return f"{self.pattern_description}, or empty"
        return "a string"

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready description, for generated documentation and templates."""
        return {
            "name": self.name,
            "field": self.field,
            "kind": self.kind,
            "default": self.default,
            "description": self.description,
            "allowed": self.allowed(),
            "minimum": self.minimum,
            "maximum": self.maximum,
            "choices": list(self.choices),
            "pattern": self.pattern,
            "secret": self.secret,
        }


def _env(
    name: str,
    kind: Kind,
    default: str,
    description: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] = (),
    pattern: str = "",
    pattern_description: str = "",
) -> dict[str, object]:
    spec = {
        "name": name,
        "kind": kind,
        "default": default,
        "description": description,
        "minimum": minimum,
        "maximum": maximum,
        "choices": choices,
        "pattern": pattern,
        "pattern_description": pattern_description,
    }
    return {"env": spec}


@dataclass(frozen=True)
class Settings:
    """Everything the drainer can be told through its environment.

    Defaults are the dataclass defaults; `from_env` applies the same defaults to
    unset or empty variables.
    """

    cluster_name: str = field(
        default="",
        metadata=_env(
            "CLUSTER_NAME",
            "str",
            "",
            "EKS cluster to drain nodes of when neither the hook's NotificationMetadata "
            "nor the ASG's tags name one. Empty: the cluster must come from those.",
            pattern=r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}",
            pattern_description="an EKS cluster name: up to 100 letters, digits, '-' "
            "or '_', starting with a letter or digit",
        ),
    )
    allowed_asgs: frozenset[str] = field(
        default=frozenset(),
        metadata=_env(
            "ALLOWED_ASGS",
            "names",
            "",
            "Comma-separated Auto Scaling group names the function may act on; "
            "events from other groups are refused unless ASG_TAG admits them. Empty, "
            "with ASG_TAG empty too: any group.",
        ),
    )
    asg_tag: str = field(
        default="",
        metadata=_env(
            "ASG_TAG",
            "str",
            "",
            "An Auto Scaling group tag, key=value, that puts a group in the function's "
            "care beside ALLOWED_ASGS: the function gives every group carrying it a "
            "terminate hook (CREATE_LIFECYCLE_HOOKS) and drains its instances, unless "
            "the group's cluster tags name another cluster than CLUSTER_NAME. Empty: "
            "ALLOWED_ASGS alone.",
            pattern=r"[A-Za-z0-9 +\-._:/@]{1,128}=[A-Za-z0-9 +\-._:/@]{1,256}",
            pattern_description="key=value: a tag key of up to 128 and a value of up to "
            "256 letters, digits, spaces or + - . _ : / @ (no '=' in either)",
        ),
    )
    create_lifecycle_hooks: bool = field(
        default=True,
        metadata=_env(
            "CREATE_LIFECYCLE_HOOKS",
            "bool",
            "true",
            "Keep a terminate lifecycle hook named LIFECYCLE_HOOK_NAME on every group "
            "of ALLOWED_ASGS and ASG_TAG (created or corrected on a schedule, on Auto "
            "Scaling API events and at deploy). false: the hooks are yours to make.",
        ),
    )
    lifecycle_hook_name: str = field(
        default="eks-node-drainer",
        metadata=_env(
            "LIFECYCLE_HOOK_NAME",
            "str",
            "eks-node-drainer",
            "Name of the terminate lifecycle hooks the function keeps on its groups.",
            pattern=r"[A-Za-z0-9\-_/]{1,255}",
            pattern_description="1 to 255 letters, digits, '-', '_' or '/'",
        ),
    )
    heartbeat_timeout: int = field(
        default=600,
        metadata=_env(
            "HEARTBEAT_TIMEOUT",
            "int",
            "600",
            "HeartbeatTimeout of the hooks the function keeps: seconds an instance "
            "waits without a heartbeat before the hook's DefaultResult (CONTINUE).",
            minimum=30,
            maximum=7200,
        ),
    )
    allow_managed_node_groups: bool = field(
        default=False,
        metadata=_env(
            "ALLOW_MANAGED_NODE_GROUPS",
            "bool",
            "false",
            "Put the hooks on EKS managed node groups too (groups tagged "
            "eks:nodegroup-name). false: they are left alone, since EKS drains their "
            "nodes itself. true: both terminate hooks fire together on a scale-in; on "
            "an update EKS drains first and ours finds the node empty; an ABANDON of "
            "ours cuts EKS's own hook short too.",
        ),
    )
    drain_timeout_seconds: int = field(
        default=3600,
        metadata=_env(
            "DRAIN_TIMEOUT_SECONDS",
            "int",
            "3600",
            "Overall time a drain may take before TIMEOUT_POLICY applies, counted "
            "from the lifecycle event's time (when the instance began to wait), so "
            "Lambda hand-overs, retries and duplicate events all share it. At most "
            "48 hours, the longest a lifecycle hook can hold an instance.",
            minimum=60,
            maximum=172800,
        ),
    )
    timeout_policy: TimeoutPolicy = field(
        default=TimeoutPolicy.CONTINUE,
        metadata=_env(
            "TIMEOUT_POLICY",
            "choice",
            "continue",
            "At the drain timeout: continue = complete the action with CONTINUE, "
            "leaving the remaining pods; force = delete each pod still held, bypassing "
            "PodDisruptionBudgets, when only its grace period (at most "
            "FORCE_GRACE_PERIOD_SECONDS) is left before the deadline, so every pod gets "
            "SIGTERM and its grace before the node goes, then CONTINUE; "
            "abandon = stop heartbeating and leave the action to the hook's timeout "
            "and DefaultResult (the node stays cordoned for an operator).",
            choices=("continue", "force", "abandon"),
        ),
    )
    failure_result: LifecycleResult = field(
        default="ABANDON",
        metadata=_env(
            "FAILURE_RESULT",
            "choice",
            "ABANDON",
            "Lifecycle action result sent after an unrecoverable error (an RBAC "
            "denial, an unknown cluster).",
            choices=("CONTINUE", "ABANDON"),
        ),
    )
    eviction_concurrency: int = field(
        default=32,
        metadata=_env(
            "EVICTION_CONCURRENCY",
            "int",
            "32",
            "Evictions in flight at once within a priority tier; bounded so a large "
            "node does not flood the API server.",
            minimum=CONCURRENCY_RANGE[0],
            maximum=CONCURRENCY_RANGE[1],
        ),
    )
    evict_unreplicated_pods: bool = field(
        default=True,
        metadata=_env(
            "EVICT_UNREPLICATED_PODS",
            "bool",
            "true",
            "Evict pods no controller will recreate (kubectl's --force). The node is "
            "going away, so they die either way; a warning is logged for each.",
        ),
    )
    evict_emptydir_pods: bool = field(
        default=True,
        metadata=_env(
            "EVICT_EMPTYDIR_PODS",
            "bool",
            "true",
            "Evict pods with emptyDir volumes (kubectl's --delete-emptydir-data); "
            "their data dies with the node either way.",
        ),
    )
    evict_daemonset_pods: bool = field(
        default=False,
        metadata=_env(
            "EVICT_DAEMONSET_PODS",
            "bool",
            "false",
            "Evict DaemonSet pods too. Off by default, like kubectl drain "
            "--ignore-daemonsets: the DaemonSet controller would recreate them on the "
            "cordoned node, and node agents (CNI, log shippers) should run to the end.",
        ),
    )
    honor_do_not_disrupt: bool = field(
        default=True,
        metadata=_env(
            "HONOR_DO_NOT_DISRUPT",
            "bool",
            "true",
            "Hold the pods annotated karpenter.sh/do-not-disrupt (or "
            'eks-node-drainer/do-not-disrupt) "true" until the deadline instead of '
            "evicting them; TIMEOUT_POLICY then applies to them as to budget-held pods.",
        ),
    )
    grace_period_seconds: int = field(
        default=-1,
        metadata=_env(
            "GRACE_PERIOD_SECONDS",
            "int",
            "-1",
            "Grace period given to evicted pods. -1 uses each pod's own "
            "terminationGracePeriodSeconds; 0 deletes immediately.",
            minimum=-1,
            maximum=GRACE_PERIOD_RANGE[1],
        ),
    )
    force_grace_period_seconds: int = field(
        default=30,
        metadata=_env(
            "FORCE_GRACE_PERIOD_SECONDS",
            "int",
            "30",
            "The longest grace period TIMEOUT_POLICY=force gives (and spot interruption "
            "drains): a held pod is deleted that long before the deadline (its own "
            "grace if shorter, the time left if less), so budgets hold until then. "
            "0 deletes at the deadline itself.",
            minimum=0,
            maximum=3600,
        ),
    )
    stuck_pod_seconds: int = field(
        default=60,
        metadata=_env(
            "STUCK_POD_SECONDS",
            "int",
            "60",
            "How long past its deletion deadline a terminating pod may stay before it "
            "stops blocking the drain (a kubelet that never reports back).",
            minimum=STUCK_POD_RANGE[0],
            maximum=STUCK_POD_RANGE[1],
        ),
    )
    volume_detach_timeout_seconds: int = field(
        default=120,
        metadata=_env(
            "VOLUME_DETACH_TIMEOUT_SECONDS",
            "int",
            "120",
            "How long to wait for the VolumeAttachments of evicted pods to go, so EBS "
            "volumes detach cleanly before the instance dies. 0: do not wait.",
            minimum=0,
            maximum=3600,
        ),
    )
    target_group_wait_seconds: int = field(
        default=300,
        metadata=_env(
            "TARGET_GROUP_WAIT_SECONDS",
            "int",
            "300",
            "After the pods are gone, how long to wait for the instance to leave the "
            "load balancer target groups it is a target of (the cluster's, found by the "
            "AWS Load Balancer Controller's elbv2.k8s.aws/cluster tag, and "
            "TARGET_GROUP_ARNS): deregistered where still registered, and done draining "
            "connections; in those of type ip, the same for the IPs of the pods the drain "
            "took off. 0: do not look at target groups.",
            minimum=0,
            maximum=3600,
        ),
    )
    target_group_arns: frozenset[str] = field(
        default=frozenset(),
        metadata=_env(
            "TARGET_GROUP_ARNS",
            "names",
            "",
            "Comma-separated ARNs of more target groups to take the instance out of "
            "(NodePort services behind load balancers you manage yourself). Empty: only "
            "the cluster's own, those the AWS Load Balancer Controller tagged "
            "elbv2.k8s.aws/cluster.",
        ),
    )
    notification_topic_arn: str = field(
        default="",
        metadata=_env(
            "NOTIFICATION_TOPIC_ARN",
            "str",
            "",
            "An SNS topic told, in a short message for people, when a drain ends, fails "
            "or times out (instance, node, result, duration, budgets, pods left). Empty: "
            "no notices.",
        ),
    )
    notify_on_start: bool = field(
        default=False,
        metadata=_env(
            "NOTIFY_ON_START",
            "bool",
            "false",
            "Tell NOTIFICATION_TOPIC_ARN when a drain starts too.",
        ),
    )
    launch_hook: bool = field(
        default=False,
        metadata=_env(
            "LAUNCH_HOOK",
            "bool",
            "false",
            "Also keep a launch lifecycle hook (LAUNCH_HOOK_NAME) on the node groups: each "
            "new instance waits in Pending:Wait until its node has joined the cluster, is "
            "Ready and has lost its startup taints (LAUNCH_STARTUP_TAINTS), so an instance "
            "refresh or a replacement goes on only once the new node can take pods.",
        ),
    )
    launch_hook_name: str = field(
        default="eks-node-drainer-launch",
        metadata=_env(
            "LAUNCH_HOOK_NAME",
            "str",
            "eks-node-drainer-launch",
            "The launch lifecycle hook's name (LAUNCH_HOOK).",
        ),
    )
    launch_timeout_seconds: int = field(
        default=600,
        metadata=_env(
            "LAUNCH_TIMEOUT_SECONDS",
            "int",
            "600",
            "How long after the launch action began a new node may take to be able to "
            "take pods (within one invocation); then LAUNCH_TIMEOUT_RESULT.",
            minimum=30,
            maximum=840,
        ),
    )
    launch_timeout_result: Literal["abandon", "continue"] = field(
        default="abandon",
        metadata=_env(
            "LAUNCH_TIMEOUT_RESULT",
            "choice",
            "abandon",
            "A new instance whose node cannot take pods in time (not Ready, a startup "
            "taint still there, or cordoned with LAUNCH_WAIT_FOR_UNCORDON): abandon = "
            "ABANDON (Auto Scaling terminates it and launches another; an instance refresh "
            "stops); "
            "continue = CONTINUE with a warning.",
            choices=("abandon", "continue"),
        ),
    )
    launch_wait_daemonsets: bool = field(
        default=True,
        metadata=_env(
            "LAUNCH_WAIT_DAEMONSETS",
            "bool",
            "true",
            "A new node counts as ready once its DaemonSet pods (CNI, log agents) on it "
            "are Ready too.",
        ),
    )
    launch_startup_taints: frozenset[str] = field(
        default=frozenset(
            {
                "node.cilium.io/agent-not-ready",
                "ebs.csi.aws.com/agent-not-ready",
                "efs.csi.aws.com/agent-not-ready",
            }
        ),
        metadata=_env(
            "LAUNCH_STARTUP_TAINTS",
            "names",
            "node.cilium.io/agent-not-ready,ebs.csi.aws.com/agent-not-ready,"
            "efs.csi.aws.com/agent-not-ready",
            "Keys of the taints that CNI and CSI agents put on a new node and remove once "
            "they run on it (Cilium's, the EBS and EFS CSI drivers'): a new node counts as "
            "ready once they are gone, as it always waits for "
            "node.cloudprovider.kubernetes.io/uninitialized, node.kubernetes.io/not-ready, "
            "node.kubernetes.io/unreachable and node.kubernetes.io/network-unavailable to go.",
        ),
    )
    launch_wait_for_uncordon: bool = field(
        default=False,
        metadata=_env(
            "LAUNCH_WAIT_FOR_UNCORDON",
            "bool",
            "false",
            "A new node cordoned when it registered: false = CONTINUE once it is ready "
            "otherwise, the cordon named in the end line, a Kubernetes Event and the notice "
            "(someone's decision); true = wait for the uncordon too, then "
            "LAUNCH_TIMEOUT_RESULT.",
        ),
    )
    spot_interruption_drain: bool = field(
        default=True,
        metadata=_env(
            "SPOT_INTERRUPTION_DRAIN",
            "bool",
            "true",
            "Drain a node at once on its EC2 Spot Instance Interruption Warning, with a "
            "deadline of the warning's time plus 2 minutes less "
            "SPOT_DEADLINE_MARGIN_SECONDS. The terminate hook's event that may follow "
            "for the same instance waits for that drain instead of starting another.",
        ),
    )
    spot_deadline_margin_seconds: int = field(
        default=15,
        metadata=_env(
            "SPOT_DEADLINE_MARGIN_SECONDS",
            "int",
            "15",
            "How long before EC2 reclaims a spot instance (2 minutes after its "
            "warning), or acts at a time its event names (a scheduled change's start, "
            "a capacity reservation's termination), the drain must be over, so evicted "
            "pods finish their shutdown on a live node; grace periods are cut to fit.",
            minimum=0,
            maximum=100,
        ),
    )
    scheduled_change_drain: bool = field(
        default=True,
        metadata=_env(
            "SCHEDULED_CHANGE_DRAIN",
            "bool",
            "true",
            "Drain a node on an AWS Health scheduled change for its instance (retirement, "
            "maintenance), every instance the event names, with a deadline of the "
            "window's start less SPOT_DEADLINE_MARGIN_SECONDS (or DRAIN_TIMEOUT_SECONDS "
            "when the window is further away).",
        ),
    )
    scheduled_change_lead_seconds: int = field(
        default=0,
        metadata=_env(
            "SCHEDULED_CHANGE_LEAD_SECONDS",
            "int",
            "0",
            "When a scheduled change's node is drained: 0 = when AWS Health's event "
            "arrives; more = that long before the window starts (an EventBridge "
            "Scheduler schedule invokes the function then, with SCHEDULER_ROLE_ARN).",
            minimum=0,
            maximum=1209600,
        ),
    )
    scheduler_role_arn: str = field(
        default="",
        metadata=_env(
            "SCHEDULER_ROLE_ARN",
            "str",
            "",
            "The role EventBridge Scheduler invokes the function with, for "
            "SCHEDULED_CHANGE_LEAD_SECONDS (the stack sets it).",
        ),
    )
    stack_id: str = field(
        default="",
        metadata=_env(
            "STACK_ID",
            "str",
            "",
            "The ARN of the stack that deployed the function (the stack sets it). Its "
            "custom resource answers only this stack's requests, and every hook the "
            "function puts names it in its NotificationMetadata, so that the stack "
            "deletes only the hooks it put. Empty: hooks name no stack.",
            pattern=r"arn:aws[a-z-]*:cloudformation:[a-z0-9-]+:\d{12}:stack/"
            r"[A-Za-z][A-Za-z0-9-]*/\S+",
            pattern_description="a CloudFormation stack ARN",
        ),
    )
    state_change_drain: bool = field(
        default=False,
        metadata=_env(
            "STATE_CHANGE_DRAIN",
            "bool",
            "false",
            "Drain a node at once when its instance is stopping or shutting down (an "
            "EC2 state-change notification): instances stopped or terminated outside "
            "the terminate hook, with the minute the OS's shutdown leaves.",
        ),
    )
    capacity_reservation_drain: bool = field(
        default=True,
        metadata=_env(
            "CAPACITY_RESERVATION_DRAIN",
            "bool",
            "true",
            "Drain a node at once on its EC2 Capacity Reservation Instance Interruption "
            "Warning (an interruptible reservation taking its capacity back), with a "
            "deadline of the warning's instance-termination-time less "
            "SPOT_DEADLINE_MARGIN_SECONDS.",
        ),
    )
    rebalance_action: Literal["off", "cordon", "drain"] = field(
        default="off",
        metadata=_env(
            "REBALANCE_ACTION",
            "choice",
            "off",
            "On an EC2 Instance Rebalance Recommendation (a spot instance at higher "
            "risk of interruption): off = nothing; cordon = no new pods on the node; "
            "drain = cordon and evict its pods like a scale-in, within one invocation.",
            choices=("off", "cordon", "drain"),
        ),
    )
    critical_reserve_seconds: int = field(
        default=120,
        metadata=_env(
            "CRITICAL_RESERVE_SECONDS",
            "int",
            "120",
            "How long before the drain's deadline the critical tier (DNS and other "
            "system-cluster-critical or system-node-critical pods) starts even if "
            "ordinary pods are still held by their budgets or stuck, so critical pods "
            "are evicted gracefully rather than die with the node.",
            minimum=0,
            maximum=86400,
        ),
    )
    handover_margin_seconds: int = field(
        default=60,
        metadata=_env(
            "HANDOVER_MARGIN_SECONDS",
            "int",
            "60",
            "Time before the Lambda invocation's own deadline at which an unfinished "
            "drain hands over to a new invocation.",
            minimum=5,
            maximum=600,
        ),
    )
    global_timeout_margin_seconds: int = field(
        default=60,
        metadata=_env(
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
        ),
    )
    kube_request_timeout_seconds: float = field(
        default=10.0,
        metadata=_env(
            "KUBE_REQUEST_TIMEOUT_SECONDS",
            "float",
            "10",
            "Timeout of one Kubernetes API request (watches excepted).",
            minimum=1,
            maximum=120,
        ),
    )
    dry_run: bool = field(
        default=False,
        metadata=_env(
            "DRY_RUN",
            "bool",
            "false",
            "Log what would be cordoned and evicted without changing anything; the "
            "lifecycle action is still completed.",
        ),
    )
    log_level: LogLevel = field(
        default="INFO",
        metadata=_env(
            "LOG_LEVEL",
            "choice",
            "INFO",
            "Level of the drainer's own logs.",
            choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        ),
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Read and validate every variable; unset or empty means the default.

        Raises SettingsError naming the first variable that cannot be used.
        """
        values: dict[str, Any] = {}
        for variable in VARIABLES:
            raw = env.get(variable.name, "").strip()
            values[variable.field] = _parse(variable, raw if raw else variable.default)
        return cls(**values)

    def allows_group(self, asg_name: str) -> bool:
        """ALLOWED_ASGS: may the function act on this Auto Scaling group's instances,
        by its name alone? True for any group when neither ALLOWED_ASGS nor ASG_TAG is
        set; a group admitted by ASG_TAG only needs its tags read
        (drainer/lifecycle/admission.py: group_refused)."""
        if not self.allowed_asgs and not self.asg_tag:
            return True
        return asg_name in self.allowed_asgs

    @property
    def asg_tag_pair(self) -> tuple[str, str] | None:
        """ASG_TAG as (key, value); None when unset."""
        if not self.asg_tag:
            return None
        key, _, value = self.asg_tag.partition("=")
        return key, value

    def drain_options(self) -> DrainOptions:
        """The engine's options these settings give: the one mapping between them."""
        return DrainOptions(
            filters=FilterOptions(
                evict_unreplicated=self.evict_unreplicated_pods,
                evict_emptydir=self.evict_emptydir_pods,
                evict_daemonset=self.evict_daemonset_pods,
            ),
            concurrency=self.eviction_concurrency,
            grace_period_seconds=self.grace_period_seconds
            if self.grace_period_seconds >= 0
            else None,
            stuck_pod_seconds=self.stuck_pod_seconds,
            critical_reserve_seconds=self.critical_reserve_seconds,
            volume_detach_timeout=self.volume_detach_timeout_seconds,
            dry_run=self.dry_run,
            force_on_timeout=self.timeout_policy == TimeoutPolicy.FORCE,
            force_grace_period_seconds=self.force_grace_period_seconds,
            honor_do_not_disrupt=self.honor_do_not_disrupt,
        )

    def describe(self) -> dict[str, object]:
        """The resolved settings, JSON-ready, for the one log line at cold start.

        Secret variables are hidden here and nowhere else.
        """
        described: dict[str, object] = {}
        for variable in VARIABLES:
            value = getattr(self, variable.field)
            if variable.secret:
                described[variable.field] = _HIDDEN if value else ""
            elif isinstance(value, frozenset):
                described[variable.field] = sorted(value)
            elif isinstance(value, StrEnum):
                described[variable.field] = value.value
            else:
                described[variable.field] = value
        return described


def _variables() -> tuple[Variable, ...]:
    found = []
    for f in dataclasses.fields(Settings):
        spec = cast(dict[str, Any], f.metadata["env"])
        found.append(Variable(field=f.name, **spec))
    return tuple(found)


VARIABLES: tuple[Variable, ...] = _variables()
"""Every environment variable the drainer reads, in Settings field order."""


def _invalid(variable: Variable, raw: str, why: str = "") -> SettingsError:
    reason = f" ({why})" if why else ""
    return SettingsError(
        variable.name,
        f"{raw!r} is not valid{reason}; expected {variable.allowed()} "
        f"(default {variable.default!r})",
    )


def _parse(variable: Variable, raw: str) -> object:
    if variable.kind == "int":
        return _parse_number(variable, raw, int)
    if variable.kind == "float":
        return _parse_number(variable, raw, float)
    if variable.kind == "bool":
        lowered = raw.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise _invalid(variable, raw)
    if variable.kind == "choice":
        for choice in variable.choices:
            if raw.lower() == choice.lower():
                return TimeoutPolicy(choice) if variable.field == "timeout_policy" else choice
        raise _invalid(variable, raw)
    if variable.kind == "names":
        return frozenset(name.strip() for name in raw.split(",") if name.strip())
    if raw and variable.pattern and not re.fullmatch(variable.pattern, raw):
        raise _invalid(variable, raw)
    return raw


def _parse_number(variable: Variable, raw: str, kind: type[int] | type[float]) -> int | float:
    try:
        value = kind(raw)
    except ValueError:
        raise _invalid(variable, raw) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise _invalid(variable, raw)
    assert variable.minimum is not None and variable.maximum is not None
    if not variable.minimum <= value <= variable.maximum:
        raise _invalid(variable, raw, "out of range")
    return value


if __name__ == "__main__":  # pragma: no cover - documentation generator
    print(json.dumps([variable.as_dict() for variable in VARIABLES], indent=2))
