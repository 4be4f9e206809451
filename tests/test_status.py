"""A failure on the wire is judged by its exception's type, not its words
(drainer/k8s/status.py's transport_error): a certificate that does not verify is
fatal (TlsVerificationError, never retried) wherever the ssl module's error sits,
and an error that only mentions a certificate in its text is not one.

The API server's answers are pinned to the real server in
tests/e2e/test_status_texts.py; the table of translations is in tests/test_kube.py."""

from __future__ import annotations

import ssl

import pytest

from drainer import errors
from drainer.k8s.status import transport_error
from drainer.k8s.transport import Unreachable


def _verify_failed(text: str) -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, text)
    error.verify_message = text
    return error


def _chained(inner: BaseException) -> Exception:
    try:
        try:
            raise inner
        except BaseException as e:
            raise ConnectionError("the request failed") from e
    except ConnectionError as outer:
        return outer


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(
            Unreachable("10.0.0.1:443", _verify_failed("unable to get issuer")), id="unreachable"
        ),
        pytest.param(_verify_failed("IP address mismatch"), id="bare"),
        pytest.param(_chained(_verify_failed("self-signed certificate")), id="as-a-cause"),
    ],
)
def test_certificate_not_verified__fatal_tls_error_whatever_its_words(error: Exception) -> None:
    translated = transport_error(error, "get node n1")

    assert type(translated) is errors.TlsVerificationError
    assert "does not verify against the cluster CA" in str(translated)


def test_words_about_a_certificate__not_a_tls_refusal() -> None:
    """A reset whose text happens to quote a certificate failure (a proxy's words) is a
    broken connection, retried, not a refusal to connect for good."""
    error = ConnectionResetError(104, "peer said: certificate verify failed upstream")

    translated = transport_error(error, "get node n1")

    assert type(translated) is errors.KubeServerError
    assert "cannot reach the API server" in str(translated)
