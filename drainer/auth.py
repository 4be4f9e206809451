"""EKS bearer tokens, made exactly as aws-iam-authenticator and `aws eks get-token` do.

Why a boundary: the token is a credential. It is a presigned STS GetCallerIdentity
URL (SigV4 query signing, X-Amz-Expires=60, the header `x-k8s-aws-id: <cluster>`
among the signed headers), base64url-encoded without padding and prefixed
"k8s-aws-v1.". EKS accepts one for 15 minutes; a drain can last hours, so
`TokenSource` caches a token and mints a new one well before that, or at once after
a 401 (`invalidate`). Nothing here logs a token, and botocore's signing debug lines
(which would print the signature) are filtered out.

The STS client only presigns and never sends a request, so it is built with the
real regional endpoint explicitly: a custom AWS_ENDPOINT_URL (a local AWS emulator)
must not end up inside a token that the API server passes on to STS.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drainer.aws import ClientFactory


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


def make_token(sts: Any, cluster_name: str) -> str:
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
        self._mints = 0
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
                self._mints += 1
            return self._token

    @property
    def mints(self) -> int:
        """How many tokens this source has made (for the drain's summary line)."""
        with self._lock:
            return self._mints

    def invalidate(self) -> None:
        """Forget the cached token (the API server answered 401): the next is new."""
        with self._lock:
            self._token = ""

    def __repr__(self) -> str:
        # Never the token itself.
        return f"TokenSource(cluster_name={self.cluster_name!r}, region={self.region!r})"
