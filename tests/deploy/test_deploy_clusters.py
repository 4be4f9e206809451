"""Several clusters (tools/stacks.py, tools/deploy.py) against moto: a stack per
cluster by default, the stack of before still found, a ClusterName change refused
unless asked for, and the change set shown, parameters before and after, and
executed only on a yes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import boto3
import pytest

from awssim.world import create_node_group
from tools import deploy, logs, stacks, undeploy
from tools.common import DeployError, connect

from .test_deploy_script import prebuilt_zip

REGION = "us-east-1"


def _client(service: str) -> Any:
    return boto3.client(service, region_name=REGION)


def _cluster(name: str) -> None:
    _client("eks").create_cluster(
        name=name,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": [], "endpointPublicAccess": True},
    )
    create_node_group(
        _client("ec2"), _client("autoscaling"), asg_name=f"{name}-nodes", size=0,
        hook_name="eks-node-drainer", cluster_name=name,
    )  # fmt: skip


def _deploy(
    tmp_path: Path,
    cluster: str,
    *more: str,
    answer: str = "",
    said: list[str] | None = None,
    **options: Any,
) -> str:
    """make deploy, in process; its output (also in `said`, for a deploy that raises).
    `answer`: what the person types at the question (none: --yes)."""
    said = [] if said is None else said

    def ask(question: str) -> str:
        said.append(question)
        return answer

    deploy.deploy(
        deploy.Options(
            cluster_name=cluster, asg_names=f"{cluster}-nodes", region=REGION,
            zip_path=prebuilt_zip(tmp_path), poll_seconds=0.01, check_wait_seconds=0.0,
            overrides=("CreateLifecycleHooks=false", *more), yes=not answer, **options,
        ),
        said.append,
        sleep=lambda _: None,
        ask=ask if answer else None,
    )  # fmt: skip
    return "\n".join(said)


def _parameters(stack: str) -> dict[str, str]:
    found = _client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
    return {p["ParameterKey"]: p["ParameterValue"] for p in found["Parameters"]}


def _stacks() -> set[str]:
    return {s["StackName"] for s in _client("cloudformation").describe_stacks()["Stacks"]}


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [("prod", "eks-node-drainer-prod"), ("prod-eu-1", "eks-node-drainer-prod-eu-1")],
)
def test_default_stack_name__the_clusters(cluster: str, expected: str) -> None:
    assert stacks.default_stack_name(cluster) == expected


def test_default_stack_name__a_100_character_cluster__fits_the_function_name() -> None:
    first, second = "c" * 99 + "1", "c" * 99 + "2"
    names = {stacks.default_stack_name(first), stacks.default_stack_name(second)}
    assert len(names) == 2
    for name in names:
        assert len(name) <= 64
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,63}", name)
    # '_' is no stack name's: replaced, and told apart from the cluster with '-'
    assert stacks.default_stack_name("prod_eu") != stacks.default_stack_name("prod-eu")
    assert "_" not in stacks.default_stack_name("prod_eu")


def test_second_cluster__its_own_stack__the_first_untouched__the_old_stack_still_found(
    moto_aws: None, tmp_path: Path
) -> None:
    _cluster("prod")
    _cluster("staging")
    # A stack of 0.1.0's time: the one default name, for prod.
    _deploy(tmp_path, "prod", stack_name="eks-node-drainer")

    again = _deploy(tmp_path, "prod", "DryRun=true")
    staging = _deploy(tmp_path, "staging")

    assert "using stack eks-node-drainer, deployed for cluster prod" in again
    assert _parameters("eks-node-drainer")["DryRun"] == "true"
    assert "creating stack eks-node-drainer-staging" in staging
    assert _stacks() == {"eks-node-drainer", "eks-node-drainer-staging"}
    assert _parameters("eks-node-drainer")["ClusterName"] == "prod"
    assert _parameters("eks-node-drainer-staging")["ClusterName"] == "staging"
    cfn = _client("cloudformation")
    assert stacks.resolve(cfn, "", "prod")[0] == "eks-node-drainer"
    assert stacks.resolve(cfn, "", "staging")[0] == "eks-node-drainer-staging"
    with pytest.raises(DeployError, match=r"several stacks.*CLUSTER_NAME=<cluster>"):
        stacks.resolve(cfn, "", "")


def test_cluster_name_change__refused_unless_asked__nothing_changed(
    moto_aws: None, tmp_path: Path
) -> None:
    _cluster("prod")
    _cluster("staging")
    _deploy(tmp_path, "prod", stack_name="drainer-prod")

    with pytest.raises(DeployError) as refused:
        _deploy(tmp_path, "staging", stack_name="drainer-prod")

    message = str(refused.value)
    assert "stack drainer-prod drains cluster prod" in message
    assert "CHANGE_CLUSTER=1" in message and "eks-node-drainer-staging" in message
    assert _parameters("drainer-prod")["ClusterName"] == "prod"

    # Asked for: past the refusal, to the change set (not executed here: moto cannot
    # update the stack's conditional rules in place).
    said: list[str] = []
    with pytest.raises(DeployError, match="not deployed"):
        _deploy(
            tmp_path, "staging", stack_name="drainer-prod", change_cluster=True, answer="n",
            said=said,
        )  # fmt: skip
    assert "    ClusterName: prod -> staging" in said
    assert _parameters("drainer-prod")["ClusterName"] == "prod"


def test_change_set__parameters_before_and_after__executed_only_on_yes(
    moto_aws: None, tmp_path: Path
) -> None:
    _cluster("prod")
    _deploy(tmp_path, "prod")

    said: list[str] = []
    with pytest.raises(DeployError, match="not deployed: the change set was not executed"):
        _deploy(tmp_path, "prod", "DrainTimeoutSeconds=7200", answer="no", said=said)
    text = "\n".join(said)

    assert "    DrainTimeoutSeconds: 3600 -> 7200" in said
    assert "ClusterName" not in text  # unchanged parameters are not listed
    assert text.index("DrainTimeoutSeconds: 3600 -> 7200") < text.index("Execute this change")
    assert _parameters("eks-node-drainer-prod")["DrainTimeoutSeconds"] == "3600"
    summaries = _client("cloudformation").list_change_sets(StackName="eks-node-drainer-prod")
    assert [c for c in summaries["Summaries"] if c["ExecutionStatus"] == "AVAILABLE"] == []

    _deploy(tmp_path, "prod", "DrainTimeoutSeconds=7200", answer="yes")

    assert _parameters("eks-node-drainer-prod")["DrainTimeoutSeconds"] == "7200"


def test_change_set__no_terminal_and_no_yes__refused_saying_so(
    moto_aws: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cluster("prod")
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)

    with pytest.raises(DeployError, match="YES=1"):
        deploy.deploy(
            deploy.Options(
                cluster_name="prod", asg_names="prod-nodes", region=REGION,
                zip_path=prebuilt_zip(tmp_path), poll_seconds=0.01,
            ),
            lambda _: None,
        )  # fmt: skip

    assert _stacks() == set()


def test_logs_and_undeploy__find_the_clusters_stack(
    moto_aws: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _cluster("prod")
    _deploy(tmp_path, "prod", stack_name="eks-node-drainer")

    assert logs.parse_args(["--cluster-name", "prod"]).cluster_name == "prod"
    lines: list[str] = []
    status = undeploy.undeploy(connect(REGION), undeploy.Options(cluster_name="prod"), lines.append)
    assert status == 0
    assert any("eks-node-drainer" in line for line in lines), lines


def test_two_deploys_in_one_second__each_its_own_change_set(
    moto_aws: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change set's name is unique even when two deploys start in the same second:
    CloudFormation refuses a second change set of the same name on a stack, and the
    declined deploy's clean-up must delete its own change set, not the one before."""
    second = deploy.time.gmtime()
    monkeypatch.setattr(deploy.time, "gmtime", lambda *_: second)
    _cluster("prod")
    _deploy(tmp_path, "prod")
    with pytest.raises(DeployError, match="not deployed"):
        _deploy(tmp_path, "prod", "DrainTimeoutSeconds=7200", answer="no")

    summaries = _client("cloudformation").list_change_sets(StackName="eks-node-drainer-prod")
    names = [c["ChangeSetName"] for c in summaries["Summaries"]]
    assert len(names) == len(set(names))
    assert [c for c in summaries["Summaries"] if c["ExecutionStatus"] == "AVAILABLE"] == []
