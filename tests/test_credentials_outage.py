"""A drain outlives a passing failure of what it talks through (issue 38, item 3):
an exec credential plugin that worked and fails now is run again with back-off, its
last token used while valid, and said once; only one that fails for
CREDENTIALS_OUTAGE_SECONDS ends the drain. A tokenFile that cannot be read again is
said once. An API server that does not answer mid-drain is said once per outage, not
once per retry of every call. Every clock here is injected: nothing sleeps."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.clock import FakeClock
from support.sims import sim_with_a_node  # noqa: F401  (the fixture `sim`)

from drainer.errors import (
    CredentialsFailing,
    CredentialsUnavailable,
    FatalKubeError,
    KubeServerError,
)
from drainer.k8s.auth import (
    CREDENTIALS_OUTAGE_SECONDS,
    TOKEN_FILE_REREAD_SECONDS,
    ExecToken,
    FileToken,
)
from drainer.k8s.client import RetryPolicy
from drainer.k8s.kube import Kube
from kubesim import KubeSim
from kubesim.faults import Fault

COMMAND = "aws eks get-token --cluster-name prod"


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FlakyPlugin:
    """An exec plugin whose runs fail when their number is in `failing` (or from
    `failing_from` on), as `aws eks get-token` does while STS is out of reach; its
    tokens are token-1, token-2, ... (by run), each `lifetime` seconds long."""

    def __init__(
        self,
        clock: FakeClock,
        lifetime: float = 840.0,
        failing: set[int] | None = None,
        failing_from: int | None = None,
        token: str = "",
    ) -> None:
        self.clock = clock
        self.lifetime = lifetime
        self.failing = failing or set()
        self.failing_from = failing_from
        self.token = token
        self.runs = 0

    def __call__(self) -> dict[str, str]:
        self.runs += 1
        if self.runs in self.failing or (self.failing_from and self.runs >= self.failing_from):
            raise CredentialsUnavailable(
                f"the exec credential plugin `{COMMAND}` of kubeconfig user 'me' failed: "
                "exec: process returned 255\nInstall the AWS CLI"
            )
        return {
            "token": self.token or f"token-{self.runs}",
            "expirationTimestamp": _stamp(self.clock.now + self.lifetime),
        }


def _source(plugin: FlakyPlugin, clock: FakeClock, **kwargs: float) -> ExecToken:
    """As the CLI makes it: the plugin's first answer (start-up) handed in."""
    return ExecToken(plugin, command=COMMAND, clock=clock, status=plugin(), **kwargs)


def _said(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    """The levels of the lines that say `text`, at INFO and above."""
    return [r.levelname for r in caplog.records if text in r.getMessage() and r.levelno >= 20]


def test_plugin_fails_once_mid_drain__last_token_used__runs_again__failure_and_recovery_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="drainer.k8s.auth")
    clock = FakeClock()
    plugin = FlakyPlugin(clock, lifetime=840, failing={2})
    source = _source(plugin, clock)

    clock.advance(831)  # past the refresh margin, 9 s before the stated expiry
    during = [source.token() for _ in range(50)]  # a drain's requests meanwhile
    clock.advance(2.0)  # PLUGIN_RETRY's first pause is at most 2 s
    after = source.token()

    assert during == ["token-1"] * 50, "the last token, still valid: no request fails"
    assert after == "token-3"
    assert plugin.runs == 3, "one run failed, the next worked: not a run per request"
    assert _said(caplog, "the plugin runs again in") == ["WARNING"]
    assert "its last token valid 9 s more" in caplog.text
    assert _said(caplog, "works again, after 2 s and 1 failed runs") == ["WARNING"]


def test_plugin_failing_and_token_expired__a_server_error_retried__runs_paced_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="drainer.k8s.auth")
    clock = FakeClock()
    plugin = FlakyPlugin(clock, lifetime=60, failing_from=2)
    source = _source(plugin, clock)
    clock.advance(61)  # expired

    outcomes: list[type[BaseException]] = []
    for _ in range(1200):  # a busy drain: a request every 0.1 s for two minutes
        with pytest.raises(KubeServerError) as raised:
            source.token()
        outcomes.append(type(raised.value))
        clock.advance(0.1)

    assert set(outcomes) == {CredentialsFailing}
    assert not issubclass(CredentialsFailing, FatalKubeError), "the drain goes on"
    # Runs after 1-2, 2-4, 4-8, 8-16, then 15-30 s: a dozen at most, never per request.
    assert 2 < plugin.runs - 1 <= 12
    failures = _said(caplog, "the plugin runs again in")
    assert failures == ["WARNING"] + ["INFO"] * (plugin.runs - 2)


def test_plugin_failing_and_token_expired__the_error_names_the_plugin_and_its_last_error() -> None:
    clock = FakeClock()
    plugin = FlakyPlugin(clock, lifetime=60, failing_from=2)
    source = _source(plugin, clock)
    clock.advance(61)
    with pytest.raises(CredentialsFailing):
        source.token()
    clock.advance(0.5)

    with pytest.raises(CredentialsFailing) as raised:
        source.token()

    message = str(raised.value)
    assert message.startswith(f"no valid token: the exec credential plugin `{COMMAND}`")
    assert "(failing for 0 s; it runs again in " in message
    assert "exec: process returned 255" in message
    assert "Install the AWS CLI" not in message, "one line: the hint is the start-up's"


def test_plugin_failing_for_the_outage_allowed__fatal__names_plugin_how_long_and_last_error() -> (
    None
):
    clock = FakeClock()
    plugin = FlakyPlugin(clock, lifetime=60, failing_from=2)
    source = _source(plugin, clock)
    clock.advance(60)  # the refresh is due: the first failed run, when the outage starts
    started = clock.now

    fatal: CredentialsUnavailable | None = None
    while fatal is None and clock.now < started + CREDENTIALS_OUTAGE_SECONDS + 60:
        try:
            source.token()
        except CredentialsUnavailable as e:
            fatal = e
        except CredentialsFailing:
            pass
        clock.advance(1.0)

    assert fatal is not None
    assert clock.now - 1.0 == started + CREDENTIALS_OUTAGE_SECONDS, "at the bound, not later"
    assert isinstance(fatal, FatalKubeError)
    assert str(fatal).startswith(f"the exec credential plugin `{COMMAND}`")
    assert "it has failed on every run for 300 s" in str(fatal)
    assert "exec: process returned 255" in str(fatal)
    runs = plugin.runs
    assert runs - 1 <= 24, "a prompt on each failed run: some twenty in five minutes at most"
    for _ in range(10):
        with pytest.raises(CredentialsUnavailable):
            source.token()
        clock.advance(60)
    assert plugin.runs == runs, "given up: never run again"


def test_plugin_fails_at_start_up__fatal_at_once() -> None:
    clock = FakeClock()
    plugin = FlakyPlugin(clock, failing={1})
    source = ExecToken(plugin, command=COMMAND, clock=clock)

    with pytest.raises(CredentialsUnavailable, match="process returned 255"):
        source.token()
    assert plugin.runs == 1


def test_outage_allowed_is_injectable_and_recovery_resets_it() -> None:
    clock = FakeClock()
    plugin = FlakyPlugin(clock, lifetime=60, failing={2, 3}, failing_from=5)
    source = _source(plugin, clock, outage=20.0)
    clock.advance(60)
    seen: list[str] = []
    fatal: CredentialsUnavailable | None = None
    for _ in range(400):
        try:
            seen.append(source.token())
        except CredentialsFailing:
            pass
        except CredentialsUnavailable as e:
            fatal = e
            break
        clock.advance(0.5)

    assert "token-4" in seen, "worked again within 20 s: the outage counted anew"
    assert fatal is not None
    assert "has failed on every run for 20 s" in str(fatal)


# -- a 401 with a failing plugin: bounded, never a loop --------------------------------


def test_refused_token_and_the_plugin_failing__retried_a_few_times__then_the_caller_retries(
    sim: KubeSim,
) -> None:
    clock = FakeClock()
    plugin = FlakyPlugin(clock, failing_from=2, token=sim.admin_token)
    source = _source(plugin, clock)
    configured = Kube.for_cluster(sim.url, sim.ca_pem, source, request_timeout=2.0)
    kube = Kube(configured.transport, source, retry=RetryPolicy(attempts=4), sleep=clock.sleep)
    sim.faults.add(Fault(kind="status", status=401, path="/api/v1/nodes/n1", count=1))

    with pytest.raises(CredentialsFailing):
        kube.get_node("n1")  # 401, the plugin fails: three retries paced by the call's back-off
    assert [r.status for r in sim.requests()] == [401]
    clock.advance(CREDENTIALS_OUTAGE_SECONDS)
    with pytest.raises(CredentialsUnavailable, match=r"failed on every run for 30\d s"):
        kube.get_node("n1")

    assert len(clock.sleeps) == 3
    assert plugin.runs <= 4


def test_refused_token_then_the_plugin_works_again__the_call_succeeds(sim: KubeSim) -> None:
    clock = FakeClock()
    plugin = FlakyPlugin(clock, failing={2}, token=sim.admin_token)
    source = _source(plugin, clock)
    configured = Kube.for_cluster(sim.url, sim.ca_pem, source, request_timeout=2.0)
    kube = Kube(configured.transport, source, retry=RetryPolicy(attempts=12), sleep=clock.sleep)
    sim.faults.add(Fault(kind="status", status=401, path="/api/v1/nodes/n1", count=1))

    assert kube.get_node("n1") is not None
    assert plugin.runs == 3


# -- a tokenFile that cannot be read again ----------------------------------------------


def test_token_file_unreadable_for_an_hour__said_once__and_its_return_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="drainer.k8s.auth")
    clock = FakeClock()
    path = tmp_path / "token"
    path.write_text("first\n")
    source = FileToken(str(path), clock=clock)
    source.token()
    path.unlink()

    for _ in range(60):
        clock.advance(TOKEN_FILE_REREAD_SECONDS)
        assert source.token() == "first"
    path.write_text("second\n")
    clock.advance(TOKEN_FILE_REREAD_SECONDS)

    assert source.token() == "second"
    assert _said(caplog, "cannot read tokenFile") == ["WARNING"] + ["INFO"] * 59
    assert _said(caplog, "read again, after 3600 s") == ["WARNING"]


# -- the API server not answering mid-drain: said once per outage ------------------------


class StaticToken:
    def __init__(self, token: str) -> None:
        self._token = token

    def token(self) -> str:
        return self._token

    def invalidate(self) -> None:
        pass


def test_api_server_failing_mid_drain__said_once__not_once_per_retry__then_its_return_once(
    sim: KubeSim, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="drainer.k8s.client")
    clock = FakeClock()
    token = StaticToken(sim.admin_token)
    configured = Kube.for_cluster(sim.url, sim.ca_pem, token, request_timeout=2.0)
    kube = Kube(configured.transport, token, retry=RetryPolicy(attempts=6), sleep=clock.sleep)
    assert kube.get_node("n1") is not None  # it answered: the drain is under way

    sim.faults.add(Fault(kind="status", status=503, path="/api/v1/nodes/n1", count=30))
    said: list[bool] = []
    for _ in range(5):  # five calls (pods, watches), each tried 6 times: 25 retries
        with pytest.raises(KubeServerError) as raised:
            kube.get_node("n1")
        said.append(raised.value.said)
    assert kube.get_node("n1") is not None

    retries = [r for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(retries) == 25
    assert [r.levelname for r in retries if r.levelno >= logging.WARNING] == ["WARNING"]
    back = [r for r in caplog.records if "answers again" in r.getMessage()]
    assert [r.levelname for r in back] == ["WARNING"]
    assert "(25 retries)" in back[0].getMessage()
    assert said == [True] * 5, "each error the engine retries is marked as said already"


def test_api_server_failing_before_it_ever_answered__every_retry_said__error_not_marked(
    sim: KubeSim, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    token = StaticToken(sim.admin_token)
    configured = Kube.for_cluster(sim.url, sim.ca_pem, token, request_timeout=2.0)
    kube = Kube(configured.transport, token, retry=RetryPolicy(attempts=6), sleep=clock.sleep)
    sim.faults.add(Fault(kind="status", status=503, path="/api/v1/nodes/n1", count=6))

    with pytest.raises(KubeServerError) as raised:
        kube.get_node("n1")

    retries = [r for r in caplog.records if "retrying in" in r.getMessage()]
    assert [r.levelname for r in retries] == ["WARNING"] * 5
    assert not raised.value.said
