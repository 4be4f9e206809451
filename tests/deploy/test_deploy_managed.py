"""make deploy on an EKS managed node group (drainer/lifecycle/managed.py): refused
before anything is uploaded, unless AllowManagedNodeGroups=true."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import deploy
from tools.common import DeployError

from .test_deploy_clusters import REGION, _client, _cluster, _parameters
from .test_deploy_script import prebuilt_zip


def _deploy(tmp_path: Path, *more: str) -> list[str]:
    said: list[str] = []
    deploy.deploy(
        deploy.Options(
            cluster_name="prod", asg_names="prod-nodes", region=REGION,
            zip_path=prebuilt_zip(tmp_path), poll_seconds=0.01, check_wait_seconds=0.0,
            overrides=("CreateLifecycleHooks=false", *more), yes=True,
        ),
        said.append,
        sleep=lambda _: None,
    )  # fmt: skip
    return said


def test_managed_node_group__deploy_refused__allowed_on_request(
    moto_aws: None, tmp_path: Path
) -> None:
    _cluster("prod")
    _client("autoscaling").create_or_update_tags(
        Tags=[{"ResourceId": "prod-nodes", "ResourceType": "auto-scaling-group",
               "Key": "eks:nodegroup-name", "Value": "ng-1", "PropagateAtLaunch": False}]
    )  # fmt: skip

    with pytest.raises(DeployError, match="group prod-nodes: EKS managed node group ng-1"):
        _deploy(tmp_path)
    assert _client("cloudformation").describe_stacks()["Stacks"] == []

    said = "\n".join(_deploy(tmp_path, "AllowManagedNodeGroups=true"))

    assert "both terminate hooks fire together" in said
    assert _parameters("eks-node-drainer-prod")["AllowManagedNodeGroups"] == "true"
