"""A client certificate from a kubeconfig user's exec credential plugin
(ExecCredential status.clientCertificateData and clientKeyData), renewed as client-go
renews it: the plugin runs again shortly before the expiry it states, or after the
API server refuses the certificate (401), and the transport presents the new one on
its next connections (drainer/k8s/transport.py `Endpoint.certificate`).

It stands where a token provider stands (drainer.k8s.client.TokenProvider): `token()`
renews when due and gives no bearer token (""), `invalidate()` after a 401.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from drainer.errors import CredentialsUnavailable
from drainer.k8s.auth import EXEC_REFRESH_MARGIN_FRACTION, EXEC_REFRESH_MARGIN_SECONDS
from drainer.k8s.auth import _expiry as expiry_of


class ExecCertificate:
    """The current client certificate and key (files: the ssl module loads them from
    files) of an exec plugin, and a version that changes with each renewal."""

    def __init__(
        self,
        run: Callable[[], Mapping[str, Any]],
        *,
        command: str,
        clock: Callable[[], float],
        status: Mapping[str, Any],
    ) -> None:
        self.command = command
        self._run = run
        self._clock = clock
        self._lock = threading.Lock()
        self._stale = False
        self._fresh_until = 0.0
        self._files = ("", "")
        self.version = 0
        self._accept(status)

    def token(self) -> str:
        """Renew the certificate when it is near its expiry or was refused; no bearer."""
        with self._lock:
            if self._stale or self._clock() >= self._fresh_until:
                self._accept(self._run())
        return ""

    def invalidate(self) -> None:
        """The API server refused the certificate (401): the next request renews it."""
        with self._lock:
            self._stale = True

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
        now = self._clock()
        expiry = expiry_of(status.get("expirationTimestamp"), self.command)
        if expiry is None:
            self._fresh_until = float("inf")  # until the API server refuses it
        else:
            lifetime = max(0.0, expiry - now)
            margin = min(EXEC_REFRESH_MARGIN_SECONDS, EXEC_REFRESH_MARGIN_FRACTION * lifetime)
            self._fresh_until = expiry - margin
        self._files = (secret_file(cert), secret_file(key))
        self._stale = False
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
