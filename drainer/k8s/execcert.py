"""A client certificate from a kubeconfig user's exec credential plugin
(ExecCredential status.clientCertificateData and clientKeyData), renewed as client-go
renews it: the plugin runs again shortly before the expiry it states, or after the
API server refuses the certificate (401), and the transport presents the new one on
its next connections (drainer/k8s/transport.py `Endpoint.certificate`).

It stands where a token provider stands (drainer.k8s.client.TokenProvider): `token()`
renews when due and gives no bearer token ("") unless the plugin printed one beside
the certificate (client-go sends both), `invalidate()` after a 401; a plugin
that fails after it has worked is retried as an exec plugin's token is.
"""

from __future__ import annotations

import atexit
import contextlib
import os
from collections.abc import Callable, Mapping
from typing import Any

from drainer.errors import CredentialsUnavailable
from drainer.k8s.auth import ExecToken


class ExecCertificate(ExecToken):
    """The current client certificate and key (files: the ssl module loads them from
    files) of an exec plugin, and a version that changes with each renewal. Renewed
    and, when the plugin fails after it has worked, retried as ExecToken does its
    token (drainer/k8s/auth.py): the last certificate presented until the expiry it
    stated, CredentialsFailing (retried) after it, CredentialsUnavailable once the
    plugin has failed for CREDENTIALS_OUTAGE_SECONDS."""

    def __init__(
        self,
        run: Callable[[], Mapping[str, Any]],
        *,
        command: str,
        clock: Callable[[], float],
        status: Mapping[str, Any],
        outage: float | None = None,
    ) -> None:
        self._files = ("", "")
        self._bearer = ""  # the token a plugin may print beside its certificate
        self.version = 0
        super().__init__(run, command=command, clock=clock, status=status, outage=outage)

    def token(self) -> str:
        """Renew the certificate when it is near its expiry or was refused; the bearer
        token the plugin printed beside it, as client-go sends both, else ""."""
        super().token()
        with self._lock:
            return self._bearer

    def current(self) -> tuple[int, str, str]:
        """(version, certificate file, key file)."""
        with self._lock:
            return self.version, *self._files

    def _accept(self, status: Mapping[str, Any]) -> None:
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if not isinstance(cert, str) or not cert or not isinstance(key, str) or not key:
            raise CredentialsUnavailable(
                f"the exec credential plugin `{self.command}` printed no client certificate "
                "and key this time (status.clientCertificateData, clientKeyData)"
            )
        # The token's bookkeeping (its expiry, the margin before it) for the certificate:
        # the "token" stands for this version of it, never sent.
        stamp = status.get("expirationTimestamp")
        super()._accept({"token": f"certificate {self.version + 1}", "expirationTimestamp": stamp})
        self._files = (secret_file(cert), secret_file(key))
        token = status.get("token")
        self._bearer = token if isinstance(token, str) else ""
        self.version += 1

    def __repr__(self) -> str:
        return f"ExecCertificate(command={self.command!r})"


def secret_file(text: str) -> str:
    """`text` in a file only this user may read, removed when the process ends
    (the ssl module loads client certificates from files)."""
    import tempfile  # only with client certificates given as data

    handle, name = tempfile.mkstemp(prefix="eks-node-drainer-", suffix=".pem")
    with os.fdopen(handle, "w") as file:
        file.write(text)
    atexit.register(_remove, name)
    return name


def _remove(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name)
