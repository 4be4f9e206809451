"""The function's configuration as template.yaml deploys it, read from the template.

The demo runs the handler with the environment CloudFormation would give it when
every parameter keeps its default: the function's `Environment.Variables` with each
`!Ref Parameter` resolved to that parameter's `Default`, the function's `Timeout`,
and the terminate hook the function keeps on its groups (drainer/lifecycle/hooks.py: name,
heartbeat timeout, default result and notification metadata, from that
environment). ClusterName, without a default, and AsgNames are the demo's
cluster and Auto Scaling group.

When template.yaml is missing or cannot be read, the demo falls back to the
defaults of drainer.settings and says so: the drainer's own defaults are the same
values by design (tests/deploy keeps the two in step).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from drainer.errors import SettingsError

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"
HANDLER = "drainer.handler.lambda_handler"


@dataclass(frozen=True)
class Hook:
    """The terminate lifecycle hook the stack puts on each Auto Scaling group."""

    name: str
    heartbeat_timeout: int
    default_result: str
    notification_metadata: str


@dataclass(frozen=True)
class Function:
    """What the deployed function would run with."""

    environment: dict[str, str]
    timeout_seconds: int
    memory_mb: int
    hook: Hook
    source: str
    """Where the values come from, for the demo's header."""
    notes: tuple[str, ...] = field(default=())
    handler: str = HANDLER
    """The function's `Handler:` (testbed/lambdarie starts the runtime with it)."""


class TemplateError(Exception):
    """template.yaml does not have the shape the demo reads."""


class _CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short-form tags (!Ref X -> {"Ref": "X"})."""


def _construct_tag(loader: _CfnLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    key = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if suffix == "GetAtt" and isinstance(value, str):
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {key: value}


_CfnLoader.add_multi_constructor("!", _construct_tag)


def load(
    cluster_name: str, asg_name: str, path: Path = TEMPLATE, overrides: dict[str, str] | None = None
) -> Function:
    """The function's configuration from `path`, or drainer.settings' defaults.

    `overrides` replaces environment variables after resolution (the demo's options).
    """
    try:
        function = from_template(path, cluster_name, asg_name)
    except (OSError, yaml.YAMLError, TemplateError, SettingsError) as e:
        function = from_settings(cluster_name, asg_name, f"{path.name} not usable ({e})")
    if overrides:
        environment = {**function.environment, **overrides}
        function = replace(function, environment=environment)
    return function


def read(path: Path = TEMPLATE) -> dict[str, Any]:
    """The template as a mapping, its short-form tags as their long forms."""
    document = yaml.load(path.read_text(), Loader=_CfnLoader)  # noqa: S506 - a SafeLoader subclass
    if not isinstance(document, dict):
        raise TemplateError("not a mapping")
    return document


def from_template(path: Path, cluster_name: str, asg_name: str) -> Function:
    document = read(path)
    parameters = document.get("Parameters") or {}
    resources = document.get("Resources") or {}
    values = {name: str(spec["Default"]) for name, spec in parameters.items() if "Default" in spec}
    values.update({"ClusterName": cluster_name, "AsgNames": asg_name})
    values["AWS::StackId"] = ""  # no stack runs the demo: its hooks name none (STACK_ID)
    functions = [
        r.get("Properties") or {}
        for r in resources.values()
        if isinstance(r, dict) and r.get("Type") == "AWS::Lambda::Function"
    ]
    if len(functions) != 1:
        raise TemplateError(f"{len(functions)} AWS::Lambda::Function resources, not one")
    function = functions[0]
    variables = (function.get("Environment") or {}).get("Variables") or {}
    if not variables:
        raise TemplateError("the function has no Environment.Variables")
    conditions = document.get("Conditions") or {}
    environment = {
        name: _resolve(_choose(value, conditions, values), values)
        for name, value in variables.items()
    }
    # The function keeps the hooks (drainer/lifecycle/hooks.py): the hook is the one it puts.
    from drainer.lifecycle.hooks import DEFAULT_RESULT, HookSpec
    from drainer.lifecycle.settings import Settings

    spec = HookSpec.from_settings(Settings.from_env(environment))
    return Function(
        environment=environment,
        timeout_seconds=int(_resolve(function.get("Timeout", 3), values)),
        memory_mb=int(_resolve(function.get("MemorySize", 128), values)),
        hook=Hook(
            name=spec.name,
            heartbeat_timeout=spec.heartbeat_timeout,
            default_result=DEFAULT_RESULT,
            notification_metadata=spec.notification_metadata,
        ),
        source=f"{path.name} defaults",
        handler=str(function.get("Handler", "")),
    )


def from_settings(cluster_name: str, asg_name: str, why: str) -> Function:
    """drainer.lifecycle.settings' defaults, with the hook and timeout a deployment would use."""
    from drainer.lifecycle.settings import VARIABLES

    environment = {v.name: v.default for v in VARIABLES}
    environment.update({"CLUSTER_NAME": cluster_name, "ALLOWED_ASGS": asg_name})
    return Function(
        environment=environment,
        timeout_seconds=900,
        memory_mb=512,
        hook=Hook(
            name="eks-node-drainer",
            heartbeat_timeout=600,
            default_result="CONTINUE",
            notification_metadata=f'{{"cluster_name": "{cluster_name}"}}',
        ),
        source="drainer.settings defaults",
        notes=(why,),
    )


def _choose(value: Any, conditions: dict[str, Any], parameters: dict[str, str]) -> Any:
    """A value with its `!If`s decided for these parameter values."""
    if isinstance(value, dict) and set(value) == {"Fn::If"}:
        name, then, otherwise = value["Fn::If"]
        chosen = then if _holds({"Condition": name}, conditions, parameters) else otherwise
        return _choose(chosen, conditions, parameters)
    return value


def _holds(condition: Any, conditions: dict[str, Any], parameters: dict[str, str]) -> bool:
    """A template condition (Equals, Not, And, Or of parameters) for these values."""
    if not isinstance(condition, dict) or len(condition) != 1:
        raise TemplateError(f"cannot evaluate the condition {condition!r}")
    ((function, argument),) = condition.items()
    if function == "Condition":
        return _holds(conditions[argument], conditions, parameters)
    if function == "Fn::Equals":
        left, right = (_resolve(a, parameters) for a in argument)
        return left == right
    if function == "Fn::Not":
        return not _holds(argument[0], conditions, parameters)
    if function in ("Fn::And", "Fn::Or"):
        results = [_holds(a, conditions, parameters) for a in argument]
        return all(results) if function == "Fn::And" else any(results)
    raise TemplateError(f"cannot evaluate the condition {condition!r}")


def _resolve(value: Any, parameters: dict[str, str]) -> str:
    """A property value with Ref and Sub of parameters resolved; other intrinsics refused."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref" and isinstance(argument, str):
            if argument not in parameters:
                raise TemplateError(f"!Ref {argument}: no such parameter with a default")
            return parameters[argument]
        if function == "Fn::Sub" and isinstance(argument, str):

            def substitute(match: re.Match[str]) -> str:
                name = match.group(1)
                if name not in parameters:
                    raise TemplateError(f"!Sub ${{{name}}}: no such parameter with a default")
                return parameters[name]

            return re.sub(r"\$\{([A-Za-z0-9:]+)\}", substitute, argument)
    raise TemplateError(f"cannot resolve {value!r} without deploying")
