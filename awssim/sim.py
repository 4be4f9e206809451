"""`AwsSim`: the in-process handle on awssim's state for one account and region.

`AwsSimClient` (awssim.client) offers the same methods over the admin HTTP API of
`python -m awssim serve`, so a test or the demo can be written once for both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moto.core.models import DEFAULT_ACCOUNT_ID

from awssim import activities, apifaults, eks, elbv2, instances, invocations, lifecycle, routing

DEFAULT_REGION = "us-east-1"


def install() -> None:
    """Register every awssim extension on moto's response classes (idempotent)."""
    lifecycle.register()
    invocations.register()
    elbv2.register()
    apifaults.register()
    instances.register()
    activities.register()
    routing.register()


class AwsSim:
    """awssim's ledger, faults, scale-in, EKS endpoint and invocation queue."""

    def __init__(self, account_id: str = DEFAULT_ACCOUNT_ID, region: str = DEFAULT_REGION):
        install()
        self.account_id = account_id
        self.region = region

    @property
    def _ledger(self) -> lifecycle.LifecycleLedger:
        return lifecycle.ledger(self.account_id, self.region)

    # lifecycle actions
    def begin_termination(
        self, asg_name: str, instance_id: str, hook_name: str, age: float = 0.0
    ) -> str:
        """Put the instance in Terminating:Wait on the hook; returns the action token.
        `age`: the action began that many seconds ago (heartbeated since)."""
        return self._ledger.begin_termination(asg_name, instance_id, hook_name, age)

    def begin_launch(self, asg_name: str, instance_id: str, hook_name: str) -> str:
        """Put a new instance in Pending:Wait on the launch hook; returns the token."""
        return self._ledger.begin_launch(asg_name, instance_id, hook_name)

    def set_global_timeout(self, asg_name: str, hook_name: str, seconds: int) -> None:
        """Give the hook this GlobalTimeout (DescribeLifecycleHooks and the ledger);
        AWS derives it and moto answers 172800 for every hook."""
        self._ledger.set_global_timeout(asg_name, hook_name, seconds)

    def scale_in(self, asg_name: str, count: int = 1) -> list[dict[str, Any]]:
        """Scale the group in; returns the EventBridge events AWS would send."""
        return self._ledger.scale_in(asg_name, count)

    def launch_into_warm_pool(self, asg_name: str) -> tuple[str, list[dict[str, Any]]]:
        """Warm a new instance in the group's warm pool: its id and the launch hooks'
        events (Origin EC2, Destination WarmPool)."""
        return self._ledger.launch_into_warm_pool(asg_name)

    def scale_out_from_warm_pool(self, asg_name: str) -> tuple[str, list[dict[str, Any]]]:
        """Take a stopped instance of the warm pool back into service: its id and the
        launch hooks' events (Origin WarmPool, Destination AutoScalingGroup)."""
        return self._ledger.scale_out_from_warm_pool(asg_name)

    def warm_instances(self, asg_name: str) -> list[dict[str, str]]:
        """The warm pool's instances, as DescribeWarmPool lists them."""
        return self._ledger.warm_instances(asg_name)

    def event_for(self, token: str) -> dict[str, Any]:
        """The EventBridge event of a lifecycle action begun earlier."""
        return self._ledger.event_for(token)

    def calls(self, kind: str) -> list[dict[str, Any]]:
        """ "complete", "heartbeat" or "timeout" calls, each with its parameters,
        "time" and "error" (None, or the error code answered)."""
        return self._ledger.calls(kind)

    def actions(self) -> list[dict[str, Any]]:
        """Every lifecycle action, open and closed."""
        return self._ledger.action_list()

    def fail_next(self, kind: str, code: str, count: int = 1, message: str = "") -> None:
        """Make the next `count` "complete"/"heartbeat" calls fail with `code`."""
        self._ledger.fail_next(kind, code, count, message)

    def fail_action(self, service: str, action: str, code: str, count: int = 1) -> None:
        """Answer the next `count` calls of an Auto Scaling or EC2 action (e.g.
        "ec2", "DescribeInstances") with `code` (Throttling, RequestLimitExceeded, ...)."""
        apifaults.api_faults(self.account_id, self.region).fail_next(service, action, code, count)

    def injected_faults(self) -> list[dict[str, Any]]:
        """The action faults answered so far: service, action, code, time."""
        return apifaults.api_faults(self.account_id, self.region).injected()

    def pending_faults(self) -> dict[str, int]:
        """Action faults queued and not answered yet, by "service:Action"."""
        return apifaults.api_faults(self.account_id, self.region).pending()

    def expire_action(self, instance_id: str) -> None:
        """Time the instance's open actions out now (the hook's DefaultResult applies)."""
        self._ledger.expire_action(instance_id)

    def set_clock(self, clock: Callable[[], float]) -> None:
        """The time the ledger's deadlines are checked against (in-process only)."""
        self._ledger.clock = clock

    # scaling activities
    def add_launch_activity(
        self, asg_name: str, instance_id: str, start: float, end: float | None
    ) -> None:
        """A launch in the group's history (DescribeScalingActivities): begun at
        `start`, InService at `end` (epoch seconds; None: in progress)."""
        activities.ledger(self.account_id, self.region).add_launch(
            asg_name, instance_id, start, end
        )

    def activity_calls(self) -> list[dict[str, Any]]:
        """The DescribeScalingActivities calls received: their parameters."""
        return activities.ledger(self.account_id, self.region).calls()

    # EKS
    def point_cluster_at(self, name: str, endpoint: str, ca_data_b64: str) -> None:
        """Make DescribeCluster(name) return this endpoint and CA (creating the cluster)."""
        eks.point_cluster_at(self.account_id, self.region, name, endpoint, ca_data_b64)

    # Lambda
    def pending_invocations(self) -> list[dict[str, Any]]:
        """Queued asynchronous invocations: function_name, qualifier, payload, time."""
        return invocations.invocation_queue(self.account_id, self.region).pending()

    def pop_invocation(self) -> dict[str, Any] | None:
        """The oldest queued asynchronous invocation, removed; None when there is none."""
        return invocations.invocation_queue(self.account_id, self.region).pop()
