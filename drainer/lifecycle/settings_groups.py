"""The variables that say which instances are the function's and which lifecycle
hooks it keeps on their groups: the cluster, the groups (by name or tag), the
terminate and launch hooks, and the stack that put them.

Each is the metadata of one `Settings` field (drainer/lifecycle/settings.py).
"""

from __future__ import annotations

from drainer.lifecycle.settings_variable import env

CLUSTER_NAME = env(
    "CLUSTER_NAME",
    "str",
    "",
    "EKS cluster to drain nodes of when neither the hook's NotificationMetadata "
    "nor the ASG's tags name one; a hook whose metadata names another "
    "cluster is another deployment's, left alone. Empty: the cluster must come "
    "from those.",
    pattern=r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}",
    pattern_description="an EKS cluster name: up to 100 letters, digits, '-' "
    "or '_', starting with a letter or digit",
)

ALLOWED_ASGS = env(
    "ALLOWED_ASGS",
    "names",
    "",
    "Comma-separated Auto Scaling group names the function may act on; "
    "events from other groups are refused unless ASG_TAG admits them. Empty, "
    "with ASG_TAG empty too: any group.",
)

ASG_TAG = env(
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
)

CREATE_LIFECYCLE_HOOKS = env(
    "CREATE_LIFECYCLE_HOOKS",
    "bool",
    "true",
    "Keep a terminate lifecycle hook named LIFECYCLE_HOOK_NAME on every group "
    "of ALLOWED_ASGS and ASG_TAG (created or corrected on a schedule, on Auto "
    "Scaling API events and at deploy). false: the hooks are yours to make.",
)

LIFECYCLE_HOOK_NAME = env(
    "LIFECYCLE_HOOK_NAME",
    "str",
    "eks-node-drainer",
    "Name of the terminate lifecycle hooks the function keeps on its groups.",
    pattern=r"[A-Za-z0-9\-_/]{1,255}",
    pattern_description="1 to 255 letters, digits, '-', '_' or '/'",
)

HEARTBEAT_TIMEOUT = env(
    "HEARTBEAT_TIMEOUT",
    "int",
    "600",
    "HeartbeatTimeout of the hooks the function keeps: seconds an instance "
    "waits without a heartbeat before the hook's DefaultResult (CONTINUE). Keep it "
    "above some 180 s: an invocation that fails for now (AWS throttling it) is run "
    "again by Lambda a minute or more later, no heartbeat meanwhile, and a shorter "
    "timeout lets the instance go with its pods.",
    minimum=30,
    maximum=7200,
)

ALLOW_MANAGED_NODE_GROUPS = env(
    "ALLOW_MANAGED_NODE_GROUPS",
    "bool",
    "false",
    "Put the hooks on EKS managed node groups too (groups tagged "
    "eks:nodegroup-name). false: they are left alone, since EKS drains their "
    "nodes itself. true: both terminate hooks fire together on a scale-in; on "
    "an update EKS drains first and ours finds the node empty; an ABANDON of "
    "ours cuts EKS's own hook short too.",
)

LAUNCH_HOOK = env(
    "LAUNCH_HOOK",
    "bool",
    "false",
    "Also keep a launch lifecycle hook (LAUNCH_HOOK_NAME) on the node groups: each "
    "new instance waits in Pending:Wait until its node has joined the cluster, is "
    "Ready and has lost its startup taints (LAUNCH_STARTUP_TAINTS), so an instance "
    "refresh or a replacement goes on only once the new node can take pods.",
)

LAUNCH_HOOK_NAME = env(
    "LAUNCH_HOOK_NAME",
    "str",
    "eks-node-drainer-launch",
    "The launch lifecycle hook's name (LAUNCH_HOOK).",
)

STACK_ID = env(
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
)
