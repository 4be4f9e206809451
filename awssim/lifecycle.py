"""Lifecycle actions for moto's Auto Scaling: the part of a scale-in moto leaves out.

moto 5.2.5 stores lifecycle hooks but never puts an instance in Terminating:Wait,
and answers CompleteLifecycleAction and RecordLifecycleActionHeartbeat with
NotImplementedError. This module adds, explicitly:

- a ledger per account and region (a moto backend, so moto's reset clears it) of
  pending lifecycle actions, of every heartbeat and completion call received, and
  of faults to inject into the next calls;
- `begin_termination` / `scale_in`, which move instances to Terminating:Wait and
  return the EventBridge events AWS would send;
- the two missing API actions, registered on moto's AutoScalingResponse (moto
  dispatches a query action to the response method of the same name in
  snake_case), answering like AWS does, including the "No active Lifecycle Action
  found with token ..." ValidationError;
- PutLifecycleHook keeping the hook's NotificationMetadata, which moto drops;
- DeleteLifecycleHook ending the hook's outstanding actions first, as AWS does
  (CONTINUE a termination, ABANDON a launch), which moto does not;
- `set_global_timeout`, a hook's GlobalTimeout set explicitly (see there);
- `begin_termination(age=...)`, an action that began a while ago (see there);
- warm pools (moto stores a group's warm pool but keeps no instance in it): a
  scale-in of a group whose pool reuses instances on scale-in puts them in
  Warmed:Pending:Wait (Origin AutoScalingGroup, Destination WarmPool), stopped once
  the hooks are done; `launch_into_warm_pool` warms a new instance (Origin EC2,
  Destination WarmPool); `scale_out_from_warm_pool` takes one back into service
  (Origin WarmPool, Destination AutoScalingGroup, Pending:Wait). The pool's
  instances are answered by DescribeWarmPool and DescribeAutoScalingInstances, as
  AWS answers them.

An action that outlives its hook's HeartbeatTimeout (or GlobalTimeout) is closed
with the hook's DefaultResult when the ledger is next consulted, as Auto Scaling
would; `expire_action` does the same on demand.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from moto.autoscaling.exceptions import ValidationError
from moto.autoscaling.models import AutoScalingBackend, autoscaling_backends
from moto.autoscaling.responses import AutoScalingResponse
from moto.core.base_backend import BackendDict, BaseBackend
from moto.core.responses import ActionResult, EmptyResult
from werkzeug.exceptions import HTTPException

from awssim.apifaults import ERRORS, error_response
from awssim.events import envelope

TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"
TERMINATE_DETAIL_TYPE = "EC2 Instance-terminate Lifecycle Action"
LAUNCHING = "autoscaling:EC2_INSTANCE_LAUNCHING"
LAUNCH_DETAIL_TYPE = "EC2 Instance-launch Lifecycle Action"
EC2, GROUP, WARM_POOL = "EC2", "AutoScalingGroup", "WarmPool"
"""The Origin and Destination values of a lifecycle event."""
CALL_KINDS = ("complete", "heartbeat", "timeout", "hook_deleted")
FAULT_KINDS = ("complete", "heartbeat")


@dataclass
class LifecycleAction:
    """One instance waiting on one hook, as Auto Scaling tracks it."""

    token: str
    asg_name: str
    hook_name: str
    instance_id: str
    transition: str
    started_at: float
    deadline: float
    """When the hook's HeartbeatTimeout runs out; each heartbeat pushes it on."""
    global_deadline: float
    origin: str = ""
    destination: str = ""
    heartbeats: int = 0
    result: str | None = None
    """CONTINUE or ABANDON once closed."""
    closed_at: float | None = None
    closed_by: str = ""
    """"complete", "timeout" or "abandoned" (another hook's ABANDON)."""

    @property
    def active(self) -> bool:
        return self.closed_at is None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Fault:
    code: str
    message: str


class InjectedFault(HTTPException):
    """An AWS query-protocol error response, status and body as AWS sends them."""

    def __init__(self, code: str, message: str) -> None:
        status, body = error_response("autoscaling", code, message)
        super().__init__(description=body)
        self.code = status

    def get_headers(self, *args: Any, **kwargs: Any) -> list[tuple[str, str]]:
        return [("Content-Type", "text/xml")]


class LifecycleLedger(BaseBackend):
    """Pending lifecycle actions, calls received and faults queued, per account/region."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.lock = threading.RLock()
        self.clock: Callable[[], float] = time.time
        self.actions: dict[str, LifecycleAction] = {}
        self.received: dict[str, list[dict[str, Any]]] = {kind: [] for kind in CALL_KINDS}
        self.faults: dict[str, deque[Fault]] = {kind: deque() for kind in FAULT_KINDS}
        self.warm: dict[str, dict[str, Any]] = {}
        """Group name -> instance id -> moto InstanceState of the warm pool's instances,
        kept out of the group's own (which count towards its capacity)."""

    @property
    def autoscaling(self) -> AutoScalingBackend:
        backend: AutoScalingBackend = autoscaling_backends[self.account_id][self.region_name]
        return backend

    # -- what tests and the demo call ------------------------------------------------

    def begin_termination(
        self,
        asg_name: str,
        instance_id: str,
        hook_name: str,
        age: float = 0.0,
        *,
        destination: str = EC2,
    ) -> str:
        """Put the instance in Terminating:Wait on `hook_name`; returns the action token.

        `age` > 0: the action began that many seconds ago and heartbeats kept it alive
        since (its HeartbeatTimeout runs from now, its GlobalTimeout from its start):
        a scenario near the end of the GlobalTimeout without waiting for it. The
        event's "time" says when it began, as AWS's would."""
        if age < 0:
            raise ValueError(f"age must be >= 0, not {age}")
        with self.lock:
            self._expire_overdue()
            group = self._group(asg_name)
            state = self._instance_state(group, instance_id)
            hook = self._hook(asg_name, hook_name)
            for action in self.actions.values():
                if action.active and (action.instance_id, action.hook_name) == (
                    instance_id,
                    hook_name,
                ):
                    raise ValueError(f"{instance_id} already waits on hook {hook_name}")
            now = self.clock()
            started = now - age
            global_deadline = started + _global_timeout(hook)
            if global_deadline <= now:
                raise ValueError(
                    f"an action begun {age:g} s ago is past its hook's GlobalTimeout "
                    f"({_global_timeout(hook):g} s)"
                )
            token = str(uuid.uuid4())
            self.actions[token] = LifecycleAction(
                token=token,
                asg_name=asg_name,
                hook_name=hook_name,
                instance_id=instance_id,
                transition=TERMINATING,
                started_at=started,
                deadline=min(now + hook.heartbeat_timeout, global_deadline),
                global_deadline=global_deadline,
                origin=WARM_POOL if instance_id in self.warm.get(asg_name, {}) else GROUP,
                destination=destination,
            )
            if destination == WARM_POOL:
                state.lifecycle_state = "Warmed:Pending:Wait"
            elif instance_id in self.warm.get(asg_name, {}):
                state.lifecycle_state = "Warmed:Terminating:Wait"
            else:
                state.lifecycle_state = "Terminating:Wait"
            return token

    def begin_launch(
        self,
        asg_name: str,
        instance_id: str,
        hook_name: str,
        *,
        origin: str = EC2,
        destination: str = GROUP,
    ) -> str:
        """Put a new instance of the group in Pending:Wait on the launch hook
        `hook_name`; returns the action token. CONTINUE puts it InService; ABANDON
        (or the hook's timeout with DefaultResult ABANDON) terminates it. Into the warm
        pool: Warmed:Pending:Wait, and CONTINUE stops it there."""
        with self.lock:
            self._expire_overdue()
            group = self._group(asg_name)
            state = self._instance_state(group, instance_id)
            hook = self._hook(asg_name, hook_name, LAUNCHING)
            now = self.clock()
            token = str(uuid.uuid4())
            self.actions[token] = LifecycleAction(
                token=token,
                asg_name=asg_name,
                hook_name=hook_name,
                instance_id=instance_id,
                transition=LAUNCHING,
                started_at=now,
                deadline=now + hook.heartbeat_timeout,
                global_deadline=now + _global_timeout(hook),
                origin=origin,
                destination=destination,
            )
            state.lifecycle_state = (
                "Warmed:Pending:Wait" if destination == WARM_POOL else "Pending:Wait"
            )
            return token

    def scale_in(self, asg_name: str, count: int = 1) -> list[dict[str, Any]]:
        """Lower the desired capacity by `count` and put that many instances in
        Terminating:Wait on every terminate hook of the group.

        Returns the EventBridge events Auto Scaling would send, one per instance and hook.
        """
        with self.lock:
            self._expire_overdue()
            group = self._group(asg_name)
            hooks = [
                h
                for h in self.autoscaling.describe_lifecycle_hooks(asg_name)
                if h.lifecycle_transition == TERMINATING
            ]
            if not hooks:
                raise ValueError(f"Auto Scaling group {asg_name} has no terminate lifecycle hook")
            candidates = [
                s
                for s in group.instance_states
                if s.lifecycle_state == "InService" and not s.protected_from_scale_in
            ]
            if count < 1 or count > len(candidates):
                raise ValueError(
                    f"cannot scale {asg_name} in by {count}: "
                    f"{len(candidates)} instances are InService and unprotected"
                )
            desired = (group.desired_capacity or 0) - count
            if desired < group.min_size:
                raise ValueError(
                    f"cannot scale {asg_name} in by {count}: desired capacity {desired} "
                    f"would fall below MinSize {group.min_size}"
                )
            group.desired_capacity = desired
            destination = WARM_POOL if _reuses_on_scale_in(group) else EC2
            events = []
            for state in candidates[:count]:
                for hook in hooks:
                    token = self.begin_termination(
                        asg_name, state.instance.id, hook.name, destination=destination
                    )
                    events.append(self.event_for(token))
            return events

    def launch_into_warm_pool(self, asg_name: str) -> tuple[str, list[dict[str, Any]]]:
        """A new instance of the group's warm pool, being warmed: in Warmed:Pending:Wait
        on every launch hook (Origin EC2, Destination WarmPool), stopped once they are
        done (at once without one). Its id and the events AWS would send."""
        with self.lock:
            self._expire_overdue()
            group = self._group(asg_name)
            if group.warm_pool is None:
                raise ValueError(f"Auto Scaling group {asg_name} has no warm pool")
            before = {s.instance.id for s in group.instance_states}
            group.replace_autoscaling_group_instances(1, group.get_propagated_tags())
            (state,) = [s for s in group.instance_states if s.instance.id not in before]
            group.instance_states.remove(state)
            self.warm.setdefault(asg_name, {})[state.instance.id] = state
            instance_id = state.instance.id
            events = [
                self.event_for(
                    self.begin_launch(
                        asg_name, instance_id, hook.name, origin=EC2, destination=WARM_POOL
                    )
                )
                for hook in self._hooks(asg_name, LAUNCHING)
            ]
            if not events:
                self._into_the_pool(group, state)
            return instance_id, events

    def scale_out_from_warm_pool(self, asg_name: str) -> tuple[str, list[dict[str, Any]]]:
        """Raise the desired capacity by one, taken from the warm pool: its oldest
        stopped instance starts, in Pending:Wait on every launch hook (Origin WarmPool,
        Destination AutoScalingGroup; InService at once without one). Its id and the
        events AWS would send."""
        with self.lock:
            self._expire_overdue()
            group = self._group(asg_name)
            pool = self.warm.get(asg_name, {})
            ready = [s for s in pool.values() if s.lifecycle_state in _WARMED]
            if not ready:
                raise ValueError(f"the warm pool of {asg_name} has no stopped instance")
            if (group.desired_capacity or 0) >= group.max_size:
                raise ValueError(f"{asg_name} is at its MaxSize {group.max_size}")
            state = ready[0]
            instance_id = state.instance.id
            del pool[instance_id]
            self.autoscaling.ec2_backend.start_instances([instance_id])
            state.lifecycle_state = "InService"
            group.instance_states.append(state)
            group.desired_capacity = (group.desired_capacity or 0) + 1
            events = [
                self.event_for(
                    self.begin_launch(
                        asg_name, instance_id, hook.name, origin=WARM_POOL, destination=GROUP
                    )
                )
                for hook in self._hooks(asg_name, LAUNCHING)
            ]
            return instance_id, events

    def warm_instances(self, asg_name: str) -> list[dict[str, str]]:
        """The warm pool's instances as DescribeWarmPool lists them."""
        with self.lock:
            self._expire_overdue()
            return [_warm_entry(s) for s in self.warm.get(asg_name, {}).values()]

    def event_for(self, token: str) -> dict[str, Any]:
        """The EventBridge event Auto Scaling sends when this action begins."""
        with self.lock:
            action = self.actions[token]
            group = self._group(action.asg_name)
            detail: dict[str, Any] = {
                "LifecycleActionToken": token,
                "AutoScalingGroupName": action.asg_name,
                "LifecycleHookName": action.hook_name,
                "EC2InstanceId": action.instance_id,
                "LifecycleTransition": action.transition,
            }
            hook = self.autoscaling.lifecycle_hooks.get(f"{action.asg_name}_{action.hook_name}")
            metadata = getattr(hook, "notification_metadata", "")
            if metadata:
                detail["NotificationMetadata"] = metadata
            launching = action.transition == LAUNCHING
            detail["Origin"] = action.origin or (EC2 if launching else GROUP)
            detail["Destination"] = action.destination or (GROUP if launching else EC2)
            return envelope(
                LAUNCH_DETAIL_TYPE if launching else TERMINATE_DETAIL_TYPE,
                "aws.autoscaling",
                account=self.account_id,
                region=self.region_name,
                at=action.started_at,
                resources=[group.arn],
                detail=detail,
            )

    def set_global_timeout(self, asg_name: str, hook_name: str, seconds: int) -> None:
        """Give a hook this GlobalTimeout, in DescribeLifecycleHooks' answer and in the
        ledger's deadlines. AWS derives a hook's GlobalTimeout (the smaller of 100 x
        HeartbeatTimeout and 48 hours) and no API sets it; moto answers 172800 for every
        hook whatever its HeartbeatTimeout, while the ledger applies AWS's rule. A
        scenario about the GlobalTimeout sets it here, explicitly, so what the drainer
        reads and what the ledger enforces agree."""
        if not 1 <= seconds <= MAX_GLOBAL_TIMEOUT:
            raise ValueError(f"GlobalTimeout must be 1 to {MAX_GLOBAL_TIMEOUT} s, not {seconds}")
        with self.lock:
            hook = self._hook(asg_name, hook_name)
            hook.global_timeout = int(seconds)  # read by DescribeLifecycleHooks' serializer
            setattr(hook, EXPLICIT_GLOBAL_TIMEOUT, int(seconds))

    def fail_next(self, kind: str, code: str, count: int = 1, message: str = "") -> None:
        """Make the next `count` calls of `kind` ("complete"/"heartbeat") fail with `code`."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"fault kind must be one of {FAULT_KINDS}, not {kind!r}")
        if code not in ERRORS:
            raise ValueError(f"fault code must be one of {sorted(ERRORS)}, not {code!r}")
        with self.lock:
            for _ in range(count):
                self.faults[kind].append(Fault(code, message))

    def calls(self, kind: str) -> list[dict[str, Any]]:
        """Calls received of `kind`: "complete", "heartbeat", or "timeout" (expiries)."""
        if kind not in CALL_KINDS:
            raise ValueError(f"call kind must be one of {CALL_KINDS}, not {kind!r}")
        with self.lock:
            self._expire_overdue()
            return [dict(call) for call in self.received[kind]]

    def action_list(self) -> list[dict[str, Any]]:
        """Every lifecycle action, open and closed, oldest first."""
        with self.lock:
            self._expire_overdue()
            return [action.as_dict() for action in self.actions.values()]

    def expire_action(self, instance_id: str) -> None:
        """Time out the instance's open actions now, as if no heartbeat had come."""
        with self.lock:
            open_actions = [
                a for a in self.actions.values() if a.active and a.instance_id == instance_id
            ]
            if not open_actions:
                raise ValueError(f"{instance_id} has no active lifecycle action")
            for action in open_actions:
                if action.active:
                    self._time_out(action, self.clock())

    # -- the API actions --------------------------------------------------------------

    def complete(self, params: dict[str, Any]) -> None:
        with self.lock:
            self._expire_overdue()
            call = self._record("complete", params, ("LifecycleActionResult",))
            self._maybe_fail("complete", call)
            result = params.get("LifecycleActionResult")
            if result not in ("CONTINUE", "ABANDON"):
                call["error"] = "ValidationError"
                raise ValidationError(
                    f"Value '{result}' at 'lifecycleActionResult' failed to satisfy "
                    "constraint: Member must be CONTINUE or ABANDON"
                )
            action = self._find_active(params, call)
            now = self.clock()
            self._close(action, str(result), now, "complete")
            if result == "ABANDON":
                for other in self.actions.values():
                    if other.active and other.instance_id == action.instance_id:
                        self._close(other, "ABANDON", now, "abandoned")
            self._finish_instance_if_done(action)

    def hook_deleted(self, asg_name: str, hook_name: str) -> None:
        """DeleteLifecycleHook: "if there are any outstanding lifecycle actions, they are
        completed first (ABANDON for launching instances, CONTINUE for terminating
        instances)" (AWS's API reference); each such end recorded as "hook_deleted"."""
        with self.lock:
            self._expire_overdue()
            now = self.clock()
            for action in list(self.actions.values()):
                if not action.active or (action.asg_name, action.hook_name) != (
                    asg_name,
                    hook_name,
                ):
                    continue
                result = "ABANDON" if action.transition == LAUNCHING else "CONTINUE"
                self._close(action, result, now, "hook_deleted")
                self.received["hook_deleted"].append(
                    {
                        "AutoScalingGroupName": asg_name,
                        "LifecycleHookName": hook_name,
                        "InstanceId": action.instance_id,
                        "LifecycleActionResult": result,
                        "time": now,
                    }
                )
                self._finish_instance_if_done(action)

    def heartbeat(self, params: dict[str, Any]) -> None:
        with self.lock:
            self._expire_overdue()
            call = self._record("heartbeat", params, ())
            self._maybe_fail("heartbeat", call)
            action = self._find_active(params, call)
            hook = self.autoscaling.lifecycle_hooks.get(f"{action.asg_name}_{action.hook_name}")
            timeout = hook.heartbeat_timeout if hook is not None else 3600
            action.heartbeats += 1
            action.deadline = min(self.clock() + timeout, action.global_deadline)

    # -- internals -------------------------------------------------------------------

    def _record(self, kind: str, params: dict[str, Any], extra: tuple[str, ...]) -> dict[str, Any]:
        keys = ("AutoScalingGroupName", "LifecycleHookName", "LifecycleActionToken", "InstanceId")
        call: dict[str, Any] = {key: params.get(key) for key in keys + extra}
        call["time"] = self.clock()
        call["error"] = None
        self.received[kind].append(call)
        return call

    def _maybe_fail(self, kind: str, call: dict[str, Any]) -> None:
        if self.faults[kind]:
            fault = self.faults[kind].popleft()
            call["error"] = fault.code
            call["injected"] = True
            raise InjectedFault(fault.code, fault.message)

    def _find_active(self, params: dict[str, Any], call: dict[str, Any]) -> LifecycleAction:
        token = params.get("LifecycleActionToken")
        instance_id = params.get("InstanceId")
        asg_name = params.get("AutoScalingGroupName")
        hook_name = params.get("LifecycleHookName")
        for action in self.actions.values():
            if (
                action.active
                and (action.asg_name, action.hook_name) == (asg_name, hook_name)
                and (not token or action.token == token)
                and (not instance_id or action.instance_id == instance_id)
                and (token or instance_id)
            ):
                return action
        call["error"] = "ValidationError"
        if token:
            raise ValidationError(f"No active Lifecycle Action found with token {token}")
        if instance_id:
            raise ValidationError(
                f"No active Lifecycle Action found with instance ID {instance_id}"
            )
        raise ValidationError("Either LifecycleActionToken or InstanceId must be specified")

    def _close(self, action: LifecycleAction, result: str, now: float, by: str) -> None:
        action.result = result
        action.closed_at = now
        action.closed_by = by

    def _time_out(self, action: LifecycleAction, now: float) -> None:
        hook = self.autoscaling.lifecycle_hooks.get(f"{action.asg_name}_{action.hook_name}")
        result = hook.default_result if hook is not None else "ABANDON"
        self._close(action, result, now, "timeout")
        self.received["timeout"].append(
            {
                "AutoScalingGroupName": action.asg_name,
                "LifecycleHookName": action.hook_name,
                "LifecycleActionToken": action.token,
                "InstanceId": action.instance_id,
                "LifecycleActionResult": result,
                "time": now,
                "error": None,
            }
        )
        if result == "ABANDON":
            for other in self.actions.values():
                if other.active and other.instance_id == action.instance_id:
                    self._close(other, "ABANDON", now, "abandoned")
        self._finish_instance_if_done(action)

    def _expire_overdue(self) -> None:
        now = self.clock()
        for action in list(self.actions.values()):
            if action.active and now >= min(action.deadline, action.global_deadline):
                self._time_out(action, now)

    def _finish_instance_if_done(self, action: LifecycleAction) -> None:
        """Once none of its actions is open: a terminate hook's instance is terminated
        (any result: it goes either way); a launch hook's goes InService on CONTINUE
        and is terminated on ABANDON."""
        if any(a.active and a.instance_id == action.instance_id for a in self.actions.values()):
            return
        group = self.autoscaling.autoscaling_groups.get(action.asg_name)
        if group is None:
            return
        if action.destination == WARM_POOL and (
            action.transition == TERMINATING or action.result == "CONTINUE"
        ):
            # Into the warm pool (either way for a scale-in, as for a termination).
            state = self.warm.get(action.asg_name, {}).get(action.instance_id)
            if state is None:
                state = self._instance_state(group, action.instance_id)
                group.instance_states.remove(state)
            self._into_the_pool(group, state)
            return
        if action.transition == LAUNCHING and action.result == "CONTINUE":
            for state in group.instance_states:
                if state.instance.id == action.instance_id:
                    state.lifecycle_state = "InService"
            return
        states = [s for s in group.instance_states if s.instance.id == action.instance_id]
        for state in states:
            group.instance_states.remove(state)
        self.warm.get(action.asg_name, {}).pop(action.instance_id, None)
        known = {
            i.id for r in self.autoscaling.ec2_backend.reservations.values() for i in r.instances
        }
        if action.instance_id in known:  # EC2 may have forgotten it already
            self.autoscaling.ec2_backend.terminate_instances([action.instance_id])
        # Like Auto Scaling: below the desired capacity (no scale-in lowered it), launch
        # a replacement.
        group.set_desired_capacity(group.desired_capacity)

    def _group(self, asg_name: str) -> Any:
        group = self.autoscaling.autoscaling_groups.get(asg_name)
        if group is None:
            raise ValueError(f"no Auto Scaling group {asg_name!r} in {self.region_name}")
        return group

    def _into_the_pool(self, group: Any, state: Any) -> None:
        """The instance stops (or hibernates) in the warm pool: out of the group's
        capacity, no replacement launched."""
        pool_state = getattr(group.warm_pool, "pool_state", None) or "Stopped"
        self.warm.setdefault(group.name, {})[state.instance.id] = state
        if pool_state != "Running":
            self.autoscaling.ec2_backend.stop_instances([state.instance.id])
        state.lifecycle_state = f"Warmed:{pool_state}"

    def _hooks(self, asg_name: str, transition: str) -> list[Any]:
        return [
            h
            for h in self.autoscaling.describe_lifecycle_hooks(asg_name)
            if h.lifecycle_transition == transition
        ]

    def _instance_state(self, group: Any, instance_id: str) -> Any:
        for state in group.instance_states:
            if state.instance.id == instance_id:
                return state
        warm = self.warm.get(group.name, {}).get(instance_id)
        if warm is not None:
            return warm
        raise ValueError(f"{instance_id} is not in Auto Scaling group {group.name}")

    def _hook(self, asg_name: str, hook_name: str, transition: str = TERMINATING) -> Any:
        hook = self.autoscaling.lifecycle_hooks.get(f"{asg_name}_{hook_name}")
        if hook is None:
            raise ValueError(f"Auto Scaling group {asg_name} has no lifecycle hook {hook_name!r}")
        if hook.lifecycle_transition != transition:
            kind = "terminate" if transition == TERMINATING else "launch"
            raise ValueError(f"lifecycle hook {hook_name} is not a {kind} hook")
        return hook


MAX_GLOBAL_TIMEOUT = 172800
# The attribute set_global_timeout puts on moto's hook (moto has none of its own: its
# global_timeout is a constant, not a setting).
EXPLICIT_GLOBAL_TIMEOUT = "awssim_global_timeout"


_WARMED = ("Warmed:Stopped", "Warmed:Running", "Warmed:Hibernated")
"""The states of a warm pool's instance ready to be taken back into service."""


def _reuses_on_scale_in(group: Any) -> bool:
    policy = getattr(group.warm_pool, "instance_reuse_policy", None) or {}
    return str(policy.get("ReuseOnScaleIn", "")).lower() == "true"


def _warm_entry(state: Any) -> dict[str, str]:
    return {
        "InstanceId": state.instance.id,
        "InstanceType": state.instance.instance_type,
        "AvailabilityZone": state.instance.placement.zone,
        "LifecycleState": state.lifecycle_state,
        "HealthStatus": state.health_status,
    }


def _global_timeout(hook: Any) -> float:
    explicit = getattr(hook, EXPLICIT_GLOBAL_TIMEOUT, None)
    if explicit is not None:
        return float(explicit)
    # AWS: the smaller of 100 x HeartbeatTimeout and 48 hours.
    return float(min(100 * int(hook.heartbeat_timeout), MAX_GLOBAL_TIMEOUT))


ledgers: BackendDict[LifecycleLedger] = BackendDict(LifecycleLedger, "autoscaling")


def ledger(account_id: str, region: str) -> LifecycleLedger:
    """The ledger of one account and region (created on first use)."""
    found: LifecycleLedger = ledgers[account_id][region]
    return found


# --- registration on moto's response class ------------------------------------------


def _complete_lifecycle_action(self: AutoScalingResponse) -> ActionResult:
    ledger(self.current_account, self.region).complete(dict(self._get_params()))
    return EmptyResult()


def _record_lifecycle_action_heartbeat(self: AutoScalingResponse) -> ActionResult:
    ledger(self.current_account, self.region).heartbeat(dict(self._get_params()))
    return EmptyResult()


_original_put_lifecycle_hook = AutoScalingResponse.put_lifecycle_hook


def _put_lifecycle_hook(self: AutoScalingResponse) -> ActionResult:
    result: ActionResult = _original_put_lifecycle_hook(self)
    asg_name = self._get_param("AutoScalingGroupName")
    hook_name = self._get_param("LifecycleHookName")
    metadata = self._get_param("NotificationMetadata") or ""
    hook = self.autoscaling_backend.lifecycle_hooks.get(f"{asg_name}_{hook_name}")
    if hook is not None:
        # Read back by DescribeLifecycleHooks' serializer (NotificationMetadata ->
        # notification_metadata).
        setattr(hook, "notification_metadata", metadata)  # noqa: B010 - moto declares no such attribute
    return result


_original_delete_lifecycle_hook = AutoScalingResponse.delete_lifecycle_hook


def _delete_lifecycle_hook(self: AutoScalingResponse) -> ActionResult:
    book = ledger(self.current_account, self.region)
    book.hook_deleted(self._get_param("AutoScalingGroupName"), self._get_param("LifecycleHookName"))
    result: ActionResult = _original_delete_lifecycle_hook(self)
    return result


def _describe_warm_pool(self: AutoScalingResponse) -> ActionResult:
    asg_name = self._get_param("AutoScalingGroupName")
    configuration = self.autoscaling_backend.describe_warm_pool(group_name=asg_name)
    instances = ledger(self.current_account, self.region).warm_instances(asg_name)
    return ActionResult({"WarmPoolConfiguration": configuration, "Instances": instances})


def _describe_auto_scaling_instances(self: AutoScalingResponse) -> ActionResult:
    wanted = self._get_param("InstanceIds", [])
    states = self.autoscaling_backend.describe_auto_scaling_instances(instance_ids=wanted)
    book = ledger(self.current_account, self.region)
    with book.lock:
        warm = [
            state
            for pool in book.warm.values()
            for state in pool.values()
            if not wanted or state.instance.id in wanted
        ]
    return ActionResult({"AutoScalingInstances": [*states, *warm]})


def register() -> None:
    """Add the lifecycle actions to moto's Auto Scaling (idempotent)."""
    AutoScalingResponse.complete_lifecycle_action = _complete_lifecycle_action  # type: ignore[attr-defined]
    AutoScalingResponse.record_lifecycle_action_heartbeat = _record_lifecycle_action_heartbeat  # type: ignore[attr-defined]
    AutoScalingResponse.put_lifecycle_hook = _put_lifecycle_hook  # type: ignore[method-assign]
    AutoScalingResponse.delete_lifecycle_hook = _delete_lifecycle_hook  # type: ignore[method-assign]
    AutoScalingResponse.describe_warm_pool = _describe_warm_pool  # type: ignore[method-assign]
    AutoScalingResponse.describe_auto_scaling_instances = _describe_auto_scaling_instances  # type: ignore[method-assign]
