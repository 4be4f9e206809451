"""A kubeconfig read as kubectl reads it, without the kubernetes package: the files
of KUBECONFIG merged (the first file to name a cluster, user or context, or to set
current-context, wins), the context's cluster and user, relative paths taken from
the file that wrote them.

What it understands: a cluster's server, certificate-authority(-data) and
tls-server-name; a user's token, tokenFile (the file's token over an inline one:
drainer/k8s/tokenfile.py), client-certificate(-data) and client-key(-data) (of the
data, its PEM blocks alone: drainer/k8s/pem.py), username and password, and an exec
credential plugin (run as client-go runs it: drainer/k8s/execinfo.py), whose token
is renewed by drainer.k8s.auth.ExecToken. A user with the oidc auth-provider is
loaded by the kubernetes package's own loader instead (`library_endpoint`); the gcp
and azure ones are refused, as kubectl refuses them since they were removed. With no
kubeconfig file, a pod's in-cluster configuration (drainer/k8s/incluster.py), as
kubectl. A cluster's proxy-url is read here and applied by the transport, as are the
environment's proxies (drainer/k8s/proxy.py).

insecure-skip-tls-verify is refused: the drainer always verifies the API server. So is
a field given both as a file and as data (the CA, the client certificate, its key),
as kubectl refuses it (tests/e2e/test_kubectl_table.py holds this module to kubectl).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from drainer.errors import CredentialsUnavailable, KubeError, TlsVerificationError
from drainer.k8s import execinfo, incluster, pem
from drainer.k8s.auth import ExecToken, FileToken
from drainer.k8s.execcert import ExecCertificate, secret_file
from drainer.k8s.impersonation import Impersonation
from drainer.k8s.provider import ProviderToken
from drainer.k8s.tokenfile import FileOrInlineToken
from drainer.k8s.transport import Endpoint

log = logging.getLogger(__name__)

EXEC_TIMEOUT_SECONDS = 60.0
EXEC_OUTPUT_LIMIT_BYTES = 1 << 20
"""The most an exec plugin may print (1 MiB): an ExecCredential is a token, or a
client certificate and its key, a few kilobytes."""
_REMOVED_AUTH_PROVIDERS = {
    "gcp": "gke-gcloud-auth-plugin",
    "azure": "kubelogin (https://github.com/Azure/kubelogin)",
}
"""The auth-providers kubectl no longer has (removed in 1.26), with the exec credential
plugin each is told to use instead; only `oidc` is still one."""


class KubeconfigError(Exception):
    """What is wrong with the kubeconfig, in a few words."""


@dataclass(frozen=True)
class Entry:
    """A named cluster, user or context, and the directory of the file that wrote it."""

    value: Mapping[str, Any]
    directory: Path


@dataclass(frozen=True)
class Loaded:
    endpoint: Endpoint
    user: str
    """The context's user name, for messages."""
    token: ExecToken | FileToken | ExecCertificate | ProviderToken | None = None
    """The user's exec plugin's tokens, renewed as they expire or are refused; or its
    tokenFile's, read again as it rotates."""


def files(path: str | None) -> list[Path]:
    """The files to read, as kubectl: --kubeconfig's one file (a ':' in its path is
    part of the path; `found` has checked that it is a file), else KUBECONFIG's list,
    else ~/.kube/config. A `path` that names no file is read as a list (`load` called
    with one, as tests/test_kubeconfig.py calls it)."""
    if path and os.path.isfile(os.path.expanduser(path)):
        return [Path(os.path.expanduser(path))]
    where = path or os.environ.get("KUBECONFIG") or "~/.kube/config"
    return [Path(os.path.expanduser(p)) for p in where.split(os.pathsep) if p]


class Merged:
    """The files of a kubeconfig path, merged as kubectl merges them."""

    def __init__(self, paths: list[Path]) -> None:
        import yaml

        try:  # libyaml's, where PyYAML was built with it (its wheels are): about 7 times
            # faster than the pure-Python loader on an EKS kubeconfig's certificates
            from yaml import CSafeLoader as SafeLoader
        except ImportError:  # pragma: no cover - a PyYAML built without libyaml
            from yaml import SafeLoader  # type: ignore[assignment]

        self.clusters: dict[str, Entry] = {}
        self.users: dict[str, Entry] = {}
        self.contexts: dict[str, Entry] = {}
        self.current = ""
        for path in paths:
            if not path.is_file():
                continue
            try:
                document = yaml.load(path.read_text(), Loader=SafeLoader) or {}
            except (OSError, yaml.YAMLError) as e:
                raise KubeconfigError(f"{path} does not read as YAML: {e}") from e
            if not isinstance(document, dict):
                raise KubeconfigError(f"{path} is not a kubeconfig (no mapping at its top)")
            # As kubectl resolves relative paths (client-go's ResolveLocalPaths): from the
            # file's own directory, a symbolic link's not followed.
            directory = Path(os.path.abspath(path)).parent
            for key, found in (
                ("clusters", self.clusters),
                ("users", self.users),
                ("contexts", self.contexts),
            ):
                inner = key[:-1]  # cluster, user, context
                for item in document.get(key) or []:
                    if isinstance(item, dict) and item.get("name") and item["name"] not in found:
                        body = item.get(inner) or {}
                        if not isinstance(body, dict):
                            raise KubeconfigError(
                                f"{path}: the {inner} {item['name']!r} is not a mapping "
                                f"(its {inner}: holds {type(body).__name__} {body!r:.40})"
                            )
                        found[item["name"]] = Entry(body, directory)
            self.current = self.current or str(document.get("current-context") or "")


def found(
    path: str | None,
    context: str | None,
    *,
    clock: Callable[[], float],
    impersonate: Impersonation | None = None,
) -> Loaded:
    """The kubeconfig's endpoint and credentials (`load`); with no file found and none
    named, a pod's in-cluster configuration where there is one, as kubectl falls back
    to it (drainer/k8s/incluster.py). KubeError when there is neither."""
    # As kubectl: --kubeconfig names one file, which must exist; only KUBECONFIG's
    # list skips the files it names that do not.
    where = [Path(os.path.expanduser(path))] if path else files(path)
    if any(f.is_file() for f in where):
        return _paired(load(path, context, clock=clock, impersonate=impersonate))
    if not path and incluster.possible():
        endpoint, token = incluster.load(clock)
        headers = (impersonate or Impersonation()).headers()
        return Loaded(replace(endpoint, impersonate=headers), incluster.USER, token)
    raise KubeError(
        f"no kubeconfig file at {', '.join(str(f) for f in where)}: write one with "
        "`aws eks update-kubeconfig --name <cluster>`, or name one with --kubeconfig "
        "or KUBECONFIG"
    )


def _paired(loaded: Loaded) -> Loaded:
    """As kubectl's validation: a client certificate without its key, or a key without
    its certificate, is refused by name (the ssl module would say "PEM lib"), before
    any connection."""
    cert, key = bool(loaded.endpoint.cert_file), bool(loaded.endpoint.key_file)
    if cert == key:
        return loaded
    missing, present = ("client-key", "certificate") if cert else ("client-certificate", "key")
    raise KubeconfigError(
        f"{missing}-data or {missing} must be specified for {loaded.user} to use the "
        f"clientCert authentication method (kubeconfig user '{loaded.user}' has a client "
        f"{present} and nothing to pair it with)"
    )


def load(
    path: str | None,
    context: str | None,
    *,
    clock: Callable[[], float],
    impersonate: Impersonation | None = None,
) -> Loaded:
    """The endpoint and credentials of `context` (default: the current one);
    `impersonate`: kubectl's --as flags, over the user's own `as` fields."""
    merged = Merged(files(path))
    name = context or merged.current
    if not name:
        raise KubeconfigError("no context given and no current-context set")
    if name not in merged.contexts:
        raise KubeconfigError(f"context '{name}' is not in the kubeconfig")
    chosen = merged.contexts[name].value
    cluster_name, user_name = str(chosen.get("cluster") or ""), str(chosen.get("user") or "")
    if cluster_name not in merged.clusters:
        raise KubeconfigError(f"cluster '{cluster_name}' of context '{name}' is not in it")
    cluster = merged.clusters[cluster_name]
    user = merged.users.get(user_name, Entry({}, cluster.directory))
    impersonating = Impersonation.of_user(user.value).overridden_by(impersonate).headers()
    _check_cluster(cluster.value, cluster_name)
    proxy_url = str(cluster.value.get("proxy-url") or "")
    if "auth-provider" in user.value:
        _refuse_auth_provider(user.value["auth-provider"], user_name)
        library = replace(library_endpoint(path, name, user_name), proxy_url=proxy_url)
        token = ProviderToken(
            lambda: library_endpoint(path, name, user_name).authorization,
            user=user_name,
            clock=clock,
        )
        token.token()  # now: an id-token that cannot be had is an error before any request
        endpoint = replace(library, impersonate=impersonating, authorization="")
        return Loaded(endpoint, user_name, token)
    server = str(cluster.value.get("server") or "")
    if not server:
        raise KubeconfigError(f"cluster '{cluster_name}' has no server")
    ca_pem = _pem(cluster.value, "certificate-authority-data", f"cluster '{cluster_name}'")
    ca_file = _path(cluster.value.get("certificate-authority"), cluster.directory)
    endpoint = Endpoint(
        server,
        ca_pem=ca_pem,
        ca_file="" if ca_pem else ca_file,  # the data overrides the file (_data_over_file)
        tls_server_name=str(cluster.value.get("tls-server-name") or ""),
        proxy_url=proxy_url,
    )
    return _with_user(replace(endpoint, impersonate=impersonating), user_name, user, cluster, clock)


def _refuse_auth_provider(provider: Any, user: str) -> None:
    """As kubectl: the gcp and azure auth-providers were removed (their exec plugins
    replace them), and a name it has no provider for is an error. Only oidc remains,
    loaded by the kubernetes package (`library_endpoint`)."""
    name = str(provider.get("name") or "") if isinstance(provider, Mapping) else ""
    if name in _REMOVED_AUTH_PROVIDERS:
        raise KubeconfigError(
            f"kubeconfig user '{user}' uses the {name} auth-provider, which kubectl removed "
            f"(as does this CLI): use the {_REMOVED_AUTH_PROVIDERS[name]} exec credential "
            "plugin instead, which rewrites the kubeconfig's user to an `exec` entry"
        )
    if name != "oidc":
        raise KubeconfigError(
            f"kubeconfig user '{user}' names auth-provider {name!r}, which neither kubectl "
            "nor this CLI has; use an exec credential plugin"
        )


def _check_cluster(value: Mapping[str, Any], name: str) -> None:
    """What the drainer never does (turn TLS verification off); the CA both as a
    file and as data is said (the data wins)."""
    if value.get("insecure-skip-tls-verify"):
        raise TlsVerificationError(
            "the kubeconfig turns TLS verification off (insecure-skip-tls-verify); "
            "the drainer always verifies the API server"
        )
    _data_over_file(value, "certificate-authority", f"cluster '{name}'")


def _data_over_file(value: Mapping[str, Any], field: str, owner: str) -> None:
    """A field given both as a file and as `-data`: the data is used and the file
    ignored, as client-go's own message says ("-data will override"), with a warning
    that kubectl itself refuses such a kubeconfig (its validation returns that message
    as an error: tests/e2e/test_kubectl_table.py shows both sides)."""
    if value.get(field) and value.get(f"{field}-data"):
        log.warning(
            "%s has both %s-data and %s: the data is used and the file ignored (kubectl "
            "refuses this kubeconfig; keep one of them)",
            owner,
            field,
            field,
        )


def _with_user(
    endpoint: Endpoint, name: str, user: Entry, cluster: Entry, clock: Callable[[], float]
) -> Loaded:
    """The user's credentials, by kubectl's precedence: a token file (its token
    over an inline one, as client-go) or a token before a plugin; a client
    certificate beside either."""
    value = user.value
    cert_file, key_file = _client_certificate(value, name, user.directory)
    authorization = ""
    token: ExecToken | FileToken | ExecCertificate | None = None
    if value.get("tokenFile"):
        path = _path(value["tokenFile"], user.directory)
        token = FileToken(path, clock=clock)
        if value.get("token"):
            token = FileOrInlineToken(path, inline=str(value["token"]), clock=clock)
        token.token()  # read now: a file that cannot be is an error before any request
    elif value.get("token"):
        authorization = f"Bearer {value['token']}"
    elif value.get("username") is not None and value.get("password") is not None:
        pair = f"{value['username']}:{value['password']}".encode()
        authorization = f"Basic {base64.b64encode(pair).decode()}"
    elif isinstance(value.get("exec"), Mapping):
        plugin = Plugin(value["exec"], name, cluster, user.directory)
        status = plugin.run()
        # As client-go: a certificate (with the token beside it, if any, sent too);
        # an empty or null token is none.
        if status.get("clientCertificateData") or status.get("clientKeyData"):
            token = ExecCertificate(plugin.run, command=plugin.command, clock=clock, status=status)
            _, cert_file, key_file = token.current()
            endpoint = replace(endpoint, certificate=token)
        elif status.get("token"):
            token = ExecToken(plugin.run, command=plugin.command, clock=clock, status=status)
        else:
            raise CredentialsUnavailable(
                f"the exec credential plugin `{plugin.command}` of kubeconfig user '{name}' "
                "gave neither a token nor a client certificate"
            )
    credentials = replace(
        endpoint, cert_file=cert_file, key_file=key_file, authorization=authorization
    )
    return Loaded(credentials, name, token)


def _client_certificate(value: Mapping[str, Any], name: str, directory: Path) -> tuple[str, str]:
    """The user's client certificate and key files (the `-data` written to files only
    this user may read); one without the other is refused by `found` (`_paired`)."""
    owner = f"user '{name}'"
    for field in ("client-certificate", "client-key"):
        _data_over_file(value, field, owner)
    cert_file = _path(value.get("client-certificate"), directory)
    key_file = _path(value.get("client-key"), directory)
    if value.get("client-certificate-data"):
        cert_file = secret_file(_pem(value, "client-certificate-data", owner))
    if value.get("client-key-data"):
        key_file = secret_file(_pem(value, "client-key-data", owner))
    return cert_file, key_file


class Plugin:
    """An exec credential plugin (client.authentication.k8s.io), run as kubectl runs it."""

    def __init__(
        self, spec: Mapping[str, Any], user: str, cluster: Entry, user_directory: Path
    ) -> None:
        self.spec = spec
        self.user = user
        self.cluster = cluster
        command = execinfo.command(spec, user_directory)
        self.argv = [command, *(str(a) for a in spec.get("args") or [])]
        self.env = execinfo.environment(spec)  # ExecSpecError: a usage error, before a run
        self.command = shlex.join(self.argv)
        self.api_version = str(spec.get("apiVersion") or "")

    def run(self) -> Mapping[str, Any]:
        """The plugin's ExecCredential status; CredentialsUnavailable when it fails."""
        try:
            return self._run()
        except (KubeconfigError, OSError, ValueError) as e:
            hint = self.spec.get("installHint")
            raise CredentialsUnavailable(
                f"the exec credential plugin `{self.command}` of kubeconfig user "
                f"'{self.user}' failed: {e}"
                + (f"\n{hint}" if hint and isinstance(e, OSError) else "")
            ) from e

    def _run(self) -> Mapping[str, Any]:
        import subprocess  # only with a plugin: not on the start-up of a token's user

        if not self.argv[0]:
            raise KubeconfigError("exec: no command")
        env = dict(self.env)
        # As client-go: the person at the terminal sees the plugin's stderr (an SSO or
        # device-code prompt) and, when it is interactive, answers on its stdin.
        interactive = execinfo.interactive(self.spec, execinfo.stdin_is_terminal())
        info: dict[str, Any] = {"interactive": interactive}
        if self.spec.get("provideClusterInfo"):
            info["cluster"] = execinfo.cluster_info(self.cluster.value, self.cluster.directory)
        env["KUBERNETES_EXEC_INFO"] = json.dumps(
            {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": info}
        )
        from drainer.k8s import capped  # subprocess: only with a plugin

        try:
            code, stdout = capped.run(
                [execinfo.located(self.argv[0]), *self.argv[1:]],
                env=env,
                stdin=sys.stdin if interactive else subprocess.DEVNULL,
                timeout=None if interactive else EXEC_TIMEOUT_SECONDS,  # a person answers
                limit=EXEC_OUTPUT_LIMIT_BYTES,  # read as it comes; killed past it
            )
        except subprocess.TimeoutExpired as e:
            raise KubeconfigError(str(e)) from e
        if code != 0:
            raise KubeconfigError(f"exec: process returned {code}")
        credential = json.loads(stdout)
        if not isinstance(credential, dict) or not isinstance(credential.get("status"), dict):
            raise KubeconfigError(
                "exec: the plugin's output is not an ExecCredential with a status"
            )
        if self.api_version and credential.get("apiVersion") != self.api_version:
            raise KubeconfigError(
                f"exec: the plugin answered {credential.get('apiVersion')!r}, "
                f"not the {self.api_version!r} the kubeconfig asks for"
            )
        return dict(credential["status"])


def library_endpoint(path: str | None, context: str, user: str = "") -> Endpoint:
    """The kubernetes package's own loader, for what this module does not read
    itself (an auth-provider): its configuration as an Endpoint. What the loader
    refuses (an oidc user with no id-token, a refresh the identity provider
    declines) is CredentialsUnavailable, at the first load and at each reload."""
    from kubernetes.client import Configuration
    from kubernetes.config import ConfigException, kube_config

    configuration = Configuration()
    try:
        # The files `files` reads (--kubeconfig's one, whatever ':' its path holds),
        # each given to the merger alone: it would split a path on ':'.
        merged = kube_config.KubeConfigMerger("")  # type: ignore[no-untyped-call]
        for file in files(path):
            if file.is_file():
                merged.load_config(str(file))  # type: ignore[no-untyped-call]
        loader = kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call]
            config_dict=merged.config, active_context=context, config_base_path=None
        )
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    except ConfigException as e:
        # Never what follows " in ": the loader names the user's entry whole, its
        # tokens and client-secret with it.
        why = str(e).split(" in ", 1)[0]
        raise CredentialsUnavailable(
            f"kubeconfig user '{user}': its oidc auth-provider gives no token ({why}); "
            "sign in again (kubectl oidc-login, or your identity provider's tool), which "
            "writes an id-token (and refresh-token) into the kubeconfig"
        ) from e
    return Endpoint(
        configuration.host,
        ca_file=configuration.ssl_ca_cert or "",
        cert_file=configuration.cert_file or "",
        key_file=configuration.key_file or "",
        authorization=_authorization(configuration.api_key or {}),
        tls_server_name=str(getattr(configuration, "tls_server_name", "") or ""),
    )


def _authorization(api_key: Mapping[str, Any]) -> str:
    """The Authorization header the package's loader set (its key's name has changed
    between versions); a bare token is a bearer token."""
    value = str(api_key.get("BearerToken") or api_key.get("authorization") or "")
    if value and not value.startswith(("Bearer ", "Basic ")):
        value = f"Bearer {value}"
    return value


def _pem(value: Mapping[str, Any], field: str, owner: str) -> str:
    """A `-data` field's PEM blocks, as ASCII text (drainer/k8s/pem.py)."""
    try:
        return pem.decoded(value.get(field), field)
    except ValueError as e:
        raise KubeconfigError(f"kubeconfig {owner}: {e}") from e


def _path(value: Any, directory: Path) -> str:
    if not value:
        return ""
    path = Path(os.path.expanduser(str(value)))
    return str(path if path.is_absolute() else directory / path)


_AWS_PLUGINS = {"aws", "aws-iam-authenticator"}


def refused_advice(user: str, token: object) -> str:
    """What a 401 means for a kubeconfig's user, and what to check."""
    if not isinstance(token, ExecToken):
        return (
            f"the API server refused the credentials of kubeconfig user '{user}' (401 "
            "Unauthorized): a token or client certificate this cluster does not accept "
            "(expired, revoked, or another cluster's). Get current ones; `kubectl auth "
            "whoami` shows who the kubeconfig signs in as."
        )
    program = os.path.basename(shlex.split(token.command)[0]) if token.command else ""
    aws = (
        " (`aws eks get-token` signs in as the AWS profile or role it runs with, "
        "`aws sts get-caller-identity` shows which; that IAM principal needs an EKS access "
        "entry or aws-auth mapping for this cluster)"
        if program in _AWS_PLUGINS
        else ""
    )
    return (
        f"the API server refused the token of kubeconfig user '{user}' (401 Unauthorized), "
        f"and a fresh one from running its exec credential plugin again too. Run the "
        f"plugin yourself (`{token.command}`), see who it signs in as, and check that "
        f"this identity may use the cluster{aws}."
    )
