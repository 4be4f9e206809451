"""Facts the docs state that the code knows: which AWS services the function calls
(a private cluster's VPC endpoints) and the values of the end line's `trigger`.
Each is derived from the code, so a new client or a new trigger fails here until
the docs name it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import botocore.session

import drainer
from drainer import aws
from drainer.aws.session import AwsClients
from drainer.lifecycle.events_ec2 import EC2_TRIGGERS
from drainer.lifecycle.events_hook import TERMINATE_HOOK_TRIGGER
from drainer.lifecycle.launch import LAUNCH_TRIGGER

from .cfn import ROOT
from .test_deploy_readme import OPERATIONS, REFERENCE, section

DRAIN_TRIGGERS = {TERMINATE_HOOK_TRIGGER, *EC2_TRIGGERS}
PRIVATE_CLUSTER = "## A private cluster: the function in your VPC"


class _Recording:
    """A ClientFactory that notes which services are asked for."""

    def __init__(self) -> None:
        self.services: list[str] = []

    def client(self, service_name: str, *args: Any, **kwargs: Any) -> object:
        self.services.append(service_name)
        return object()


def called_services() -> set[str]:
    """Every service the function builds a client of: make_clients's, the lazy
    ones included."""
    factory = _Recording()
    clients = aws.make_clients(factory, "eu-west-1")
    for name, member in vars(AwsClients).items():
        if isinstance(member, property):
            getattr(clients, name)
    return set(factory.services)


def test_the_function_builds_clients_only_in_make_clients() -> None:
    """A client made elsewhere would escape called_services(). The one other is the
    STS client that presigns the EKS token: presigning calls nothing (the API server
    sends the URL to STS), so it needs no endpoint."""
    sources = {
        path.relative_to(ROOT).as_posix(): path.read_text()
        for path in (ROOT / "drainer").rglob("*.py")
    }
    making = {
        path: re.findall(r"\.client\(\s*\"?(\w*)", text)
        for path, text in sources.items()
        if ".client(" in text
    }
    assert making == {"drainer/aws/session.py": ["service"], "drainer/aws/eks.py": ["sts"]}
    assert "generate_presigned_url" in sources["drainer/aws/eks.py"]


def test_the_private_cluster_section_names_an_endpoint_for_every_service_called() -> None:
    services = called_services()
    assert {"ec2", "autoscaling", "eks", "lambda", "elbv2", "sns", "scheduler"} <= services
    models = botocore.session.get_session()
    endpoints = section(OPERATIONS, PRIVATE_CLUSTER)
    missing = [
        service
        for service in sorted(services)
        if f"com.amazonaws.<region>.{models.get_service_model(service).endpoint_prefix}`"
        not in endpoints
    ]
    assert not missing, f"docs/operations.md ({PRIVATE_CLUSTER}) names no endpoint for {missing}"
    # The custom resource's answer goes to a presigned S3 URL.
    assert "com.amazonaws.<region>.s3`" in endpoints


def test_the_subnets_parameter_points_to_the_endpoint_list(template: dict[str, Any]) -> None:
    row = next(line for line in REFERENCE.splitlines() if line.startswith("| `SubnetIds`"))
    assert "operations.md#a-private-cluster-the-function-in-your-vpc" in row
    assert "docs/operations.md" in template["Parameters"]["SubnetIds"]["Description"]


def _triggers_named(text: str) -> set[str]:
    """The values a sentence gives for `trigger`: each code span after "`trigger`:"
    up to the closing parenthesis."""
    found: set[str] = set()
    for match in re.finditer(r"`trigger`: ([^)]*)\)", text):
        found |= set(re.findall(r"`([a-z-]+)`", match.group(1)))
    return found


def test_the_log_contract_names_every_trigger_of_a_drain() -> None:
    row = next(line for line in REFERENCE.splitlines() if line.startswith("| `drain_finished`"))
    assert _triggers_named(row) == DRAIN_TRIGGERS
    assert f"`trigger: {LAUNCH_TRIGGER}`" in REFERENCE


def test_the_operations_table_has_one_row_per_trigger() -> None:
    table = section(OPERATIONS, "## Every way EC2 takes a node away")
    rows = re.findall(r"^\| `([a-z-]+)`", table, re.MULTILINE)
    assert sorted(rows) == sorted(DRAIN_TRIGGERS | {LAUNCH_TRIGGER})


def test_every_trigger_value_the_docs_name_is_one_the_code_writes() -> None:
    known = DRAIN_TRIGGERS | {LAUNCH_TRIGGER}
    for document in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = document.read_text()
        named = _triggers_named(text) | set(re.findall(r"`trigger: ([a-z-]+)`", text))
        named |= set(re.findall(r'"trigger": "([a-z-]+)"', text))
        assert named <= known, f"{Path(document).name} names unknown triggers {named - known}"


def test_each_list_setting_says_what_empty_means() -> None:
    """An empty TARGET_GROUP_ARNS means no target group beyond the cluster's own
    (drainer/lifecycle/targets.py), not "any"; each list says what its empty is."""
    for name in ("ALLOWED_ASGS", "TARGET_GROUP_ARNS"):
        row = next(line for line in REFERENCE.splitlines() if line.startswith(f"| `{name}`"))
        assert "empty means any" not in row and "Empty" in row, row
    row = next(line for line in REFERENCE.splitlines() if line.startswith("| `TARGET_GROUP_ARNS`"))
    assert "elbv2.k8s.aws/cluster" in row


def test_the_newest_changelog_section_is_the_version_the_code_reports() -> None:
    """What is not released yet is the next version's, not an unnumbered section
    above the last release: a stack that deploys something new (an IAM action)
    reports a version of its own, and its upgrade notes are under that version."""
    changelog = (ROOT / "CHANGELOG.md").read_text()
    first = re.search(r"^## (.+)$", changelog, re.MULTILINE)
    assert first is not None and first.group(1).split()[0] == drainer.__version__, first
    notes = section(OPERATIONS, "## Upgrade notes")
    assert f"### {drainer.__version__}, from " in notes


def test_the_license_names_its_copyright_holder() -> None:
    license_text = (ROOT / "LICENSE").read_text()
    assert "Copyright 2026 The eks-node-drainer authors" in license_text
    assert "[name of copyright owner]" not in license_text
