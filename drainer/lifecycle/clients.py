"""The Kubernetes client of an EKS cluster, with IAM tokens: one per drain, the token
source kept for the container's life."""

from __future__ import annotations

import base64
import binascii
import threading
from collections.abc import Callable
from typing import Any

from drainer import aws
from drainer.errors import TlsVerificationError
from drainer.k8s.kube import Kube
from drainer.lifecycle.settings import Settings

KubeFactory = Callable[[aws.ClusterInfo, str, Settings], Kube]


def eks_kube(session: Any, region: str) -> KubeFactory:
    """Build Kube clients for EKS clusters with IAM tokens from this session."""
    # One token source per cluster for the container's life: its STS client is built
    # once and a token stays in use until it needs refreshing, across invocations.
    sources: dict[str, aws.TokenSource] = {}
    lock = threading.Lock()

    def token_source(cluster_name: str) -> aws.TokenSource:
        with lock:
            if cluster_name not in sources:
                sources[cluster_name] = aws.TokenSource(session, cluster_name, region)
            return sources[cluster_name]

    def factory(cluster: aws.ClusterInfo, cluster_name: str, settings: Settings) -> Kube:
        try:
            ca_pem = base64.b64decode(cluster.certificate_authority_data, validate=True)
        except (binascii.Error, ValueError) as e:
            raise TlsVerificationError(
                f"cluster {cluster_name}'s certificate authority data is not base64; "
                "refusing to connect"
            ) from e
        return Kube.for_cluster(
            cluster.endpoint,
            ca_pem,
            token_source(cluster_name),
            request_timeout=settings.kube_request_timeout_seconds,
            pool_size=settings.eviction_concurrency + 4,
        )

    return factory
