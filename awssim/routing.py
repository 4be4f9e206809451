"""moto's service models and request routers, built once per process however many
threads ask first.

moto parses a request with its service's model (loaded by scanning botocore's data
directories) and routes a restJson1 one (EKS) through a router that compiles a URL
rule for each of the service's operations: about 0.3 s of CPU for EKS. It keeps
both in caches (`functools.cache`, a dict per router) that compute outside any
lock, so threads that miss one at the same moment each build their own. Twenty
handler threads making their first calls together (tests/e2e/test_concurrency.py)
built them about twenty times: 22 of the test's 34 s of CPU under a profiler,
enough to push its drains past their bound on a loaded machine. Here each first
build happens under one lock, which every later call takes briefly around the
cache's lookup (so a first build holds up requests to other services meanwhile).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from moto.core import responses, routing, utils

_LOCK = threading.RLock()


def _locked(build: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(build)
    def once(*args: Any) -> Any:
        with _LOCK:
            return build(*args)

    return once


_REGISTERED: list[bool] = []


def register() -> None:
    """Build each model and router once (idempotent)."""
    if _REGISTERED:
        return
    _REGISTERED.append(True)
    for module, name in (
        (responses, "get_service_router"),  # as moto.core.responses calls them
        (responses, "get_service_model"),
        (utils, "get_service_model"),  # as moto.core.errors imports it, for an error's model
    ):
        setattr(module, name, _locked(getattr(module, name)))
    router = routing.ServiceOperationRouter
    router._get_router = _locked(router._get_router)  # type: ignore[method-assign]
