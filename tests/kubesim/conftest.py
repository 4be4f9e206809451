"""Fixtures for the kubesim tests: a started KubeSim, Python clients for its contexts,
the admin API, and a real kubectl pointed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from kubesim import EksIdentity, KubeSim
from kubesim.testing import Admin, Kubectl

# Durations in annotations are divided by this: "1" second lasts 50 ms.
SPEED = 20.0
CLUSTER = "kubesim-test"
# The IAM credentials an EKS access entry maps to the drainer (EksIdentity).
EKS_ACCESS_KEY = "AKIAKUBESIMDRAINER01"
EKS_SECRET_KEY = "kubesim/secret/for+tests"
EKS_IDENTITY = EksIdentity(
    access_key_id=EKS_ACCESS_KEY,
    secret_access_key=EKS_SECRET_KEY,
    arn="arn:aws:iam::111122223333:role/eks-node-drainer",
    username="eks-drainer",
    groups=("eks-node-drainer",),
)

ClientFactory = Callable[..., Any]


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim(speed=SPEED, cluster_name=CLUSTER, eks_identities=[EKS_IDENTITY]) as started:
        yield started


@pytest.fixture
def clients(sim: KubeSim) -> Iterator[ClientFactory]:
    """make(context="admin" | "drainer", token=None) -> kubernetes ApiClient.

    A context is loaded from the kubeconfig kubesim wrote, as a user would; a token
    replaces the context's credentials."""
    made: list[Any] = []

    def make(context: str = "admin", token: str | None = None) -> Any:
        api_client = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
            str(sim.kubeconfig), context=context
        )
        if token is not None:
            api_client.configuration.api_key = {"authorization": f"Bearer {token}"}
            api_client.configuration.refresh_api_key_hook = None
        made.append(api_client)
        return api_client

    yield make
    for api_client in made:
        api_client.close()


@pytest.fixture
def admin_client(clients: ClientFactory) -> Any:
    return clients("admin")


@pytest.fixture
def core(admin_client: Any) -> Any:
    return k8s.CoreV1Api(admin_client)


@pytest.fixture
def apps(admin_client: Any) -> Any:
    return k8s.AppsV1Api(admin_client)


@pytest.fixture
def policy(admin_client: Any) -> Any:
    return k8s.PolicyV1Api(admin_client)


@pytest.fixture
def admin(sim: KubeSim) -> Admin:
    return Admin(sim)


# -- kubectl -------------------------------------------------------------------


@pytest.fixture
def kubectl(sim: KubeSim, kubectl_binary: Path, tmp_path: Path) -> Kubectl:
    """kubectl with kubesim's kubeconfig and a temporary HOME (its discovery cache)."""
    home = tmp_path / "home"
    home.mkdir()
    return Kubectl(kubectl_binary, sim.kubeconfig, home)
