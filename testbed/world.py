"""One emulated EKS cluster: Kubernetes nodes (on kubesim or the real control plane,
testbed.cluster) that are the instances of a moto Auto Scaling group with a
terminate lifecycle hook, the EKS cluster pointing at that API server, and the
drainer's IAM identity mapped to the Kubernetes group eks-node-drainer with
exactly the RBAC of k8s-rbac/."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import boto3

from awssim import AwsSim
from awssim import ec2_events as spot
from awssim.world import NodeGroup, create_node_group
from kubesim import DRAINER_GROUP, EksIdentity
from kubesim.testing import eventually
from testbed import workloads
from testbed.cluster import Cluster

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent
RBAC_DIR = ROOT / "k8s-rbac"
SHUTDOWN_TAINT = "node.cloudprovider.kubernetes.io/shutdown"
DRAINER_USER = "eks-node-drainer"


def rbac_manifests() -> list[dict[str, Any]]:
    import yaml

    documents: list[dict[str, Any]] = []
    for path in sorted(RBAC_DIR.glob("*.yaml")):
        documents.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return documents


# (verb, resource, subresource) of the drainer's first calls: the node, its pods' evictions.
_FIRST_CALLS = (("get", "nodes", ""), ("patch", "nodes", ""), ("create", "pods", "eviction"))


def drainer_may(cluster: Cluster, verb: str, resource: str, subresource: str = "") -> bool:
    """Whether the drainer's Kubernetes group may do it now, as the API server's
    authorizer answers (a SelfSubjectAccessReview as the harness's static drainer
    identity, a member of the same group: not the EKS identity whose requests the
    scenarios count)."""
    from testbed.cluster import ApiClient

    client = ApiClient(cluster.url, cluster.ca_pem, cluster.drainer_token)
    attributes = {"verb": verb, "resource": resource, "namespace": "default"}
    if subresource:
        attributes["subresource"] = subresource
    review = client.call(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        },
    )
    return bool(review["status"].get("allowed"))


class World:
    def __init__(
        self,
        cluster: Cluster,
        *,
        size: int = 3,
        region: str = "us-east-1",
        asg_name: str = "eks-workers",
        heartbeat_timeout: int = 300,
        node_capacity: int = 110,
        rbac: Iterable[dict[str, Any]] | None = None,
        node_names: str = "dns",
        global_timeout: int | None = None,
    ) -> None:
        """`node_names`: "dns" names nodes after the PrivateDnsName (the EKS default);
        "custom" gives them other names, so only the providerID finds them.
        `global_timeout`: the hook's GlobalTimeout, set explicitly (AWS derives it from
        the HeartbeatTimeout; see awssim's set_global_timeout)."""
        self.cluster = cluster
        self.region = region
        self.cluster_name = cluster.cluster_name
        session = boto3.Session(region_name=region)
        self.ec2 = session.client("ec2")
        self.autoscaling = session.client("autoscaling")
        self.aws = AwsSim(region=region)
        self.group: NodeGroup = create_node_group(
            self.ec2,
            self.autoscaling,
            asg_name=asg_name,
            size=size,
            heartbeat_timeout=heartbeat_timeout,
            cluster_name=self.cluster_name,
            notification_metadata=json.dumps({"cluster_name": self.cluster_name}),
        )
        if global_timeout is not None:
            self.aws.set_global_timeout(self.group.asg_name, self.group.hook_name, global_timeout)
        self.aws.point_cluster_at(self.cluster_name, cluster.url, cluster.ca_data)
        # The drainer signs its EKS token with whatever credentials boto3 finds
        # (moto's, in-process): map exactly those to the drainer's Kubernetes group.
        credentials = session.get_credentials()
        assert credentials is not None, "no AWS credentials for the drainer"
        if cluster.authenticator is None:
            raise RuntimeError(
                f"the {cluster.backend} backend cannot verify EKS tokens: no authenticator"
            )
        cluster.authenticator.identities.append(
            EksIdentity(
                credentials.access_key,
                credentials.secret_key,
                f"arn:aws:sts::123456789012:assumed-role/{DRAINER_USER}/lambda",
                DRAINER_USER,
                (DRAINER_GROUP,),
            )
        )
        cluster.apply(list(rbac) if rbac is not None else rbac_manifests())
        if rbac is None and cluster.drainer_token:
            # The API server's authorizer learns new RBAC objects from its informers,
            # a moment after they are written: the first drain of a test (its node
            # lookup's GET) must not meet the lag as a 403.
            eventually(
                lambda: all(drainer_may(cluster, *rule) for rule in _FIRST_CALLS),
                timeout=10.0,
                what="k8s-rbac/ in force for the drainer's group",
            )
        self.nodes: dict[str, str] = {}
        for instance_id in self.group.instance_ids:
            self.add_node(instance_id, node_capacity, node_names)

    def add_node(self, instance_id: str, capacity: int = 110, naming: str = "dns") -> str:
        described = self.ec2.describe_instances(InstanceIds=[instance_id])
        instance = described["Reservations"][0]["Instances"][0]
        dns = instance["PrivateDnsName"]
        zone = instance["Placement"]["AvailabilityZone"]
        name = dns if naming == "dns" else f"worker-{instance_id[-6:]}"
        labels = {"kubernetes.io/hostname": name} if naming != "dns" else {}
        self.cluster.apply(workloads.node(name, instance_id, zone, pods=capacity, labels=labels))
        self.nodes[instance_id] = name
        return name

    @property
    def instance_ids(self) -> tuple[str, ...]:
        return self.group.instance_ids

    def terminate(self, instance_id: str, age: float = 0.0) -> dict[str, Any]:
        """Put one instance in Terminating:Wait; the EventBridge event AWS would send.
        `age`: the lifecycle action began that many seconds ago (heartbeated since),
        and the event's time says so."""
        token = self.aws.begin_termination(
            self.group.asg_name, instance_id, self.group.hook_name, age
        )
        return self.aws.event_for(token)

    def launch(self, hook_name: str = "eks-node-drainer-launch") -> tuple[str, dict[str, Any]]:
        """A new instance of the group (no node yet) waiting in Pending:Wait on the
        launch hook `hook_name`, which the group is given; its id and the event."""
        self.put_launch_hook(hook_name)
        group = self.autoscaling.describe_auto_scaling_groups(
            AutoScalingGroupNames=[self.group.asg_name]
        )["AutoScalingGroups"][0]
        before = {i["InstanceId"] for i in group["Instances"]}
        self.autoscaling.set_desired_capacity(
            AutoScalingGroupName=self.group.asg_name,
            DesiredCapacity=group["DesiredCapacity"] + 1,
        )
        group = self.autoscaling.describe_auto_scaling_groups(
            AutoScalingGroupNames=[self.group.asg_name]
        )["AutoScalingGroups"][0]
        (new,) = {i["InstanceId"] for i in group["Instances"]} - before
        token = self.aws.begin_launch(self.group.asg_name, new, hook_name)
        return new, self.aws.event_for(token)

    def put_warm_pool(
        self, *, reuse_on_scale_in: bool = True, launch_hook: str = "eks-node-drainer-launch"
    ) -> None:
        """Give the group a warm pool of stopped instances (reused on scale-in: a
        scale-in then stops the instance instead of terminating it) and the launch
        hook that takes one back into service."""
        self.autoscaling.put_warm_pool(
            AutoScalingGroupName=self.group.asg_name,
            PoolState="Stopped",
            InstanceReusePolicy={"ReuseOnScaleIn": reuse_on_scale_in},
        )
        self.put_launch_hook(launch_hook)

    def put_launch_hook(self, name: str) -> None:
        """The launch lifecycle hook `name` on the group, as the stack puts it with
        LaunchHook (DefaultResult CONTINUE)."""
        self.autoscaling.put_lifecycle_hook(
            AutoScalingGroupName=self.group.asg_name,
            LifecycleHookName=name,
            LifecycleTransition="autoscaling:EC2_INSTANCE_LAUNCHING",
            HeartbeatTimeout=300,
            DefaultResult="CONTINUE",
        )

    def instance_stopped(self, instance_id: str) -> None:
        """What the cluster sees of an instance stopped in the warm pool: its Node stays
        (the instance still exists), with the cloud controller's shutdown taint. (The
        kubelet's Ready condition goes Unknown too, on a real cluster; kwok keeps its
        nodes Ready.)"""
        node = self.nodes[instance_id]
        taints = self.cluster.get("Node", node)["spec"].get("taints") or []
        if not any(t.get("key") == SHUTDOWN_TAINT for t in taints):
            taints = [*taints, {"key": SHUTDOWN_TAINT, "effect": "NoSchedule"}]
            self.cluster.client.patch("Node", node, {"spec": {"taints": taints}})

    def instance_started(self, instance_id: str) -> None:
        """The instance runs again: the cloud controller removes the shutdown taint."""
        node = self.nodes[instance_id]
        taints = self.cluster.get("Node", node)["spec"].get("taints") or []
        kept = [t for t in taints if t.get("key") != SHUTDOWN_TAINT]
        self.cluster.client.patch("Node", node, {"spec": {"taints": kept or None}})

    def launch_into_warm_pool(self) -> tuple[str, dict[str, Any]]:
        """A new instance being warmed for the pool, waiting on the launch hook: its id
        and the event (Origin EC2, Destination WarmPool)."""
        instance_id, events = self.aws.launch_into_warm_pool(self.group.asg_name)
        (event,) = events
        return instance_id, event

    def scale_out_from_warm_pool(self) -> tuple[str, dict[str, Any]]:
        """One instance of the warm pool back into service, waiting on the launch hook:
        its id and the event (Origin WarmPool)."""
        instance_id, events = self.aws.scale_out_from_warm_pool(self.group.asg_name)
        (event,) = events
        return instance_id, event

    def spot_warning(
        self, instance_id: str, age: float = 0.0, action: str = "terminate"
    ) -> dict[str, Any]:
        """The EC2 Spot Instance Interruption Warning for the instance, sent `age`
        seconds ago (EC2 reclaims it two minutes after; `action`: terminate, stop or
        hibernate)."""
        return spot.interruption_warning(
            self.aws.account_id, self.region, instance_id, age=age, action=action
        )

    def rebalance(self, instance_id: str) -> dict[str, Any]:
        """The EC2 Instance Rebalance Recommendation for the instance."""
        return spot.rebalance_recommendation(self.aws.account_id, self.region, instance_id)

    def scheduled_change(
        self, instance_ids: list[str], starts_in: float, age: float = 0.0
    ) -> dict[str, Any]:
        """AWS Health's scheduled retirement of the instances, its window starting
        `starts_in` seconds from now."""
        return spot.scheduled_change(
            self.aws.account_id, self.region, instance_ids, starts_in=starts_in, age=age
        )

    def state_change(self, instance_id: str, state: str, age: float = 0.0) -> dict[str, Any]:
        """EC2's state-change notification for the instance, sent `age` seconds ago."""
        return spot.state_change(self.aws.account_id, self.region, instance_id, state, age=age)

    def capacity_interruption(self, instance_id: str, age: float = 0.0) -> dict[str, Any]:
        """The interruptible capacity reservation's warning for the instance."""
        return spot.capacity_interruption(self.aws.account_id, self.region, instance_id, age=age)

    def scale_in(self, count: int = 1) -> list[dict[str, Any]]:
        return self.aws.scale_in(self.group.asg_name, count)

    def env(self, **overrides: Any) -> dict[str, str]:
        """The function's environment, as template.yaml would set it."""
        env = {"CLUSTER_NAME": self.cluster_name, "LOG_LEVEL": "INFO"}
        env.update({k: str(v) for k, v in overrides.items()})
        return env

    def process_env(self, aws_url: str, **overrides: Any) -> dict[str, str]:
        """env() for a handler in a process of its own (the Lambda runtime): AWS at
        `aws_url` (awssim served from this process), with the credentials the
        cluster's authenticator maps to the drainer (moto's while it mocks)."""
        return {
            "AWS_ENDPOINT_URL": aws_url,
            "AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
            "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"],
            **self.env(**overrides),
        }

    def completions(self) -> list[Mapping[str, Any]]:
        return [c for c in self.aws.calls("complete") if not c.get("error")]


def pods_on(cluster: Cluster, node: str) -> list[dict[str, Any]]:
    return cluster.client.list("Pod", fieldSelector=f"spec.nodeName={node}")


def is_pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def all_ready(cluster: Cluster, namespace: str = "") -> bool:
    pods = cluster.list("Pod", namespace)
    return all(is_pod_ready(p) and not p["metadata"].get("deletionTimestamp") for p in pods)


def wait_until(
    check: Callable[[], T], timeout: float = 10.0, interval: float = 0.02, what: str = ""
) -> T:
    """kubesim.testing.eventually, the one poll helper, with the scenarios' longer
    default timeout (a real control plane is slower than kubesim)."""
    return eventually(check, timeout=timeout, interval=interval, what=what)


def set_schedulable(cluster: Cluster, nodes: Iterable[str], schedulable: bool) -> None:
    for name in nodes:
        cluster.patch("Node", name, {"spec": {"unschedulable": None if schedulable else True}})


def workloads_ready(cluster: Cluster, objects: Iterable[dict[str, Any]]) -> bool:
    """Every workload among `objects` has all its replicas Ready (a real controller
    makes pods after the create returns: "every pod Ready" alone may hold of none)."""
    return not workloads_short(cluster, objects)


def not_ready(cluster: Cluster, objects: Iterable[dict[str, Any]]) -> list[str]:
    """What keeps `place_on` waiting, in words for its timeout's message: every pod
    not Ready or terminating (its phase, node and Ready condition's reason), then the
    workloads among `objects` short of Ready replicas."""
    waiting = []
    for pod in cluster.list("Pod"):
        metadata, status = pod["metadata"], pod.get("status") or {}
        if is_pod_ready(pod) and not metadata.get("deletionTimestamp"):
            continue
        ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
        why = (ready[0].get("reason") or ready[0].get("status")) if ready else "no Ready condition"
        going = " terminating" if metadata.get("deletionTimestamp") else ""
        waiting.append(
            f"pod {metadata.get('namespace')}/{metadata['name']}{going} "
            f"({status.get('phase')}, on {pod.get('spec', {}).get('nodeName') or 'no node'}: {why})"
        )
    return waiting + workloads_short(cluster, objects)


def workloads_short(cluster: Cluster, objects: Iterable[dict[str, Any]]) -> list[str]:
    """The workloads among `objects` (and bare pods) short of Ready replicas."""
    short = []
    for obj in objects:
        kind, metadata = obj.get("kind"), obj["metadata"]
        if kind not in ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Pod"):
            continue
        current = cluster.get(kind, metadata["name"], metadata.get("namespace", "default"))
        status = current.get("status") or {}
        if kind == "Pod":
            ready = is_pod_ready(current)
        elif kind == "DaemonSet":
            wanted = int(status.get("desiredNumberScheduled") or 0)
            ready = wanted > 0 and int(status.get("numberReady") or 0) == wanted
        else:
            wanted = int(current["spec"].get("replicas", 1))
            ready = int(status.get("readyReplicas") or 0) == wanted
        if not ready:
            short.append(f"{kind} {metadata['name']} (status {status or 'empty'})")
    return short


def node_tainted(cluster: Cluster, node: str) -> bool:
    """The node carries the unschedulable taint the scheduler goes by."""
    taints = cluster.get("Node", node)["spec"].get("taints") or []
    return any(t.get("key") == "node.kubernetes.io/unschedulable" for t in taints)


def place_on(world: World, node: str, objects: list[dict[str, Any]], timeout: float = 10.0) -> None:
    """Create objects while only `node` takes new pods, wait until they run, then
    open the other nodes again (and wait until the scheduler may use them): a way to
    put many replicas on the node to drain."""
    others = [n for n in world.nodes.values() if n != node]
    set_schedulable(world.cluster, others, False)
    # The scheduler goes by what its informers saw: wait until the node lifecycle
    # controller has tainted the cordoned nodes, by then the scheduler has seen them too.
    wait_until(lambda: all(node_tainted(world.cluster, n) for n in others), timeout)
    try:
        world.cluster.apply(objects)
        world.cluster.settle()

        def placed() -> bool:
            waiting = not_ready(world.cluster, objects)
            assert not waiting, f"not Ready after {timeout} s: {'; '.join(waiting)}"
            return True

        wait_until(placed, timeout)
    finally:
        set_schedulable(world.cluster, others, True)
    # As on the way in: the scheduler goes by the taint, which the node lifecycle
    # controller removes a moment later. A drain begun before that finds no node for
    # the replacements, and a budget that waits for them holds the drain meanwhile.
    wait_until(lambda: not any(node_tainted(world.cluster, n) for n in others), timeout)


def forget_instance(world: World, instance_id: str) -> None:
    """Make EC2 forget an instance (as after it was terminated long ago): an explicit
    reach into moto's EC2 backend, because no EC2 API call does that."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[DEFAULT_ACCOUNT_ID][world.region]
    for reservation in backend.reservations.values():
        reservation.instances = [i for i in reservation.instances if i.id != instance_id]
