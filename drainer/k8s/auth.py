"""Bearer tokens for the API server: EKS tokens (the Lambda's), and the tokens of a
kubeconfig user's exec credential plugin (the CLI's, as `aws eks update-kubeconfig`
writes it). Both are `TokenProvider`s of drainer.kube: a cached token, and
`invalidate()` after a 401 so that the next call gets a fresh one.

EKS tokens, made exactly as aws-iam-authenticator and `aws eks get-token` do.

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
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from drainer.errors import CredentialsUnavailable

if TYPE_CHECKING:
    from drainer.aws import ClientFactory


log = logging.getLogger(__name__)

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


EXEC_REFRESH_MARGIN_SECONDS = 10.0
EXEC_REFRESH_MARGIN_FRACTION = 0.1
"""An exec plugin's token is used until shortly before its stated expiry: 10 s, or a
tenth of its lifetime when that is shorter (3 s for a 30 s token). Enough for a
request to reach the API server, which checks the token when the request arrives;
not the official client's 5 minutes, which re-runs the plugin on every request when
tokens live less than that. A token the server refuses earlier is caught by the 401."""


class ExecToken:
    """The bearer token of a kubeconfig user's exec credential plugin
    (client.authentication.k8s.io ExecCredential), kept as kubectl's client keeps it
    (which uses it up to the stated expiry itself; here a small margin before).

    `run` runs the plugin and returns its ExecCredential's status; it raises
    CredentialsUnavailable when the plugin fails. The token is cached until shortly
    before its status.expirationTimestamp (see EXEC_REFRESH_MARGIN_SECONDS), or, when
    the plugin states no expiry, until the API server refuses it. `invalidate()` (a
    401) makes the next `token()` run the plugin again, whatever the stated expiry:
    a token can be refused before it (its signing credentials rotated, a clock
    behind the server's). Thread-safe: concurrent callers share one run.
    """

    def __init__(
        self,
        run: Callable[[], Mapping[str, Any]],
        *,
        command: str,
        clock: Callable[[], float] = time.time,
        status: Mapping[str, Any] | None = None,
    ) -> None:
        """`status`: the plugin's answer when the caller has already run it once."""
        self.command = command
        self._run = run
        self._clock = clock
        self._lock = threading.Lock()
        self._token = ""
        self._fresh_until = 0.0
        self._runs = 0
        if status is not None:
            self._accept(status)

    def token(self) -> str:
        """The cached token, or a fresh one from the plugin when it is near its expiry
        or was refused."""
        with self._lock:
            if not self._token or self._clock() >= self._fresh_until:
                self._runs += 1
                self._accept(self._run())
            return self._token

    def invalidate(self) -> None:
        """Forget the token (the API server answered 401): the next runs the plugin."""
        with self._lock:
            self._token = ""

    @property
    def runs(self) -> int:
        """How many times the plugin has been run for this source (not counting a
        status handed in)."""
        with self._lock:
            return self._runs

    def _accept(self, status: Mapping[str, Any]) -> None:
        token = status.get("token")
        if not isinstance(token, str) or not token:
            raise CredentialsUnavailable(
                f"the exec credential plugin `{self.command}` printed no token "
                "(status.token is missing or empty); run it yourself to see what it prints"
            )
        now = self._clock()
        expiry = _expiry(status.get("expirationTimestamp"), self.command)
        if expiry is None:
            fresh_until = float("inf")
        else:
            lifetime = max(0.0, expiry - now)
            margin = min(EXEC_REFRESH_MARGIN_SECONDS, EXEC_REFRESH_MARGIN_FRACTION * lifetime)
            fresh_until = expiry - margin
            if lifetime == 0:
                log.warning(
                    "the exec credential plugin `%s` printed a token that has already "
                    "expired (%s); is this machine's clock right?",
                    self.command,
                    status.get("expirationTimestamp"),
                )
        self._token = token
        self._fresh_until = fresh_until

    def __repr__(self) -> str:
        # Never the token itself.
        return f"ExecToken(command={self.command!r})"


def _expiry(stamp: object, command: str) -> float | None:
    """An ExecCredential's status.expirationTimestamp (RFC 3339) as epoch seconds;
    None when it states none, or one that cannot be read (warned about: the token is
    then kept until a 401, as one without an expiry)."""
    if stamp is None or stamp == "":
        return None
    try:
        parsed = datetime.fromisoformat(str(stamp).replace("z", "Z"))
    except ValueError:
        log.warning(
            "the exec credential plugin `%s` stated an expirationTimestamp that is not "
            "RFC 3339 (%r); its token is kept until the API server refuses it",
            command,
            stamp,
        )
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
