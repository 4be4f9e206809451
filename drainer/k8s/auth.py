"""The bearer token of a kubeconfig user's exec credential plugin (the CLI's, as
`aws eks update-kubeconfig` writes it): a `TokenProvider` of drainer.k8s.client, a
cached token, and `invalidate()` after a 401 so that the next call gets a fresh one.

The Lambda's EKS token is the other TokenProvider; it is made from AWS credentials,
so it lives with the other AWS calls, in drainer/aws/eks.py (TokenSource).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from drainer.backoff import Backoff
from drainer.errors import CredentialsFailing, CredentialsUnavailable

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
CREDENTIALS_OUTAGE_SECONDS = 300.0
"""How long a plugin that worked before (so the credentials are right: this is
mid-drain, not start-up) may fail on every run before the drain gives up with
CredentialsUnavailable. Five minutes rides out what makes `aws eks get-token` or an
SSO helper fail for a while and then work again (a VPN or Wi-Fi reconnecting, STS or
the identity provider throttling or briefly unreachable), while a credential that
truly ended (an SSO session expired, a role removed) is said within minutes, not at
a deadline hours away. Meanwhile the last token is used until its stated expiry, and
requests without a valid token fail as a server error (CredentialsFailing), which
the drain retries as it retries an API server that does not answer."""
PLUGIN_RETRY = Backoff(first=2.0, cap=30.0)
"""The pause before running a failing plugin again: 1-2 s, doubling to 30 s. Every
caller shares the runs (it waits for the next one due, or is told the last error),
so a plugin that prints a prompt on each failed run prints it 14 to 24 times in
CREDENTIALS_OUTAGE_SECONDS, never once per request."""


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

    A plugin that fails at its first run is CredentialsUnavailable at once. One that
    worked and fails later is run again with back-off (PLUGIN_RETRY), its last token
    used until the expiry it stated, CredentialsFailing (retried as a server error)
    without one, and CredentialsUnavailable once it has failed on every run for
    CREDENTIALS_OUTAGE_SECONDS: said once, and its recovery once.
    """

    def __init__(
        self,
        run: Callable[[], Mapping[str, Any]],
        *,
        command: str,
        clock: Callable[[], float] = time.time,
        status: Mapping[str, Any] | None = None,
        outage: float | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """`status`: the plugin's answer when the caller has already run it once.
        `outage`: how long a plugin that worked may fail before it is given up on
        (CREDENTIALS_OUTAGE_SECONDS)."""
        self.command = command
        self._run = run
        self._clock = clock
        self._lock = threading.Lock()
        self._token = ""
        self._fresh_until = 0.0
        self._expires = math.inf  # the stated expiry: a failing plugin's last token until then
        self._warned_expired = False
        self._outage = CREDENTIALS_OUTAGE_SECONDS if outage is None else outage
        self._rng = rng or random.Random()  # noqa: S311 - jitter
        self._worked = False  # a run (or the status handed in) gave a token once
        self._failing: _Failing | None = None
        if status is not None:
            self._accept(status)
            self._worked = True

    def token(self) -> str:
        """The cached token, or a fresh one from the plugin when it is near its expiry
        or was refused. A plugin that worked before and fails now is run again with
        back-off; meanwhile its last token while still valid, else CredentialsFailing;
        CredentialsUnavailable once it has failed for the outage allowed."""
        with self._lock:
            now = self._clock()
            if self._token and now < self._fresh_until:
                return self._token
            if self._failing is not None and now < self._failing.next_run:
                return self._while_failing(now)
            try:
                self._accept(self._run())
            except CredentialsUnavailable as e:
                if not self._worked:
                    raise  # start-up: the plugin never worked, nothing to wait for
                self._failed(e, now)
                return self._while_failing(now)
            self._worked = True
            self._recovered(now)
            return self._token

    def invalidate(self) -> None:
        """Forget the token (the API server answered 401): the next runs the plugin."""
        with self._lock:
            self._token = ""

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
        self._expires = math.inf if expiry is None else max(expiry, fresh_until)

    def _failed(self, error: CredentialsUnavailable, now: float) -> None:
        """A run failed (hold the lock): said once as a warning, then at info; the
        next run paced by PLUGIN_RETRY; given up once failing for the outage allowed."""
        failing = self._failing
        first = failing is None
        if failing is None:
            failing = self._failing = _Failing(since=now)
        failing.runs += 1
        failing.error = error
        lasted = now - failing.since
        if lasted >= self._outage:
            failing.given_up = CredentialsUnavailable(
                f"{_first_line(error)}; it has failed on every run for {lasted:.0f} s "
                f"({failing.runs} runs), after it had worked. Run it yourself to see why "
                f"(`{self.command}`; an expired SSO session: log in again), then drain again"
            )
            failing.next_run = math.inf  # never run again: the drain ends on it
            raise failing.given_up from error
        pause = PLUGIN_RETRY.delay(failing.runs - 1, self._rng)
        failing.next_run = min(now + pause, failing.since + self._outage)
        valid = self._expires - now if self._token else 0.0
        log.log(
            logging.WARNING if first else logging.INFO,
            "%s; the plugin runs again in %.0f s%s, %s (the drain gives up after %.0f s of "
            "failures)",
            _first_line(error),
            failing.next_run - now,
            "" if first else f" ({failing.runs} failed runs in {lasted:.0f} s)",
            f"its last token valid {valid:.0f} s more" if valid > 0 else "requests retried",
            self._outage,
        )

    def _while_failing(self, now: float) -> str:
        """The last token while its stated expiry has not passed and no 401 refused
        it; else CredentialsFailing, a server error the caller retries (hold the lock)."""
        failing = self._failing
        assert failing is not None
        if failing.given_up is not None:
            raise failing.given_up
        if self._token and now < self._expires:
            return self._token
        raise CredentialsFailing(
            f"no valid token: {_first_line(failing.error)} (failing for "
            f"{now - failing.since:.0f} s; it runs again in "
            f"{max(0.0, failing.next_run - now):.0f} s)"
        )

    def _recovered(self, now: float) -> None:
        """A run worked after failing ones: said once (hold the lock)."""
        if self._failing is None:
            return
        log.warning(
            "the exec credential plugin `%s` works again, after %.0f s and %d failed runs",
            self.command,
            now - self._failing.since,
            self._failing.runs,
        )
        self._failing = None

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


@dataclass
class _Failing:
    """A plugin that worked failing now: since when, how many runs, the last error,
    when it runs next, and the error it was given up with."""

    since: float
    runs: int = 0
    error: Exception | None = None
    next_run: float = -math.inf
    given_up: CredentialsUnavailable | None = None


def _first_line(error: BaseException | None) -> str:
    """An error's first line (a plugin's installHint follows on the next)."""
    return str(error).splitlines()[0] if error is not None and str(error) else "no message"


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
        self._failing_since: float | None = None  # when a re-read first failed

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
            first = self._failing_since is None
            if first:
                self._failing_since = self._clock()
            # Said once: a drain of hours would say it every minute.
            log.log(
                logging.WARNING if first else logging.INFO,
                "cannot read tokenFile %s again (%s); keeping its last token",
                self.path,
                why,
            )
            return self._token
        if self._failing_since is not None:
            log.warning(
                "tokenFile %s read again, after %.0f s",
                self.path,
                self._clock() - self._failing_since,
            )
            self._failing_since = None
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
