"""The variables of the triggers beside the terminate hook: the launch hook's wait
for a new node (drainer/lifecycle/launch.py) and EC2's events about an instance
(spot interruptions, rebalance recommendations, scheduled changes, state changes,
capacity reservation interruptions: drainer/lifecycle/ec2_events.py).

Each is the metadata of one `Settings` field (drainer/lifecycle/settings.py).
"""

from __future__ import annotations

from drainer.lifecycle.settings_variable import env

LAUNCH_TIMEOUT_SECONDS = env(
    "LAUNCH_TIMEOUT_SECONDS",
    "int",
    "600",
    "How long after the launch action began a new node may take to be able to "
    "take pods (within one invocation); then LAUNCH_TIMEOUT_RESULT.",
    minimum=30,
    maximum=840,
)

LAUNCH_TIMEOUT_RESULT = env(
    "LAUNCH_TIMEOUT_RESULT",
    "choice",
    "abandon",
    "A new instance whose node cannot take pods in time (not Ready, a startup "
    "taint still there, or cordoned with LAUNCH_WAIT_FOR_UNCORDON): abandon = "
    "ABANDON (Auto Scaling terminates it and launches another; an instance refresh "
    "stops); "
    "continue = CONTINUE with a warning.",
    choices=("abandon", "continue"),
)

LAUNCH_WAIT_DAEMONSETS = env(
    "LAUNCH_WAIT_DAEMONSETS",
    "bool",
    "true",
    "A new node counts as ready once its DaemonSet pods (CNI, log agents) are Ready too: "
    "those on it, and the pod of each DaemonSet that owes it one (its nodeSelector, node "
    "affinity and tolerations admit the node) but has not made it yet, such as one kept "
    "off by a startup taint until the taint goes (k8s-rbac/ lets the function list "
    "DaemonSets for this).",
)

LAUNCH_STARTUP_TAINTS = env(
    "LAUNCH_STARTUP_TAINTS",
    "names",
    "node.cilium.io/agent-not-ready,ebs.csi.aws.com/agent-not-ready,"
    "efs.csi.aws.com/agent-not-ready",
    "Keys of the taints that CNI and CSI agents put on a new node and remove once "
    "they run on it (Cilium's, the EBS and EFS CSI drivers'): a new node counts as "
    "ready once they are gone, as it always waits for "
    "node.cloudprovider.kubernetes.io/uninitialized, node.kubernetes.io/not-ready, "
    "node.kubernetes.io/unreachable and node.kubernetes.io/network-unavailable to go. "
    "Set empty: none of them (unset: the default).",
)

LAUNCH_WAIT_FOR_UNCORDON = env(
    "LAUNCH_WAIT_FOR_UNCORDON",
    "bool",
    "false",
    "A new node cordoned when it registered: false = CONTINUE once it is ready "
    "otherwise, the cordon named in the end line, a Kubernetes Event and the notice "
    "(someone's decision); true = wait for the uncordon too, then "
    "LAUNCH_TIMEOUT_RESULT.",
)

SPOT_INTERRUPTION_DRAIN = env(
    "SPOT_INTERRUPTION_DRAIN",
    "bool",
    "true",
    "Drain a node at once on its EC2 Spot Instance Interruption Warning, with a "
    "deadline of the warning's time plus 2 minutes less "
    "SPOT_DEADLINE_MARGIN_SECONDS. The terminate hook's event that may follow "
    "for the same instance waits for that drain instead of starting another.",
)

SPOT_DEADLINE_MARGIN_SECONDS = env(
    "SPOT_DEADLINE_MARGIN_SECONDS",
    "int",
    "15",
    "How long before EC2 reclaims a spot instance (2 minutes after its "
    "warning), or acts at a time its event names (a scheduled change's start, "
    "a capacity reservation's termination), the drain must be over, so evicted "
    "pods finish their shutdown on a live node; grace periods are cut to fit.",
    minimum=0,
    maximum=100,
)

SCHEDULED_CHANGE_DRAIN = env(
    "SCHEDULED_CHANGE_DRAIN",
    "bool",
    "true",
    "Drain a node on an AWS Health scheduled change for its instance (retirement, "
    "maintenance), every instance the event names, with a deadline of the "
    "window's start less SPOT_DEADLINE_MARGIN_SECONDS (or DRAIN_TIMEOUT_SECONDS "
    "when the window is further away).",
)

SCHEDULED_CHANGE_LEAD_SECONDS = env(
    "SCHEDULED_CHANGE_LEAD_SECONDS",
    "int",
    "0",
    "When a scheduled change's node is drained: 0 = when AWS Health's event "
    "arrives; more = that long before the window starts (an EventBridge "
    "Scheduler schedule invokes the function then, with SCHEDULER_ROLE_ARN).",
    minimum=0,
    maximum=1209600,
)

SCHEDULER_ROLE_ARN = env(
    "SCHEDULER_ROLE_ARN",
    "str",
    "",
    "The role EventBridge Scheduler invokes the function with, for "
    "SCHEDULED_CHANGE_LEAD_SECONDS (the stack sets it).",
)

STATE_CHANGE_DRAIN = env(
    "STATE_CHANGE_DRAIN",
    "bool",
    "false",
    "Drain a node at once when its instance is stopping or shutting down (an "
    "EC2 state-change notification): instances stopped or terminated outside "
    "the terminate hook, with the minute the OS's shutdown leaves.",
)

CAPACITY_RESERVATION_DRAIN = env(
    "CAPACITY_RESERVATION_DRAIN",
    "bool",
    "true",
    "Drain a node at once on its EC2 Capacity Reservation Instance Interruption "
    "Warning (an interruptible reservation taking its capacity back), with a "
    "deadline of the warning's instance-termination-time less "
    "SPOT_DEADLINE_MARGIN_SECONDS.",
)

REBALANCE_ACTION = env(
    "REBALANCE_ACTION",
    "choice",
    "off",
    "On an EC2 Instance Rebalance Recommendation (a spot instance at higher "
    "risk of interruption): off = nothing; cordon = no new pods on the node; "
    "drain = cordon and evict its pods like a scale-in, within one invocation.",
    choices=("off", "cordon", "drain"),
)
