"""Point moto's EKS cluster at a local Kubernetes API server (kubesim).

moto's DescribeCluster returns a made-up endpoint and random CA data; the drainer
connects to whatever DescribeCluster says, so tests and the demo rewrite both to
the emulator's URL and CA bundle.
"""

from __future__ import annotations

from moto.eks.models import EKSBackend, eks_backends

# CreateCluster validates the role ARN's shape only; this one is never assumed.
_ROLE_ARN = "arn:aws:iam::{account}:role/awssim-eks-cluster"


def point_cluster_at(
    account_id: str, region: str, name: str, endpoint: str, ca_data_b64: str
) -> None:
    """Make DescribeCluster(name) return `endpoint` and `ca_data_b64`.

    Creates the cluster (ACTIVE) when moto does not have it yet.
    """
    backend: EKSBackend = eks_backends[account_id][region]
    cluster = backend.clusters.get(name)
    if cluster is None:
        cluster = backend.create_cluster(
            name=name,
            role_arn=_ROLE_ARN.format(account=account_id),
            resources_vpc_config={},
        )
    cluster.endpoint = endpoint
    cluster.certificate_authority = {"data": ca_data_b64}
    cluster.status = "ACTIVE"


def set_cluster_config(
    account_id: str,
    region: str,
    name: str,
    *,
    authentication_mode: str | None = None,
    vpc_config: dict[str, object] | None = None,
) -> None:
    """What moto's CreateCluster leaves out: DescribeCluster's accessConfig (moto
    never returns one; real clusters always do) and endpoint settings moto does not
    default. moto's serializer reads the cluster's `access_config` attribute."""
    cluster = eks_backends[account_id][region].clusters[name]
    if authentication_mode is not None:
        # An attribute moto's Cluster lacks; its serializer picks it up by name.
        cluster.access_config = {"authenticationMode": authentication_mode}  # type: ignore[attr-defined]
    if vpc_config is not None:
        cluster.resources_vpc_config = {**(cluster.resources_vpc_config or {}), **vpc_config}
