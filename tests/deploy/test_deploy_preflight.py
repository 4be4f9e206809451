"""make preflight (tools/preflight.py) on a moto account: the cluster, its endpoint,
its authentication mode and its groups, each check with the command that fixes it."""

from __future__ import annotations

import os
import re
from typing import Any

import boto3
import pytest
from moto.core.models import DEFAULT_ACCOUNT_ID

from awssim.eks import set_cluster_config
from awssim.world import create_node_group
from tools import preflight, preflight_plan
from tools.common import connect
from tools.preflight_plan import GroupPlan, Where, plan_group, plan_rows

REGION = "us-east-1"
CLUSTER = "prod"


def _client(service: str) -> Any:
    return boto3.client(service, region_name=REGION)


def _cluster(mode: str = "API_AND_CONFIG_MAP", **vpc: Any) -> str:
    ec2 = _client("ec2")
    vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    _client("eks").create_cluster(
        name=CLUSTER,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": []},
    )
    set_cluster_config(
        DEFAULT_ACCOUNT_ID,
        REGION,
        CLUSTER,
        authentication_mode=mode,
        vpc_config={"vpcId": vpc_id, "endpointPublicAccess": True, **vpc},
    )
    return vpc_id


def _group(name: str, cluster: str = CLUSTER, hook: str = "eks-node-drainer", **tags: str) -> None:
    create_node_group(
        _client("ec2"), _client("autoscaling"), asg_name=name, size=0, hook_name=hook,
        cluster_name=cluster,
    )  # fmt: skip
    if tags:
        _client("autoscaling").create_or_update_tags(
            Tags=[
                {"ResourceId": name, "ResourceType": "auto-scaling-group", "Key": k,
                 "Value": v, "PropagateAtLaunch": False}
                for k, v in tags.items()
            ]
        )  # fmt: skip


def _run(*groups: str, **options: Any) -> list[preflight.Check]:
    return preflight.run(
        connect(REGION), preflight.Options(CLUSTER, tuple(groups), region=REGION, **options)
    )


def _row(checks: list[preflight.Check], what: str) -> preflight.Check:
    (found,) = [c for c in checks if c.what == what]
    return found


def test_good_group__managed_group__other_clusters_group__table_and_exit_1(
    moto_aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    _cluster()
    _group("nodes-good")
    _group("nodes-managed", **{"eks:nodegroup-name": "ng-1"})
    _group("nodes-staging", cluster="staging")

    code = preflight.main(
        ["--cluster-name", CLUSTER, "--asg-names", "nodes-good,nodes-managed,nodes-staging",
         "--region", REGION]
    )  # fmt: skip

    assert code == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"preflight for cluster {CLUSTER} in {REGION} (123456789012):"
    print(out)  # the table, for the record
    rows = {}
    for line in lines[1:]:
        row = re.match(r"(ok|warn|FAIL)\s+(.+?)\s{2,}", line)
        if row:
            rows[row.group(2)] = line
    assert rows["cluster prod"].startswith("ok ")
    assert rows["authentication mode"].startswith("ok ")
    assert rows["API endpoint"].startswith("ok ")
    assert rows["group nodes-good"].startswith("ok ")
    assert rows["group nodes-managed"].startswith("FAIL")
    assert "EKS managed node group ng-1" in rows["group nodes-managed"]
    assert rows["group nodes-staging"].startswith("FAIL")
    assert "belongs to cluster staging, not prod" in rows["group nodes-staging"]
    assert "fix: leave it out of ASG_NAMES" in out
    assert "2 check(s) block a deploy" in out


def test_only_good_groups__exit_0_ready(moto_aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    _cluster()
    _group("nodes-a")
    _group("nodes-b", **{"kubernetes.io/cluster/prod": "owned"})

    code = preflight.main(["--cluster-name", CLUSTER, "--asg-names", "nodes-a, nodes-b"])

    assert code == 0
    assert capsys.readouterr().out.rstrip().endswith("ready to deploy")


def test_no_such_cluster_or_group__blocks_with_the_command_to_list_them(moto_aws: None) -> None:
    checks = _run("nodes-missing")
    assert _row(checks, "cluster prod").status == preflight.Status.FAIL
    assert "aws eks list-clusters" in _row(checks, "cluster prod").fix
    assert _row(checks, "group nodes-missing").status == preflight.Status.FAIL


@pytest.mark.parametrize(
    ("mode", "access_entry", "status"),
    [
        ("API", True, preflight.Status.OK),
        ("API_AND_CONFIG_MAP", True, preflight.Status.OK),
        ("CONFIG_MAP", True, preflight.Status.FAIL),
        ("CONFIG_MAP", False, preflight.Status.WARN),
    ],
)
def test_authentication_mode__access_entries_need_api(
    moto_aws: None, mode: str, access_entry: bool, status: preflight.Status
) -> None:
    _cluster(mode)
    check = _row(_run(access_entry=access_entry), "authentication mode")
    assert check.status == status
    if status == preflight.Status.FAIL:
        assert "--access-config authenticationMode=API_AND_CONFIG_MAP" in check.fix


def test_private_endpoint__blocks_without_subnets__ok_with_the_clusters_subnets(
    moto_aws: None,
) -> None:
    vpc_id = _cluster(endpointPublicAccess=False, endpointPrivateAccess=True)
    ec2 = _client("ec2")
    inside = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    other_vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    outside = ec2.create_subnet(VpcId=other_vpc, CidrBlock="10.1.1.0/24")["Subnet"]["SubnetId"]

    without = _row(_run(), "API endpoint")
    assert without.status == preflight.Status.FAIL
    assert "SubnetIds=" in without.fix

    checks = _run(subnet_ids=(inside,))
    assert _row(checks, "API endpoint").status == preflight.Status.OK
    assert _row(checks, "subnets").status == preflight.Status.OK

    wrong = _row(_run(subnet_ids=(inside, outside)), "subnets")
    assert wrong.status == preflight.Status.FAIL
    assert outside in wrong.detail and vpc_id in wrong.detail


def test_public_endpoint_limited_to_some_addresses__warns(moto_aws: None) -> None:
    _cluster(publicAccessCidrs=["203.0.113.0/24"])
    check = _row(_run(), "API endpoint")
    assert check.status == preflight.Status.WARN
    assert "203.0.113.0/24" in check.detail


def test_another_terminate_hook__blocks__ours_is_fine(moto_aws: None) -> None:
    _cluster()
    _group("nodes-nth", hook="nth-termination")
    _group("nodes-ours")

    checks = _run("nodes-nth", "nodes-ours")

    other = _row(checks, "group nodes-nth hooks")
    assert other.status == preflight.Status.FAIL
    assert "nth-termination" in other.detail
    assert "delete-lifecycle-hook --auto-scaling-group-name nodes-nth" in other.fix
    assert _row(checks, "group nodes-ours hooks").status == preflight.Status.OK


def test_no_cluster_tag__warns_with_the_tag_command(moto_aws: None) -> None:
    _cluster()
    create_node_group(
        _client("ec2"), _client("autoscaling"), asg_name="nodes-untagged", size=0,
        hook_name="eks-node-drainer", cluster_tag="",
    )  # fmt: skip
    check = _row(_run("nodes-untagged"), "group nodes-untagged")
    assert check.status == preflight.Status.WARN
    assert "Key=eks:cluster-name,Value=prod" in check.fix


def test_missing_arguments__usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        preflight.main(["--cluster-name", "prod", "--asg-names", " , "])
    assert exited.value.code == 2
    assert "CLUSTER_NAME and ASG_NAMES are required" in capsys.readouterr().err


TAG = "eks-node-drainer/enabled=true"


def test_tag__tagged_groups_checked__another_clusters_left_alone__not_blocking(
    moto_aws: None,
) -> None:
    _cluster()
    _group("tagged-prod", **{"eks-node-drainer/enabled": "true"})
    _group("tagged-staging", cluster="staging", **{"eks-node-drainer/enabled": "true"})
    _group("untagged")

    checks = _run(asg_tag=TAG)

    assert _row(checks, "group tagged-prod").status == preflight.Status.OK
    assert _row(checks, "group tagged-prod hooks").status == preflight.Status.OK
    staging = _row(checks, "group tagged-staging")
    assert staging.status == preflight.Status.OK
    assert staging.detail == "tagged, but belongs to cluster staging, not prod: left alone"
    assert not [c for c in checks if "untagged" in c.what]
    assert preflight.blocking(checks) == []


def test_tag_on_no_group_yet__warns_with_the_tag_command(moto_aws: None) -> None:
    _cluster()

    check = _row(_run(asg_tag=TAG), f"tag {TAG}")

    assert check.status == preflight.Status.WARN
    assert "Key=eks-node-drainer/enabled,Value=true" in check.fix


def test_tag_only_from_the_command_line(moto_aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    _cluster()
    _group("tagged-prod", **{"eks-node-drainer/enabled": "true"})

    code = preflight.main(["--cluster-name", CLUSTER, "--asg-tag", TAG])

    assert code == 0
    assert "group tagged-prod" in capsys.readouterr().out


def _managed_group(name: str, nodegroup: str = "ng-1") -> None:
    """An EKS managed node group's Auto Scaling group as EKS makes it: its tags, and
    EKS's own two hooks (Terminate-LC-Hook with a heartbeat of 1800 s, Launch-LC-Hook)."""
    _group(name, hook="Terminate-LC-Hook", **{"eks:nodegroup-name": nodegroup})
    autoscaling = _client("autoscaling")
    autoscaling.put_lifecycle_hook(
        AutoScalingGroupName=name, LifecycleHookName="Terminate-LC-Hook",
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING", HeartbeatTimeout=1800,
        DefaultResult="CONTINUE",
    )  # fmt: skip
    autoscaling.put_lifecycle_hook(
        AutoScalingGroupName=name, LifecycleHookName="Launch-LC-Hook",
        LifecycleTransition="autoscaling:EC2_INSTANCE_LAUNCHING", HeartbeatTimeout=1800,
        DefaultResult="CONTINUE",
    )  # fmt: skip


def test_managed_node_group__refused_without_the_opt_in__never_told_to_delete_eks_hooks(
    moto_aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    _cluster()
    _managed_group("eks-ng-1-abcd")

    code = preflight.main(["--cluster-name", CLUSTER, "--asg-names", "eks-ng-1-abcd"])

    out = capsys.readouterr().out
    print(out)
    assert code == 1
    assert "EKS managed node group ng-1" in out
    assert "delete-lifecycle-hook" not in out
    assert "remove that tool" not in out
    group = _row(_run("eks-ng-1-abcd"), "group eks-ng-1-abcd")
    assert group.status == preflight.Status.FAIL
    assert "ALLOW_MANAGED_NODE_GROUPS=1" in group.fix
    hooks = _row(_run("eks-ng-1-abcd"), "group eks-ng-1-abcd hooks")
    assert hooks.status != preflight.Status.FAIL
    assert "Terminate-LC-Hook" in hooks.detail


def test_managed_node_group__with_the_opt_in__ready_saying_what_happens_when_both_fire(
    moto_aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    _cluster()
    _managed_group("eks-ng-1-abcd")

    code = preflight.main(
        ["--cluster-name", CLUSTER, "--asg-names", "eks-ng-1-abcd", "--allow-managed-node-groups"]
    )

    out = capsys.readouterr().out
    print(out)
    assert code == 0
    assert "delete-lifecycle-hook" not in out
    group = _row(_run("eks-ng-1-abcd", allow_managed=True), "group eks-ng-1-abcd")
    assert group.status == preflight.Status.WARN
    assert "both terminate hooks fire together" in group.detail
    assert "ABANDON" in group.detail


def test_managed_node_group_known_by_eks_hook_alone__refused(moto_aws: None) -> None:
    """A group that lost its eks:nodegroup-name tag is still known by EKS's hook."""
    _cluster()
    _group("renamed", hook="Terminate-LC-Hook")

    checks = _run("renamed")

    assert _row(checks, "group renamed").status == preflight.Status.FAIL
    assert "EKS managed node group" in _row(checks, "group renamed").detail
    assert "delete-lifecycle-hook" not in _row(checks, "group renamed hooks").fix


def test_managed_node_group_tagged__left_alone_without_the_opt_in__not_blocking(
    moto_aws: None,
) -> None:
    _cluster()
    _managed_group("eks-ng-1-abcd")
    _client("autoscaling").create_or_update_tags(
        Tags=[{"ResourceId": "eks-ng-1-abcd", "ResourceType": "auto-scaling-group",
               "Key": "eks-node-drainer/enabled", "Value": "true", "PropagateAtLaunch": False}]
    )  # fmt: skip

    checks = _run(asg_tag=TAG)

    row = _row(checks, "group eks-ng-1-abcd")
    assert row.status == preflight.Status.WARN
    assert "left alone" in row.detail
    assert preflight.blocking(checks) == []


def _kubeconfig(path: Any, ca_pem: bytes, server: str, *, as_file: bool = False) -> str:
    import base64

    import yaml

    cluster: dict[str, str] = {"server": server}
    if as_file:
        (path / "ca.crt").write_bytes(ca_pem)
        cluster["certificate-authority"] = "ca.crt"
    else:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "there",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "there", "context": {"cluster": "c", "user": "u"}}],
    }  # fmt: skip
    (path / "config").write_text(yaml.safe_dump(config))
    return str(path / "config")


def _cluster_ca(
    ca_pem: bytes, endpoint: str = "https://ABC.gr7.us-east-1.eks.amazonaws.com"
) -> None:
    import base64

    from awssim.eks import point_cluster_at

    point_cluster_at(
        DEFAULT_ACCOUNT_ID, REGION, CLUSTER, endpoint, base64.b64encode(ca_pem).decode()
    )


def test_kubeconfig_of_another_cluster__blocks__rbac_not_checked(
    moto_aws: None, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from kubesim.certs import generate

    _cluster()
    _cluster_ca(generate("prod-ca").ca_pem)
    elsewhere = _kubeconfig(tmp_path, generate("staging-ca").ca_pem, "https://127.0.0.1:6443")

    code = preflight.main(["--cluster-name", CLUSTER, "--asg-tag", TAG, "--kubeconfig", elsewhere])

    out = capsys.readouterr().out
    assert code == 1
    assert "ready to deploy" not in out
    check = _row(_run(asg_tag=TAG, kubeconfig=elsewhere), "kubeconfig")
    assert check.status == preflight.Status.FAIL
    assert "is not cluster prod" in check.detail
    assert "aws eks update-kubeconfig --name prod" in check.fix
    assert not [c for c in _run(asg_tag=TAG, kubeconfig=elsewhere) if c.what.startswith("RBAC")]


@pytest.mark.parametrize("as_file", [False, True], ids=["ca-data", "ca-file"])
def test_kubeconfig_through_a_tunnel__same_ca__passes(
    moto_aws: None, tmp_path: Any, as_file: bool
) -> None:
    """An SSH tunnel: another server address, the cluster's own CA (a bundle of two)."""
    from kubesim.certs import generate

    _cluster()
    ca = generate("prod-ca").ca_pem
    _cluster_ca(ca)
    tunnel = _kubeconfig(
        tmp_path, generate("old-ca").ca_pem + ca, "https://localhost:8443", as_file=as_file
    )

    identity = preflight.check_kubeconfig(
        _client("eks").describe_cluster(name=CLUSTER)["cluster"],
        preflight.Options(CLUSTER, (), kubeconfig=tunnel),
    )

    assert identity.status == preflight.Status.OK, identity
    assert "cluster prod's CA" in identity.detail


# --- the plan of each group (issue 40, item 5; on a cluster: tests/e2e/test_preflight_rbac.py)


def test_the_groups_planned__those_the_function_would_drain(moto_aws: None) -> None:
    _cluster()
    _group("nodes-good")
    _group("nodes-staging", cluster="staging")
    _managed_group("eks-ng-1-abcd")

    checks = _run("nodes-good", "nodes-staging", "eks-ng-1-abcd", "nodes-missing")

    assert [c.group for c in checks if c.group] == ["nodes-good"]
    opted_in = _run("nodes-good", "eks-ng-1-abcd", allow_managed=True)
    assert [c.group for c in opted_in if c.group] == ["nodes-good", "eks-ng-1-abcd"]


def test_plan_in_preflights_region__not_the_environments__which_is_left_as_it_was(
    moto_aws: None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """make preflight REGION=us-east-1 from a shell whose AWS_REGION is another: the
    plan looks the group up where preflight does. (A group with no instance: nothing
    to plan, and nothing asked of the cluster.)"""
    from kubesim.certs import generate

    _group("nodes-empty")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    kubeconfig = _kubeconfig(tmp_path, generate("prod-ca").ca_pem, "https://127.0.0.1:6443")

    plan = plan_group("nodes-empty", Where(kubeconfig, "", REGION))

    [row] = plan_rows(plan)
    assert (row.what, row.status) == ("plan nodes-empty", preflight.Status.OK)
    assert row.detail == (
        "nothing to plan: no node for any InService instance of Auto Scaling group nodes-empty"
    )
    assert os.environ["AWS_REGION"] == "eu-west-1"


def _planned(group: str, notes: list[str], **document: Any) -> GroupPlan:
    refresh = {
        "batch": 1, "instance_warmup_seconds": 30.0, "batches": [["n-1"], ["n-2"]],
        "waits_for_new_nodes": [False, False], "new_nodes": None,
    }  # fmt: skip
    whole = {
        "result": "planned",
        "nodes": [{"node": "n-1", "blockers": []}, {"node": "n-2", "blockers": []}],
        "total_eta_seconds": 75.0, "deadlocked": False, "refresh": refresh, **document,
    }  # fmt: skip
    return GroupPlan(group, 0, whole, notes)


def test_plans__the_optional_volume_read_denied__said_once_for_every_group__other_notes_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    denied = (
        "the zones of the volumes behind 1 PersistentVolumeClaim(s) ({}) are not checked: "
        "RBAC denies get persistentvolumes (grant it: kubectl apply -f k8s-rbac/plan/)"
    )
    plans = {
        "nodes-a": _planned("nodes-a", [denied.format("default/data-a")]),
        "nodes-b": _planned(
            "nodes-b",
            [
                "instance i-0bbbbbbbbbbbbbbb2 of nodes-b has no node: replaced without a drain",
                denied.format("default/data-b"),
            ],
        ),
    }
    monkeypatch.setattr(preflight_plan, "plan_group", lambda group, where: plans[group])

    rows = preflight_plan.check_plans(["nodes-a", "nodes-b"], Where("k", "", "r"))

    assert [(r.what, r.status) for r in rows] == [
        ("plan nodes-a", preflight.Status.OK),
        ("plan nodes-b", preflight.Status.OK),
        ("plan nodes-b", preflight.Status.WARN),
        ("plan volumes", preflight.Status.WARN),
    ]
    assert rows[0].detail == (
        "a refresh of 2 node(s), 2 batch(es) of up to 1 with a 30 s warm-up: forecast 75 s "
        "in all; nothing blocks"
    )
    assert rows[2].detail == (
        "note: instance i-0bbbbbbbbbbbbbbb2 of nodes-b has no node: replaced without a drain"
    )
    assert rows[3].detail == denied.format("default/data-a") + (" (and in 1 more group(s)' plans)")
    assert rows[3].fix.startswith("kubectl apply -f k8s-rbac/plan/")


def test_plan__aws_refuses_it__a_warning_naming_the_call__not_a_blocking_check() -> None:
    said = (
        "DescribeInstances i-0aaaaaaaaaaaaaaa1: access denied (AccessDenied); grant "
        "ec2:DescribeInstances to the function's IAM role"
    )
    document = {"result": "error", "message": said, "exit_code": 3}

    [row] = plan_rows(GroupPlan("nodes-a", 3, document))

    assert (row.what, row.status) == ("plan nodes-a", preflight.Status.WARN)
    assert row.detail == f"not planned: {said}"
    assert "ec2:DescribeInstances" in row.fix
    assert preflight.blocking([row]) == []


def test_plan__batches_wait_for_new_nodes__how_long_and_from_what() -> None:
    new_nodes = {"basis": "bound", "wait_seconds": 3600.0}
    plan = _planned("nodes-a", [], total_eta_seconds=3720.0)
    plan.document["refresh"].update(waits_for_new_nodes=[True, False], new_nodes=new_nodes)

    [row] = plan_rows(plan)

    assert row.detail == (
        "a refresh of 2 node(s), 2 batch(es) of up to 1 with a 30 s warm-up: forecast 3720 s "
        "(~62 min) in all, 1 batch(es) of it waiting for new nodes (3600 s each: a bound); "
        "nothing blocks"
    )
