"""EKS: which cluster an instance belongs to, and how to reach its API server: its
endpoint and CA (DescribeCluster), and a bearer token the API server accepts.

EKS tokens are made exactly as aws-iam-authenticator and `aws eks get-token` do.
Why here: the token is a credential. It is a presigned STS GetCallerIdentity
URL (SigV4 query signing, X-Amz-Expires=60, the header `x-k8s-aws-id: <cluster>`
among the signed headers), base64url-encoded without padding and prefixed
"k8s-aws-v1.". EKS accepts one for 15 minutes; a drain can last hours, so
`TokenSource` caches a token and mints a new one well before that, or at once after
a 401 (`invalidate`): it is a TokenProvider of drainer.k8s.client. Nothing here logs a
token, and botocore's signing debug lines (which would print the signature) are
filtered out.

The STS client only presigns and never sends a request, so it is built with the
real regional endpoint explicitly: a custom AWS_ENDPOINT_URL (a local AWS emulator)
must not end up inside a token that the API server passes on to STS.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from drainer.aws.errors import AWS_FAILURES, error_code, translate
from drainer.aws.session import Client, ClientFactory
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
    owners = tagged_clusters(asg_tags)
    if asg_tags.get(CLUSTER_NAME_TAG, "").strip():
        return owners[0]
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


def tagged_clusters(asg_tags: Mapping[str, str]) -> list[str]:
    """The clusters a group's tags name: its eks:cluster-name tag alone when it has
    one, else every kubernetes.io/cluster/<name> tag's name, sorted."""
    tagged = asg_tags.get(CLUSTER_NAME_TAG, "").strip()
    if tagged:
        return [tagged]
    return sorted(
        key.removeprefix(CLUSTER_TAG_PREFIX)
        for key in asg_tags
        if key.startswith(CLUSTER_TAG_PREFIX) and key != CLUSTER_TAG_PREFIX
    )


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


# --- the bearer token ---------------------------------------------------------

TOKEN_PREFIX = "k8s-aws-v1."  # noqa: S105 - a format prefix, not a password
CLUSTER_ID_HEADER = "x-k8s-aws-id"
URL_EXPIRES_SECONDS = 60
EKS_TOKEN_LIFETIME_SECONDS = 15 * 60

# botocore.auth logs the canonical request, string to sign and signature at DEBUG:
# enough to rebuild a token. These are dropped whatever the log level.
_SIGNING_DEBUG_PREFIXES = ("CanonicalRequest", "StringToSign", "Signature")


class _DropSigningDetails(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_SIGNING_DEBUG_PREFIXES)


_SIGNING_FILTER = _DropSigningDetails()


def _hide_signing_details() -> None:
    signing_log = logging.getLogger("botocore.auth")
    if _SIGNING_FILTER not in signing_log.filters:
        signing_log.addFilter(_SIGNING_FILTER)


def sts_endpoint(region: str) -> str:
    """The regional STS endpoint the token's URL points at."""
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://sts.{region}.{suffix}/"


def make_token(sts: Client, cluster_name: str) -> str:
    """A bearer token for `cluster_name`, presigned by the `sts` client.

    The client must add the x-k8s-aws-id header before signing (see TokenSource).
    """
    url: str = sts.generate_presigned_url(
        "get_caller_identity",
        Params={},
        ExpiresIn=URL_EXPIRES_SECONDS,
        HttpMethod="GET",
    )
    encoded = base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
    return TOKEN_PREFIX + encoded


class TokenSource:
    """Hands out a cached EKS bearer token, minting a new one when it gets old.

    Thread-safe: evictions run concurrently and share one source.
    """

    def __init__(
        self,
        session: ClientFactory,
        cluster_name: str,
        region: str,
        clock: Callable[[], float] = time.time,
        refresh_after_seconds: float = 600,
    ) -> None:
        if not 0 < refresh_after_seconds < EKS_TOKEN_LIFETIME_SECONDS:
            raise ValueError(
                f"refresh_after_seconds must be between 0 and {EKS_TOKEN_LIFETIME_SECONDS} "
                f"(EKS accepts a token for 15 minutes), not {refresh_after_seconds}"
            )
        _hide_signing_details()
        self.cluster_name = cluster_name
        self.region = region
        self._clock = clock
        self._refresh_after = refresh_after_seconds
        self._lock = threading.Lock()
        self._token = ""
        self._minted_at = 0.0
        self._sts = session.client("sts", region_name=region, endpoint_url=sts_endpoint(region))
        self._sts.meta.events.register(
            "before-sign.sts.GetCallerIdentity", self._add_cluster_id_header
        )

    def _add_cluster_id_header(self, request: Any, **_: Any) -> None:
        request.headers[CLUSTER_ID_HEADER] = self.cluster_name

    def token(self) -> str:
        """A token at most `refresh_after_seconds` old."""
        with self._lock:
            now = self._clock()
            if not self._token or now - self._minted_at >= self._refresh_after:
                self._token = make_token(self._sts, self.cluster_name)
                self._minted_at = now
            return self._token

    def invalidate(self) -> None:
        """Forget the cached token (the API server answered 401): the next is new."""
        with self._lock:
            self._token = ""

    def __repr__(self) -> str:
        # Never the token itself.
        return f"TokenSource(cluster_name={self.cluster_name!r}, region={self.region!r})"
