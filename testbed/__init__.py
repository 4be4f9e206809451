"""testbed: kubesim and awssim wired into one emulated EKS cluster with a
self-managed node group, for the end-to-end tests, the demo and the benchmarks.
Never shipped in the Lambda zip.

`World` (which imports moto, a couple of seconds) loads on first use, so
`testbed.workloads` and `testbed.context` stay cheap to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from testbed.context import LambdaContext

if TYPE_CHECKING:
    from testbed.world import World

__all__ = ["LambdaContext", "World"]


def __getattr__(name: str) -> Any:
    if name == "World":
        from testbed.world import World

        return World
    raise AttributeError(f"module 'testbed' has no attribute {name!r}")
