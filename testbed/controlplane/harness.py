"""Start and stop a real control plane on 127.0.0.1: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok, with their own CA.

Every port is ephemeral and every file lives in one temporary directory, so each
test worker can run its own. Children die with us (PR_SET_PDEATHSIG) and are
stopped on exit, SIGTERM and Ctrl-C by whoever owns the ControlPlane (a context
manager, a pytest fixture, `python -m testbed controlplane`).

Identities, as `python -m kubesim serve` has them: the `admin` context (static
token, system:masters) and the `drainer` context (static token, group
eks-node-drainer); EKS tokens (`k8s-aws-v1.`) go through a TokenReview webhook
(testbed.controlplane.webhook) that maps IAM credentials to users like kubesim.

Pod timing follows kubesim's annotations (testbed.workloads), divided by `speed`,
through kwok stages: `kubesim.io/startup-seconds` from binding to Ready, and
`kubesim.io/shutdown-seconds` from deletion to gone, capped by the grace period.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import functools
import json
import os
import secrets
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from kubesim import certs
from kubesim.auth import Authenticator, EksIdentity
from testbed.cluster import ApiClient
from testbed.controlplane.binaries import binaries
from testbed.controlplane.storage import StorageEmulator, StorageEmulatorError
from testbed.controlplane.webhook import TokenWebhook
from testbed.processes import die_with_parent, free_port

DRAINER_GROUP = "eks-node-drainer"
SERVICE_CIDR = "10.96.0.0/16"
STARTUP = "kubesim.io/startup-seconds"
SHUTDOWN = "kubesim.io/shutdown-seconds"


class ControlPlaneError(RuntimeError):
    """A component did not start or died; the message holds the tail of its log."""


def _pod_stage(
    name: str, match: list[dict[str, Any]], then: dict[str, Any], delay_jq: str = ""
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": match},
        "next": then,
    }
    if delay_jq:
        spec["delay"] = {
            "durationMilliseconds": 0,
            "durationFrom": {"jq": {"expression": delay_jq}},
        }
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": spec,
    }


def _kwok_stages(speed: float) -> list[dict[str, Any]]:
    """Pod stages: created at once, Ready after startup/speed, gone after
    min(shutdown, grace)/speed (finalizers, which kwok leaves alone, still hold it)."""

    def millis(expression: str) -> str:
        return f'({expression}) * 1000 / {speed} | floor | tostring + "ms"'

    def field(key: str, operator: str, *values: str) -> dict[str, Any]:
        return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}

    seconds = '(.metadata.annotations["{}"] // "0" | tonumber)'
    startup = millis(seconds.format(STARTUP))
    shutdown = millis(
        f"[{seconds.format(SHUTDOWN)}, (.metadata.deletionGracePeriodSeconds // 0)] | min"
    )
    live = field(".metadata.deletionTimestamp", "DoesNotExist")
    return [
        _pod_stage(
            "pod-create",
            [live, field(".status.podIP", "DoesNotExist")],
            {"statusTemplate": _POD_CREATED},
        ),
        _pod_stage(
            "pod-ready",
            [live, field(".status.podIP", "Exists"), field(".status.phase", "In", "Pending")],
            {"statusTemplate": _POD_READY},
            startup,
        ),
        _pod_stage(
            "pod-delete",
            [
                field(".metadata.deletionTimestamp", "Exists"),
                field(".metadata.finalizers", "DoesNotExist"),
            ],
            {"delete": True},
            shutdown,
        ),
    ]


def _pod_status(ready: bool) -> str:
    """A kwok status template: the pod created (Pending, not Ready) or running."""
    flag = "true" if ready else "false"
    condition = '"True"' if ready else '"False"\n  reason: ContainersNotReady'
    if ready:
        state, tail = (
            "running:\n      startedAt: {{ $now | Quote }}",
            ("phase: Running\nstartTime: {{ $now | Quote }}\n"),
        )
    else:
        state, tail = (
            "waiting:\n      reason: ContainerCreating",
            (
                "hostIP: {{ NodeIPWith .spec.nodeName | Quote }}\n"
                "podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) "
                '( or .metadata.uid "" ) ( or .metadata.name "" ) '
                '( or .metadata.namespace "" ) | Quote }}\n'
                "phase: Pending\n"
            ),
        )
    conditions = "".join(
        f"- lastTransitionTime: {{{{ $now | Quote }}}}\n  status: {status}\n  type: {kind}\n"
        for kind, status in (
            ("PodScheduled", '"True"'),
            ("Initialized", '"True"'),
            ("Ready", condition),
            ("ContainersReady", condition),
        )
    )
    return (
        "{{ $now := Now }}\nconditions:\n" + conditions + "containerStatuses:\n"
        "{{ range .spec.containers }}\n"
        "- image: {{ .image | Quote }}\n  name: {{ .name | Quote }}\n"
        f"  ready: {flag}\n  restartCount: 0\n  started: {flag}\n  state:\n    {state}\n"
        "{{ end }}\n" + tail
    )


_POD_CREATED = _pod_status(ready=False)
_POD_READY = _pod_status(ready=True)


class ControlPlane:
    """A real control plane; `with ControlPlane() as cp:` or start()/stop().

    >>> cp.url, cp.kubeconfig          # contexts `admin` and `drainer`
    >>> cp.authenticator.identities    # EKS IAM identities the webhook accepts
    """

    def __init__(
        self,
        *,
        cluster_name: str = "kubesim",
        speed: float = 1.0,
        kubeconfig: Path | str | None = None,
        eks_identities: Iterable[EksIdentity] = (),
        max_token_age: float = 900.0,
        build: bool = True,
        start_timeout: float = 90.0,
    ) -> None:
        self.cluster_name = cluster_name
        self.speed = speed
        self.build = build
        self.start_timeout = start_timeout
        self.admin_token = "cp-admin-" + secrets.token_hex(16)
        self.drainer_token = "cp-drainer-" + secrets.token_hex(16)
        self.authenticator = Authenticator(
            cluster_id=cluster_name, identities=list(eks_identities), max_token_age=max_token_age
        )
        self.tls = certs.generate("controlplane-ca", hosts=("10.96.0.1",))
        # etcd writes on every change: a RAM-backed directory when there is one.
        shm = Path("/dev/shm")  # noqa: S108 (a private mkdtemp inside it)
        base = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
        _sweep(Path(base or tempfile.gettempdir()))
        self.dir = Path(tempfile.mkdtemp(prefix="eks-drainer-cp-", dir=base))
        (self.dir / "owner.pid").write_text(str(os.getpid()))
        self.kubeconfig = Path(kubeconfig) if kubeconfig else self.dir / "kubeconfig"
        self.port = 0
        self.started_in = 0.0
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._commands: dict[str, tuple[list[str], dict[str, str] | None]] = {}
        self._logs: dict[str, Path] = {}
        self._down: set[str] = set()
        self._restarter = concurrent.futures.ThreadPoolExecutor(1, "controlplane-restart")
        self.restarts: list[tuple[str, float]] = []
        """(component, seconds until it served again) of every restart()."""
        self._webhook: TokenWebhook | None = None
        self.storage: StorageEmulator | None = None

    # -- lifecycle ------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        began = time.monotonic()
        try:
            self._start(binaries(build=self.build))
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - began
        return self

    def _start(self, bin_dir: Path) -> None:
        d = self.dir
        ca, cert, key = self.tls.write(d / "pki")
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (d / "pki" / "sa.key").write_bytes(
            sa_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        (d / "pki" / "sa.pub").write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        component_tokens = {
            name: f"cp-{name}-" + secrets.token_hex(16)
            for name in ("controller-manager", "scheduler", "kwok")
        }
        rows = [
            f'{self.admin_token},admin,admin,"system:masters"',
            f'{self.drainer_token},drainer,drainer,"{DRAINER_GROUP}"',
            # Components as cluster admins: what each may do is not under test here.
            f"{component_tokens['controller-manager']},system:kube-controller-manager,"
            'kcm,"system:masters"',
            f'{component_tokens["scheduler"]},system:kube-scheduler,sched,"system:masters"',
            f'{component_tokens["kwok"]},kwok,kwok,"system:masters"',
        ]
        tokens = d / "tokens.csv"
        tokens.touch(mode=0o600)
        tokens.write_text("\n".join(rows) + "\n")

        # etcd
        client, peer = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{client}"
        self._spawn(
            "etcd",
            [
                str(bin_dir / "etcd"),
                "--name=default",
                f"--data-dir={d / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self._wait("etcd", lambda: _http_ok(f"{etcd_url}/health"))

        # the EKS token webhook, then the apiserver that calls it
        self._webhook = TokenWebhook(self.authenticator, str(cert), str(key))
        self._webhook.start()
        webhook_config = d / "webhook.kubeconfig"
        _write_kubeconfig(webhook_config, self._webhook.url, self.tls.ca_pem, {"apiserver": None})
        self.port = free_port()
        self._spawn(
            "kube-apiserver",
            [
                str(bin_dir / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--tls-cert-file={cert}",
                f"--tls-private-key-file={key}",
                f"--client-ca-file={ca}",
                f"--token-auth-file={tokens}",
                f"--authentication-token-webhook-config-file={webhook_config}",
                "--authentication-token-webhook-version=v1",
                # Every request asks the webhook again, as a token may expire mid-test.
                "--authentication-token-webhook-cache-ttl=0s",
                "--authorization-mode=Node,RBAC",
                f"--service-account-issuer=https://kubernetes.default.svc.{self.cluster_name}",
                f"--service-account-key-file={d / 'pki' / 'sa.pub'}",
                f"--service-account-signing-key-file={d / 'pki' / 'sa.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                "--profiling=false",
                # Loopback only: no endpoint for the `kubernetes` service to reconcile.
                "--endpoint-reconciler-type=none",
                "--v=0",
            ],
        )
        self._wait("kube-apiserver", self._apiserver_ready)
        self.write_kubeconfig(self.kubeconfig)

        def component_config(name: str) -> Path:
            path = d / f"{name}.kubeconfig"
            _write_kubeconfig(path, self.url, self.tls.ca_pem, {name: component_tokens[name]})
            return path

        self._spawn(
            "kube-controller-manager",
            [
                str(bin_dir / "kube-controller-manager"),
                f"--kubeconfig={component_config('controller-manager')}",
                "--leader-elect=false",
                "--secure-port=0",
                f"--service-account-private-key-file={d / 'pki' / 'sa.key'}",
                f"--root-ca-file={ca}",
                f"--cluster-name={self.cluster_name}",
                "--controllers=*",
                # kwok's nodes live as long as kwok does (check() watches it), but on a
                # loaded host their heartbeats come late: past the default 50 s the node
                # lifecycle controller marks every pod of the node not Ready, which kwok
                # never undoes, and the budgets then allow nothing (seen in make soak
                # BACKEND=real with other control planes on the same two cores).
                "--node-monitor-grace-period=10m",
                "--v=0",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                str(bin_dir / "kube-scheduler"),
                f"--kubeconfig={component_config('scheduler')}",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=0",
            ],
        )
        stages = d / "kwok.yaml"
        stages.write_text(yaml.safe_dump_all(_kwok_stages(self.speed), sort_keys=False))
        self._spawn(
            "kwok",
            [
                str(bin_dir / "kwok"),
                f"--kubeconfig={component_config('kwok')}",
                f"--config={stages}",
                "--manage-all-nodes=true",
                # Node leases, renewed as a kubelet renews them: without them kwok's
                # status heartbeat (about every 50 s) can miss the node lifecycle
                # controller's grace period (40 s), which then marks every pod
                # NotReady; a controller-manager restarted mid-test did just that.
                "--node-lease-duration-seconds=40",
                "--node-port=0",
                "--cidr=10.244.0.1/16",
                "--v=WARN",
            ],
            env={"HOME": str(d)},
        )
        # The controller manager is working once it has made the default namespace's
        # service account (pods cannot be created without it).
        self._wait(
            "kube-controller-manager",
            lambda: self._get("/api/v1/namespaces/default/serviceaccounts/default") is not None,
        )
        # What the EBS CSI driver runs beside the control plane: StorageClass gp3,
        # provisioner and attacher (testbed.controlplane.storage).
        self.storage = StorageEmulator(
            ApiClient(self.url, self.tls.ca_pem, self.admin_token), self.speed
        ).start()
        self.check()

    def stop(self) -> None:
        """Stop every component (newest first), then remove every file."""
        if self.storage is not None:
            self.storage.stop()
            self.storage = None
        for process in reversed(list(self._processes.values())):
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + 10
        for process in self._processes.values():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._processes.clear()
        self._restarter.shutdown(wait=False)
        if self._webhook is not None:
            self._webhook.stop()
            self._webhook = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def restart(self, name: str, *, down: float = 0.0) -> float:
        """Kill component `name` with SIGKILL (no clean shutdown: a crash), keep it down
        `down` seconds, start it again with the same flags (etcd keeps the state) and,
        for the apiserver, wait until it is ready; the seconds from the kill until then."""
        if name == "etcd":
            raise ValueError("etcd keeps the state: restart the components above it")
        argv, env = self._commands[name]
        process = self._processes[name]
        killed = time.monotonic()
        self._down.add(name)  # check() must not take it for dead meanwhile
        process.kill()
        process.wait()
        if down > 0:
            time.sleep(down)  # the outage itself: what the clients must ride out
        # PR_SET_PDEATHSIG fires when the *thread* that started a child ends: start
        # it from the control plane's own long-lived thread, not the caller's.
        try:
            self._restarter.submit(self._spawn, name, argv, env, append=True).result()
        finally:
            self._down.discard(name)
        if name == "kube-apiserver":
            self._wait(name, self._apiserver_ready)
        seconds = time.monotonic() - killed
        self.restarts.append((name, seconds))
        return seconds

    def check(self) -> None:
        """Raise ControlPlaneError if a component has died."""
        if self.storage is not None:
            try:
                self.storage.check()
            except StorageEmulatorError as e:
                raise ControlPlaneError(str(e)) from e
        for name, process in list(self._processes.items()):
            if process.poll() is not None and name not in self._down:
                raise ControlPlaneError(
                    f"{name} exited with {process.returncode}:\n{self.log_tail(name)}"
                )

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self._logs.get(name)
        if path is None or not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    # -- what clients need ------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        return self.tls.ca_pem

    @property
    def ca_data(self) -> str:
        return base64.b64encode(self.tls.ca_pem).decode()

    @property
    def token_reviews(self) -> int:
        return self._webhook.reviews if self._webhook else 0

    def version_info(self) -> dict[str, Any]:
        return self._get("/version") or {}

    def write_kubeconfig(self, path: Path) -> None:
        _write_kubeconfig(
            path,
            self.url,
            self.tls.ca_pem,
            {"admin": self.admin_token, "drainer": self.drainer_token},
            cluster=self.cluster_name,
        )

    # -- internals ----------------------------------------------------------------

    def _spawn(
        self, name: str, argv: list[str], env: dict[str, str] | None = None, *, append: bool = False
    ) -> None:
        log = self.dir / f"{name}.log"
        self._logs[name] = log
        self._commands[name] = (argv, env)
        with log.open("ab" if append else "wb") as out:
            self._processes[name] = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                env={**os.environ, **(env or {})},
                preexec_fn=die_with_parent,  # noqa: PLW1509 (only prctl, no locks)
            )

    def _wait(self, name: str, ready: Any) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            self.check()
            with contextlib.suppress(Exception):
                if ready():
                    return
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"{name} was not ready within {self.start_timeout:.0f} s:\n"
                    f"{self.log_tail(name)}"
                )
            time.sleep(0.1)

    @functools.cached_property
    def _ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.tls.ca_pem.decode())

    def _get(self, path: str) -> Any:
        request = urllib.request.Request(
            self.url + path, headers={"Authorization": f"Bearer {self.admin_token}"}
        )
        try:
            with urllib.request.urlopen(request, context=self._ssl, timeout=5) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    def _apiserver_ready(self) -> bool:
        request = urllib.request.Request(
            self.url + "/readyz", headers={"Authorization": f"Bearer {self.admin_token}"}
        )
        with urllib.request.urlopen(request, context=self._ssl, timeout=5) as answer:
            return bool(answer.status == 200)


def _sweep(base: Path) -> None:
    """Remove the directories of control planes whose owner was killed before it could
    clean up (its children died with it: PR_SET_PDEATHSIG)."""
    for directory in base.glob("eks-drainer-cp-*"):
        try:
            owner = int((directory / "owner.pid").read_text())
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(directory, ignore_errors=True)
        except (OSError, ValueError):
            continue


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as answer:
        return bool(answer.status == 200)


def _write_kubeconfig(
    path: Path,
    server: str,
    ca_pem: bytes,
    users: dict[str, str | None],
    *,
    cluster: str = "cluster",
) -> None:
    ca_data = base64.b64encode(ca_pem).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"server": server, "certificate-authority-data": ca_data}}
        ],
        "users": [{"name": u, "user": {"token": t} if t else {}} for u, t in users.items()],
        "contexts": [{"name": u, "context": {"cluster": cluster, "user": u}} for u in users],
        "current-context": next(iter(users)),
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
