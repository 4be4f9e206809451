"""The Lambda entry point: it reads the settings, parses the event, builds the
clients and routes the event to its trigger (drainer/lifecycle/scale_in.py,
drainer/lifecycle/ec2_events.py), the hook keeper, the stack's custom resource
(drainer/lifecycle/stack_hooks.py) or the self-check. What a trigger's run
ends in (the lifecycle action, the end line, metrics, notices) is
drainer/lifecycle/ending.py's.

Nothing here runs at import time but imports: settings are read and clients built
on the first invocation of a container and reused after that.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from drainer import aws, logs
from drainer.engine.options import DrainOptions
from drainer.engine.pace import Listed, NodeForecast
from drainer.errors import SettingsError
from drainer.k8s import proxy as proxies
from drainer.k8s.kube import Kube
from drainer.lifecycle import (
    checks,
    closed,
    ec2_events,
    ending,
    hooks,
    launch,
    scale_in,
    stack_hooks,
)
from drainer.lifecycle.checks import GroupsForecast
from drainer.lifecycle.clients import KubeFactory, eks_kube
from drainer.lifecycle.events import HookSyncEvent, SelfCheckEvent, StackRequest, parse_event
from drainer.lifecycle.events_ec2 import ChangeClosed, Ec2Event, ScheduledChanges
from drainer.lifecycle.events_fields import Skip
from drainer.lifecycle.job import Tools
from drainer.lifecycle.settings import Settings
from drainer.lifecycle.window import Invocation

log = logging.getLogger(__name__)


class _Container:
    """What a Lambda container keeps between invocations: settings read once, clients
    built once (connections and the botocore session are reused)."""

    settings: Settings | None = None
    clients: tuple[aws.AwsClients, KubeFactory] | None = None
    lock = threading.Lock()  # one builder, even when a test runs handlers in threads


_CONTAINER = _Container()


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings of this container, read once. A bad value raises SettingsError
    naming the variable: the invocation fails loudly rather than drain wrongly."""
    if _CONTAINER.settings is None or environ is not None:
        env = os.environ if environ is None else environ
        settings = Settings.from_env(env)
        _check_proxies(env)
        logs.configure(settings.log_level)
        log.info("settings", extra={"settings": settings.describe()})
        _CONTAINER.settings = settings
    return _CONTAINER.settings


def _check_proxies(env: Mapping[str, str]) -> None:
    """A proxy the function's client cannot use is said when its settings are read, by
    name, not as a ValueError at the drain's first request."""
    for name in proxies.ENVIRONMENT:
        try:
            if env.get(name):
                proxies.parse(env[name], name)
        except proxies.ProxyError as e:
            raise SettingsError(name, f"not a proxy the function can use ({e})") from e


def _aws(settings: Settings, region: str) -> tuple[aws.AwsClients, KubeFactory]:
    with _CONTAINER.lock:
        if _CONTAINER.clients is None:
            session = aws.Session(region_name=region or None)
            region = session.region_name or region
            _CONTAINER.clients = (aws.make_clients(session, region), eks_kube(session, region))
        return _CONTAINER.clients


def reset() -> None:
    """Forget cached settings and clients (tests, and the CLI between runs)."""
    _CONTAINER.settings = None
    _CONTAINER.clients = None


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    # Parsed before the settings are read: CloudFormation must hear of settings that
    # do not read, not wait an hour for its custom resource's answer.
    parsed = parse_event(event, now=time.time())
    try:
        settings = load_settings()
    except SettingsError as e:
        logs.configure("INFO")
        log.error("invalid settings, nothing done: %s", e)
        if isinstance(parsed, StackRequest):
            return stack_hooks.unreadable(parsed, e)
        raise
    logs.reset()
    if isinstance(parsed, Skip):
        return ending.skipped(parsed)
    if isinstance(parsed, SelfCheckEvent):
        clients, kube_factory = _aws(settings, os.environ.get("AWS_REGION", ""))
        return checks.handle(
            parsed, Tools(settings, clients, kube_factory), forecast=_forecast_groups
        )
    if isinstance(parsed, StackRequest):
        region = os.environ.get("AWS_REGION", "")
        return stack_hooks.serve(parsed, settings, lambda: _aws(settings, region)[0])
    if isinstance(parsed, HookSyncEvent):
        clients, _ = _aws(settings, os.environ.get("AWS_REGION", ""))
        return hooks.sync_hooks(
            clients.autoscaling,
            settings,
            parsed.cause,
            cloudformation=lambda: clients.cloudformation,  # built only when asked for
        ).result()
    clients, kube_factory = _aws(settings, os.environ.get("AWS_REGION", "") or parsed.region)
    invocation = None
    if context is not None and hasattr(context, "get_remaining_time_in_millis"):
        invocation = Invocation(
            remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000.0,
            function_arn=str(getattr(context, "invoked_function_arn", "")),
            request_id=str(getattr(context, "aws_request_id", "") or ""),
        )
    tools = Tools(settings, clients, kube_factory, forecaster=_forecast_node)
    if isinstance(parsed, ScheduledChanges):
        return ec2_events.fan_out(parsed, tools, invocation)
    logs.bind(**parsed.log_keys())
    if isinstance(parsed, ChangeClosed):
        return closed.handle(parsed, tools, invocation)
    if isinstance(parsed, Ec2Event):
        return ec2_events.handle(parsed, tools, invocation, raw_event=event)
    if parsed.launching:
        return launch.handle(parsed, tools, invocation)
    return scale_in.handle(parsed, tools, invocation, raw_event=event)


def _forecast_node(
    kube: Kube,
    node: str,
    options: DrainOptions,
    *,
    timeout: float,
    now: float,
    listed: Listed | None = None,
) -> NodeForecast:
    """drainer/plan/eta.py's forecast of a drain, imported on a drain's first use:
    the plan's model (a tenth of the handler's imports) stays out of the cold start."""
    from drainer.plan.eta import forecast_node

    return forecast_node(kube, node, options, timeout=timeout, now=now, listed=listed)


def _forecast_groups(
    kube: Kube,
    clients: aws.AwsClients,
    groups: Callable[[], Sequence[str]],
    options: DrainOptions,
    *,
    timeout: float,
    clock: Callable[[], float],
) -> GroupsForecast:
    """drainer/plan/groups.py's plan of the function's groups, imported only by a
    self-check."""
    from drainer.plan.groups import forecast_groups

    return forecast_groups(kube, clients, groups, options, timeout=timeout, clock=clock)
