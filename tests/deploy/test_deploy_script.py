"""make deploy (tools/deploy.py): it fails early and clearly, and deploys.

The failure paths need no network: parameters are checked before any AWS call,
and without credentials botocore stops before sending anything (the instance
metadata lookup is switched off, so nothing leaves the machine). The happy path
runs against `python -m awssim serve` (moto) on 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import boto3
import pytest

from tools import deploy, package

from .cfn import ROOT, TEMPLATE

SPEC = deploy.template_parameters(TEMPLATE.read_text())
REQUIRED = {"ClusterName": "prod-eu", "AsgNames": "eks-workers-a,eks-workers-b"}


def offline_env(home: Path, **extra: str) -> dict[str, str]:
    """No AWS configuration at all: no AWS_* credentials, an empty HOME, no IMDS."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "AWS_EC2_METADATA_DISABLED": "true",
        **extra,
    }


def run_deploy(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.deploy", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# --- parameters: checked before anything else --------------------------------------------


def collect(named: dict[str, str] | None = None, *overrides: str, params_file: Path | None = None):
    return deploy.collect_parameters(
        SPEC, params_file=params_file, named=named or {}, overrides=overrides
    )


@pytest.mark.parametrize(
    ("named", "overrides", "message"),
    [
        ({}, (), "missing CLUSTER_NAME (parameter ClusterName) and ASG_NAMES"),
        ({"ClusterName": "prod"}, (), "missing ASG_NAMES"),
        ({"AsgNames": "a"}, (), "missing CLUSTER_NAME"),
        (REQUIRED, ("DrainTimoutSeconds=10",), "unknown parameter(s) DrainTimoutSeconds"),
        (REQUIRED, ("CodeS3Key=x.zip",), "set by make deploy"),
        (REQUIRED, ("DrainTimeoutSeconds=10",), "DrainTimeoutSeconds='10': must be from 60"),
        (REQUIRED, ("TimeoutPolicy=maybe",), "must be one of continue, force, abandon"),
        (REQUIRED, ("Architecture=riscv",), "must be one of arm64, x86_64"),
        (REQUIRED, ("MemorySize=lots",), "must be a number"),
        (REQUIRED, ("DrainTimeoutSeconds=5400.5",), "'5400.5': must be a whole number"),
        (REQUIRED, ("HeartbeatTimeout=nan",), "HeartbeatTimeout='nan': must be a number"),
        (
            REQUIRED,
            ("FailureTopicArn=arn:aws:sns:eu-west-1:123456789012:failures.fifo",),
            "a standard SNS topic (not FIFO: Lambda cannot deliver failed invocations",
        ),
        (
            REQUIRED,
            (
                "AsgNames="
                + ",".join(f"eksctl-prod-nodegroup-ng-{i:03d}-NodeGroup-1A2B3C" for i in range(80)),
            ),
            "AsgNames: 80 groups take",
        ),
        ({"ClusterName": "prod"}, (), "missing ASG_NAMES (parameter AsgNames) or ASG_TAG"),
        (REQUIRED, ("AsgNames=a b",), "names separated by commas, without spaces"),
        (REQUIRED, ("AsgTag=enabled",), "AsgTag='enabled': key=value"),
        (REQUIRED, ('AsgTag=a"b=c',), "AsgTag='a\"b=c': key=value"),
        ({"ClusterName": "prod eu", "AsgNames": "a"}, (), "an EKS cluster name"),
        (REQUIRED, ("NoEquals",), "is not Key=Value"),
    ],
)
def test_bad_parameters_stop_the_deploy_naming_the_problem(
    named: dict[str, str], overrides: tuple[str, ...], message: str
):
    with pytest.raises(deploy.DeployError) as stopped:
        collect(named, *overrides)
    assert message in str(stopped.value)
    assert stopped.value.status == 2


def test_parameters_come_from_the_file_then_variables_then_pairs(tmp_path: Path):
    as_object = tmp_path / "params.json"
    as_object.write_text(json.dumps({**REQUIRED, "DrainTimeoutSeconds": 600, "DryRun": True}))
    assert collect(params_file=as_object) == {
        **REQUIRED,
        "DrainTimeoutSeconds": "600",
        "DryRun": "true",
    }
    as_cli_list = tmp_path / "cli.json"
    as_cli_list.write_text(
        json.dumps([{"ParameterKey": k, "ParameterValue": v} for k, v in REQUIRED.items()])
    )
    given = collect({"ClusterName": "staging"}, "LogLevel=DEBUG", params_file=as_cli_list)
    assert given == {**REQUIRED, "ClusterName": "staging", "LogLevel": "DEBUG"}


@pytest.mark.parametrize(
    "groups",
    [
        {"AsgTag": "eks-node-drainer/enabled=true"},
        {"AsgNames": "nodes-a", "AsgTag": "eks-node-drainer/enabled=true"},
        {"AsgNames": ",".join(f"nodes-{i}" for i in range(40))},
    ],
    ids=["tag-only", "names-and-tag", "forty-names"],
)
def test_groups_by_name_or_tag_or_both(groups: dict[str, str]):
    assert collect({"ClusterName": "prod", **groups}) == {"ClusterName": "prod", **groups}


def test_a_whole_number_with_a_decimal_point_is_taken():
    """As CloudFormation takes it; the function reads it as the integer it is."""
    given = collect(REQUIRED, "DrainTimeoutSeconds=5400.0", "KubeRequestTimeoutSeconds=2.5")
    assert (given["DrainTimeoutSeconds"], given["KubeRequestTimeoutSeconds"]) == ("5400.0", "2.5")


def test_describe_sync__says_where_the_hooks_are_and_what_was_left_alone():
    text = deploy.describe_sync(
        {
            "result": "hooks_synced",
            "groups": 2,
            "covered": ["nodes-a", "nodes-b"],
            "hooks_created": ["nodes-b"],
            "hooks_updated": {"nodes-a": ["HeartbeatTimeout"]},
            "skipped": {"staging": "tagged for cluster staging, not prod"},
            "failed": {},
        }
    )
    assert text.splitlines() == [
        "lifecycle hooks in place on 2 group(s): nodes-a, nodes-b",
        "  created on: nodes-b",
        "  corrected on: nodes-a",
        "  left alone: staging (tagged for cluster staging, not prod)",
    ]
    failed = deploy.describe_sync({"result": "sync_failed", "message": "could not invoke f"})
    assert failed.startswith("warning: the lifecycle hooks were not synced now (could not")
    assert "within 10 minutes" in failed


def test_group_names_are_trimmed_before_they_are_checked():
    given = collect({"ClusterName": "prod", "AsgNames": " nodes-a, nodes-b ,"})
    assert given["AsgNames"] == "nodes-a,nodes-b"


def test_a_parameters_file_that_is_not_json_is_a_clear_error(tmp_path: Path):
    broken = tmp_path / "params.json"
    broken.write_text("ClusterName=prod\n")
    with pytest.raises(deploy.DeployError, match="is not JSON"):
        collect(params_file=broken)


def test_make_deploy_without_parameters_fails_before_looking_for_credentials(tmp_path: Path):
    run = subprocess.run(
        ["make", "--no-print-directory", "deploy"],
        cwd=ROOT,
        env=offline_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode != 0
    assert "deploy: missing CLUSTER_NAME (parameter ClusterName) and ASG_NAMES" in run.stderr
    assert "credentials" not in run.stderr


# --- region and credentials ---------------------------------------------------------------


def test_no_region_is_a_clear_error(tmp_path: Path):
    run = run_deploy("--cluster-name", "prod", "--asg-names", "a", env=offline_env(tmp_path))
    assert run.returncode == 3
    assert "no AWS region: pass REGION=" in run.stderr


def test_no_credentials_stop_the_deploy_before_anything_is_built_or_uploaded(tmp_path: Path):
    env = offline_env(tmp_path, AWS_REGION="eu-west-1")
    run = run_deploy("--cluster-name", "prod", "--asg-names", "a", env=env)
    assert run.returncode == 3, run.stderr
    assert "no usable AWS credentials (NoCredentialsError" in run.stderr
    assert "nothing was uploaded or changed" in run.stderr
    assert "building" not in run.stdout


def test_a_stack_name_too_long_for_the_function_name_is_refused(tmp_path: Path):
    run = run_deploy(
        "--stack-name",
        "x" * 65,
        "--cluster-name",
        "p",
        "--asg-names",
        "a",
        env=offline_env(tmp_path),
    )
    assert run.returncode == 2
    assert "1 to 64 letters" in run.stderr


# --- the happy path against moto -----------------------------------------------------------


@pytest.fixture(scope="module")
def awssim_url() -> Iterator[str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "awssim", "serve"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        _the_account(url)
        yield url
    finally:
        server.terminate()
        server.wait(10)


def _the_account(url: str) -> None:
    """What make deploy's preflight looks for: the cluster and its node groups."""
    from awssim.world import create_node_group

    env = {"AWS_ENDPOINT_URL": url}
    client(env, "eks").create_cluster(
        name="prod-eu",
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": [], "endpointPublicAccess": True},
    )
    for name in ("eks-workers-a", "eks-workers-b", "nodes"):
        create_node_group(
            client(env, "ec2"), client(env, "autoscaling"), asg_name=name, size=0,
            hook_name="eks-node-drainer", cluster_name="prod-eu",
        )  # fmt: skip


def test_preflight_blocks__nothing_uploaded(moto_env: dict[str, str], tmp_path: Path):
    run = run_deploy(
        "--stack-name", "drainer-blocked", "--zip", str(prebuilt_zip(tmp_path)), "--yes",
        "--cluster-name", "prod-eu", "--asg-names", "eks-workers-a,no-such-group",
        env=moto_env,
    )  # fmt: skip
    assert run.returncode == 1
    assert "FAIL  group no-such-group" in run.stdout
    assert "1 preflight check(s) block the deploy: group no-such-group" in run.stderr
    assert "nothing was uploaded or changed" in run.stderr
    assert "uploading" not in run.stdout


def prebuilt_zip(directory: Path, arch: str = "arm64") -> Path:
    """A stand-in for build/eks-node-drainer.zip (moto never runs it) and its manifest."""
    path = directory / "eks-node-drainer.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("drainer/__init__.py", "")
    manifest = package.Manifest(
        zip=path.name,
        runtime="python3.13",
        architecture=arch,
        sha256=package.sha256(path),
        size=path.stat().st_size,
        unpacked_size=0,
        files=1,
        bytecode=False,
        distributions={},
    )
    package.manifest_path(path).write_text(json.dumps(asdict(manifest)))
    return path


@pytest.fixture
def moto_env(awssim_url: str, tmp_path: Path) -> dict[str, str]:
    return offline_env(
        tmp_path,
        AWS_ENDPOINT_URL=awssim_url,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_REGION="us-east-1",
    )


def client(env: dict[str, str], service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_deploy_creates_then_updates_the_stack_keeping_unchanged_parameters(
    moto_env: dict[str, str], tmp_path: Path
):
    zip_path = prebuilt_zip(tmp_path)
    common = (
        "--stack-name", "drainer-happy", "--zip", str(zip_path), "--poll-seconds", "0.05", "--yes",
    )  # fmt: skip
    # The server cannot run the function (moto would need Docker), so its self-check
    # fails: with hooks this deploy does not own, that is a warning, not a stop.
    # tests/e2e/test_deploy_flow.py runs the whole hooks-off, check, hooks-on path.
    first = run_deploy(
        *common,
        "--cluster-name", "prod-eu",
        "--asg-names", "eks-workers-a, eks-workers-b",
        "DrainTimeoutSeconds=7200", "CreateLifecycleHooks=false",
        env=moto_env,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "self-check failed: drainer-happy failed: error running docker" in first.stdout
    assert "warning: the function cannot drain yet" in first.stdout
    sha = package.read_manifest(zip_path).sha256
    bucket = "eks-node-drainer-123456789012-us-east-1"
    assert (
        f"uploading eks-node-drainer.zip (0.0 MB) to s3://{bucket}/eks-node-drainer/{sha}.zip"
        in first.stdout
    )
    assert "creating stack drainer-happy" in first.stdout
    assert "kubectl apply" in first.stdout and "-f k8s-rbac/" in first.stdout
    assert "make logs STACK_NAME=drainer-happy REGION=us-east-1 FOLLOW=1" in first.stdout
    assert "terminate-instance-in-auto-scaling-group" in first.stdout

    s3 = client(moto_env, "s3")
    assert s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"][
        "BlockPublicPolicy"
    ]
    function = client(moto_env, "lambda").get_function(FunctionName="drainer-happy")
    variables = {
        k: str(v) for k, v in function["Configuration"]["Environment"]["Variables"].items()
    }
    assert variables["ALLOWED_ASGS"] == "eks-workers-a,eks-workers-b"
    assert variables["DRAIN_TIMEOUT_SECONDS"] == "7200"

    second = run_deploy(
        *common, "--cluster-name", "prod-eu", "--asg-names", "eks-workers-a,eks-workers-b",
        "DryRun=true", env=moto_env,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert "is already uploaded" in second.stdout
    stack = client(moto_env, "cloudformation").describe_stacks(StackName="drainer-happy")["Stacks"][
        0
    ]
    parameters = {p["ParameterKey"]: p["ParameterValue"] for p in stack["Parameters"]}
    assert parameters["DrainTimeoutSeconds"] == "7200"  # kept from the first deploy
    assert parameters["DryRun"] == "true"
    assert parameters["CodeS3Key"] == f"eks-node-drainer/{sha}.zip"


def test_a_zip_for_the_other_architecture_is_refused_before_upload(
    moto_env: dict[str, str], tmp_path: Path
):
    zip_path = prebuilt_zip(tmp_path, arch="arm64")
    run = run_deploy(
        "--stack-name", "drainer-arch", "--zip", str(zip_path), "--yes",
        "--cluster-name", "prod-eu", "--asg-names", "nodes", "--arch", "x86_64", env=moto_env,
    )  # fmt: skip
    assert run.returncode == 1
    assert "was built for arm64, the stack runs on x86_64: make package ARCH=x86_64" in run.stderr
    assert "uploading" not in run.stdout


@pytest.mark.parametrize(
    ("tool", "said"),
    [("logs", ""), ("preflight", ""), ("undeploy", "nothing was deleted")],
)
def test_read_only_tools_without_credentials__do_not_claim_an_upload(
    tmp_path: Path, tool: str, said: str
):
    args = {"preflight": ["--cluster-name", "prod", "--asg-names", "a"]}.get(tool, [])
    run = subprocess.run(
        [sys.executable, "-m", f"tools.{tool}", *args],
        cwd=ROOT,
        env=offline_env(tmp_path, AWS_REGION="eu-west-1"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 3, run.stderr
    assert "no usable AWS credentials" in run.stderr
    assert "uploaded" not in run.stderr
    assert said in run.stderr
