"""The in-cluster configuration, as kubectl uses it when no kubeconfig file is found:
a CLI run as a Job or in a pod reaches the API server named by the pod's
KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, trusts the service account's
ca.crt and sends its projected token, read again as the kubelet rotates it
(drainer.k8s.auth.FileToken: each minute and after a 401, as client-go does).

Used only when both variables are set and the token file exists, exactly when
client-go's in-cluster config says it is possible; otherwise the CLI says that no
kubeconfig was found, as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from drainer.k8s.auth import FileToken
from drainer.k8s.transport import Endpoint

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts the pod's service account (token, ca.crt, namespace)."""
USER = "in-cluster service account"
"""The user's name in messages (a kubeconfig's user name elsewhere)."""


def possible(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process runs in a pod with a service account token, as client-go
    decides it: both variables set and the token a file."""
    env = os.environ if environ is None else environ
    return bool(
        env.get("KUBERNETES_SERVICE_HOST")
        and env.get("KUBERNETES_SERVICE_PORT")
        and (SERVICE_ACCOUNT / "token").is_file()
    )


def load(
    clock: Callable[[], float], environ: Mapping[str, str] | None = None
) -> tuple[Endpoint, FileToken]:
    """The API server's endpoint and the service account's token; call when
    `possible()`. CredentialsUnavailable when the token cannot be read."""
    env = os.environ if environ is None else environ
    host, port = env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]
    if ":" in host and not host.startswith("["):  # an IPv6 address, as net.JoinHostPort
        host = f"[{host}]"
    token = FileToken(str(SERVICE_ACCOUNT / "token"), clock=clock)
    token.token()  # read now: one that cannot be is an error before any request
    # As client-go: without a readable ca.crt, the system's trust store.
    ca_file = SERVICE_ACCOUNT / "ca.crt"
    where = Endpoint(f"https://{host}:{port}", ca_file=str(ca_file) if ca_file.is_file() else "")
    return where, token
