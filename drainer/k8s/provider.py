"""The bearer token of a kubeconfig user with the `oidc` auth-provider, kept current
through a drain of hours: the kubernetes package's loader reads it (and refreshes it
through the identity provider when a refresh-token is there, writing it back to the
kubeconfig as kubectl does), and it is read again shortly before the expiry the
id-token states (its JWT `exp`) and after the API server refuses it (401), instead of
being frozen at the moment the drain began.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable

from drainer.errors import CredentialsUnavailable

REFRESH_MARGIN_SECONDS = 10.0
"""Read again this long before the id-token's stated expiry (as an exec plugin's)."""


class ProviderToken:
    """`load()` gives the Authorization header the package's loader makes ("Bearer
    ..."); a TokenProvider of drainer.k8s.client."""

    def __init__(self, load: Callable[[], str], *, user: str, clock: Callable[[], float]) -> None:
        self.command = ""  # no plugin to name in a 401's message
        self.user = user
        self._load = load
        self._clock = clock
        self._lock = threading.Lock()
        self._token = ""
        self._fresh_until = 0.0

    def token(self) -> str:
        with self._lock:
            if not self._token or self._clock() >= self._fresh_until:
                self._token = self._loaded()
                expiry = _jwt_expiry(self._token)
                self._fresh_until = (
                    float("inf") if expiry is None else expiry - REFRESH_MARGIN_SECONDS
                )
            return self._token

    def invalidate(self) -> None:
        """The API server refused the token (401): the next `token()` loads it again."""
        with self._lock:
            self._token = ""

    def _loaded(self) -> str:
        header = self._load()
        token = header.removeprefix("Bearer ").strip()
        if not token:
            raise CredentialsUnavailable(
                f"kubeconfig user '{self.user}': its oidc auth-provider gave no id-token; "
                "sign in again (kubectl oidc-login, or your identity provider's tool)"
            )
        return token

    def __repr__(self) -> str:
        return f"ProviderToken(user={self.user!r})"


def _jwt_expiry(token: str) -> float | None:
    """The `exp` claim of a JWT, unverified (the API server verifies it); None for a
    token that is not a JWT or states none."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        exp = claims.get("exp") if isinstance(claims, dict) else None
        return float(exp) if isinstance(exp, int | float) else None
    except ValueError:
        return None
