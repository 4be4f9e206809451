"""EKS bearer tokens: the presigned URL inside, its signature, refresh and secrecy."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlsplit

import boto3
import pytest
from support.clock import FakeClock
from support.views import Mints

from drainer.aws.eks import TOKEN_PREFIX, TokenSource, sts_endpoint
from drainer.errors import CredentialsUnavailable
from drainer.k8s.auth import (
    EXEC_EXPIRED_REUSE_SECONDS,
    TOKEN_FILE_REREAD_SECONDS,
    ExecToken,
    FileToken,
)
from drainer.k8s.kube import Kube
from kubesim import EksIdentity, KubeSim
from kubesim.faults import Fault

ACCESS_KEY = "AKIDEXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
SESSION_TOKEN = "FQoGZXIvYXdzEXAMPLESESSIONTOKEN//////////wEaDEXAMPLE="
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
ADMIN = ("system:masters", "system:authenticated")


def _session(region: str = "eu-west-1", session_token: str | None = None) -> boto3.Session:
    return boto3.Session(
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        aws_session_token=session_token,
        region_name=region,
    )


def _decode(token: str) -> str:
    assert token.startswith(TOKEN_PREFIX)
    encoded = token.removeprefix(TOKEN_PREFIX)
    assert "=" not in encoded, "base64url without padding"
    assert "+" not in encoded and "/" not in encoded, "base64url alphabet"
    return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()


def _expected_signature(url: str, cluster: str, secret_key: str) -> str:
    """SigV4 query signing, recomputed from the AWS specification."""
    parts = urlsplit(url)
    params = parse_qsl(parts.query, keep_blank_values=True)
    unsigned = sorted((k, v) for k, v in params if k != "X-Amz-Signature")
    canonical_query = "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in unsigned
    )
    query = dict(params)
    signed_headers = query["X-Amz-SignedHeaders"]
    headers = {"host": parts.netloc, "x-k8s-aws-id": cluster}
    canonical_headers = "".join(f"{name}:{headers[name]}\n" for name in signed_headers.split(";"))
    canonical_request = "\n".join(
        ["GET", parts.path or "/", canonical_query, canonical_headers, signed_headers, EMPTY_SHA256]
    )
    amz_date = query["X-Amz-Date"]
    scope = query["X-Amz-Credential"].split("/", 1)[1]
    date, region, service, _ = scope.split("/")
    string_to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            amz_date,
            scope,
            hashlib.sha256(canonical_request.encode()).hexdigest(),
        ]
    )

    def sign(key: bytes, message: str) -> bytes:
        return hmac.new(key, message.encode(), hashlib.sha256).digest()

    key = sign(("AWS4" + secret_key).encode(), date)
    key = sign(key, region)
    key = sign(key, service)
    key = sign(key, "aws4_request")
    return hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()


def test_token__is_prefixed_base64url_of_presigned_get_caller_identity(
    fake_aws_env: None,
) -> None:
    url = _decode(TokenSource(_session(), "prod-eu", "eu-west-1").token())

    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    assert parts.scheme == "https"
    assert parts.netloc == "sts.eu-west-1.amazonaws.com"
    assert parts.path == "/"
    assert query["Action"] == "GetCallerIdentity"
    assert query["Version"] == "2011-06-15"
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert query["X-Amz-Expires"] == "60"
    assert query["X-Amz-Credential"].startswith(f"{ACCESS_KEY}/")
    assert query["X-Amz-Credential"].endswith("/eu-west-1/sts/aws4_request")
    assert set(query["X-Amz-SignedHeaders"].split(";")) == {"host", "x-k8s-aws-id"}
    assert "X-Amz-Security-Token" not in query


@pytest.mark.parametrize("cluster", ["prod-eu", "a", "cluster_with_underscores-99"])
def test_token__signature__matches_independent_sigv4_computation(
    fake_aws_env: None, cluster: str
) -> None:
    url = _decode(TokenSource(_session(), cluster, "eu-west-1").token())

    signature = dict(parse_qsl(urlsplit(url).query))["X-Amz-Signature"]
    assert signature == _expected_signature(url, cluster, SECRET_KEY)


def test_token__signature__binds_the_cluster_name(fake_aws_env: None) -> None:
    url = _decode(TokenSource(_session(), "prod-eu", "eu-west-1").token())

    signature = dict(parse_qsl(urlsplit(url).query))["X-Amz-Signature"]
    assert signature != _expected_signature(url, "other-cluster", SECRET_KEY)


def test_token__temporary_credentials__carry_signed_security_token(fake_aws_env: None) -> None:
    session = _session(session_token=SESSION_TOKEN)

    url = _decode(TokenSource(session, "prod-eu", "eu-west-1").token())

    query = dict(parse_qsl(urlsplit(url).query))
    assert query["X-Amz-Security-Token"] == SESSION_TOKEN
    assert query["X-Amz-Signature"] == _expected_signature(url, "prod-eu", SECRET_KEY)


@pytest.mark.parametrize(
    ("region", "host"),
    [
        ("us-east-1", "sts.us-east-1.amazonaws.com"),
        ("ap-southeast-2", "sts.ap-southeast-2.amazonaws.com"),
        ("cn-north-1", "sts.cn-north-1.amazonaws.com.cn"),
    ],
)
def test_token__uses_the_regional_sts_endpoint(fake_aws_env: None, region: str, host: str) -> None:
    url = _decode(TokenSource(_session(region), "prod", region).token())

    assert urlsplit(url).netloc == host
    assert sts_endpoint(region) == f"https://{host}/"
    assert f"/{region}/sts/aws4_request" in dict(parse_qsl(urlsplit(url).query))["X-Amz-Credential"]


def test_token__custom_endpoint_url_in_environment__is_ignored(
    fake_aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:4566")

    url = _decode(TokenSource(_session(), "prod", "eu-west-1").token())

    assert urlsplit(url).netloc == "sts.eu-west-1.amazonaws.com"


@pytest.mark.parametrize(
    ("elapsed", "minted_again"),
    [(0, False), (599.9, False), (600, True), (3600, True)],
)
def test_token__cached_until_refresh_after_seconds(
    fake_aws_env: None, elapsed: float, minted_again: bool
) -> None:
    clock = FakeClock()
    session = _session()
    mints = Mints(session)
    source = TokenSource(session, "prod", "eu-west-1", clock=clock, refresh_after_seconds=600)
    first = source.token()

    clock.advance(elapsed)
    second = source.token()

    assert mints.count == (2 if minted_again else 1)
    if not minted_again:
        assert second == first


def test_token__refreshed__is_reused_from_the_new_mint(fake_aws_env: None) -> None:
    clock = FakeClock()
    session = _session()
    mints = Mints(session)
    source = TokenSource(session, "prod", "eu-west-1", clock=clock, refresh_after_seconds=300)
    source.token()
    clock.advance(300)
    refreshed = source.token()

    clock.advance(299)

    assert source.token() == refreshed
    assert mints.count == 2


def test_invalidate__forces_a_new_token(fake_aws_env: None) -> None:
    session = _session()
    mints = Mints(session)
    source = TokenSource(session, "prod", "eu-west-1", clock=FakeClock())
    source.token()

    source.invalidate()
    token = source.token()

    assert mints.count == 2
    assert _decode(token).startswith("https://sts.eu-west-1.amazonaws.com/?")


@pytest.mark.parametrize("refresh", [0, -1, 900, 901])
def test_token_source__refresh_outside_eks_lifetime__is_refused(
    fake_aws_env: None, refresh: float
) -> None:
    with pytest.raises(ValueError, match="15 minutes"):
        TokenSource(_session(), "prod", "eu-west-1", refresh_after_seconds=refresh)


def eight_at_once(token: Callable[[], str]) -> list[str]:
    """The tokens eight threads get when they ask at the same moment."""
    tokens: list[str] = []
    start = threading.Barrier(8)

    def take() -> None:
        start.wait()
        tokens.append(token())

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    return tokens


def test_token__concurrent_callers__share_one_mint(fake_aws_env: None) -> None:
    session = _session()
    mints = Mints(session)
    source = TokenSource(session, "prod", "eu-west-1", clock=FakeClock())

    tokens = eight_at_once(source.token)

    assert len(tokens) == 8
    assert len(set(tokens)) == 1
    assert mints.count == 1


def test_token__never_appears_in_logs_even_at_debug(
    fake_aws_env: None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("botocore").setLevel(logging.DEBUG)
        try:
            source = TokenSource(_session(), "prod", "eu-west-1")
            token = source.token()
            source.invalidate()
            second = source.token()
        finally:
            logging.getLogger("botocore").setLevel(logging.NOTSET)

    url = _decode(token)
    signature = dict(parse_qsl(urlsplit(url).query))["X-Amz-Signature"]
    assert caplog.records, "botocore logged nothing: the test would prove nothing"
    for secret in (token, second, token.removeprefix(TOKEN_PREFIX)[:40], url, signature):
        assert secret not in caplog.text
    assert token not in repr(source)


def test_eks_token_refused__one_new_token_and_the_call_succeeds(fake_aws_env: None) -> None:
    # The Lambda's path: kubesim checks the token as the EKS authenticator does.
    identity = EksIdentity(ACCESS_KEY, SECRET_KEY, "arn:aws:iam::1:role/drainer", "drainer", ADMIN)
    with KubeSim(cluster_name="prod", eks_identities=[identity]) as sim:
        sim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        session = _session()
        mints = Mints(session)
        source = TokenSource(session, "prod", "eu-west-1")
        kube = Kube.for_cluster(sim.url, sim.ca_pem, source)
        sim.faults.add(Fault(kind="status", status=401, path="/api/v1/nodes/n1", count=1))

        node = kube.get_node("n1")

        assert node is not None
        assert mints.count == 2
        assert [r.status for r in sim.requests()] == [401, 200]


# -- exec credential plugins (kubeconfig users) ---------------------------------


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakePlugin:
    """An exec plugin's answers: token-1, token-2, ..., each `lifetime` seconds long."""

    def __init__(self, clock: FakeClock, lifetime: float | None) -> None:
        self.clock = clock
        self.lifetime = lifetime
        self.runs = 0

    def __call__(self) -> dict[str, str]:
        self.runs += 1
        status = {"token": f"token-{self.runs}"}
        if self.lifetime is not None:
            status["expirationTimestamp"] = _stamp(self.clock.now + self.lifetime)
        return status


@pytest.mark.parametrize(
    ("lifetime", "elapsed", "run_again"),
    [
        (840, 829.9, False),  # `aws eks get-token`: 14 minutes, used until 10 s before
        (840, 830, True),
        (30, 26.9, False),  # a short one: until a tenth of its lifetime before
        (30, 27, True),
        (None, 10**7, False),  # no stated expiry: until the API server refuses it
    ],
)
def test_exec_token__cached_until_shortly_before_its_stated_expiry(
    lifetime: float | None, elapsed: float, run_again: bool
) -> None:
    clock = FakeClock()
    plugin = FakePlugin(clock, lifetime)
    source = ExecToken(plugin, command="plugin", clock=clock)
    assert source.token() == "token-1"

    clock.advance(elapsed)

    assert source.token() == ("token-2" if run_again else "token-1")
    assert plugin.runs == (2 if run_again else 1)


def test_exec_token__invalidate__plugin_runs_again_long_before_the_expiry() -> None:
    clock = FakeClock()
    plugin = FakePlugin(clock, lifetime=840)
    source = ExecToken(plugin, command="plugin", clock=clock)
    source.token()

    source.invalidate()

    assert source.token() == "token-2"
    assert source.token() == "token-2"
    assert plugin.runs == 2


def test_exec_token__a_status_handed_in__no_run_until_it_is_old() -> None:
    clock = FakeClock()
    plugin = FakePlugin(clock, lifetime=60)
    source = ExecToken(plugin, command="plugin", clock=clock, status=plugin())

    assert source.token() == "token-1"
    assert plugin.runs == 1, "the status handed in is used: the plugin is not run again"
    clock.advance(60)
    assert source.token() == "token-2"


@pytest.mark.parametrize(
    "status",
    [{}, {"token": ""}, {"clientCertificateData": "pem", "clientKeyData": "pem"}],
    ids=["nothing", "empty-token", "certificate"],
)
def test_exec_token__plugin_prints_no_token__clear_error(status: dict[str, str]) -> None:
    source = ExecToken(lambda: status, command="my-plugin --flag")

    with pytest.raises(CredentialsUnavailable, match="`my-plugin --flag` printed no token"):
        source.token()


def test_exec_token__unreadable_expiry__kept_until_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    runs: list[None] = []

    def plugin() -> dict[str, str]:
        runs.append(None)
        return {"token": "t", "expirationTimestamp": "tomorrow"}

    source = ExecToken(plugin, command="p", clock=clock)
    source.token()
    clock.advance(10**6)

    source.token()

    assert len(runs) == 1
    assert "not RFC 3339" in caplog.text


def test_exec_token__concurrent_callers__share_one_run() -> None:
    clock = FakeClock()
    plugin = FakePlugin(clock, lifetime=840)
    source = ExecToken(plugin, command="plugin", clock=clock)

    tokens = eight_at_once(source.token)

    assert tokens == ["token-1"] * 8
    assert plugin.runs == 1


def test_exec_token__never_in_its_repr() -> None:
    source = ExecToken(lambda: {"token": "s3cret"}, command="plugin")
    source.token()

    assert "s3cret" not in repr(source)


def test_exec_token__already_expired__reused_a_short_while_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A plugin whose tokens come back already expired (a clock behind, a cache that
    hands out stale ones): a 60-pod drain's 73 requests in 7 s ran it 73 times, with
    73 warnings; its token is used for 10 s, and said once."""
    clock = FakeClock()
    plugin = FakePlugin(clock, lifetime=-5)
    source = ExecToken(plugin, command="plugin", clock=clock)

    for _ in range(73):
        source.token()
        clock.advance(0.1)
    assert plugin.runs == 1
    clock.advance(EXEC_EXPIRED_REUSE_SECONDS)
    for _ in range(10):
        source.token()

    assert plugin.runs == 2
    said = [r for r in caplog.records if "already expired" in r.getMessage()]
    assert [r.levelname for r in said if r.levelno >= logging.WARNING] == ["WARNING"]


def test_token_file__caught_being_replaced__keeps_its_last_token_until_it_reads_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    path = tmp_path / "token"
    path.write_text("first\n")
    source = FileToken(str(path), clock=clock)
    assert source.token() == "first"

    path.unlink()  # a rotation that writes the new file after removing the old
    clock.advance(TOKEN_FILE_REREAD_SECONDS)
    assert source.token() == "first"
    path.write_text("second\n")
    source.invalidate()  # the API server refused "first"

    assert source.token() == "second"
    assert "cannot read tokenFile" in caplog.text


@pytest.mark.parametrize("text", [None, "  \n"], ids=["missing", "empty"])
def test_token_file__never_read__clear_error(tmp_path: Path, text: str | None) -> None:
    path = tmp_path / "token"
    if text is not None:
        path.write_text(text)

    with pytest.raises(CredentialsUnavailable, match=f"cannot read tokenFile {path}"):
        FileToken(str(path)).token()
