"""The botocore session and the clients the drainer uses.

Clients are passed in, never created at import time; `make_clients` builds them
with bounded timeouts and botocore's standard retry mode, so a throttled call is
retried by botocore before it ever reaches drainer/aws/errors.py.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeAlias

from botocore.config import Config

from drainer.errors import AwsConfigError, AwsError

Client: TypeAlias = Any
"""A botocore client. Clients are generated at run time and no type stubs are pinned."""

CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5},
    connect_timeout=5,
    read_timeout=20,
)


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
        with _configuration():
            region = self._session.get_config_variable("region")
        return str(region) if region else None

    def client(
        self,
        service_name: str,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        config: Any = None,
    ) -> Any:
        with _configuration():
            return self._session.create_client(
                service_name,
                region_name=region_name or self.region_name,
                endpoint_url=endpoint_url,
                config=config,
            )

    def get_credentials(self) -> Any:
        with _configuration():
            return self._session.get_credentials()


@contextlib.contextmanager
def _configuration() -> Iterator[None]:
    """botocore's errors about this machine's AWS configuration, as one clear line."""
    from botocore.exceptions import ConfigParseError, ProfileNotFound

    try:
        yield
    except ProfileNotFound as e:
        profile = e.kwargs.get("profile", "")
        raise AwsConfigError(
            f"AWS profile {profile!r} (AWS_PROFILE) is not in ~/.aws/config or "
            f"~/.aws/credentials: create it (aws configure --profile {profile}), "
            "or unset AWS_PROFILE"
        ) from e
    except ConfigParseError as e:
        raise AwsConfigError(f"the AWS config file does not parse: {e}") from e


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
        scheduler: Callable[[], Client] | None = None,
        cloudformation: Callable[[], Client] | None = None,
    ) -> None:
        self.ec2 = ec2
        self.autoscaling = autoscaling
        self.eks = eks
        self._factories = {
            "lambda": lambda_,
            "elbv2": elbv2,
            "sns": sns,
            "scheduler": scheduler,
            "cloudformation": cloudformation,
        }
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

    @property
    def scheduler(self) -> Client:
        """Built the first time a drain is scheduled for later (a scheduled change)."""
        return self._lazy("scheduler")

    @property
    def cloudformation(self) -> Client:
        """Built the first time the stack's custom resource asks how its stack is."""
        return self._lazy("cloudformation")


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
        scheduler=lambda: client("scheduler"),
        cloudformation=lambda: client("cloudformation"),
    )
