"""Authentication (static bearer tokens and EKS IAM tokens) and RBAC authorization.

EKS tokens are checked the way aws-iam-authenticator checks them, except that the
last step, which the real authenticator delegates to STS, is done here: the SigV4
signature is recomputed with the configured test credentials. So a token for the
wrong cluster, a tampered one, or one older than the age limit is refused.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import hashlib
import hmac
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubesim.store import Obj, Store

EKS_PREFIX = "k8s-aws-v1."
# A presigned GET has an empty body: SigV4 signs the SHA-256 of b"".
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_STS_HOST = re.compile(r"^sts(\.[a-z0-9-]+)?\.amazonaws\.com(\.cn)?$")
_ALLOWED_PARAMS = {
    "action",
    "version",
    "x-amz-algorithm",
    "x-amz-credential",
    "x-amz-date",
    "x-amz-expires",
    "x-amz-security-token",
    "x-amz-signature",
    "x-amz-signedheaders",
    "x-amz-user-agent",
}


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()

    @property
    def is_admin(self) -> bool:
        return "system:masters" in self.groups


@dataclass(frozen=True)
class EksIdentity:
    """Stand-in for an EKS access entry: these IAM credentials map to this user."""

    access_key_id: str
    secret_access_key: str
    arn: str
    username: str
    groups: tuple[str, ...] = ()


class AuthenticationError(Exception):
    """Why a token was refused (logged and kept for tests; the client only sees 401)."""


@dataclass
class Authenticator:
    tokens: dict[str, User] = field(default_factory=dict)
    cluster_id: str = ""
    identities: list[EksIdentity] = field(default_factory=list)
    max_token_age: float = 900.0
    clock: Callable[[], float] = time.time
    failures: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def authenticate(self, authorization: str | None) -> User:
        """The user behind an Authorization header; raises AuthenticationError."""
        try:
            return self._authenticate(authorization)
        except AuthenticationError as e:
            with self._lock:
                self.failures.append(str(e))
            raise

    def _authenticate(self, authorization: str | None) -> User:
        if not authorization:
            raise AuthenticationError("no bearer token")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationError("not a bearer token")
        token = token.strip()
        if token in self.tokens:
            return self.tokens[token]
        if token.startswith(EKS_PREFIX):
            return self._eks(token[len(EKS_PREFIX) :])
        raise AuthenticationError("unknown token")

    def _eks(self, encoded: str) -> User:
        try:
            url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError) as e:
            raise AuthenticationError("EKS token is not base64url") from e
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "https" or not _STS_HOST.match(parsed.hostname or ""):
            raise AuthenticationError(
                f"EKS token URL host {parsed.hostname!r} is not an STS endpoint"
            )
        if parsed.path not in ("", "/"):
            raise AuthenticationError("EKS token URL path must be /")
        pairs = urllib.parse.parse_qsl(parsed.query, keep_blank_values=True)
        params = {k: v for k, v in pairs}
        lowered = {k.lower() for k in params}
        unexpected = lowered - _ALLOWED_PARAMS
        if unexpected:
            raise AuthenticationError(
                f"EKS token has unexpected query parameters {sorted(unexpected)}"
            )
        if params.get("Action") != "GetCallerIdentity" or params.get("Version") != "2011-06-15":
            raise AuthenticationError("EKS token is not a GetCallerIdentity request")
        if params.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
            raise AuthenticationError("EKS token is not signed with SigV4")
        signed_headers = params.get("X-Amz-SignedHeaders", "").split(";")
        if "x-k8s-aws-id" not in signed_headers or "host" not in signed_headers:
            raise AuthenticationError("EKS token does not sign the x-k8s-aws-id and host headers")
        try:
            signed_at = calendar.timegm(time.strptime(params["X-Amz-Date"], "%Y%m%dT%H%M%SZ"))
        except (KeyError, ValueError) as e:
            raise AuthenticationError("EKS token has no valid X-Amz-Date") from e
        now = self.clock()
        if now - signed_at > self.max_token_age:
            raise AuthenticationError(
                f"X-Amz-Date parameter is expired ({self.max_token_age:.0f} second expiration)"
            )
        if signed_at - now > 300:
            raise AuthenticationError("X-Amz-Date parameter is in the future")
        credential = params.get("X-Amz-Credential", "").split("/")
        if len(credential) != 5 or credential[3] != "sts" or credential[4] != "aws4_request":
            raise AuthenticationError("EKS token has a malformed X-Amz-Credential")
        identity = next((i for i in self.identities if i.access_key_id == credential[0]), None)
        if identity is None:
            raise AuthenticationError(f"no access entry for access key {credential[0]}")
        expected = _sigv4_signature(
            secret=identity.secret_access_key,
            host=parsed.netloc,
            params=[(k, v) for k, v in pairs if k != "X-Amz-Signature"],
            headers={"host": parsed.netloc, "x-k8s-aws-id": self.cluster_id},
            signed_headers=signed_headers,
            amz_date=params["X-Amz-Date"],
            scope="/".join(credential[1:]),
            date=credential[1],
            region=credential[2],
        )
        if not hmac.compare_digest(expected, params.get("X-Amz-Signature", "")):
            raise AuthenticationError(
                "SignatureDoesNotMatch: the token was signed for another cluster id or credentials"
            )
        return User(identity.username, (*identity.groups, "system:authenticated"))


def _quote(value: str) -> str:
    return urllib.parse.quote(value, safe="-_.~")


def _sigv4_signature(
    *,
    secret: str,
    host: str,
    params: list[tuple[str, str]],
    headers: dict[str, str],
    signed_headers: list[str],
    amz_date: str,
    scope: str,
    date: str,
    region: str,
) -> str:
    query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(params))
    canonical_headers = "".join(f"{h}:{headers.get(h, '').strip()}\n" for h in signed_headers)
    canonical_request = "\n".join(
        ["GET", "/", query, canonical_headers, ";".join(signed_headers), _EMPTY_SHA256]
    )
    string_to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            amz_date,
            scope,
            hashlib.sha256(canonical_request.encode()).hexdigest(),
        ]
    )
    key = ("AWS4" + secret).encode()
    for part in (date, region, "sts", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()


# -- RBAC -----------------------------------------------------------------------


@dataclass(frozen=True)
class Attributes:
    user: User
    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""  # for non-resource requests

    @property
    def is_resource(self) -> bool:
        return bool(self.resource)


# What every authenticated user may do (the bootstrap roles system:discovery,
# system:public-info-viewer and system:basic-user).
_PUBLIC_PATHS = ("/api", "/apis", "/version", "/openapi", "/healthz", "/livez", "/readyz")
_SELF_REVIEWS = {"selfsubjectaccessreviews", "selfsubjectrulesreviews"}


def _rule_matches(rule: dict[str, Any], attributes: Attributes) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attributes.verb not in verbs:
        return False
    if not attributes.is_resource:
        urls = rule.get("nonResourceURLs") or []
        return any(
            u in ("*", attributes.path) or (u.endswith("*") and attributes.path.startswith(u[:-1]))
            for u in urls
        )
    groups = rule.get("apiGroups")
    if groups is None or ("*" not in groups and attributes.group not in groups):
        return False
    resources = rule.get("resources") or []
    combined = (
        f"{attributes.resource}/{attributes.subresource}"
        if attributes.subresource
        else attributes.resource
    )
    if not any(
        r in ("*", combined) or (attributes.subresource and r == f"*/{attributes.subresource}")
        for r in resources
    ):
        return False
    names = rule.get("resourceNames") or []
    return not names or attributes.name in names


def _subject_matches(subject: dict[str, Any], user: User) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return bool(subject.get("name") == user.name)
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        return (
            user.name == f"system:serviceaccount:{subject.get('namespace')}:{subject.get('name')}"
        )
    return False


class Authorizer:
    def __init__(self, store: Store) -> None:
        self.store = store
        # The roles that apply to (user, namespace), until an RBAC object changes:
        # most requests then authorize without taking the store lock at all.
        self._cache: dict[tuple[User, str], list[Obj]] = {}
        store.add_hook(self._on_change)

    def _on_change(self, change: Any) -> None:
        if change.resource.group == "rbac.authorization.k8s.io":
            self._cache = {}

    def _roles(self, user: User, namespace: str) -> list[Obj]:
        cache = self._cache
        found = cache.get((user, namespace))
        if found is None:
            with self.store.lock:
                found = self._resolve(user, namespace)
                if cache is self._cache:  # no RBAC change since the lookup began
                    cache[(user, namespace)] = found
        return found

    def _resolve(self, user: User, namespace: str) -> list[Obj]:
        from kubesim.resources import BY_KEY

        rbac = "rbac.authorization.k8s.io"
        cluster_roles = BY_KEY[f"clusterroles.{rbac}"]
        roles = BY_KEY[f"roles.{rbac}"]
        found: list[Obj] = []
        with self.store.lock:
            for binding in self.store.iter(BY_KEY[f"clusterrolebindings.{rbac}"]):
                if any(_subject_matches(s, user) for s in binding.get("subjects") or []):
                    ref = binding.get("roleRef") or {}
                    role = self.store.peek(cluster_roles, "", ref.get("name", ""))
                    if role is not None and ref.get("kind") == "ClusterRole":
                        found.append(role)
            if namespace:
                for binding in self.store.iter(BY_KEY[f"rolebindings.{rbac}"], namespace):
                    if any(_subject_matches(s, user) for s in binding.get("subjects") or []):
                        ref = binding.get("roleRef") or {}
                        if ref.get("kind") == "ClusterRole":
                            role = self.store.peek(cluster_roles, "", ref.get("name", ""))
                        else:
                            role = self.store.peek(roles, namespace, ref.get("name", ""))
                        if role is not None:
                            found.append(role)
        return found

    def allowed(self, attributes: Attributes) -> bool:
        user = attributes.user
        if user.is_admin:
            return True
        if not attributes.is_resource:
            if attributes.verb == "get" and any(
                attributes.path == p or attributes.path.startswith(p + "/") for p in _PUBLIC_PATHS
            ):
                return True
        elif (
            attributes.group == "authorization.k8s.io"
            and attributes.resource in _SELF_REVIEWS
            and attributes.verb == "create"
        ):
            return True
        return any(
            _rule_matches(rule, attributes)
            for role in self._roles(user, attributes.namespace)
            for rule in role.get("rules") or []
        )

    def rules_for(self, user: User, namespace: str) -> list[dict[str, Any]]:
        if user.is_admin:
            return [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
        return [rule for role in self._roles(user, namespace) for rule in role.get("rules") or []]


def forbidden_message(attributes: Attributes) -> str:
    user = attributes.user.name
    if not attributes.is_resource:
        return f'forbidden: User "{user}" cannot {attributes.verb} path "{attributes.path}"'
    qualified = (
        f"{attributes.resource}.{attributes.group}" if attributes.group else attributes.resource
    )
    target = f'{qualified} "{attributes.name}"' if attributes.name else qualified
    combined = (
        f"{attributes.resource}/{attributes.subresource}"
        if attributes.subresource
        else attributes.resource
    )
    scope = (
        f'in the namespace "{attributes.namespace}"'
        if attributes.namespace
        else "at the cluster scope"
    )
    return (
        f'{target} is forbidden: User "{user}" cannot {attributes.verb} resource "{combined}" '
        f'in API group "{attributes.group}" {scope}'
    )
