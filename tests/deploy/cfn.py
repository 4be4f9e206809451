"""template.yaml evaluated for given parameters, for what moto does not create.

moto's CloudFormation skips lifecycle hooks, access entries, alarms and the async
invoke config, and drops Architectures and LoggingConfig. To test those as the
template states them, `Stack` resolves the intrinsic functions the template uses
(Ref, Fn::Sub, Join, Split, Select, If, GetAtt, the condition functions) the way
CloudFormation documents them. Anything else raises, so a new function in the
template cannot be silently misread.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cfnlint.decode import decode_str

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
ACCOUNT = "123456789012"
REGION = "eu-west-1"
NO_VALUE = object()

# What Fn::GetAtt returns for the template's resources, as CloudFormation documents it.
_ATTRIBUTES = {
    ("DrainerRole", "Arn"): "arn:aws:iam::{account}:role/{stack}-DrainerRole-ABC123",
    ("SchedulerRole", "Arn"): "arn:aws:iam::{account}:role/{stack}-SchedulerRole-ABC123",
    ("DrainerFunction", "Arn"): "arn:aws:lambda:{region}:{account}:function:{stack}",
    ("DrainFailedAlarm", "Arn"): "arn:aws:cloudwatch:{region}:{account}:alarm:{stack}-drain-failed",
    (
        "FailedEventsAlarm",
        "Arn",
    ): "arn:aws:cloudwatch:{region}:{account}:alarm:{stack}-failed-events",
    ("DrainerLogGroup", "Arn"): "arn:aws:logs:{region}:{account}:log-group:/aws/lambda/{stack}:*",
    ("FailedEventsQueue", "Arn"): "arn:aws:sqs:{region}:{account}:{stack}-FailedEventsQueue-XYZ",
    ("FailedEventsQueue", "QueueName"): "{stack}-FailedEventsQueue-XYZ",
    ("TerminateRule", "Arn"): "arn:aws:events:{region}:{account}:rule/{stack}-TerminateRule-XYZ",
    ("LaunchRule", "Arn"): "arn:aws:events:{region}:{account}:rule/{stack}-LaunchRule-XYZ",
    ("SpotInterruptionRule", "Arn"): (
        "arn:aws:events:{region}:{account}:rule/{stack}-SpotInterruptionRule-XYZ"
    ),
    ("RebalanceRule", "Arn"): "arn:aws:events:{region}:{account}:rule/{stack}-RebalanceRule-XYZ",
    ("ScheduledChangeRule", "Arn"): (
        "arn:aws:events:{region}:{account}:rule/{stack}-ScheduledChangeRule-XYZ"
    ),
    ("StateChangeRule", "Arn"): (
        "arn:aws:events:{region}:{account}:rule/{stack}-StateChangeRule-XYZ"
    ),
    ("CapacityReservationRule", "Arn"): (
        "arn:aws:events:{region}:{account}:rule/{stack}-CapacityReservationRule-XYZ"
    ),
    (
        "HookSyncSchedule",
        "Arn",
    ): "arn:aws:events:{region}:{account}:rule/{stack}-HookSyncSchedule-XYZ",
    (
        "HookSyncApiCalls",
        "Arn",
    ): "arn:aws:events:{region}:{account}:rule/{stack}-HookSyncApiCalls-XYZ",
}
# What Ref returns for a resource (its physical id).
_REFS = {
    "DrainerFunction": "{stack}",
    "DrainerLogGroup": "/aws/lambda/{stack}",
    "FailedEventsQueue": "https://sqs.{region}.amazonaws.com/{account}/{stack}-FailedEventsQueue-XYZ",
}


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """The template as plain dicts and lists, short-form tags expanded (Fn::...)."""
    template, errors = decode_str(path.read_text())
    assert not errors, errors
    loaded: dict[str, Any] = json.loads(json.dumps(template))
    return loaded


class Stack:
    """The template with parameter values: conditions, resources, outputs resolved."""

    def __init__(
        self,
        parameters: Mapping[str, str],
        template: Mapping[str, Any] | None = None,
        stack_name: str = "eks-node-drainer",
    ) -> None:
        self.template = template if template is not None else load_template()
        self.names = {"stack": stack_name, "region": REGION, "account": ACCOUNT}
        self.values: dict[str, Any] = {}
        for name, spec in self.template["Parameters"].items():
            raw = parameters.get(name, spec.get("Default"))
            if raw is None:
                raise ValueError(f"parameter {name} has no default and no value")
            raw = str(raw)
            if spec["Type"] == "CommaDelimitedList":
                self.values[name] = [item.strip() for item in raw.split(",")]
            else:
                self.values[name] = raw
        unknown = set(parameters) - set(self.template["Parameters"])
        if unknown:
            raise ValueError(f"unknown parameters {unknown}")
        self._conditions: dict[str, bool] = {}

    # --- the evaluated template ---------------------------------------------------
    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            self._conditions[name] = bool(self.resolve(self.template["Conditions"][name]))
        return self._conditions[name]

    def resources(self, type_: str | None = None) -> dict[str, dict[str, Any]]:
        """Logical id -> resolved Properties of the resources the conditions create."""
        found = {}
        for logical, resource in self.template["Resources"].items():
            if type_ is not None and resource["Type"] != type_:
                continue
            if "Condition" in resource and not self.condition(resource["Condition"]):
                continue
            found[logical] = self.resolve(resource.get("Properties", {}))
        return found

    def resource(self, logical: str) -> dict[str, Any]:
        return self.resources()[logical]

    def rule_failures(self) -> list[str]:
        """The AssertDescription of every template Rule assertion that fails (what
        CloudFormation refuses the stack with)."""
        failed = []
        for rule in self.template.get("Rules", {}).values():
            if "RuleCondition" in rule and not self.resolve(rule["RuleCondition"]):
                continue
            for assertion in rule["Assertions"]:
                if not self.resolve(assertion["Assert"]):
                    failed.append(str(assertion.get("AssertDescription", "")))
        return failed

    def policy_statements(self, role: str = "DrainerRole") -> list[dict[str, Any]]:
        """Every statement the role gets: its inline policies, then the AWS::IAM::Policy
        resources attached to it. A document written as a JSON string (Fn::Sub) is
        parsed, as IAM does."""
        documents = [p["PolicyDocument"] for p in self.resource(role).get("Policies", [])]
        ref = self._ref(role)
        for policy in self.resources("AWS::IAM::Policy").values():
            if ref in policy.get("Roles", []):
                documents.append(policy["PolicyDocument"])
        statements: list[dict[str, Any]] = []
        for document in documents:
            parsed = json.loads(document) if isinstance(document, str) else document
            statements += parsed["Statement"]
        return statements

    def outputs(self) -> dict[str, Any]:
        return {k: self.resolve(v["Value"]) for k, v in self.template["Outputs"].items()}

    # --- intrinsic functions --------------------------------------------------------
    def resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            items = [self.resolve(item) for item in node]
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Ref":
                return self._ref(arg)
            if key == "Condition":
                return self.condition(arg)
            if key.startswith("Fn::"):
                return self._function(key, arg)
        resolved = {k: self.resolve(v) for k, v in node.items()}
        return {k: v for k, v in resolved.items() if v is not NO_VALUE}

    def _function(self, name: str, arg: Any) -> Any:
        if name == "Fn::If":
            condition, when_true, when_false = arg
            return self.resolve(when_true if self.condition(condition) else when_false)
        if name == "Fn::Equals":
            left, right = (self.resolve(a) for a in arg)
            return str(left) == str(right)
        if name == "Fn::Not":
            return not self.resolve(arg[0])
        if name == "Fn::And":
            return all(self.resolve(a) for a in arg)
        if name == "Fn::Or":
            return any(self.resolve(a) for a in arg)
        if name == "Fn::Join":
            delimiter, items = arg
            return delimiter.join(str(i) for i in self.resolve(items))
        if name == "Fn::Split":
            delimiter, text = arg
            return str(self.resolve(text)).split(delimiter)
        if name == "Fn::Select":
            index, items = arg
            return self.resolve(items)[int(self.resolve(index))]
        if name == "Fn::Sub":
            return self._sub(arg)
        if name == "Fn::GetAtt":
            logical, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
            return self._getatt(logical, attribute)
        raise NotImplementedError(f"{name} is not evaluated here; teach tests/deploy/cfn.py")

    def _ref(self, name: str) -> Any:
        pseudo = {
            "AWS::NoValue": NO_VALUE,
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": "aws",
            "AWS::StackName": self.names["stack"],
            "AWS::StackId": (
                f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{self.names['stack']}/"
                "5b3f4c60-0000-11ef-0000-0a1b2c3d4e5f"
            ),
            "AWS::URLSuffix": "amazonaws.com",
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.values:
            return self.values[name]
        if name in self.template["Resources"]:
            return _REFS.get(name, f"{{stack}}-{name}-XYZ").format(**self.names)
        raise KeyError(f"Ref to unknown {name}")

    def _getatt(self, logical: str, attribute: str) -> str:
        if (logical, attribute) not in _ATTRIBUTES:
            raise NotImplementedError(f"GetAtt {logical}.{attribute}: add it to _ATTRIBUTES")
        return _ATTRIBUTES[(logical, attribute)].format(**self.names)

    def _sub(self, arg: Any) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        resolved = {k: self.resolve(v) for k, v in variables.items()}

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in resolved:
                return str(resolved[name])
            if "." in name and not name.startswith("AWS::"):
                logical, attribute = name.split(".", 1)
                return self._getatt(logical, attribute)
            value = self._ref(name)
            return ",".join(value) if isinstance(value, list) else str(value)

        return re.sub(r"\$\{([^!}][^}]*)\}", replace, text)
