"""What the operator tools (deploy, preflight, logs, undeploy, stacks) share: the
error that ends one with a message and an exit status, the AWS session of one run,
the edge that turns any failure into one line, and the repository's RBAC objects.
Apart from tools/deploy.py so that preflight, which deploy runs, does not import it
back (issue 39, item 7)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
Client = Any


class DeployError(Exception):
    """Stops the deploy; the message says what to do. `status` is the exit status."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def normalise_names(value: str) -> str:
    """ "ng-a, ng-b," -> "ng-a,ng-b": the template takes no spaces or empty names."""
    return ",".join(name.strip() for name in value.split(",") if name.strip())


@dataclass
class Aws:
    """The clients of one deploy, in one region, with the caller's credentials."""

    session: Any
    region: str
    account: str
    caller: str
    clients: dict[str, Client] = field(default_factory=dict)

    def client(self, service: str) -> Client:
        if service not in self.clients:
            self.clients[service] = self.session.client(service, region_name=self.region)
        return self.clients[service]


def connect(
    region: str, profile: str = "", *, unchanged: str = "nothing was uploaded or changed"
) -> Aws:
    """A session with a region and working credentials; DeployError (status 3) if not.
    `unchanged` says what a failure left alone ("" for a tool that changes nothing)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError, ProfileNotFound

    try:
        session = boto3.Session(profile_name=profile or None, region_name=region or None)
    except ProfileNotFound as e:
        raise DeployError(f"{e}; check AWS_PROFILE or ~/.aws/config", 3) from e
    # botocore reads AWS_DEFAULT_REGION and the profile; AWS_REGION is the other
    # common spelling (the AWS CLI v2, the SDKs of other languages).
    resolved = session.region_name or os.environ.get("AWS_REGION", "")
    if not resolved:
        raise DeployError(
            "no AWS region: pass REGION=eu-west-1 to make (or --region), or set AWS_REGION, "
            "or a region in your AWS profile",
            3,
        )
    try:
        identity = session.client("sts", region_name=resolved).get_caller_identity()
    except (BotoCoreError, ClientError) as e:
        raise DeployError(
            f"no usable AWS credentials ({type(e).__name__}: {e}). Configure them first "
            "(aws configure, AWS_PROFILE=..., or aws sso login) and check with "
            f"`aws sts get-caller-identity`{'; ' + unchanged if unchanged else ''}",
            3,
        ) from e
    return Aws(session, resolved, str(identity["Account"]), str(identity["Arn"]))


def rbac_documents() -> list[dict[str, Any]]:
    """k8s-rbac/'s objects, as this repository has them."""
    return [
        document
        for path in sorted((ROOT / "k8s-rbac").glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
        if document
    ]


def run_tool(
    prog: str, body: Callable[[], int], *, interrupted: str = "", on_ctrl_c: int = 130
) -> int:
    """The edge of every tool here (deploy, preflight, logs): `body`'s exit status,
    or one line for the DeployError, AWS error or Ctrl-C that ended it."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return body()
    except DeployError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return e.status
    except (BotoCoreError, ClientError) as e:
        print(f"{prog}: an AWS call failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if interrupted:
            print(f"\n{prog}: interrupted; {interrupted}", file=sys.stderr)
        return on_ctrl_c


def describe_stack(cfn: Client, stack_name: str) -> dict[str, Any] | None:
    """The stack as CloudFormation describes it; None when there is none."""
    from botocore.exceptions import ClientError

    try:
        stacks = cfn.describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as e:
        if "does not exist" in str(e):
            return None
        raise
    return dict(stacks[0]) if stacks else None
