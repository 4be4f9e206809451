"""Shared fixtures. Keep this small; append, don't restructure."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from realapi import StaticToken

import awssim  # before anything imports moto: its cut catalogue of images (awssim.AMIS)
from drainer.k8s.kube import Kube
from kubesim import KubeSim

EVENTS_DIR = Path(__file__).parent / "events"
KUBECTL_BUILD = Path(__file__).resolve().parents[1] / "testbed" / "kubectl" / "build.sh"


# The suite shares its machine (four workers on two cores, the control planes beside
# them): a property's examples are what it checks, not how fast they are drawn, so
# neither a slow draw nor a slow example fails a test. Settings a test gives itself
# still apply over this profile.
hypothesis.settings.register_profile(
    "suite", deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)
hypothesis.settings.load_profile("suite")


def _one_data_loader() -> None:
    """Every botocore session of the test process shares one data loader, as the
    function's clients do in a warm container (drainer/handler.py keeps its session
    for the container's life). A session's loader reads and decodes the JSON of each
    service model it is asked for (EC2's is megabytes); the tests make a session per
    invocation (handler.reset) and moto makes more, and decoding the same models again
    was the largest single cost of the AWS tests (cProfile of tests/test_aws.py: 466
    model loads, 11.4 s of its 25 s). The models are read-only data: botocore already
    shares them between the clients of one session."""
    import botocore.loaders
    import botocore.session

    shared = botocore.loaders.create_loader()

    def register(session: botocore.session.Session) -> None:
        session._components.lazy_register_component("data_loader", lambda: shared)

    botocore.session.Session._register_data_loader = register  # type: ignore[method-assign]


_one_data_loader()


def _one_client_class_per_service() -> None:
    """What else botocore builds again for each session, built once per test process:
    - a client's class, one method per operation (EC2 has about 700), which botocore
      makes afresh for every client. The session's handlers, credentials and endpoint
      are the client's own (its instance); the class keeps only the first session's
      emitter, for its methods' lazy docstrings. S3 aside: a boto3 session gives S3's
      class methods a botocore session does not. A handler a session registered for
      `creating-client-class` after the first build would be skipped: none does;
    - an event name's alias, worked out for each of the 200-odd handlers a session
      registers (the aliases are botocore's fixed table).
    Under coverage, a session with the handler's three clients took 80 ms of CPU, 59
    ms with the classes kept (mean of 20), and a bare session 22 ms, 6.6 ms with the
    aliases kept (mean of 30); the suite makes thousands of both."""
    import threading

    import botocore.client
    import botocore.hooks

    creator = botocore.client.ClientCreator
    build = creator._create_client_class
    classes: dict[tuple[str, str], type] = {}
    lock = threading.RLock()  # held while the class's events run

    def client_class(self: Any, service_name: str, service_model: Any) -> type:
        if service_name == "s3":
            return build(self, service_name, service_model)  # type: ignore[no-any-return]
        key = (service_name, service_model.api_version)
        with lock:
            if key not in classes:
                classes[key] = build(self, service_name, service_model)
            return classes[key]

    creator._create_client_class = client_class  # type: ignore[method-assign]

    aliaser = botocore.hooks.EventAliaser
    alias = aliaser._alias_event_name
    standard = list(botocore.hooks.EVENT_ALIASES.items())
    aliases: dict[str, str] = {}

    def aliased(self: Any, event_name: str) -> str:
        found: str | None = self._alias_name_cache.get(event_name)  # this emitter's own
        if found is not None:
            return found
        if list(self._event_aliases.items()) != standard:  # in order: the first match wins
            return alias(self, event_name)  # type: ignore[no-any-return]
        found = aliases.get(event_name)
        if found is None:
            found = aliases[event_name] = alias(self, event_name)
        self._alias_name_cache[event_name] = found
        return found

    aliaser._alias_event_name = aliased  # type: ignore[method-assign]


_one_client_class_per_service()


@pytest.fixture
def load_event() -> Callable[[str], dict[str, Any]]:
    """Load tests/events/<name>.json, a fresh copy each call."""

    def load(name: str) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((EVENTS_DIR / f"{name}.json").read_text())
        return loaded

    return load


@pytest.fixture
def fake_aws_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fake credentials and region, and nothing that could point boto3 at real AWS."""
    for name in (
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    yield


@pytest.fixture
def moto_aws(fake_aws_env: None) -> Iterator[None]:
    """moto's in-process AWS with the awssim extension (lifecycle actions, async invoke)."""
    from moto import mock_aws

    awssim.install()
    with mock_aws():
        yield


@pytest.fixture(scope="session")
def kubectl_binary() -> Path:
    """A real kubectl: on PATH, else built from the Kubernetes release the control
    plane pins (testbed/kubectl/build.sh: once, then cached; `make kubectl`, a step
    of `make test`, builds it beforehand). Never a skip: the kubectl tests are part of
    the proof that kubesim is faithful and that the CLI reads kubeconfigs as kubectl."""
    on_path = shutil.which("kubectl")
    if on_path:
        return Path(on_path)
    done = subprocess.run(["bash", str(KUBECTL_BUILD)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(
            f"no kubectl on PATH, and building one failed (bash {KUBECTL_BUILD}):\n"
            f"{done.stderr[-4000:]}"
        )
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    """A kubesim at its own pace; a module that needs another (a speed, faults at the
    start) defines its own `sim`, which takes the place of this one."""
    with KubeSim() as running:
        yield running


@pytest.fixture
def kube(sim: KubeSim) -> Iterator[Kube]:
    """The drainer's client, as the cluster's admin, on the test module's `sim`."""
    client = Kube.for_cluster(sim.url, sim.ca_pem, StaticToken(sim.admin_token))
    yield client
    client.close()


@pytest.fixture(autouse=True)
def cli_json_follows_the_schema(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every document the CLI prints with -o json, in any test run in this process, is
    checked against docs/cli-output.schema.json once the test is over."""
    from support.cli_schema import problems

    from drainer.cli import output

    printed: list[object] = []
    emit = output.emit

    def recording(out: Any, document: dict[str, Any]) -> None:
        emit(out, document)
        printed.append(json.loads(json.dumps(document)))  # as a reader of stdout sees it

    monkeypatch.setattr(output, "emit", recording)
    yield
    for document in printed:
        if said := problems(document):
            pytest.fail(f"-o json document off docs/cli-output.schema.json: {said}: {document}")
