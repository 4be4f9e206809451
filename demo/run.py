"""The demo's sequence: servers, cluster, scale-in, the function, the summary.

    kubesim (subprocess)  the Kubernetes API: nodes, workloads, budgets, volumes
    awssim  (subprocess)  moto + lifecycle actions: EC2, Auto Scaling, EKS, Lambda
    demo.runner (one subprocess per invocation)  drainer.handler.lambda_handler

The demo process itself only sets the scene, watches, and reports.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import string
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from awssim import ec2_events as spot
from awssim.world import create_target_group
from demo import forecast, template
from demo import summary as summaries
from demo.kube import Follower, admin, apply, merge_patch
from demo.observe import Observer
from demo.procs import Child, ChildError, Children
from demo.view import View, make_view, shown_path
from drainer.lifecycle.events_ec2 import Ec2Kind
from drainer.lifecycle.settings import Settings
from testbed.cluster import ApiClient, admin_client

ROOT = Path(__file__).resolve().parent.parent
RBAC_DIR = ROOT / "k8s-rbac"
CLUSTER = "demo"
ASG = "demo-workers"
REGION = "us-east-1"
ACCOUNT = "123456789012"
FUNCTION = "eks-node-drainer"
DRAINER_USER = "eks-node-drainer"
DRAINER_GROUP = "eks-node-drainer"
INSTANCE_TYPE = "m5.large"
# The function's asynchronous invoke config retries a failed invocation twice
# (template.yaml, AsyncInvokeConfig.MaximumRetryAttempts).
RETRIES = 2
MAX_INVOCATIONS = 50
# DRAIN_TIMEOUT_SECONDS' minimum; --stubborn-pdb starts the drain this much "earlier".
MIN_DRAIN_TIMEOUT = 60
SHUTDOWN_TAINT = "node.cloudprovider.kubernetes.io/shutdown"


class DemoError(Exception):
    """The demo itself could not go on (not a drain failure: those are results)."""


@dataclass(frozen=True)
class Options:
    nodes: int = 3
    pods_per_node: int = 2
    stubborn_pdb: bool = False
    timeout_policy: str = ""
    speed: float = 1.0
    plain: bool = False
    no_color: bool = False
    summary_json: Path | None = None
    logs: Path | None = None
    lambda_timeout: float | None = None
    spot: bool = False
    """A spot interruption warning instead of a scale-in; the terminate hook's event
    for the same instance follows while the drain runs."""
    health: bool = False
    """An AWS Health scheduled retirement of the instance instead of a scale-in; the
    hook's event follows the same way."""
    health_window_seconds: int = 600
    """--health: the retirement's window starts this long after AWS Health's event."""
    launch_hook: bool = False
    """The group first scales out by one: the new instance waits on the launch hook
    until its node is Ready, as in an instance refresh, before the scale-in."""
    warm_pool: bool = False
    """The group's warm pool keeps instances on scale-in: the drained instance stops in
    the pool, then comes back through the launch hook, which releases its node."""
    plan: bool = False
    """Before the drain, the command line's plan of the node; after it, the forecast
    against the drain as the demo measured it."""

    @property
    def ec2_trigger(self) -> str:
        """The EC2 event that begins the drain instead of a scale-in; empty for none."""
        if self.spot:
            return str(Ec2Kind.INTERRUPTION)
        return str(Ec2Kind.SCHEDULED_CHANGE) if self.health else ""

    def stubborn_timeout(self) -> float:
        """Seconds from the event to the drain timeout with --stubborn-pdb: long
        enough for everything but the stubborn pod to drain first (the web pods go
        one at a time, about 3.5 simulated seconds each)."""
        return min(
            float(MIN_DRAIN_TIMEOUT), max(8.0, (6.0 + 3.5 * self.pods_per_node) / self.speed)
        )


@dataclass
class Invocation:
    number: int
    handover: int
    seconds: float = 0.0
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    exit_status: int | None = None


@dataclass
class State:
    """What the run learned, for the summary."""

    options: Options
    logs: Path
    function: template.Function | None = None
    node: str = ""
    instance_id: str = ""
    nodes: dict[str, str] = field(default_factory=dict)  # instance -> node
    predicted_node: str = ""
    drain_marker: dict[str, Any] | None = None
    invocations: list[Invocation] = field(default_factory=list)
    lifecycle: dict[str, Any] = field(default_factory=dict)
    instance_state: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    """kubesim's request log of the function's Kubernetes user."""
    finished: float = 0.0
    launch: dict[str, Any] = field(default_factory=dict)
    """--launch-hook: the new instance, when it began and registered, the function's
    end line, its launch action."""
    warm: dict[str, Any] = field(default_factory=dict)
    """--warm-pool: the return from the pool: when it began and the instance booted,
    the function's end line, its launch action, the node as it was left."""
    plan: forecast.Plan | None = None
    """--plan: the node's plan, made before the drain."""


def _new_logs_dir(parent: Path) -> Path:
    """demo-logs/<date-time>/, with a suffix when two runs start in the same second."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = parent / stamp
    number = 1
    while path.exists():
        number += 1
        path = parent / f"{stamp}-{number}"
    return path


def _random(alphabet: str, length: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(length))


class Demo:
    def __init__(self, options: Options, stream: TextIO) -> None:
        self.options = options
        self.view: View = make_view(stream, plain=options.plain, no_color=options.no_color)
        logs = options.logs or _new_logs_dir(ROOT / "demo-logs")
        logs.mkdir(parents=True, exist_ok=True)
        self.state = State(options, logs)
        self.children = Children()
        # An EC2 event drains first; the terminate hook's invocation follows that drain.
        self.observer = Observer(self.view, hook_follows=bool(options.ec2_trigger))
        self.followers: list[Follower] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        # Credentials that exist only here: the local emulators accept them, AWS never sees them.
        self.access_key = "AKIA" + _random(string.ascii_uppercase + string.digits, 16)
        self.secret_key = _random(string.ascii_letters + string.digits, 40)
        self.kube: ApiClient | None = None
        self.aws: Any = None
        self.aws_url = ""
        self.session: Any = None
        self._event: dict[str, Any] = {}
        self.servers: list[Child] = []
        self._drainer_log = (logs / "function.log").open("a", encoding="utf-8")
        self._log_lock = threading.Lock()

    # -- the whole run ------------------------------------------------------------

    def run(self) -> int:
        started = time.monotonic()
        try:
            self._intro()
            self._start_servers()
            self._build_aws()
            self._build_cluster()
            if self.options.launch_hook:
                self._launch_replacement()
            if self.options.plan:
                self._plan()
            self._scale_in()
            self._drain()
            self._after()
            if self.options.warm_pool:
                self._back_from_the_warm_pool()
        finally:
            self._stop.set()
            for follower in self.followers:
                follower.stop()
            self.view.close()
            self.children.stop_all()
            self._drainer_log.close()
        self.state.finished = time.monotonic() - started
        summary = summaries.build(self.state, self.observer)
        summaries.render(self.view, summary)
        path = self.state.logs / "summary.json"
        path.write_text(json.dumps(summary, indent=2) + "\n")
        if self.options.summary_json is not None:
            self.options.summary_json.parent.mkdir(parents=True, exist_ok=True)
            self.options.summary_json.write_text(json.dumps(summary, indent=2) + "\n")
        return 0 if summary["checks_passed"] else 1

    def step(self, text: str) -> None:
        self.view.line("demo", text, "step")

    def _intro(self) -> None:
        o = self.options
        what = "an Auto Scaling group scales in"
        if o.spot:
            what = "EC2 takes a spot instance back"
        elif o.health:
            what = "AWS Health schedules an instance's retirement"
        self.view.text(
            f"eks-node-drainer demo: {what}, and the function's real handler drains the node",
            "step",
        )
        self.view.text(
            "Everything runs here: kubesim emulates the Kubernetes API, awssim (moto) emulates "
            "EC2, Auto Scaling, EKS and Lambda. No AWS account, no cluster.",
            "dim",
        )
        extras = []
        if o.stubborn_pdb:
            extras.append("a PodDisruptionBudget that never allows an eviction")
        if o.spot:
            extras.append("a spot interruption warning instead of a scale-in")
        if o.health:
            extras.append("an AWS Health scheduled retirement instead of a scale-in")
        if o.launch_hook:
            extras.append("a replacement held on the launch hook until its node is Ready")
        if o.warm_pool:
            extras.append("a warm pool: the instance stops in it, then comes back")
        if o.plan:
            extras.append("the plan of the node first, its forecast checked against the drain")
        if o.speed != 1.0:
            extras.append(f"simulated pod durations divided by {o.speed:g}")
        if extras:
            self.view.text("Options: " + "; ".join(extras) + ".", "dim")
        self.view.text(f"Logs: {shown_path(self.state.logs)}", "dim")
        self.view.text()

    # -- servers ------------------------------------------------------------------

    def _server_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def _start_servers(self) -> None:
        self.step("starting kubesim (Kubernetes API) and awssim (AWS APIs)")
        logs = self.state.logs
        kubeconfig = logs / "kubeconfig"
        argv = [
            sys.executable,
            "-m",
            "kubesim",
            "serve",
            "--kubeconfig",
            str(kubeconfig),
            "--speed",
            str(self.options.speed),
            "--cluster-name",
            CLUSTER,
        ]
        for manifest in self._rbac():
            argv += ["--apply", str(manifest)]
        self.servers = []
        kubesim = self.children.start(
            "kubesim",
            argv,
            log=logs / "kubesim.log",
            env=self._server_env(),
            cwd=ROOT,
            die_with_parent=True,
        )
        awssim = self.children.start(
            "awssim",
            [sys.executable, "-m", "awssim", "serve"],
            log=logs / "awssim.log",
            env=self._server_env(),
            cwd=ROOT,
            die_with_parent=True,
        )
        self.servers = [kubesim, awssim]
        # Imported while the servers start: boto3 and moto (under awssim and testbed)
        # take seconds; demo.scenario is imported later for the same reason.
        import boto3

        from awssim.client import AwsSimClient

        kube_url = kubesim.first_line(60)
        aws_url = awssim.first_line(60)
        self.kube = admin_client(kubeconfig)
        self.aws = AwsSimClient(aws_url, account_id=ACCOUNT, region=REGION)
        self.aws_url = aws_url
        self.session = boto3.Session(
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=REGION,
        )
        rbac = "k8s-rbac/ and k8s-rbac/plan/" if self.options.plan else "k8s-rbac/"
        self.view.line("demo", f"kubesim   {kube_url}  (RBAC from {rbac}, EKS IAM tokens)")
        self.view.line("demo", f"awssim    {aws_url}  (moto + lifecycle actions)")
        self._follow()

    def _rbac(self) -> list[Path]:
        """The drainer's ClusterRole and binding; with --plan, the optional role the
        plan's volume check reads PersistentVolumes with (k8s-rbac/plan/)."""
        found = sorted(RBAC_DIR.glob("*.yaml"))
        return found + (sorted((RBAC_DIR / "plan").glob("*.yaml")) if self.options.plan else [])

    def _follow(self) -> None:
        kube = self.kube
        assert kube is not None
        o = self.observer

        def error(message: str) -> None:
            self.view.line("demo", message, "warn")

        for path, sync, event in (
            ("/api/v1/nodes", o.sync_nodes, o.on_node),
            ("/api/v1/pods", o.sync_pods, o.on_pod),
            ("/apis/policy/v1/poddisruptionbudgets", o.sync_budgets, o.on_budget),
            ("/apis/storage.k8s.io/v1/volumeattachments", o.sync_attachments, o.on_attachment),
        ):
            self.followers.append(Follower(kube, path, sync, event, error).start())
        for follower in self.followers:
            if not follower.synced.wait(20):
                raise DemoError(f"could not list {follower.path} from kubesim")
        if self.view.live:
            self._thread(self._tick, "status")

    def _thread(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _tick(self) -> None:
        while not self._stop.wait(0.25):
            self.view.status(self.observer.status_text())

    # -- AWS ----------------------------------------------------------------------

    def _check_servers(self) -> None:
        for server in self.servers:
            if not server.running():
                raise DemoError(
                    f"{server.name} exited unexpectedly; see {shown_path(server.log_path)}:\n"
                    f"{server.tail(8)}"
                )

    def _client(self, service: str) -> Any:
        return self.session.client(service, endpoint_url=self.aws_url)

    def _build_aws(self) -> None:
        from awssim.world import create_node_group
        from demo import scenario as sc

        kube = self.kube
        assert kube is not None
        overrides = {}
        if self.options.timeout_policy:
            overrides["TIMEOUT_POLICY"] = self.options.timeout_policy
        if self.options.launch_hook or self.options.warm_pool:
            overrides["LAUNCH_HOOK"] = "true"
        if self.options.stubborn_pdb:
            overrides["DRAIN_TIMEOUT_SECONDS"] = str(MIN_DRAIN_TIMEOUT)
            # With TIMEOUT_POLICY=force the held pod is deleted when only its grace (at
            # most this) is left: 0, at the deadline itself, so that the short drain
            # first shows its hand-overs.
            overrides["FORCE_GRACE_PERIOD_SECONDS"] = "0"
        function = template.load(CLUSTER, ASG, overrides=overrides)
        self.state.function = function
        hook = function.hook
        ec2, autoscaling = self._client("ec2"), self._client("autoscaling")
        group = create_node_group(
            ec2,
            autoscaling,
            asg_name=ASG,
            size=self.options.nodes,
            hook_name=hook.name,
            heartbeat_timeout=hook.heartbeat_timeout,
            default_result=hook.default_result,
            cluster_name=CLUSTER,
            notification_metadata=hook.notification_metadata,
            instance_type=INSTANCE_TYPE,
        )
        if self.options.warm_pool:
            autoscaling.put_warm_pool(
                AutoScalingGroupName=ASG,
                PoolState="Stopped",
                InstanceReusePolicy={"ReuseOnScaleIn": True},
            )
            self._put_launch_hook()
        self.aws.point_cluster_at(CLUSTER, kube.url, base64.b64encode(kube.ca_pem).decode())
        admin(
            kube,
            "POST",
            "identities",
            {
                "access_key_id": self.access_key,
                "secret_access_key": self.secret_key,
                "arn": f"arn:aws:sts::{ACCOUNT}:assumed-role/{FUNCTION}/{FUNCTION}",
                "username": DRAINER_USER,
                "groups": [DRAINER_GROUP],
            },
        )
        self.view.line(
            "demo",
            f"Auto Scaling group {ASG}: {len(group.instance_ids)} x {INSTANCE_TYPE}, terminate "
            f"hook {hook.name} (HeartbeatTimeout {hook.heartbeat_timeout} s, DefaultResult "
            f"{hook.default_result})",
        )
        self.view.line(
            "demo",
            f"EKS cluster {CLUSTER} -> kubesim; the function's IAM role maps to Kubernetes "
            f"group {DRAINER_GROUP} (ClusterRole from k8s-rbac/)",
        )
        described = ec2.describe_instances(InstanceIds=list(group.instance_ids))
        instances = [i for r in described["Reservations"] for i in r["Instances"]]
        self._target_group([i["InstanceId"] for i in instances], instances[0]["VpcId"])
        nodes = []
        for instance in instances:
            name = instance["PrivateDnsName"]
            zone = instance["Placement"]["AvailabilityZone"]
            self.state.nodes[instance["InstanceId"]] = name
            nodes.append(sc.node_object(name, instance["InstanceId"], zone, INSTANCE_TYPE))
        apply(kube, nodes)
        groups = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[ASG])
        in_service = [
            i["InstanceId"]
            for i in groups["AutoScalingGroups"][0]["Instances"]
            if i["LifecycleState"] == "InService" and not i.get("ProtectedFromScaleIn")
        ]
        # Auto Scaling (and awssim) scale in the oldest instance first: that node gets
        # one of every kind of pod.
        self.state.predicted_node = self.state.nodes[in_service[0]]
        if not self.observer.wait_for(lambda: len(self.observer.nodes) == len(nodes), 15):
            raise DemoError("the nodes did not appear in kubesim")

    def _target_group(self, instances: list[str], vpc: str) -> None:
        """A target group as the AWS Load Balancer Controller makes one in instance
        mode: every node a target, outside the Auto Scaling group's own. The drain
        takes the instance out of it, and waits for its deregistration delay."""
        delay = max(1, round(5 / self.options.speed))
        create_target_group(
            self._client("elbv2"),
            "k8s-default-web",
            vpc=vpc,
            instances=instances,
            delay=delay,
            cluster=CLUSTER,
        )
        self.view.line(
            "demo",
            f"target group k8s-default-web (AWS Load Balancer Controller, instance mode): "
            f"every node a target, deregistration delay {delay} s",
        )

    # -- Kubernetes ------------------------------------------------------------------

    def _build_cluster(self) -> None:
        from demo import scenario as sc

        kube = self.kube
        assert kube is not None
        o = self.options
        scenario = sc.Scenario(
            nodes=o.nodes,
            pods_per_node=o.pods_per_node,
            stubborn_pdb=o.stubborn_pdb,
            tight_grace=o.plan,
        )
        self.step("deploying workloads")
        victim = self.state.predicted_node
        others = [n for n in self.state.nodes.values() if n != victim]
        timeout = 30.0
        # Setting the scene is not the demo: pods start 20 times faster until it is set.
        # Not with --plan: the plan's times to Ready are those of the pods now running.
        admin(kube, "POST", "speed", {"speed": o.speed * (1 if o.plan else 20)})
        apply(kube, sc.spread(scenario))
        expected = o.nodes + scenario.web_replicas
        self._settle(expected, timeout)
        for node in others:
            merge_patch(kube, f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}})
        try:
            placed = sc.on_the_node(scenario)
            apply(kube, placed)
            expected += 3 + (1 if o.stubborn_pdb else 0)
            self._settle(expected, timeout)
        finally:
            for node in others:
                merge_patch(kube, f"/api/v1/nodes/{node}", {"spec": {"unschedulable": None}})
        merge_patch(
            kube,
            "/apis/apps/v1/namespaces/kube-system/deployments/coredns",
            {"spec": {"replicas": 2}},
        )
        expected += 1
        self._settle(expected, timeout)
        admin(kube, "POST", "speed", {"speed": o.speed})
        self._show_cluster()

    def _settle(self, count: int, timeout: float) -> None:
        def ready() -> bool:
            return len(self.observer.pods) == count and self.observer.all_ready()

        if not self.observer.wait_for(ready, timeout):
            self._check_servers()
            raise DemoError(f"the workloads were not Ready within {timeout:.0f} s")

    def _show_cluster(self) -> None:
        self.view.line("demo", f"cluster {CLUSTER}: all pods Ready", "ok")
        for instance_id, node in sorted(self.state.nodes.items(), key=lambda kv: kv[1]):
            pods = self.observer.pods_on(node)
            names = ", ".join(_short(p) for p in pods)
            what = {
                "": "be scaled in",
                str(Ec2Kind.INTERRUPTION): "its spot warning comes",
                str(Ec2Kind.SCHEDULED_CHANGE): "be retired",
            }[self.options.ec2_trigger]
            mark = f"   <- next to {what}" if node == self.state.predicted_node else ""
            self.view.line("demo", f"  {node} ({instance_id}){mark}", "step" if mark else "info")
            self.view.line("demo", f"      {names}", "dim")

    # -- the plan, then the drain ----------------------------------------------------

    def _plan(self) -> None:
        """--plan: the command line's plan of the node to be drained, as the drainer
        identity, printed before the drain begins."""
        function = self.state.function
        assert function is not None
        node = self.state.predicted_node
        if not self.observer.wait_for(lambda: forecast.budgets_counted(self.observer), 15):
            raise DemoError("the budgets' status did not count their pods within 15 s")
        time_left = float(function.environment.get("DRAIN_TIMEOUT_SECONDS") or 3600)
        if self.options.stubborn_pdb:
            time_left = self.options.stubborn_timeout()
        chosen = forecast.flags(function.environment, time_left)
        self.step(f"the plan of {node}, before anything changes")
        try:
            plan = forecast.make(self.state.logs / "kubeconfig", node, chosen, self._server_env())
        except forecast.PlanError as e:
            raise DemoError(str(e)) from None
        self.state.plan = plan
        self.view.line(
            "plan",
            f"$ {plan.shown} (as the drainer identity; exit {plan.exit_code})",
        )
        for line in plan.table.splitlines():
            self.view.text(f"    {line}", "dim" if line.startswith("NODE") else "info")
        for note in plan.notes:
            self.view.line("plan", note, "warn")

    # -- the drain ------------------------------------------------------------------

    def _spot_warning(self) -> None:
        """EC2's interruption warning for the node the scenario filled."""
        node = self.state.predicted_node
        instance_id = next(i for i, n in self.state.nodes.items() if n == node)
        self._begin(instance_id, node)
        if self.options.health:
            self.view.line(
                "aws",
                f"AWS Health schedules the retirement of {instance_id} ({node}) in "
                f"{self.options.health_window_seconds // 60} minutes",
                "step",
            )
            self._event = spot.scheduled_change(
                ACCOUNT, REGION, [instance_id], starts_in=self.options.health_window_seconds
            )
        else:
            self.view.line(
                "aws",
                f"EC2 sends a spot interruption warning for {instance_id} ({node}): it "
                "reclaims the instance in 2 minutes",
                "step",
            )
            self._event = spot.interruption_warning(ACCOUNT, REGION, instance_id)
        self._thread(self._poll_aws, "awssim")

    def _begin(self, instance_id: str, node: str) -> None:
        """The instance and node the run is about, from now on watched."""
        self.state.instance_id = instance_id
        self.state.node = node
        self.observer.begin(node)
        self._note_claims()
        self.view.text()

    def _note_claims(self) -> None:
        assert self.kube is not None
        for volume in self.kube.call("GET", "/api/v1/persistentvolumes")["items"]:
            ref = (volume.get("spec") or {}).get("claimRef") or {}
            if ref:
                self.observer.claims_of[volume["metadata"]["name"]] = (
                    f"{ref.get('namespace')}/{ref.get('name')}"
                )

    def _put_launch_hook(self) -> str:
        """The group's launch hook, as the stack puts it with LaunchHook; its name."""
        function = self.state.function
        assert function is not None
        hook = Settings.from_env(function.environment).launch_hook_name
        self._client("autoscaling").put_lifecycle_hook(
            AutoScalingGroupName=ASG,
            LifecycleHookName=hook,
            LifecycleTransition="autoscaling:EC2_INSTANCE_LAUNCHING",
            HeartbeatTimeout=function.hook.heartbeat_timeout,
            DefaultResult="CONTINUE",
            NotificationMetadata=function.hook.notification_metadata,
        )
        return hook

    def _back_from_the_warm_pool(self) -> None:
        """--warm-pool: the drained instance stopped in the pool (its Node stays, with
        the cloud controller's shutdown taint); the group scales out from the pool, the
        instance boots, and the launch hook's invocation releases the node."""
        assert self.kube is not None
        node, instance = self.state.node, self.state.instance_id
        if self.state.instance_state != "stopped":
            said = f"{instance} is {self.state.instance_state}, not stopped in the warm pool"
            self.view.line("demo", said, "warn")
            return
        taint = {"key": SHUTDOWN_TAINT, "effect": "NoSchedule"}
        merge_patch(self.kube, f"/api/v1/nodes/{node}", {"spec": {"taints": [taint]}})
        self.view.line(
            "k8s",
            f"node {node} stays, cordoned: its instance is stopped in the warm pool (the cloud "
            f"controller taints it {SHUTDOWN_TAINT})",
        )
        back, events = self.aws.scale_out_from_warm_pool(ASG)
        if back != instance or not events:
            raise DemoError(f"the warm pool gave back {back}, not {instance}")
        self.view.line(
            "aws",
            f"{ASG} scales out from the warm pool: {instance} starts and waits in Pending:Wait "
            f"on launch hook {events[0]['detail']['LifecycleHookName']}",
            "step",
        )
        self.state.warm = {"began": time.time()}
        waiting = threading.Thread(
            target=self._invoke,
            args=(events[0], 0, 120.0, "EventBridge delivers the launch lifecycle event"),
            name="warm-pool",
            daemon=True,
        )
        waiting.start()
        time.sleep(1.0)  # the instance boots; the cloud controller removes the taint
        merge_patch(self.kube, f"/api/v1/nodes/{node}", {"spec": {"taints": None}})
        self.state.warm["booted"] = time.time()
        self.view.line("k8s", f"node {node} loses the shutdown taint ({instance} is running)")
        waiting.join(120)
        result = (self.state.invocations[-1].result or {}) if self.state.invocations else {}
        current = self.kube.call("GET", f"/api/v1/nodes/{node}")
        actions = [a for a in self.aws.actions() if a["instance_id"] == instance]
        self.state.warm.update(
            result=result,
            action=actions[-1] if actions else {},
            schedulable=not current["spec"].get("unschedulable"),
        )
        self.view.line(
            "lambda",
            f"launch: {result.get('message') or result.get('result')}; released: "
            f"{', '.join(result.get('released') or []) or 'nothing'}",
            "ok" if self.state.warm["schedulable"] else "warn",
        )

    def _launch_replacement(self) -> None:
        """--launch-hook: the group scales out by one, as an instance refresh launches a
        replacement first; the new instance waits in Pending:Wait while the function
        waits for its node, which registers a moment later (its kubelet starting)."""
        from demo import scenario as sc

        assert self.kube is not None
        hook = self._put_launch_hook()
        autoscaling = self._client("autoscaling")
        ec2 = self._client("ec2")
        group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[ASG])
        group = group["AutoScalingGroups"][0]
        known = {i["InstanceId"] for i in group["Instances"]}
        desired = group["DesiredCapacity"]
        autoscaling.set_desired_capacity(AutoScalingGroupName=ASG, DesiredCapacity=desired + 1)
        group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[ASG])
        (new,) = {i["InstanceId"] for i in group["AutoScalingGroups"][0]["Instances"]} - known
        event = self.aws.event_for(self.aws.begin_launch(ASG, new, hook))
        self.view.line(
            "aws",
            f"{ASG} scales out: desired capacity {desired} -> {desired + 1}; {new} waits in "
            f"Pending:Wait on launch hook {hook}",
            "step",
        )
        self.state.launch = {"instance_id": new, "began": time.time()}
        waiting = threading.Thread(
            target=self._invoke,
            args=(event, 0, 120.0, "EventBridge delivers the launch lifecycle event"),
            name="launch",
            daemon=True,
        )
        waiting.start()
        time.sleep(1.0)  # the instance boots; its kubelet registers the node
        instance = ec2.describe_instances(InstanceIds=[new])["Reservations"][0]["Instances"][0]
        name = instance["PrivateDnsName"]
        zone = instance["Placement"]["AvailabilityZone"]
        apply(self.kube, [sc.node_object(name, new, zone, INSTANCE_TYPE)])
        self.state.launch["registered"] = time.time()
        self.view.line("k8s", f"node {name} registers ({new}'s kubelet has started)")
        waiting.join(120)
        result = (self.state.invocations[-1].result or {}) if self.state.invocations else {}
        self.state.launch.update(result=result, completed=time.time())
        self.view.line(
            "lambda",
            f"launch: {result.get('message') or result.get('result')}; lifecycle result "
            f"{result.get('lifecycle_result')}",
            "ok" if result.get("result") == "joined" else "warn",
        )
        actions = [a for a in self.aws.actions() if a["instance_id"] == new]
        closed = actions[-1] if actions else {}
        self.view.line(
            "aws",
            f"CompleteLifecycleAction {closed.get('result')} for {new}: it goes InService",
            "ok" if closed.get("result") == "CONTINUE" else "warn",
        )
        self.state.launch["action"] = closed

    def _scale_in(self) -> None:
        if self.options.ec2_trigger:
            self._spot_warning()
            return
        autoscaling = self._client("autoscaling")
        before = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[ASG])
        desired = before["AutoScalingGroups"][0]["DesiredCapacity"]
        events = self.aws.scale_in(ASG, 1)
        if not events:
            raise DemoError("awssim returned no lifecycle event for the scale-in")
        event = events[0]
        instance_id = event["detail"]["EC2InstanceId"]
        node = self.state.nodes.get(instance_id, "")
        self._begin(instance_id, node)
        into_pool = event["detail"].get("Destination") == "WarmPool"
        self.view.line(
            "aws",
            f"{ASG} scales in: desired capacity {desired} -> {desired - 1}; {instance_id} "
            f"({node}) waits in {'Warmed:Pending:Wait' if into_pool else 'Terminating:Wait'} "
            f"on hook {event['detail']['LifecycleHookName']}"
            + (" (it goes to the warm pool, stopped, not terminated)" if into_pool else ""),
            "step",
        )
        if node != self.state.predicted_node:
            self.view.line(
                "demo", f"Auto Scaling picked {node}, not {self.state.predicted_node}", "warn"
            )
        self._event = event
        if self.options.stubborn_pdb:
            function = self.state.function
            assert function is not None
            ahead = MIN_DRAIN_TIMEOUT - self.options.stubborn_timeout()
            # The timeout counts from the event's time; a hand-over's claim of an
            # earlier start would not move it (the drain holds it against the node).
            began = datetime.fromtimestamp(time.time() - ahead, UTC)
            marker = {"time": began.isoformat(timespec="milliseconds"), "ahead": ahead}
            self.state.drain_marker = marker
            self._event = {**event, "time": marker["time"]}
            self.view.line(
                "demo",
                f"--stubborn-pdb: DRAIN_TIMEOUT_SECONDS={MIN_DRAIN_TIMEOUT} (its minimum); to "
                f"time out in {self.options.stubborn_timeout():.0f} s, the event's time is "
                f"set {ahead:.0f} s back, as if the instance began to wait then",
                "warn",
            )
        self._thread(self._poll_aws, "awssim")

    def _poll_aws(self) -> None:
        seen = {"heartbeat": 0, "complete": 0, "timeout": 0}
        while not self._stop.wait(0.3):
            try:
                for kind in seen:
                    calls = self.aws.calls(kind)
                    for call in calls[seen[kind] :]:
                        self._narrate_call(kind, call)
                    seen[kind] = len(calls)
            except Exception as e:  # awssim gone at the end: stop quietly
                if not self._stop.is_set():
                    self.view.line("demo", f"cannot read awssim's ledger: {e}", "warn")
                return

    def _narrate_call(self, kind: str, call: dict[str, Any]) -> None:
        instance = call.get("InstanceId") or self.state.instance_id
        if call.get("error"):
            self.observer.on_aws(f"{kind} call refused: {call['error']}", "warn")
        elif kind == "heartbeat":
            states = [
                a.get("transition", "") + "/" + a.get("destination", "")
                for a in self.aws.actions()
                if a.get("token") == call.get("LifecycleActionToken")
            ]
            waits = "Terminating:Wait"
            if states and states[0].endswith("/WarmPool"):
                waits = "Warmed:Pending:Wait"
            elif states and "LAUNCHING" in states[0]:
                waits = "Pending:Wait"
            self.observer.on_aws(f"RecordLifecycleActionHeartbeat: {instance} stays in {waits}")
        elif kind == "complete":
            result = call.get("LifecycleActionResult")
            self.observer.on_aws(
                f"CompleteLifecycleAction {result} for {instance}",
                "ok" if result == "CONTINUE" else "warn",
            )
        else:
            self.observer.on_aws(
                f"the hook timed out: {call.get('LifecycleActionResult')} applies", "warn"
            )

    def _function_env(self) -> dict[str, str]:
        function = self.state.function
        assert function is not None
        env = {
            name: os.environ[name]
            for name in ("PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT")
            if name in os.environ
        }
        env.update(function.environment)
        env.update(
            {
                # What Lambda sets for every function.
                "AWS_REGION": REGION,
                "AWS_DEFAULT_REGION": REGION,
                "AWS_LAMBDA_FUNCTION_NAME": FUNCTION,
                "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_mb),
                "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{FUNCTION}",
                "_HANDLER": function.handler,
                "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key,
                # Every AWS call goes to awssim, and no profile or instance role is read.
                "AWS_ENDPOINT_URL": self.aws_url,
                "AWS_CONFIG_FILE": "/dev/null",
                "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
                "AWS_EC2_METADATA_DISABLED": "true",
                "PYTHONPATH": str(ROOT),
                "PYTHONUNBUFFERED": "1",
            }
        )
        return env

    def _drain(self) -> None:
        function = self.state.function
        assert function is not None
        timeout = self.options.lambda_timeout or float(function.timeout_seconds)
        differs = {
            k: v
            for k, v in function.environment.items()
            if k in ("TIMEOUT_POLICY", "DRAIN_TIMEOUT_SECONDS")
        }
        settings = ", ".join(f"{k}={v}" for k, v in differs.items())
        self.view.line(
            "demo",
            f"function settings: {function.source} ({settings}); Lambda timeout {timeout:g} s",
        )
        if self.options.ec2_trigger:
            self._drain_spot(timeout)
            return
        payload: dict[str, Any] | None = self._event
        handover = 0
        while payload is not None:
            if len(self.state.invocations) >= MAX_INVOCATIONS:
                raise DemoError(f"more than {MAX_INVOCATIONS} invocations; giving up")
            invocation = self._invoke(payload, handover, timeout)
            payload = None
            popped = self.aws.pop_invocation()
            if popped is not None:
                handover += 1
                payload = popped["payload"]
                self.view.line(
                    "aws",
                    f"Lambda Invoke (asynchronous) queued by the function: hand-over {handover}",
                    "step",
                )
            elif invocation.error is not None:
                break

    def _drain_spot(self, timeout: float) -> None:
        """The warning's drain, and, while it runs, the terminate hook's event for the
        same instance (Auto Scaling replaces a reclaimed spot instance): the second
        invocation waits for the drain under way instead of starting another."""
        function = self.state.function
        assert function is not None and self.kube is not None
        trigger = self.options.ec2_trigger
        warning = threading.Thread(
            target=self._invoke,
            args=(self._event, 0, timeout, f"EventBridge delivers the {trigger} event"),
            name="spot-warning",
            daemon=True,
        )
        warning.start()
        deadline = time.monotonic() + 10
        while warning.is_alive() and time.monotonic() < deadline:
            node = self.kube.call("GET", f"/api/v1/nodes/{self.state.node}")
            if trigger in json.dumps(node["metadata"].get("annotations") or {}):
                break
            time.sleep(0.05)
        token = self.aws.begin_termination(ASG, self.state.instance_id, function.hook.name)
        self.view.line(
            "aws",
            f"{self.state.instance_id} also enters Terminating:Wait on hook {function.hook.name}",
            "step",
        )
        hook_event = self.aws.event_for(token)
        self._invoke(hook_event, 0, timeout, "EventBridge delivers the lifecycle event")
        warning.join()

    def _invoke(
        self, payload: dict[str, Any], handover: int, timeout: float, delivered: str = ""
    ) -> Invocation:
        attempt = 0
        request_id = str(uuid.uuid4())  # the delivery's: Lambda's retries keep it
        while True:
            number = len(self.state.invocations) + 1
            invocation = Invocation(number, handover)
            self.state.invocations.append(invocation)
            what = delivered or (
                "EventBridge delivers the lifecycle event" if number == 1 else "Lambda runs"
            )
            self.view.line("aws", f"{what}: invocation {number} of {FUNCTION}", "step")
            self._run_invocation(invocation, payload, timeout, request_id)
            if invocation.error is None:
                return invocation
            self.view.line(
                "lambda",
                f"invocation {number} failed: {invocation.error.get('errorType')}: "
                f"{invocation.error.get('errorMessage')}",
                "error",
            )
            attempt += 1
            if attempt > RETRIES:
                return invocation
            self.view.line(
                "aws", f"Lambda retries the event (retry {attempt} of {RETRIES})", "warn"
            )

    def _run_invocation(
        self, invocation: Invocation, payload: dict[str, Any], timeout: float, request_id: str
    ) -> None:
        function = self.state.function
        assert function is not None

        def on_line(line: str) -> None:
            with self._log_lock:
                self._drainer_log.write(line + "\n")
                self._drainer_log.flush()
            try:
                record = json.loads(line)
            except ValueError:
                return
            if not isinstance(record, dict):
                return
            if "lambda_result" in record:
                invocation.result = record["lambda_result"]
            elif "lambda_error" in record:
                invocation.error = record["lambda_error"]
            elif "_aws" in record:
                return  # the embedded-metric-format line
            elif "message" in record:
                self.observer.on_log(record)

        started = time.monotonic()
        child: Child = self.children.start(
            f"invocation-{invocation.number}",
            [
                sys.executable,
                "-m",
                "demo.runner",
                "--timeout",
                str(timeout),
                "--function-name",
                FUNCTION,
                "--account",
                ACCOUNT,
                "--memory",
                str(function.memory_mb),
                "--request-id",
                request_id,
            ],
            log=self.state.logs / "function-stderr.log",
            env=self._function_env(),
            cwd=ROOT,
            on_line=on_line,
            stdin=True,
        )
        child.send(json.dumps(payload))
        status = None
        while status is None:
            status = child.wait(0.2)
            self._check_servers()
            if status is None and time.monotonic() - started > timeout + 15:
                child.stop()
                status = child.wait(1) or -9
        self.children.forget(child)
        child.stop()
        invocation.exit_status = status
        invocation.seconds = time.monotonic() - started
        if invocation.result is None and invocation.error is None:
            invocation.error = {
                "errorType": "Runtime.ExitError",
                "errorMessage": f"the function exited with status {status}; "
                f"see {child.log_path}:\n{child.tail(8)}",
            }

    # -- after the function -----------------------------------------------------------

    def _after(self) -> None:
        actions = [a for a in self.aws.actions() if a["instance_id"] == self.state.instance_id]
        action = actions[-1] if actions else {}
        self.state.lifecycle = action
        assert self.kube is not None
        on_node = self.kube.call(
            "GET", "/api/v1/pods", query={"fieldSelector": f"spec.nodeName={self.state.node}"}
        )
        attachments = self.kube.call("GET", "/apis/storage.k8s.io/v1/volumeattachments")
        self.observer.end_budget_check(on_node["items"], attachments["items"])
        # The API server's own record of what the function asked for: evictions,
        # deletions and refusals, independent of the function's logs.
        recorded = admin(self.kube, "GET", "requests", {"user": DRAINER_USER})
        self.state.requests = list(recorded.get("requests") or [])
        time.sleep(0.4)  # let the ledger poller print the last call
        if action.get("closed_at") is None:
            function = self.state.function
            assert function is not None
            self.view.line(
                "aws",
                f"{self.state.instance_id} stays in Terminating:Wait: without a heartbeat, Auto "
                f"Scaling applies DefaultResult {function.hook.default_result} after the hook's "
                f"HeartbeatTimeout ({function.hook.heartbeat_timeout} s)",
                "warn",
            )
            return
        ec2 = self._client("ec2")
        described = ec2.describe_instances(InstanceIds=[self.state.instance_id])
        state = described["Reservations"][0]["Instances"][0]["State"]["Name"]
        self.state.instance_state = state
        self.observer.on_aws(f"{self.state.instance_id} {state}")
        if state in ("terminated", "shutting-down") and self.kube is not None:
            # What the cloud controller does once the instance is gone.
            self.observer.deleting_node()
            self.kube.call("DELETE", f"/api/v1/nodes/{self.state.node}")
            self.observer.wait_for(lambda: self.state.node not in self.observer.nodes, 5)
        self._wait_for_replacements()

    def _wait_for_replacements(self) -> None:
        """Give the evicted pods' controllers time to make them Ready elsewhere."""
        o = self.observer

        def replaced() -> bool:
            return all(
                f.replacement_ready_at is not None
                for f in o.fates.values()
                if f.evicted_at is not None and not f.daemon and f.owner_uid
            )

        if not o.wait_for(replaced, 10 + 20 / self.options.speed):
            self.view.line("demo", "not every evicted pod has a Ready replacement yet", "warn")


def _short(pod: dict[str, Any]) -> str:
    name = str(pod["metadata"]["name"])
    spec = pod.get("spec") or {}
    notes = []
    if any("persistentVolumeClaim" in v for v in spec.get("volumes") or []):
        notes.append("volume")
    if any("emptyDir" in v for v in spec.get("volumes") or []):
        notes.append("emptyDir")
    if spec.get("priorityClassName"):
        notes.append("critical")
    refs = pod["metadata"].get("ownerReferences") or []
    if any(r.get("kind") == "DaemonSet" for r in refs):
        notes.append("DaemonSet")
    if not refs:
        notes.append("no controller")
    return name + (f" ({', '.join(notes)})" if notes else "")


def install_signal_handlers() -> None:
    """SIGTERM and SIGHUP end the demo like Ctrl-C: through `finally`, children stopped."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)
    # Even when started with SIGINT ignored (a background job of a script): the demo
    # is interactive, and Ctrl-C must always stop it cleanly.
    signal.signal(signal.SIGINT, signal.default_int_handler)


def main(options: Options, stream: TextIO | None = None) -> int:
    install_signal_handlers()
    out = stream or sys.stdout
    demo = Demo(options, out)
    try:
        return demo.run()
    except KeyboardInterrupt:
        demo.view.close()
        out.write("\ninterrupted: kubesim, awssim and the function are stopped\n")
        out.flush()
        return 130
    except BrokenPipeError:  # the reader went away (`make demo | head`)
        return 1
    except (DemoError, ChildError) as e:
        demo.view.close()
        out.write(f"\ndemo failed: {e}\nlogs: {shown_path(demo.state.logs)}\n")
        out.flush()
        return 2
