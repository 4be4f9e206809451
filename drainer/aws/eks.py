"""EKS: which cluster an instance belongs to, and how to reach its API server."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from botocore.exceptions import ClientError

from drainer.aws.errors import AWS_FAILURES, error_code, translate
from drainer.aws.session import Client
from drainer.aws.tags import CLUSTER_NAME_TAG, CLUSTER_TAG_PREFIX
from drainer.errors import ClusterNotFound

log = logging.getLogger(__name__)

# EKS cluster names (CreateCluster's documented pattern).
_CLUSTER_NAME = re.compile(r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}")


@dataclass(frozen=True)
class ClusterInfo:
    """How to reach an EKS cluster's API server."""

    name: str
    endpoint: str
    certificate_authority_data: str
    """The cluster CA bundle, base64 (PEM inside), as EKS returns it."""
    status: str
    arn: str


def describe_cluster(eks: Client, name: str) -> ClusterInfo:
    """The cluster's endpoint and CA. ClusterNotFound names the cluster and region."""
    region = eks.meta.region_name
    try:
        cluster = eks.describe_cluster(name=name)["cluster"]
    except ClientError as e:
        if error_code(e) == "ResourceNotFoundException":
            raise ClusterNotFound(
                f"EKS cluster {name!r} not found in {region}; check the hook's "
                f"NotificationMetadata, the ASG's {CLUSTER_NAME_TAG} tag or CLUSTER_NAME"
            ) from e
        raise translate(e, "eks:DescribeCluster", f"DescribeCluster {name} in {region}") from e
    except AWS_FAILURES as e:
        raise translate(e, "eks:DescribeCluster", f"DescribeCluster {name} in {region}") from e
    return ClusterInfo(
        name=str(cluster.get("name", name)),
        endpoint=str(cluster.get("endpoint", "")),
        certificate_authority_data=str(cluster.get("certificateAuthority", {}).get("data", "")),
        status=str(cluster.get("status", "")),
        arn=str(cluster.get("arn", "")),
    )


def cluster_name_for(
    hook_metadata: str, asg_tags: Mapping[str, str], configured: str
) -> str | None:
    """Which EKS cluster the instance belongs to; None when nothing says.

    In order: the hook's NotificationMetadata (a plain cluster name, or JSON with
    "cluster_name"); the ASG tag eks:cluster-name; a kubernetes.io/cluster/<name> tag
    (when several, the configured one if among them, else only an unambiguous one);
    the CLUSTER_NAME setting.
    """
    from_metadata = _cluster_from_metadata(hook_metadata)
    if from_metadata:
        return from_metadata
    tagged = asg_tags.get(CLUSTER_NAME_TAG, "").strip()
    if tagged:
        return tagged
    owners = sorted(
        key.removeprefix(CLUSTER_TAG_PREFIX)
        for key in asg_tags
        if key.startswith(CLUSTER_TAG_PREFIX) and key != CLUSTER_TAG_PREFIX
    )
    if configured and configured in owners:
        return configured
    if len(owners) == 1:
        return owners[0]
    if len(owners) > 1:
        log.warning(
            "ASG tags name several clusters %s and CLUSTER_NAME does not pick one of them",
            owners,
        )
    return configured or None


def _cluster_from_metadata(metadata: str) -> str | None:
    text = metadata.strip()
    if not text:
        return None
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            log.warning("hook NotificationMetadata looks like JSON but is not; ignoring it")
            return None
        name = parsed.get("cluster_name") if isinstance(parsed, dict) else None
        if isinstance(name, str) and _CLUSTER_NAME.fullmatch(name.strip()):
            return name.strip()
        return None
    if _CLUSTER_NAME.fullmatch(text):
        return text
    return None
