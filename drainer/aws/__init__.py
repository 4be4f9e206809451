"""Every AWS call the drainer makes, and the translation of its errors.

Why a boundary: botocore raises one `ClientError` for everything, told apart only
by an error code string, and its clients are untyped. Nothing outside drainer/aws
imports botocore or catches its exceptions: each call here raises a
`drainer.errors` type whose message says what to do, and drainer/aws/errors.py
alone decides which failures are worth another try.

One module per service, named after it: session.py (the session and the clients),
errors.py (what a failure means), tags.py, ec2.py, autoscaling.py (hooks, tags, the
lifecycle action), heartbeat.py (the ticker that keeps the action alive), eks.py
(the cluster and its bearer token), elbv2.py (target groups), sns.py (notices),
lambda_.py (the hand-over), scheduler.py (a drain asked for later), cloudformation.py
(the custom resource's answer). This package
re-exports their public names, so that a caller reads `aws.describe_instance(...)`.

drainer/aws knows nothing of the rest of the drainer: it imports only
drainer.errors, drainer.backoff and drainer.logs.
"""

from drainer.aws.autoscaling import (
    LIFECYCLE_ACTION_MAX_SECONDS,
    GroupInstance,
    GroupShape,
    HookInfo,
    Launch,
    LifecycleAction,
    asg_tags,
    complete_lifecycle_action,
    delete_lifecycle_hook,
    describe_group,
    describe_hook,
    describe_hooks,
    every_group,
    existing_groups,
    groups_tags,
    groups_with_tag,
    instance_lifecycle_state,
    lifecycle_hook,
    put_lifecycle_hook,
    recent_launches,
    record_heartbeat,
    waits_on_hook,
)
from drainer.aws.cloudformation import answer_custom_resource, stack_status
from drainer.aws.ec2 import NodeIdentity, describe_instance, scheduled_events
from drainer.aws.eks import (
    ClusterInfo,
    TokenSource,
    cluster_name_for,
    describe_cluster,
    tagged_clusters,
)
from drainer.aws.elbv2 import (
    deregister_targets,
    target_group_arns,
    target_group_tags,
    target_health,
)
from drainer.aws.errors import is_permanent, is_transient
from drainer.aws.heartbeat import Heartbeat
from drainer.aws.lambda_ import invoke_self_async
from drainer.aws.scheduler import ABSENT as SCHEDULE_ABSENT
from drainer.aws.scheduler import CREATED as SCHEDULE_CREATED
from drainer.aws.scheduler import KEPT as SCHEDULE_KEPT
from drainer.aws.scheduler import MOVED as SCHEDULE_MOVED
from drainer.aws.scheduler import (
    SCHEDULE_PREFIX,
    Scheduled,
    drain_time,
    schedule_invocation,
    settle_schedule,
)
from drainer.aws.scheduler import SETTLED as SCHEDULE_SETTLED
from drainer.aws.session import (
    AwsClients,
    Client,
    ClientFactory,
    Session,
    make_clients,
)
from drainer.aws.sns import publish_to_topic
from drainer.aws.tags import ASG_NAME_TAG, CLUSTER_NAME_TAG, CLUSTER_TAG_PREFIX, tag_map

__all__ = [
    "ASG_NAME_TAG",
    "CLUSTER_NAME_TAG",
    "CLUSTER_TAG_PREFIX",
    "LIFECYCLE_ACTION_MAX_SECONDS",
    "SCHEDULE_ABSENT",
    "SCHEDULE_CREATED",
    "SCHEDULE_KEPT",
    "SCHEDULE_MOVED",
    "SCHEDULE_PREFIX",
    "SCHEDULE_SETTLED",
    "AwsClients",
    "Client",
    "ClientFactory",
    "ClusterInfo",
    "GroupInstance",
    "GroupShape",
    "Heartbeat",
    "HookInfo",
    "Launch",
    "LifecycleAction",
    "NodeIdentity",
    "Scheduled",
    "Session",
    "TokenSource",
    "answer_custom_resource",
    "asg_tags",
    "cluster_name_for",
    "complete_lifecycle_action",
    "delete_lifecycle_hook",
    "deregister_targets",
    "describe_cluster",
    "describe_group",
    "describe_hook",
    "describe_hooks",
    "describe_instance",
    "drain_time",
    "every_group",
    "existing_groups",
    "groups_tags",
    "groups_with_tag",
    "instance_lifecycle_state",
    "invoke_self_async",
    "is_permanent",
    "is_transient",
    "lifecycle_hook",
    "make_clients",
    "publish_to_topic",
    "put_lifecycle_hook",
    "recent_launches",
    "record_heartbeat",
    "schedule_invocation",
    "scheduled_events",
    "settle_schedule",
    "stack_status",
    "tag_map",
    "tagged_clusters",
    "target_group_arns",
    "target_group_tags",
    "target_health",
    "waits_on_hook",
]
