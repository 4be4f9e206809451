"""`AwsSimClient`: `AwsSim`'s methods over the admin API of `python -m awssim serve`."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, cast

DEFAULT_ACCOUNT_ID = "123456789012"  # moto's; not imported from it, to keep this module light
DEFAULT_REGION = "us-east-1"


class AwsSimError(Exception):
    """The awssim server refused an admin request."""


class AwsSimClient:
    """Talks to a running awssim server; `url` is the line it printed first."""

    def __init__(
        self,
        url: str,
        account_id: str = DEFAULT_ACCOUNT_ID,
        region: str = DEFAULT_REGION,
        timeout: float = 10.0,
    ) -> None:
        if not url.startswith(("http://127.", "http://localhost", "http://[::1]")):
            raise ValueError(f"awssim serves on the loopback interface only, not {url}")
        self.url = url.rstrip("/")
        self.account_id = account_id
        self.region = region
        self.timeout = timeout

    def _call(self, method: str, route: str, body: dict[str, Any] | None = None) -> Any:
        query = urllib.parse.urlencode({"account_id": self.account_id, "region": self.region})
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 - loopback URL checked in __init__
            f"{self.url}/awssim/{route}?{query}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            raise AwsSimError(f"{method} /awssim/{route}: {error.code} {detail}") from error

    def health(self) -> bool:
        return bool(self._call("GET", "health").get("ok"))

    def begin_termination(
        self, asg_name: str, instance_id: str, hook_name: str, age: float = 0.0
    ) -> str:
        body: dict[str, Any] = {
            "asg_name": asg_name,
            "instance_id": instance_id,
            "hook_name": hook_name,
        }
        if age:
            body["age"] = age
        return str(self._call("POST", "begin-termination", body)["token"])

    def begin_launch(self, asg_name: str, instance_id: str, hook_name: str) -> str:
        body = {"asg_name": asg_name, "instance_id": instance_id, "hook_name": hook_name}
        return str(self._call("POST", "begin-launch", body)["token"])

    def set_global_timeout(self, asg_name: str, hook_name: str, seconds: int) -> None:
        body = {"asg_name": asg_name, "hook_name": hook_name, "seconds": seconds}
        self._call("POST", "global-timeout", body)

    def scale_in(self, asg_name: str, count: int = 1) -> list[dict[str, Any]]:
        events = self._call("POST", "scale-in", {"asg_name": asg_name, "count": count})["events"]
        return cast(list[dict[str, Any]], events)

    def scale_out_from_warm_pool(self, asg_name: str) -> tuple[str, list[dict[str, Any]]]:
        answer = self._call("POST", "warm-pool/scale-out", {"asg_name": asg_name})
        return str(answer["instance_id"]), cast(list[dict[str, Any]], answer["events"])

    def launch_into_warm_pool(self, asg_name: str) -> tuple[str, list[dict[str, Any]]]:
        answer = self._call("POST", "warm-pool/launch", {"asg_name": asg_name})
        return str(answer["instance_id"]), cast(list[dict[str, Any]], answer["events"])

    def event_for(self, token: str) -> dict[str, Any]:
        return cast(dict[str, Any], self._call("POST", "event-for", {"token": token})["event"])

    def calls(self, kind: str) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self._call("GET", f"calls/{kind}")["calls"])

    def actions(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self._call("GET", "actions")["actions"])

    def fail_next(self, kind: str, code: str, count: int = 1, message: str = "") -> None:
        body = {"kind": kind, "code": code, "count": count, "message": message}
        self._call("POST", "faults", body)

    def expire_action(self, instance_id: str) -> None:
        self._call("POST", "expire", {"instance_id": instance_id})

    def point_cluster_at(self, name: str, endpoint: str, ca_data_b64: str) -> None:
        body = {"name": name, "endpoint": endpoint, "ca_data_b64": ca_data_b64}
        self._call("POST", "point-cluster", body)

    def pending_invocations(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self._call("GET", "invocations")["invocations"])

    def pop_invocation(self) -> dict[str, Any] | None:
        return cast(dict[str, Any] | None, self._call("POST", "invocations/pop")["invocation"])

    def add_launch_activity(
        self, asg_name: str, instance_id: str, start: float, end: float | None
    ) -> None:
        body = {"asg_name": asg_name, "instance_id": instance_id, "start": start, "end": end}
        self._call("POST", "activities/launch", body)

    def activity_calls(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self._call("GET", "activities/calls")["calls"])
