"""The tags EC2 and Auto Scaling hand back, and the ones the drainer reads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

ASG_NAME_TAG = "aws:autoscaling:groupName"
"""Auto Scaling puts it on every instance of a group."""
CLUSTER_NAME_TAG = "eks:cluster-name"
CLUSTER_TAG_PREFIX = "kubernetes.io/cluster/"


def tag_map(tags: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """EC2's or Auto Scaling's tag list ([{"Key": ..., "Value": ...}]) as a dict."""
    return {str(tag["Key"]): str(tag.get("Value", "")) for tag in tags}
