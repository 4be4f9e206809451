"""The bearer token of a kubeconfig user's exec credential plugin (the CLI's, as
`aws eks update-kubeconfig` writes it): a `TokenProvider` of drainer.k8s.kube, a
cached token, and `invalidate()` after a 401 so that the next call gets a fresh one.

The Lambda's EKS token is the other TokenProvider; it is made from AWS credentials,
so it lives with the other AWS calls, in drainer/aws/eks.py (TokenSource).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from drainer.errors import CredentialsUnavailable

log = logging.getLogger(__name__)

EXEC_REFRESH_MARGIN_SECONDS = 10.0
EXEC_REFRESH_MARGIN_FRACTION = 0.1
"""An exec plugin's token is used until shortly before its stated expiry: 10 s, or a
tenth of its lifetime when that is shorter (3 s for a 30 s token). Enough for a
request to reach the API server, which checks the token when the request arrives;
not the official client's 5 minutes, which re-runs the plugin on every request when
tokens live less than that. A token the server refuses earlier is caught by the 401."""
EXEC_EXPIRED_REUSE_SECONDS = 10.0
"""A token that comes back already expired (a clock behind the plugin's, a plugin that
hands out a stale cached one) is used for this long before the plugin runs again,
instead of a run before every request; the API server's 401 says when it truly is."""


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
        self._warned_expired = False
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
                fresh_until = now + EXEC_EXPIRED_REUSE_SECONDS
                self._said_expired(status.get("expirationTimestamp"))
        self._token = token
        self._fresh_until = fresh_until

    def _said_expired(self, stamp: object) -> None:
        """Warned once per plugin: a drain of hours would say it every 10 s."""
        level = logging.INFO if self._warned_expired else logging.WARNING
        self._warned_expired = True
        log.log(
            level,
            "the exec credential plugin `%s` printed a token that has already expired "
            "(%s); is this machine's clock right? It is used for %.0f s before the "
            "plugin runs again",
            self.command,
            stamp,
            EXEC_EXPIRED_REUSE_SECONDS,
        )

    def __repr__(self) -> str:
        # Never the token itself.
        return f"ExecToken(command={self.command!r})"


TOKEN_FILE_REREAD_SECONDS = 60.0
"""A tokenFile is read again at most this often (client-go's cached file token source
reads it once a minute), and after a 401."""


class FileToken:
    """The bearer token in a kubeconfig user's tokenFile, which something else rotates
    (a projected service-account token, a sidecar's): read again each minute and when
    the API server refuses it (401), so that a drain of hours outlives the token it
    started with. A file that cannot be read again (being replaced) keeps the token
    read last, as client-go keeps it; one never read is CredentialsUnavailable."""

    def __init__(self, path: str, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.command = ""  # no plugin to name in a 401's message
        self._clock = clock
        self._lock = threading.Lock()
        self._token = ""
        self._read_at = -math.inf

    def token(self) -> str:
        with self._lock:
            if self._clock() - self._read_at >= TOKEN_FILE_REREAD_SECONDS:
                self._token = self._read()
                self._read_at = self._clock()
            return self._token

    def invalidate(self) -> None:
        """The API server refused the token (401): the next `token()` reads the file."""
        with self._lock:
            self._read_at = -math.inf

    def _read(self) -> str:
        try:
            token = Path(self.path).read_text().strip()
            if not token:
                raise ValueError("it is empty")
        except (OSError, ValueError) as e:
            why = e.strerror if isinstance(e, OSError) else str(e)
            if not self._token:
                raise CredentialsUnavailable(f"cannot read tokenFile {self.path}: {why}") from e
            log.warning(
                "cannot read tokenFile %s again (%s); keeping its last token", self.path, why
            )
            return self._token
        return token

    def __repr__(self) -> str:
        return f"FileToken(path={self.path!r})"


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
