"""Fixtures for the deploy tests: the template, a moto stack of it, built zips."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from .cfn import TEMPLATE, load_template

STACK = "drainer-test"
CLUSTER = "prod-eu"
# The fixture events' group first, so tests/events/terminate.json matches.
ASGS = ("eks-workers-a", "eks-workers-b")
CODE_BUCKET = "drainer-code"
CODE_KEY = "eks-node-drainer/0123.zip"


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    return load_template()


@dataclass
class MotoStack:
    """A stack of template.yaml created by moto, and boto3 clients to look at it."""

    name: str
    parameters: dict[str, str]
    client: Callable[[str], Any]

    def outputs(self) -> dict[str, str]:
        stack = self.client("cloudformation").describe_stacks(StackName=self.name)["Stacks"][0]
        return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}

    def physical_id(self, logical: str) -> str:
        # list, not describe_stack_resource: moto's trips over the skipped resources
        summaries = self.client("cloudformation").list_stack_resources(StackName=self.name)
        (found,) = [
            r["PhysicalResourceId"]
            for r in summaries["StackResourceSummaries"]
            if r["LogicalResourceId"] == logical
        ]
        return str(found)


def tiny_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("drainer/__init__.py", "")
    return buffer.getvalue()


@pytest.fixture
def moto_stack(moto_aws: None, request: pytest.FixtureRequest) -> Iterator[MotoStack]:
    """template.yaml created by moto's CloudFormation with two groups, defaults else
    (parametrize indirectly with a dict of more parameters)."""
    import boto3

    def client(service: str) -> Any:
        return boto3.client(service, region_name="us-east-1")

    s3 = client("s3")
    s3.create_bucket(Bucket=CODE_BUCKET)
    s3.put_object(Bucket=CODE_BUCKET, Key=CODE_KEY, Body=tiny_zip())
    parameters = {
        "ClusterName": CLUSTER,
        "AsgNames": ",".join(ASGS),
        "CodeS3Bucket": CODE_BUCKET,
        "CodeS3Key": CODE_KEY,
        **getattr(request, "param", {}),
    }
    # As make deploy passes it: from S3 (the template is over the inline limit).
    s3.put_object(Bucket=CODE_BUCKET, Key="template.yaml", Body=TEMPLATE.read_bytes())
    with pytest.warns(UserWarning, match="not supported by moto"):
        client("cloudformation").create_stack(
            StackName=STACK,
            TemplateURL=f"https://s3.us-east-1.amazonaws.com/{CODE_BUCKET}/template.yaml",
            Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
            Capabilities=["CAPABILITY_IAM"],
        )
    yield MotoStack(STACK, parameters, client)
