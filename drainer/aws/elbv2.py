"""Elastic Load Balancing v2: the target groups, their tags and targets, and taking
an instance out of one."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from botocore.exceptions import ClientError

from drainer.aws.errors import ANSWERED_OR_UNREACHED, error_code, is_access_denied, translate
from drainer.aws.session import Client
from drainer.aws.tags import tag_map

_TAGS_PER_CALL = 20  # DescribeTags takes at most 20 ARNs
_GROUP_NOT_FOUND = "TargetGroupNotFound"
"""ELB's answer about a target group deleted since it was listed (by its owner: a
Service removed, another cluster's stack torn down)."""
_TARGET_KEYS = ("Id", "Port", "AvailabilityZone")
"""What DeregisterTargets takes of a target that DescribeTargetHealth described."""


def target_group_arns(elbv2: Client) -> list[str]:
    """The ARNs of every target group in the region, all pages."""
    return list(target_group_types(elbv2))


def target_group_types(elbv2: Client) -> dict[str, str]:
    """Every target group in the region, all pages: ARN -> its TargetType (instance,
    ip, lambda or alb)."""
    try:
        return {
            group["TargetGroupArn"]: str(group.get("TargetType") or "instance")
            for page in elbv2.get_paginator("describe_target_groups").paginate()
            for group in page["TargetGroups"]
        }
    except ANSWERED_OR_UNREACHED as e:
        raise translate(
            e, "elasticloadbalancing:DescribeTargetGroups", "DescribeTargetGroups"
        ) from e


def deregistration_delay(elbv2: Client, group: str) -> int | None:
    """The group's deregistration delay (`deregistration_delay.timeout_seconds`, 300 s
    unless set): how long ELB drains a target once it is deregistered; None when ELB
    does not know the group (deleted since it was listed)."""
    answer = _unless_gone(
        "DescribeTargetGroupAttributes",
        f"DescribeTargetGroupAttributes {group}",
        lambda: elbv2.describe_target_group_attributes(TargetGroupArn=group),
    )
    if answer is None:
        return None
    for attribute in answer["Attributes"]:
        if attribute.get("Key") == "deregistration_delay.timeout_seconds":
            return int(attribute.get("Value") or 0)
    return 300


def target_group_tags(elbv2: Client, arns: list[str]) -> dict[str, dict[str, str]]:
    """The tags of each target group in `arns`: ARN -> its tags. A group deleted since
    it was listed fails its whole call of 20 (TargetGroupNotFound): those 20 are then
    read one by one, and the deleted one is left out."""
    tags: dict[str, dict[str, str]] = {}
    for start in range(0, len(arns), _TAGS_PER_CALL):
        batch = arns[start : start + _TAGS_PER_CALL]
        described = _tags_of(elbv2, batch)
        if described is None:
            described = [d for arn in batch for d in _tags_of(elbv2, [arn]) or []]
        for one in described:
            tags[one["ResourceArn"]] = tag_map(one.get("Tags", []))
    return tags


def _tags_of(elbv2: Client, arns: list[str]) -> list[dict[str, Any]] | None:
    """The TagDescriptions of `arns`; None when one of them is a group ELB does not know."""
    answer = _unless_gone(
        "DescribeTags", "DescribeTags", lambda: elbv2.describe_tags(ResourceArns=arns)
    )
    return None if answer is None else list(answer["TagDescriptions"])


def target_health(elbv2: Client, group: str) -> list[dict[str, Any]] | None:
    """The group's TargetHealthDescriptions (each target, with its state); None when
    ELB does not know the group (deleted, or a mistyped ARN)."""
    answer = _unless_gone(
        "DescribeTargetHealth",
        f"DescribeTargetHealth {group}",
        lambda: elbv2.describe_target_health(TargetGroupArn=group),
    )
    return None if answer is None else list(answer["TargetHealthDescriptions"])


def _unless_gone(action: str, what: str, call: Callable[[], Any]) -> Any:
    """`call`'s answer; None when ELB does not know the group it names (deleted since
    it was listed: its owner may remove it at any time)."""
    try:
        return call()
    except ANSWERED_OR_UNREACHED as e:
        if error_code(e) == _GROUP_NOT_FOUND:
            return None
        raise translate(e, f"elasticloadbalancing:{action}", what) from e


def deregister_targets(elbv2: Client, group: str, targets: Iterable[Mapping[str, Any]]) -> bool:
    """Take `targets` (the "Target" of a TargetHealthDescription) out of the group;
    ELB then drains them for the group's deregistration delay. False when ELB does not
    know the group (deleted since it was described: nothing left to take them out of)."""
    what = f"DeregisterTargets {group}"
    try:
        elbv2.deregister_targets(
            TargetGroupArn=group,
            Targets=[{k: v for k, v in t.items() if k in _TARGET_KEYS} for t in targets],
        )
    except ANSWERED_OR_UNREACHED as e:
        if error_code(e) == _GROUP_NOT_FOUND:
            return False
        if is_access_denied(e) and not _exists(elbv2, group):
            return False  # IAM's tag condition finds no tag on a group that is gone
        raise translate(e, "elasticloadbalancing:DeregisterTargets", what) from e
    return True


def _exists(elbv2: Client, group: str) -> bool:
    """Whether ELB still knows the group: the function's role may deregister only from
    groups tagged with its cluster, and a group deleted since it was described has no
    tag, so IAM refuses before ELB would say it is gone. True when it cannot tell."""
    try:
        elbv2.describe_target_groups(TargetGroupArns=[group])
    except ClientError as e:
        return error_code(e) != _GROUP_NOT_FOUND
    except ANSWERED_OR_UNREACHED:
        return True
    return True
