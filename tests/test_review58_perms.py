"""Review 58, permissions: what the function's role lets it do, against what its code
does, in the configurations the template makes.

The stack's custom resource runs its Update after CloudFormation has updated the
role (LifecycleHooks -> DrainerFunction -> DrainerRole: dependencies first), so its
Auto Scaling calls are made under the updated stack's policy. Here that policy is
template.yaml's, evaluated for the new parameters (tests/deploy/cfn.py), and
enforced on moto's Auto Scaling client the way IAM does: action, resource ARN,
condition; anything else is AccessDenied.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from deploy.cfn import ACCOUNT, REGION, Stack
from support import cfn
from test_hooks import CLUSTER, HOOK, Account
from test_stack_hooks import OURS, account, answers  # noqa: F401  (fixtures)

from drainer.lifecycle import stack_hooks
from drainer.lifecycle.events import StackRequest, parse_event
from drainer.lifecycle.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
GATED = (
    "PutLifecycleHook",
    "DeleteLifecycleHook",
    "CompleteLifecycleAction",
    "RecordLifecycleActionHeartbeat",
)
"""The Auto Scaling actions the role grants on some groups only (by ARN or tag)."""


class _Denied:
    status_code = 403
    headers: dict[str, str] = {}


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def _condition_holds(condition: Mapping[str, Any], tags: Mapping[str, str]) -> bool:
    for operator, keys in condition.items():
        assert operator == "StringEquals", f"teach the test {operator}"
        for key, wanted in keys.items():
            if key == "aws:RequestedRegion":
                got = REGION  # the function calls Auto Scaling in its stack's region
            elif key.startswith(("autoscaling:ResourceTag/", "aws:ResourceTag/")):
                got = tags.get(key.split("/", 1)[1])
            else:
                raise AssertionError(f"teach the test the condition key {key}")
            if got not in _as_list(wanted):
                return False
    return True


def _allowed(
    statements: list[dict[str, Any]], action: str, arn: str, tags: Mapping[str, str]
) -> bool:
    return any(
        s["Effect"] == "Allow"
        and any(fnmatchcase(action, a) for a in _as_list(s["Action"]))
        and any(fnmatchcase(arn, r) for r in _as_list(s["Resource"]))
        and _condition_holds(s.get("Condition", {}), tags)
        for s in statements
    )


class Gate:
    """The account's Auto Scaling client answering as IAM would for the role of a
    stack of the parameters last given to `policy`; `refused`: the calls it denied."""

    def __init__(self, account: Account) -> None:  # noqa: F811
        self.client = account.autoscaling
        self.statements: list[dict[str, Any]] = []
        self.refused: list[str] = []
        for name in GATED:
            self.client.meta.events.register(f"before-parameter-build.autoscaling.{name}", _keep)
            self.client.meta.events.register(f"before-call.autoscaling.{name}", self._gate)

    def policy(self, parameters: Mapping[str, str]) -> None:
        self.statements = Stack(
            {"ClusterName": CLUSTER, "CodeS3Bucket": "code", "CodeS3Key": "k", **parameters}
        ).policy_statements()
        self.refused = []

    def _gate(self, model: Any, context: dict[str, Any], **_: Any) -> Any:
        group = str(context["review58"]["AutoScalingGroupName"])
        found = self.client.describe_auto_scaling_groups(AutoScalingGroupNames=[group])
        tags = {t["Key"]: t["Value"] for g in found["AutoScalingGroups"] for t in g.get("Tags", [])}
        arn = (
            f"arn:aws:autoscaling:{REGION}:{ACCOUNT}:autoScalingGroup:"
            f"0123abcd-0000-0000-0000-000000000000:autoScalingGroupName/{group}"
        )
        action = f"autoscaling:{model.name}"
        if _allowed(self.statements, action, arn, tags):
            return None
        self.refused.append(f"{action} {group}")
        message = f"not authorized to perform: {action} on resource: {arn}"
        return _Denied(), {
            "Error": {"Code": "AccessDenied", "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": 403},
        }


def _keep(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    context["review58"] = dict(params)


def _send(
    account: Account,  # noqa: F811
    answers: cfn.ResponseServer,  # noqa: F811
    kind: str,
    given: Settings,
    properties: Mapping[str, str],
    **more: Any,
) -> dict[str, Any]:
    event = cfn.request(kind, answers.next_url(), properties, **more)
    request = parse_event(event)
    assert isinstance(request, StackRequest)
    stack_hooks.handle(request, account.autoscaling, given, None)
    body: dict[str, Any] = answers.answers[-1].body
    return body


def _settings(*groups: str) -> Settings:
    return Settings(cluster_name=CLUSTER, allowed_asgs=groups, stack_id=cfn.STACK_ID)


def _properties(names: str) -> dict[str, str]:
    return {"ClusterName": CLUSTER, "AsgNames": names, "LifecycleHookName": HOOK}


def test_update_leaving_a_group_out_of_asg_names__succeeds_under_the_updated_policy(
    account: Account,  # noqa: F811
    answers: cfn.ResponseServer,  # noqa: F811
) -> None:
    """AsgNames nodes-a,nodes-b -> nodes-a. The role CloudFormation updated first names
    only nodes-a; the Update's tidy deletes the stack's hook on nodes-b, IAM refuses,
    and the refusal FAILS the Update: the stack rolls back to naming nodes-b, so no
    update can take a named (untagged) group out of the stack's care. The Update
    must succeed, naming the hook to delete by hand (as it does for a group only the
    old AsgTag covered)."""
    account.group("nodes-a")
    account.group("nodes-b")
    gate = Gate(account)
    gate.policy({"AsgNames": "nodes-a,nodes-b"})
    before = _properties("nodes-a,nodes-b")
    created = _send(account, answers, "Create", _settings("nodes-a", "nodes-b"), before)
    assert created["Status"] == "SUCCESS", created  # the gate lets the stack's own calls by

    assert not gate.refused, gate.refused

    gate.policy({"AsgNames": "nodes-a"})  # the role, updated before the resource
    updated = _send(
        account,
        answers,
        "Update",
        _settings("nodes-a"),
        _properties("nodes-a"),
        old=before,
        physical_id=OURS,
    )

    assert gate.refused == ["autoscaling:DeleteLifecycleHook nodes-b"], gate.refused
    assert updated["Status"] == "SUCCESS", (
        "an Update dropping a group from AsgNames fails (and rolls back) on the "
        f"deletion its own updated policy refuses: {updated['Reason']}"
    )
    assert "nodes-b" in updated["Reason"]


def _section(text: str, start: str, end: str) -> str:
    begin = text.index(start)
    return text[begin : text.index(end, begin + len(start))]


ACTION = re.compile(r"`([a-z0-9-]+:[A-Za-z]+)`")


def test_upgrade_notes_name_every_action_the_role_gains_in_0_2_0():
    """docs/operations.md's "0.2.0, from 0.1.0" tells an operator with a permissions
    boundary what the role gains ("A permissions boundary must allow it too"). The
    CHANGELOG's 0.2.0 says the role gains ec2:DescribeInstanceStatus (a closed
    change's release) and scheduler:GetSchedule and scheduler:UpdateSchedule (a moved
    or closed change's schedule); the upgrade notes do not name them."""
    changelog = " ".join(
        _section((ROOT / "CHANGELOG.md").read_text(), "## 0.2.0", "## 0.1.0").split()
    )
    gained = {
        action
        for clause in re.findall(r"role gains ([^.;]*)", changelog)
        for action in ACTION.findall(clause)
    }
    assert {"autoscaling:DescribeAutoScalingInstances", "ec2:DescribeInstanceStatus"} <= gained
    statements = Stack(
        {
            "ClusterName": CLUSTER,
            "AsgNames": "nodes-a",
            "CodeS3Bucket": "code",
            "CodeS3Key": "k",
            "ScheduledChangeLeadSeconds": "86400",
        }
    ).policy_statements()
    granted = {a for s in statements for a in _as_list(s["Action"])}
    assert gained <= granted, gained - granted
    notes = _section(
        (ROOT / "docs" / "operations.md").read_text(), "### 0.2.0, from 0.1.0", "\n### "
    )
    noted = set(ACTION.findall(" ".join(notes.split())))
    assert not gained - noted, (
        f"the role gains {sorted(gained - noted)} in 0.2.0 (CHANGELOG), which the "
        "upgrade notes (docs/operations.md) do not name"
    )
