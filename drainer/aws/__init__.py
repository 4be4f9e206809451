"""Every AWS call the drainer makes, and the translation of its errors.

Why a boundary: botocore raises one `ClientError` for everything, told apart only
by an error code string. The rest of the drainer should not know those strings, so
each call here catches them and raises a `drainer.errors` type whose message says
what to do (which IAM action to grant, which cluster and region were searched). The
original botocore error stays attached as `__cause__`.

Clients are passed in, never created at import time; `make_clients` builds them
with bounded timeouts and botocore's standard retry mode, so a throttled call is
retried by botocore before it ever reaches this module.

It is also the one place that decides whether an error is worth another try: a
throttled, failing or unreachable service is (`is_transient`: the handler raises
and Lambda retries the event); an answer that the same call gets again, an unknown
group or hook, a malformed id, a denied permission, is not (`is_permanent`, raised
as PermanentAwsError: the drain fails with the message, and the event is not
retried).
"""

from __future__ import annotations

import json
import logging
import random
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from drainer.backoff import Backoff
from drainer.errors import (
    AwsError,
    ClusterNotFound,
    DrainerError,
    InstanceNotFound,
    LifecycleActionGone,
    PermanentAwsError,
)
from drainer.lifecycle.events import LIFECYCLE_ACTION_MAX_SECONDS, LifecycleEvent

log = logging.getLogger(__name__)

Client: TypeAlias = Any
"""A botocore client. Clients are generated at run time and no type stubs are pinned."""

CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5},
    connect_timeout=5,
    read_timeout=20,
)
CLUSTER_NAME_TAG = "eks:cluster-name"
CLUSTER_TAG_PREFIX = "kubernetes.io/cluster/"
ASG_NAME_TAG = "aws:autoscaling:groupName"
LIFECYCLE_RESULTS = ("CONTINUE", "ABANDON")
MAX_GLOBAL_TIMEOUT = LIFECYCLE_ACTION_MAX_SECONDS
"""48 hours: the longest a lifecycle action may last, heartbeats or not."""
# EKS cluster names (CreateCluster's documented pattern).
_CLUSTER_NAME = re.compile(r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}")
_ACTION_GONE = "No active Lifecycle Action"
_ACCESS_DENIED = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedException"}
)
_TRANSIENT_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalFailure",
        "InternalError",
        "InternalServerError",
        "RequestTimeout",
        "RequestTimeoutException",
        "ServerException",
        "ServiceException",
        "EC2ThrottledException",
        "ResourceContention",
    }
)
# Answers of 4xx that another try may not meet: credentials that expired (the
# runtime refreshes them) or a request signed with a clock that drifted.
_RETRY_MAY_FIX = frozenset(
    {"ExpiredToken", "ExpiredTokenException", "RequestExpired", "IDPCommunicationError"}
)
AWS_FAILURES = (ClientError, BotoCoreError, ResponseParserError)
"""What a botocore call raises when AWS failed or refused: an answer with an error
code, no answer (connection, timeout), or an answer botocore could not read."""


class ClientFactory(Protocol):
    """What the drainer needs of a session: clients. A boto3.Session is one; so is
    `Session` below, which the Lambda uses."""

    def client(
        self,
        service_name: str,
        region_name: str | None = ...,
        endpoint_url: str | None = ...,
        config: Any = ...,
    ) -> Any: ...


class Session:
    """Clients straight from botocore, with boto3.Session's `client()` signature.

    boto3 adds nothing the drainer uses, and importing it costs about 0.1 s of cold
    start (it pulls in s3transfer). The same environment, credentials chain and
    AWS_ENDPOINT_URL apply: they are botocore's.
    """

    def __init__(self, region_name: str | None = None) -> None:
        import botocore.session

        self._session = botocore.session.get_session()
        if region_name:
            self._session.set_config_variable("region", region_name)

    @property
    def region_name(self) -> str | None:
        region = self._session.get_config_variable("region")
        return str(region) if region else None

    def client(
        self,
        service_name: str,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        config: Any = None,
    ) -> Any:
        return self._session.create_client(
            service_name,
            region_name=region_name or self.region_name,
            endpoint_url=endpoint_url,
            config=config,
        )

    def get_credentials(self) -> Any:
        return self._session.get_credentials()


class AwsClients:
    """The clients the drainer uses, built once per cold start. The Lambda client (a
    hand-over) and the ELBv2 client (target groups) are built the first time they are
    asked for."""

    def __init__(
        self,
        ec2: Client,
        autoscaling: Client,
        eks: Client,
        lambda_: Callable[[], Client],
        *,
        elbv2: Callable[[], Client] | None = None,
        sns: Callable[[], Client] | None = None,
    ) -> None:
        self.ec2 = ec2
        self.autoscaling = autoscaling
        self.eks = eks
        self._factories = {"lambda": lambda_, "elbv2": elbv2, "sns": sns}
        self._built: dict[str, Client] = {}
        self._lock = threading.Lock()

    def _lazy(self, service: str) -> Client:
        with self._lock:
            if service not in self._built:
                factory = self._factories[service]
                if factory is None:
                    raise AwsError(f"no {service} client was configured")
                self._built[service] = factory()
            return self._built[service]

    @property
    def lambda_(self) -> Client:
        return self._lazy("lambda")

    @property
    def elbv2(self) -> Client:
        """Built the first time a drain looks at target groups."""
        return self._lazy("elbv2")

    @property
    def sns(self) -> Client:
        """Built the first time a drain sends a notice."""
        return self._lazy("sns")


def make_clients(session: ClientFactory, region: str | None = None) -> AwsClients:
    """Clients with bounded timeouts and standard retries, in `region` or the session's."""

    def client(service: str) -> Client:
        return session.client(service, region_name=region, config=CLIENT_CONFIG)

    return AwsClients(
        ec2=client("ec2"),
        autoscaling=client("autoscaling"),
        eks=client("eks"),
        lambda_=lambda: client("lambda"),
        elbv2=lambda: client("elbv2"),
        sns=lambda: client("sns"),
    )


# --- error translation ------------------------------------------------------------


def error_code(error: BaseException) -> str:
    """The AWS error code of a ClientError ("" for anything else)."""
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code", ""))
    return ""


def _error_message(error: BaseException) -> str:
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Message", ""))
    return str(error)


def is_transient(error: BaseException) -> bool:
    """True for throttling, 5xx and connection failures: worth another try later.

    Looks through `__cause__`, so it works on the drainer errors raised here too.
    """
    cause = error.__cause__ if isinstance(error, DrainerError) else error
    if cause is None:
        return False
    if isinstance(cause, BotoCoreError | ResponseParserError):
        return True
    if isinstance(cause, ClientError):
        return error_code(cause) in _TRANSIENT_CODES or _status(cause) >= 500
    return False


def is_permanent(error: BaseException) -> bool:
    """True when the same call cannot succeed by being made again: an AWS answer
    below 500 that is neither throttling nor expired credentials (ValidationError for
    an unknown group or hook, InvalidInstanceID.Malformed, AccessDenied, ...), or a
    PermanentAwsError raised here without one (a hook the group does not have).

    Looks through `__cause__`, as `is_transient` does. An error that is neither
    (a bug, no cause at all) is not permanent: it is raised, as before.
    """
    if isinstance(error, PermanentAwsError):
        return True
    cause = error.__cause__ if isinstance(error, DrainerError) else error
    if not isinstance(cause, ClientError) or is_transient(cause):
        return False
    return error_code(cause) not in _RETRY_MAY_FIX and _status(cause) < 500


def _status(error: ClientError) -> int:
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def _aws_error(error: Exception, action: str, what: str) -> AwsError:
    """An AwsError for a failed `action` (an IAM action name) that says what to do; a
    PermanentAwsError when `is_permanent` says retrying cannot help. `error` is one
    of AWS_FAILURES."""
    kind = PermanentAwsError if is_permanent(error) else AwsError
    code = error_code(error)
    if code in _ACCESS_DENIED:
        return kind(f"{what}: access denied ({code}); grant {action} to the function's IAM role")
    if isinstance(error, BotoCoreError):
        return kind(
            f"{what}: {type(error).__name__}: {error} (after botocore's retries; "
            "check the network path to the AWS endpoint)"
        )
    if isinstance(error, ResponseParserError):
        first_line = str(error).splitlines()[0] if str(error) else ""
        return kind(f"{what}: AWS's answer could not be read: {first_line}")
    return kind(f"{what}: {code}: {_error_message(error)}")


aws_error = _aws_error
"""The same translation, for the modules that make their own calls (drainer/lifecycle/hooks.py)."""


# --- EC2: instance to node identity ----------------------------------------------


@dataclass(frozen=True)
class NodeIdentity:
    """What EC2 says about an instance that can identify its Kubernetes node."""

    instance_id: str
    private_dns_name: str
    """EC2's PrivateDnsName, e.g. ip-10-0-1-23.eu-west-1.compute.internal; "" once terminated."""
    availability_zone: str
    tags: Mapping[str, str] = field(default_factory=dict)
    """The instance's tags (an Auto Scaling group's instances carry
    aws:autoscaling:groupName, and the group's tags marked PropagateAtLaunch)."""

    @property
    def asg_name(self) -> str:
        """The Auto Scaling group the instance belongs to; "" when none."""
        return self.tags.get(ASG_NAME_TAG, "")

    @property
    def hostname_candidates(self) -> tuple[str, ...]:
        """Values a node's kubernetes.io/hostname label may have: (fqdn, short name)."""
        if not self.private_dns_name:
            return ()
        short = self.private_dns_name.split(".", 1)[0]
        if short == self.private_dns_name:
            return (self.private_dns_name,)
        return (self.private_dns_name, short)

    @property
    def provider_id_suffix(self) -> str:
        """A node's spec.providerID ends with this: aws:///<az>/<instance-id>."""
        return "/" + self.instance_id


def describe_instance(ec2: Client, instance_id: str) -> NodeIdentity:
    """The instance's DNS name and zone. InstanceNotFound when EC2 does not know it."""
    what = f"DescribeInstances {instance_id}"
    try:
        response = ec2.describe_instances(InstanceIds=[instance_id])
    except ClientError as e:
        if error_code(e) == "InvalidInstanceID.NotFound":
            raise InstanceNotFound(
                f"EC2 does not know instance {instance_id} in {ec2.meta.region_name} "
                "(already gone, or the function runs in another account or region)"
            ) from e
        raise _aws_error(e, "ec2:DescribeInstances", what) from e
    except AWS_FAILURES as e:
        raise _aws_error(e, "ec2:DescribeInstances", what) from e
    instances = [i for r in response.get("Reservations", []) for i in r.get("Instances", [])]
    if not instances:
        raise InstanceNotFound(
            f"EC2 returned no instance {instance_id} in {ec2.meta.region_name} "
            "(already gone, or the function runs in another account or region)"
        )
    instance = instances[0]
    return NodeIdentity(
        instance_id=instance_id,
        private_dns_name=instance.get("PrivateDnsName", "") or "",
        availability_zone=instance.get("Placement", {}).get("AvailabilityZone", ""),
        tags=tag_map(instance.get("Tags", [])),
    )


# --- Auto Scaling: hooks, tags, heartbeat, completion ------------------------------


@dataclass(frozen=True)
class HookInfo:
    """A lifecycle hook's timing and defaults, from DescribeLifecycleHooks."""

    name: str
    asg_name: str
    heartbeat_timeout: int
    """Seconds the instance waits without a heartbeat before DefaultResult applies."""
    default_result: str
    notification_metadata: str
    global_timeout: int | None
    """Seconds the action may last in all, heartbeats or not (min(100 x heartbeat, 48 h));
    None when DescribeLifecycleHooks does not say."""

    @property
    def global_timeout_seconds(self) -> int:
        """The GlobalTimeout, or AWS's rule for it when the answer has none."""
        if self.global_timeout is not None:
            return self.global_timeout
        return min(100 * self.heartbeat_timeout, MAX_GLOBAL_TIMEOUT)

    @property
    def heartbeat_interval(self) -> float:
        """How often to heartbeat: half the timeout, so one lost beat is survivable."""
        return self.heartbeat_timeout / 2


def describe_hook(autoscaling: Client, asg_name: str, hook_name: str) -> dict[str, Any] | None:
    """One lifecycle hook of an Auto Scaling group as Auto Scaling describes it;
    None when the group has no hook of that name."""
    what = f"DescribeLifecycleHooks {asg_name}/{hook_name}"
    try:
        response = autoscaling.describe_lifecycle_hooks(
            AutoScalingGroupName=asg_name, LifecycleHookNames=[hook_name]
        )
    except AWS_FAILURES as e:
        raise _aws_error(e, "autoscaling:DescribeLifecycleHooks", what) from e
    for hook in response.get("LifecycleHooks", []):
        if hook.get("LifecycleHookName") == hook_name:
            return dict(hook)
    return None


def lifecycle_hook(autoscaling: Client, asg_name: str, hook_name: str) -> HookInfo:
    """Describe one lifecycle hook of an Auto Scaling group."""
    hook = describe_hook(autoscaling, asg_name, hook_name)
    if hook is None:
        raise PermanentAwsError(
            f"DescribeLifecycleHooks {asg_name}/{hook_name}: Auto Scaling group {asg_name!r} "
            f"has no lifecycle hook {hook_name!r} (deleted while the instance waited?)"
        )
    global_timeout = hook.get("GlobalTimeout")
    return HookInfo(
        name=hook_name,
        asg_name=asg_name,
        heartbeat_timeout=int(hook.get("HeartbeatTimeout", 3600)),
        default_result=str(hook.get("DefaultResult", "ABANDON")),
        notification_metadata=str(hook.get("NotificationMetadata", "") or ""),
        global_timeout=int(global_timeout) if global_timeout is not None else None,
    )


def asg_tags(autoscaling: Client, asg_name: str) -> dict[str, str]:
    """The Auto Scaling group's tags; empty when the group does not exist (any more)."""
    try:
        response = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])
    except AWS_FAILURES as e:
        raise _aws_error(
            e, "autoscaling:DescribeAutoScalingGroups", f"DescribeAutoScalingGroups {asg_name}"
        ) from e
    for group in response.get("AutoScalingGroups", []):
        if group.get("AutoScalingGroupName") == asg_name:
            return tag_map(group.get("Tags", []))
    return {}


def tag_map(tags: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """EC2's or Auto Scaling's tag list ([{"Key": ..., "Value": ...}]) as a dict."""
    return {str(tag["Key"]): str(tag.get("Value", "")) for tag in tags}


def cluster_name_for(
    hook_metadata: str, asg_tags: Mapping[str, str], configured: str
) -> str | None:
    """Which EKS cluster the instance belongs to; None when nothing says.

    In order: the hook's NotificationMetadata (a plain cluster name, or JSON with
    "cluster_name"); the ASG tag eks:cluster-name; a kubernetes.io/cluster/<name> tag
    (when several, the configured one if among them, else only an unambiguous one);
    the CLUSTER_NAME setting.
    """
    from_metadata = _cluster_from_metadata(hook_metadata)
    if from_metadata:
        return from_metadata
    tagged = asg_tags.get(CLUSTER_NAME_TAG, "").strip()
    if tagged:
        return tagged
    owners = sorted(
        key.removeprefix(CLUSTER_TAG_PREFIX)
        for key in asg_tags
        if key.startswith(CLUSTER_TAG_PREFIX) and key != CLUSTER_TAG_PREFIX
    )
    if configured and configured in owners:
        return configured
    if len(owners) == 1:
        return owners[0]
    if len(owners) > 1:
        log.warning(
            "ASG tags name several clusters %s and CLUSTER_NAME does not pick one of them",
            owners,
        )
    return configured or None


def _cluster_from_metadata(metadata: str) -> str | None:
    text = metadata.strip()
    if not text:
        return None
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            log.warning("hook NotificationMetadata looks like JSON but is not; ignoring it")
            return None
        name = parsed.get("cluster_name") if isinstance(parsed, dict) else None
        if isinstance(name, str) and _CLUSTER_NAME.fullmatch(name.strip()):
            return name.strip()
        return None
    if _CLUSTER_NAME.fullmatch(text):
        return text
    return None


def _lifecycle_params(event: LifecycleEvent) -> dict[str, str]:
    return {
        "AutoScalingGroupName": event.asg_name,
        "LifecycleHookName": event.hook_name,
        "LifecycleActionToken": event.action_token,
        "InstanceId": event.instance_id,
    }


def record_heartbeat(autoscaling: Client, event: LifecycleEvent) -> None:
    """Extend the lifecycle action by the hook's HeartbeatTimeout.

    LifecycleActionGone when Auto Scaling no longer has the action (completed by
    someone else, or timed out): there is nothing left to keep alive.
    """
    what = f"RecordLifecycleActionHeartbeat {event.asg_name}/{event.instance_id}"
    try:
        autoscaling.record_lifecycle_action_heartbeat(**_lifecycle_params(event))
    except ClientError as e:
        if error_code(e) == "ValidationError" and _ACTION_GONE in _error_message(e):
            raise LifecycleActionGone(
                f"lifecycle action {event.action_token} of {event.instance_id} is no "
                f"longer active: {_error_message(e)}"
            ) from e
        raise _aws_error(e, "autoscaling:RecordLifecycleActionHeartbeat", what) from e
    except AWS_FAILURES as e:
        raise _aws_error(e, "autoscaling:RecordLifecycleActionHeartbeat", what) from e


def complete_lifecycle_action(autoscaling: Client, event: LifecycleEvent, result: str) -> bool:
    """Tell Auto Scaling to go on with CONTINUE or ABANDON.

    True when completed now; False when the action was already gone (a
    ValidationError: someone completed it, or it timed out), which is worth a log
    line but is not an error: the instance is going either way.
    """
    if result not in LIFECYCLE_RESULTS:
        raise ValueError(f"lifecycle action result must be CONTINUE or ABANDON, not {result!r}")
    what = f"CompleteLifecycleAction {event.asg_name}/{event.instance_id}"
    try:
        autoscaling.complete_lifecycle_action(
            **_lifecycle_params(event), LifecycleActionResult=result
        )
    except ClientError as e:
        if error_code(e) == "ValidationError":
            log.warning(
                "lifecycle action of %s was already gone when completing with %s: %s",
                event.instance_id,
                result,
                _error_message(e),
            )
            return False
        raise _aws_error(e, "autoscaling:CompleteLifecycleAction", what) from e
    except AWS_FAILURES as e:
        raise _aws_error(e, "autoscaling:CompleteLifecycleAction", what) from e
    return True


# --- EKS ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterInfo:
    """How to reach an EKS cluster's API server."""

    name: str
    endpoint: str
    certificate_authority_data: str
    """The cluster CA bundle, base64 (PEM inside), as EKS returns it."""
    status: str
    arn: str


def describe_cluster(eks: Client, name: str) -> ClusterInfo:
    """The cluster's endpoint and CA. ClusterNotFound names the cluster and region."""
    region = eks.meta.region_name
    try:
        cluster = eks.describe_cluster(name=name)["cluster"]
    except ClientError as e:
        if error_code(e) == "ResourceNotFoundException":
            raise ClusterNotFound(
                f"EKS cluster {name!r} not found in {region}; check the hook's "
                f"NotificationMetadata, the ASG's {CLUSTER_NAME_TAG} tag or CLUSTER_NAME"
            ) from e
        raise _aws_error(e, "eks:DescribeCluster", f"DescribeCluster {name} in {region}") from e
    except AWS_FAILURES as e:
        raise _aws_error(e, "eks:DescribeCluster", f"DescribeCluster {name} in {region}") from e
    return ClusterInfo(
        name=str(cluster.get("name", name)),
        endpoint=str(cluster.get("endpoint", "")),
        certificate_authority_data=str(cluster.get("certificateAuthority", {}).get("data", "")),
        status=str(cluster.get("status", "")),
        arn=str(cluster.get("arn", "")),
    )


# --- Lambda -------------------------------------------------------------------------


def invoke_self_async(lambda_client: Client, function_arn: str, payload: Mapping[str, Any]) -> None:
    """Queue an asynchronous invocation of `function_arn` (the drain's hand-over)."""
    what = f"Invoke {function_arn} (asynchronous hand-over)"
    try:
        response = lambda_client.invoke(
            FunctionName=function_arn,
            InvocationType="Event",
            Payload=json.dumps(payload).encode(),
        )
    except AWS_FAILURES as e:
        raise _aws_error(e, "lambda:InvokeFunction", what) from e
    status = int(response.get("StatusCode", 0))
    if status != 202:
        raise AwsError(f"{what}: Lambda answered {status}, expected 202 (queued)")


# --- heartbeat ticker ---------------------------------------------------------------


def _wait_on(stopped: threading.Event, seconds: float) -> bool:
    return stopped.wait(seconds)


class Heartbeat:
    """Keeps a lifecycle action alive while the drain works.

    Beats at once, then every `interval` seconds (pass half the hook's
    HeartbeatTimeout), in a daemon thread, until `stop()`. Stops by itself when the
    action is gone. A failed beat (throttling, 5xx, connection error, after
    botocore's own retries) is logged and retried sooner, after
    min(interval, retry_after) seconds with jitter and no growth (a longer pause
    could let the hook time out), so one bad minute does not lose the action; it
    never kills the ticker.

    `wait(stopped, seconds)` returns True when stopped; tests inject one to see the
    delays asked for without sleeping through them.
    """

    def __init__(
        self,
        autoscaling: Client,
        event: LifecycleEvent,
        interval: float,
        *,
        retry_after: float = 10.0,
        wait: Callable[[threading.Event, float], bool] = _wait_on,
        rng: random.Random | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"heartbeat interval must be positive, not {interval}")
        self._autoscaling = autoscaling
        self._event = event
        self._interval = interval
        pause = min(interval, retry_after)
        self._retry = Backoff(first=pause, cap=pause)
        self._wait = wait
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._beats = 0
        self._failures = 0
        self._gone = False
        self._thread: threading.Thread | None = None

    @property
    def beats(self) -> int:
        """Heartbeats recorded successfully so far."""
        with self._lock:
            return self._beats

    @property
    def failures(self) -> int:
        """Heartbeats that failed (and were retried)."""
        with self._lock:
            return self._failures

    @property
    def gone(self) -> bool:
        """True when the ticker stopped because the lifecycle action no longer exists."""
        with self._lock:
            return self._gone

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> Heartbeat:
        if self._thread is not None:
            raise RuntimeError("heartbeat already started")
        self._thread = threading.Thread(
            target=self._run, name=f"heartbeat-{self._event.instance_id}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop ticking; waits at most `timeout` seconds for a beat in flight."""
        self._stopped.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        delay = 0.0
        while not self._wait(self._stopped, delay):
            try:
                record_heartbeat(self._autoscaling, self._event)
            except LifecycleActionGone as gone:
                with self._lock:
                    self._gone = True
                log.info("heartbeat stopped: %s", gone)
                return
            except Exception as error:
                with self._lock:
                    self._failures += 1
                    failures = self._failures
                delay = self._retry.delay(failures - 1, self._rng)
                level = logging.WARNING if is_transient(error) else logging.ERROR
                log.log(
                    level,
                    "heartbeat for %s failed, retrying in %.1f s: %s",
                    self._event.instance_id,
                    delay,
                    error,
                )
                continue
            with self._lock:
                self._beats += 1
            delay = self._interval
            log.debug("heartbeat %d recorded for %s", self.beats, self._event.instance_id)
