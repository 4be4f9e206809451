"""The drainer's settings: one frozen dataclass, read from the environment once.

`Settings.from_env(os.environ)` is the only place that reads environment variables.
Every field has its default here and carries its environment variable (default as
written, range, reason: drainer/lifecycle/settings_variable.py) in its `metadata`,
from the table of its concern: settings_groups.py (which instances and hooks),
settings_drain.py (how a drain goes and ends), settings_triggers.py (the launch hook
and EC2's events), settings_notices.py (notices and logs). `VARIABLES` is derived
from those fields, in field order, so the table of docs/reference.md and the
CloudFormation parameter defaults can be generated from the same source
(`python -m drainer.lifecycle.settings` prints it as JSON).

A value that cannot be used stops the cold start with a `SettingsError` naming the
variable, the value and what is allowed: a drain run with a misread timeout is worse
than no drain at all.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, cast

from drainer.engine.filters import FilterOptions
from drainer.engine.options import DrainOptions
from drainer.errors import SettingsError
from drainer.lifecycle import settings_drain, settings_groups, settings_notices, settings_triggers
from drainer.lifecycle.settings_drain import TimeoutPolicy
from drainer.lifecycle.settings_variable import Variable

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
LifecycleResult = Literal["CONTINUE", "ABANDON"]

_HIDDEN = "***"


@dataclass(frozen=True)
class Settings:
    """Everything the drainer can be told through its environment.

    Defaults are the dataclass defaults; `from_env` applies the same defaults to
    unset or empty variables, but for a list: set but empty, it is the empty list.
    """

    cluster_name: str = field(default="", metadata=settings_groups.CLUSTER_NAME)
    allowed_asgs: frozenset[str] = field(default=frozenset(), metadata=settings_groups.ALLOWED_ASGS)
    asg_tag: str = field(default="", metadata=settings_groups.ASG_TAG)
    create_lifecycle_hooks: bool = field(
        default=True, metadata=settings_groups.CREATE_LIFECYCLE_HOOKS
    )
    lifecycle_hook_name: str = field(
        default="eks-node-drainer", metadata=settings_groups.LIFECYCLE_HOOK_NAME
    )
    heartbeat_timeout: int = field(default=600, metadata=settings_groups.HEARTBEAT_TIMEOUT)
    allow_managed_node_groups: bool = field(
        default=False, metadata=settings_groups.ALLOW_MANAGED_NODE_GROUPS
    )
    drain_timeout_seconds: int = field(default=3600, metadata=settings_drain.DRAIN_TIMEOUT_SECONDS)
    timeout_policy: TimeoutPolicy = field(
        default=TimeoutPolicy.CONTINUE, metadata=settings_drain.TIMEOUT_POLICY
    )
    failure_result: LifecycleResult = field(
        default="ABANDON", metadata=settings_drain.FAILURE_RESULT
    )
    eviction_concurrency: int = field(default=32, metadata=settings_drain.EVICTION_CONCURRENCY)
    evict_unreplicated_pods: bool = field(
        default=True, metadata=settings_drain.EVICT_UNREPLICATED_PODS
    )
    evict_emptydir_pods: bool = field(default=True, metadata=settings_drain.EVICT_EMPTYDIR_PODS)
    evict_daemonset_pods: bool = field(default=False, metadata=settings_drain.EVICT_DAEMONSET_PODS)
    honor_do_not_disrupt: bool = field(default=True, metadata=settings_drain.HONOR_DO_NOT_DISRUPT)
    grace_period_seconds: int = field(default=-1, metadata=settings_drain.GRACE_PERIOD_SECONDS)
    force_grace_period_seconds: int = field(
        default=30, metadata=settings_drain.FORCE_GRACE_PERIOD_SECONDS
    )
    stuck_pod_seconds: int = field(default=60, metadata=settings_drain.STUCK_POD_SECONDS)
    volume_detach_timeout_seconds: int = field(
        default=120, metadata=settings_drain.VOLUME_DETACH_TIMEOUT_SECONDS
    )
    target_group_wait_seconds: int = field(
        default=300, metadata=settings_drain.TARGET_GROUP_WAIT_SECONDS
    )
    target_group_arns: frozenset[str] = field(
        default=frozenset(), metadata=settings_drain.TARGET_GROUP_ARNS
    )
    notification_topic_arn: str = field(
        default="", metadata=settings_notices.NOTIFICATION_TOPIC_ARN
    )
    notify_on_start: bool = field(default=False, metadata=settings_notices.NOTIFY_ON_START)
    launch_hook: bool = field(default=False, metadata=settings_groups.LAUNCH_HOOK)
    launch_hook_name: str = field(
        default="eks-node-drainer-launch", metadata=settings_groups.LAUNCH_HOOK_NAME
    )
    launch_timeout_seconds: int = field(
        default=600, metadata=settings_triggers.LAUNCH_TIMEOUT_SECONDS
    )
    launch_timeout_result: Literal["abandon", "continue"] = field(
        default="abandon", metadata=settings_triggers.LAUNCH_TIMEOUT_RESULT
    )
    launch_wait_daemonsets: bool = field(
        default=True, metadata=settings_triggers.LAUNCH_WAIT_DAEMONSETS
    )
    launch_startup_taints: frozenset[str] = field(
        default=frozenset(
            {
                "node.cilium.io/agent-not-ready",
                "ebs.csi.aws.com/agent-not-ready",
                "efs.csi.aws.com/agent-not-ready",
            }
        ),
        metadata=settings_triggers.LAUNCH_STARTUP_TAINTS,
    )
    launch_wait_for_uncordon: bool = field(
        default=False, metadata=settings_triggers.LAUNCH_WAIT_FOR_UNCORDON
    )
    spot_interruption_drain: bool = field(
        default=True, metadata=settings_triggers.SPOT_INTERRUPTION_DRAIN
    )
    spot_deadline_margin_seconds: int = field(
        default=15, metadata=settings_triggers.SPOT_DEADLINE_MARGIN_SECONDS
    )
    scheduled_change_drain: bool = field(
        default=True, metadata=settings_triggers.SCHEDULED_CHANGE_DRAIN
    )
    scheduled_change_lead_seconds: int = field(
        default=0, metadata=settings_triggers.SCHEDULED_CHANGE_LEAD_SECONDS
    )
    scheduler_role_arn: str = field(default="", metadata=settings_triggers.SCHEDULER_ROLE_ARN)
    stack_id: str = field(default="", metadata=settings_groups.STACK_ID)
    state_change_drain: bool = field(default=False, metadata=settings_triggers.STATE_CHANGE_DRAIN)
    capacity_reservation_drain: bool = field(
        default=True, metadata=settings_triggers.CAPACITY_RESERVATION_DRAIN
    )
    rebalance_action: Literal["off", "cordon", "drain"] = field(
        default="off", metadata=settings_triggers.REBALANCE_ACTION
    )
    critical_reserve_seconds: int = field(
        default=120, metadata=settings_drain.CRITICAL_RESERVE_SECONDS
    )
    handover_margin_seconds: int = field(
        default=60, metadata=settings_drain.HANDOVER_MARGIN_SECONDS
    )
    global_timeout_margin_seconds: int = field(
        default=60, metadata=settings_drain.GLOBAL_TIMEOUT_MARGIN_SECONDS
    )
    kube_request_timeout_seconds: float = field(
        default=10.0, metadata=settings_drain.KUBE_REQUEST_TIMEOUT_SECONDS
    )
    dry_run: bool = field(default=False, metadata=settings_drain.DRY_RUN)
    log_level: LogLevel = field(default="INFO", metadata=settings_notices.LOG_LEVEL)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Read and validate every variable; unset or empty means the default, but
        a list ("names") set empty is empty: LAUNCH_STARTUP_TAINTS="" waits for none
        of its default taints (the stack passes the default list itself).

        Raises SettingsError naming the first variable that cannot be used.
        """
        values: dict[str, Any] = {}
        for variable in VARIABLES:
            given = env.get(variable.name)
            raw = given.strip() if given is not None else ""
            as_given = raw or (given is not None and variable.kind == "names")
            values[variable.field] = variable.parse(raw if as_given else variable.default)
        settings = cls(**values)
        if settings.launch_hook_name == settings.lifecycle_hook_name:
            raise SettingsError(
                "LAUNCH_HOOK_NAME",
                f"{settings.launch_hook_name!r} is LIFECYCLE_HOOK_NAME too: a group holds one "
                "hook per name, so the launch hook would replace the terminate hook and "
                "scale-ins would terminate nodes undrained; give it a name of its own",
            )
        return settings

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


if __name__ == "__main__":  # pragma: no cover - documentation generator
    print(json.dumps([variable.as_dict() for variable in VARIABLES], indent=2))
